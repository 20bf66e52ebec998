// Imported datasets: one JSON object per line, either {"prompt": "...", "answer": "..."} or chat form
// {"messages": [{"role": "user", "content": "..."}, …], "answer": "..."}. In chat form a final
// assistant turn, when present and no "answer" key is given, is the reference answer and is removed
// from the prompt. Answers are checked with one checker for the whole dataset: exact (trimmed
// string equality), numeric (|x − ref| ≤ tolerance), choice (a single letter, "(B)" / "b." accepted) or
// math (LaTeX answers, math-answer.ts and docs/math-checker.md).
// A line without an answer is kept; its accuracy is "not applicable" (null). A line {"nums": [..],
// "target": n} (the Countdown-Tasks layout) is a countdown problem, checked by the countdown rules.
// Any other key of a line is one of the row's own columns: kept on the problem (`columns`) and
// passed to custom rewards under its name, as TRL passes a dataset's columns to reward functions.
// Files in other formats (Parquet, CSV, JSON, other layouts) reach this parser through the
// importer in src/tasks/datasets/, which writes them as lines of this form.
// Files from any editor load: a UTF-8 byte-order mark is ignored and lines may end in \n, \r\n or a
// bare \r (classic Mac); every skipped line is reported with its 1-based number and the reason.
// A line longer than JSONL_LINE_LIMIT is reported by its length and never parsed or tokenised (a
// 50 MB prompt would otherwise cost minutes of tokenising before the first step).

import { countdownQuestion } from './countdown';
import { formatPrompt } from './prompt';
import { createRng, mixSeeds } from '../core/rng';
import type { ChatMessage, Problem, Task } from './types';
import { asciiTrim, choiceLetter, isNumericText, type VerifierSpec, verifyAnswer } from './verify';
import { overLimitMessage, type SizeLimit } from '../core/limits';
import { extractMathAnswer } from './math-answer';

/** The longest line a dataset reader parses (prompt and SFT sets alike): a million characters is
 * about 250 000 tokens, past any model's context here, and tokenises in about 2 s on a CPU. */
export const JSONL_LINE_LIMIT: SizeLimit = { max: 1_048_576, unit: 'characters' };

/** The largest dataset file the command line reads (a JS string holds at most 2^29 characters). */
export const JSONL_FILE_LIMIT: SizeLimit = { max: 256 * 2 ** 20, unit: 'bytes' };

/** One line of a JSONL text: its text, or only its length when it is over the limit. */
export type JsonlLine = { line: number; text: string } | { line: number; tooLong: number };

/**
 * The lines of a JSONL text one at a time (no array of all lines), 1-based, a UTF-8 byte-order
 * mark ignored, ends \n, \r\n or a bare \r (JSON text never holds a raw CR or LF inside a string).
 * A line over `limit` is yielded by its length only: the caller reports it without parsing it.
 */
export function* jsonlLines(
  text: string,
  limit: SizeLimit = JSONL_LINE_LIMIT,
): Generator<JsonlLine> {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const end = /\r\n|\r|\n/g;
  let start = 0;
  for (let line = 1; start <= body.length; line++) {
    const m = end.exec(body);
    const stop = m ? m.index : body.length;
    yield stop - start > limit.max
      ? { line, tooLong: stop - start }
      : { line, text: body.slice(start, stop) };
    if (!m) break;
    start = end.lastIndex;
  }
}

/** The issue of a line over JSONL_LINE_LIMIT. */
export function lineTooLongMessage(length: number): string {
  return `${overLimitMessage('length', length, JSONL_LINE_LIMIT)} a line (skipped unread)`;
}

export type JsonlChecker = 'exact' | 'numeric' | 'choice' | 'math';
export const JSONL_CHECKERS: readonly JsonlChecker[] = ['exact', 'numeric', 'choice', 'math'];

export interface JsonlOptions {
  path: string; // where the dataset came from (file name or URL), default ''; the text is passed separately
  checker: JsonlChecker; // how answers are compared, default 'exact'
  tolerance: number; // absolute tolerance of the numeric checker, default 1e-6
  columns: string; // column mapping of a file read from `path`, 'prompt=question,…' (src/tasks/datasets), default ''
}

export const JSONL_DEFAULTS: JsonlOptions = {
  path: '',
  checker: 'exact',
  tolerance: 1e-6,
  columns: '',
};

/** Keys of a line that are not the row's own columns. */
const ROLE_KEYS = new Set(['prompt', 'messages', 'answer', 'nums', 'target']);

export interface JsonlIssue {
  line: number; // 1-based
  message: string;
}

export interface JsonlDataset {
  problems: Problem[];
  issues: JsonlIssue[];
}

const ROLES = new Set(['system', 'user', 'assistant']);

function parseMessages(value: unknown): ChatMessage[] | string {
  if (!Array.isArray(value) || value.length === 0) return '"messages" must be a non-empty array';
  const out: ChatMessage[] = [];
  for (let i = 0; i < value.length; i++) {
    const m = value[i] as Record<string, unknown> | null;
    if (typeof m !== 'object' || m === null) return `messages[${i}] must be an object`;
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      return `messages[${i}].role must be "system", "user" or "assistant"`;
    }
    if (typeof m.content !== 'string') return `messages[${i}].content must be a string`;
    out.push({ role: m.role as ChatMessage['role'], content: m.content });
  }
  return out;
}

function answerText(value: unknown): string | null | undefined {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined; // wrong type
}

function verifierFor(answer: string | null, o: JsonlOptions): VerifierSpec | string {
  if (answer === null) return { kind: 'none' };
  switch (o.checker) {
    case 'exact':
      return { kind: 'exact', answer: asciiTrim(answer) };
    case 'numeric':
      if (!isNumericText(asciiTrim(answer)))
        return `answer ${JSON.stringify(answer)} is not a number`;
      return { kind: 'numeric', answer: asciiTrim(answer), tolerance: o.tolerance };
    case 'choice': {
      const letter = choiceLetter(answer);
      if (letter === null) return `answer ${JSON.stringify(answer)} is not a single choice letter`;
      return { kind: 'choice', answer: letter };
    }
    case 'math': {
      // MATH solutions keep their last \boxed{} content, GSM8K answers the number after ####.
      const extracted = extractMathAnswer(answer);
      if (extracted === null) return `answer ${JSON.stringify(answer)} has no math answer to check`;
      return { kind: 'math', answer: extracted };
    }
  }
}

/** Parses a dataset; every malformed line is reported with its 1-based line number and skipped. */
export function parseJsonlDataset(text: string, options: Partial<JsonlOptions> = {}): JsonlDataset {
  const o: JsonlOptions = { ...JSONL_DEFAULTS, ...options };
  validateJsonlOptions(o);
  const problems: Problem[] = [];
  const issues: JsonlIssue[] = [];
  for (const l of jsonlLines(text)) {
    const { line } = l;
    if ('tooLong' in l) {
      issues.push({ line, message: lineTooLongMessage(l.tooLong) });
      continue;
    }
    readLine(l.text, line);
  }
  return { problems, issues };

  function readLine(raw: string, line: number): void {
    if (asciiTrim(raw) === '') return;
    let row: unknown;
    try {
      row = JSON.parse(raw);
    } catch (e) {
      issues.push({ line, message: `not valid JSON (${(e as Error).message})` });
      return;
    }
    if (typeof row !== 'object' || row === null || Array.isArray(row)) {
      issues.push({ line, message: 'expected a JSON object' });
      return;
    }
    const r = row as Record<string, unknown>;
    const columns: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(r)) if (!ROLE_KEYS.has(k)) columns[k] = v;
    const extra = Object.keys(columns).length > 0;
    if ('nums' in r && 'target' in r && !('prompt' in r) && !('messages' in r)) {
      const { nums, target } = r;
      if (!Array.isArray(nums) || nums.length === 0 || !nums.every(Number.isSafeInteger)) {
        issues.push({ line, message: '"nums" must be a non-empty array of integers' });
        return;
      }
      if (!Number.isSafeInteger(target)) {
        issues.push({ line, message: '"target" must be an integer' });
        return;
      }
      const problem: Problem = {
        id: `jsonl-${line}`,
        task: 'jsonl',
        question: countdownQuestion(nums as number[], target as number),
        reference: null,
        verifier: { kind: 'countdown', nums: nums as number[], target: target as number },
      };
      if (extra) problem.columns = columns;
      problems.push(problem);
      return;
    }
    let answer = answerText(r.answer);
    if (answer === undefined) {
      issues.push({ line, message: '"answer" must be a string or a number' });
      return;
    }
    let question: string;
    let messages: ChatMessage[] | undefined;
    if ('messages' in r) {
      if ('prompt' in r) {
        issues.push({ line, message: 'give either "prompt" or "messages", not both' });
        return;
      }
      const parsed = parseMessages(r.messages);
      if (typeof parsed === 'string') {
        issues.push({ line, message: parsed });
        return;
      }
      messages = parsed;
      if (messages[messages.length - 1].role === 'assistant') {
        const last = messages.pop() as ChatMessage;
        if (answer === null) answer = last.content;
      }
      if (!messages.some((m) => m.role === 'user')) {
        issues.push({ line, message: '"messages" has no user turn' });
        return;
      }
      question = messages
        .filter((m) => m.role === 'user')
        .map((m) => m.content)
        .join('\n');
    } else if (typeof r.prompt === 'string') {
      question = r.prompt;
    } else {
      issues.push({ line, message: 'expected a string "prompt" or a "messages" array' });
      return;
    }
    if (asciiTrim(question) === '') {
      issues.push({ line, message: 'the prompt is empty' });
      return;
    }
    const verifier = verifierFor(answer, o);
    if (typeof verifier === 'string') {
      issues.push({ line, message: verifier });
      return;
    }
    const problem: Problem = {
      id: `jsonl-${line}`,
      task: 'jsonl',
      question,
      reference: answer,
      verifier,
    };
    if (messages) problem.messages = messages;
    if (extra) problem.columns = columns;
    problems.push(problem);
  }
}

export function validateJsonlOptions(o: JsonlOptions): void {
  if (typeof o.path !== 'string') throw new RangeError(`jsonl option 'path' must be a string`);
  if (typeof o.columns !== 'string')
    throw new RangeError(`jsonl option 'columns' must be a string`);
  if (!JSONL_CHECKERS.includes(o.checker)) {
    throw new RangeError(
      `jsonl option 'checker' must be one of ${JSONL_CHECKERS.join(', ')}, got ${String(o.checker)}`,
    );
  }
  if (typeof o.tolerance !== 'number' || !(o.tolerance >= 0) || !Number.isFinite(o.tolerance)) {
    throw new RangeError(
      `jsonl option 'tolerance' must be a finite number ≥ 0, got ${o.tolerance}`,
    );
  }
}

/** A seeded order over the dataset that cycles: epoch e is a fresh permutation. */
function draw(problems: readonly Problem[], seed: number, count: number): Problem[] {
  const out: Problem[] = [];
  for (let epoch = 0; out.length < count; epoch++) {
    const order = createRng(mixSeeds(seed, epoch)).shuffle(problems);
    out.push(...order.slice(0, count - out.length));
  }
  return out;
}

export interface JsonlTask extends Task {
  dataset: JsonlDataset;
}

/** Skipped lines as one sentence: 'line 5: not valid JSON (…); line 9: …' (the first `max`). */
export function describeIssues(issues: readonly JsonlIssue[], max = 5): string {
  const shown = issues.slice(0, max).map((i) => `line ${i.line}: ${i.message}`);
  if (issues.length > max) shown.push(`and ${issues.length - max} more`);
  return shown.join('; ');
}

/**
 * The error when no training prompt fits the prompt-length limit, with the numbers to fix it:
 * the shortest prompt's length and the option to raise (imported datasets often have long prompts).
 */
export function promptTooLongError(maxPromptLength: number, shortestTokens: number): RangeError {
  return new RangeError(
    `no training prompt fits maxPromptLength = ${maxPromptLength} tokens: the shortest prompt is ` +
      `${shortestTokens} tokens; raise --max-prompt-length (maxPromptLength in a config file or the ` +
      `playground's options) to at least ${shortestTokens}, or use shorter prompts`,
  );
}

/** A task over an imported dataset; throws when no line is usable (the issues name the lines). */
export function createJsonlTask(text: string, options: Partial<JsonlOptions> = {}): JsonlTask {
  const dataset = parseJsonlDataset(text, options);
  if (dataset.problems.length === 0) {
    const first = dataset.issues.slice(0, 5).map((i) => `line ${i.line}: ${i.message}`);
    throw new RangeError(
      `jsonl: no usable line in the dataset${first.length ? ` (${first.join('; ')})` : ''}`,
    );
  }
  const all = dataset.problems;
  const skipped = dataset.issues.length
    ? ` ${dataset.issues.length} line${dataset.issues.length === 1 ? '' : 's'} skipped: ${describeIssues(dataset.issues)}.`
    : '';
  return {
    name: 'jsonl',
    description: `Imported dataset${options.path ? ` ${options.path}` : ''} (${all.length} prompts).${skipped}`,
    dataset,
    generate: (seed, count) => draw(all, seed, count),
    formatPrompt,
    verify: (answerTextValue, problem) => verifyAnswer(answerTextValue, problem.verifier),
    splits(seed, trainCount, evalCount) {
      // Held-out prompts come out of the dataset first; at most half of it, so training keeps data.
      const order = createRng(mixSeeds(seed, 0x5eed)).shuffle(all);
      const nEval = Math.min(evalCount, Math.floor(all.length / 2));
      const held = order.slice(0, nEval);
      const rest = order.slice(nEval);
      return { train: draw(rest, seed, trainCount), eval: held };
    },
  };
}
