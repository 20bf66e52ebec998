// Rewards, docs/grpo.md §1: the built-in rule rewards (format, accuracy, language_consistency), their weighted
// combination, and the per-completion record {total, perFunction, errors}. A reward returns a
// finite number or null ("not applicable": counted 0 in the total, reported); one that throws,
// times out or returns NaN/±Inf/a non-number gives 0 and an error record, and training goes on.
//
// Built-in semantics are mirrored line for line by rewards.py in the TRL export (src/export/trl-export.ts):
// the regexes use the ASCII whitespace set [ \t\n\v\f\r] explicitly because JavaScript's and Python's
// \s differ on Unicode spaces.

import { lastBoxed } from '../tasks/math-answer';
import type { Problem, Task } from '../tasks/types';
import { verifyAnswer } from '../tasks/verify';
import { promptThinkTail } from '../tasks/prompt';
import { languageConsistencyReward, type LanguageScript } from './language-consistency';

/** What a reward function sees; structured-cloneable so it can cross to a reward worker. */
export interface RewardInput {
  /** The decoded completion, special tokens (EOS, padding) removed. */
  completion: string;
  /** The prompt as the model saw it (rendered text). */
  prompt: string;
  problem: Problem;
}

export type RewardValue = number | null;

export interface RewardFunction {
  /** Unique within a run: a built-in's name or 'custom:<id>'. Metric key reward/<name>/mean. */
  name: string;
  compute(input: RewardInput): RewardValue | Promise<RewardValue>;
}

export type RewardErrorKind = 'threw' | 'timeout' | 'non-finite' | 'invalid';

export interface RewardError {
  reward: string;
  kind: RewardErrorKind;
  message: string;
}

export interface CompletionReward {
  /** Σ_k w_k · r_k with not-applicable and failed rewards counted as 0 (an unscorable
   * completion, every r_k null, shows 0 here; the advantages see it through rewardTotals as
   * null, docs/grpo.md §1). */
  total: number;
  /** Each function's value after sanitising: null = not applicable, 0 for a failed function. */
  perFunction: Record<string, RewardValue>;
  errors: RewardError[];
}

/** What running one function on one completion produced (in-thread or in a worker). */
export type RewardOutcome = { value: unknown } | { error: unknown; timedOut?: boolean };

export const BUILTIN_REWARDS = ['format', 'accuracy', 'language_consistency'] as const;
export type BuiltinRewardName = (typeof BUILTIN_REWARDS)[number];
/** The rewards of a config that names none (R1-Zero's two rule rewards). */
export const DEFAULT_REWARDS: readonly BuiltinRewardName[] = ['format', 'accuracy'];
export const CUSTOM_REWARD_PREFIX = 'custom:';

// ---------------------------------------------------------------------------------------------
// Format: 1 when the completion is, in full,
//     ws* <think> T </think> ws* <answer> A </answer> ws*
// with ws = [ \t\n\v\f\r], and T, A containing none of <think>, </think>, <answer>, </answer>
// (so each tag appears exactly once, in that order, with nothing but whitespace after </answer>).
// Leading whitespace is allowed because the R1-Zero prompt ends in "Assistant:" and the model's
// first token usually carries the space. Tags are case-sensitive. Else 0.
// The format reward judges the model's whole turn: when the prompt ends in think markup of the
// chat template (an opened <think>, or Qwen3's empty block with thinking off: promptThinkTail),
// that markup is put before the completion, unless the completion opens its own <think>, which
// is then judged alone (one think block, never two; never rejected for the template's tag).
// ---------------------------------------------------------------------------------------------
const WS = '[ \\t\\n\\v\\f\\r]';
const NO_TAG = '(?:(?!</?think>|</?answer>)[\\s\\S])*';
export const FORMAT_PATTERN = `${WS}*<think>(${NO_TAG})</think>${WS}*<answer>(${NO_TAG})</answer>${WS}*`;
const FORMAT_RE = new RegExp(`^${FORMAT_PATTERN}$`);

/** The answer is the content of the LAST <answer>…</answer> pair (non-greedy, as TinyZero). */
export const ANSWER_PATTERN = '<answer>([\\s\\S]*?)</answer>';
const ANSWER_RE = new RegExp(ANSWER_PATTERN, 'g');

export function formatOk(completion: string): boolean {
  return FORMAT_RE.test(completion);
}

/** The raw text inside the last <answer>…</answer>, or null when there is none. */
export function extractAnswer(completion: string): string | null {
  let last: string | null = null;
  for (const m of completion.matchAll(ANSWER_RE)) last = m[1];
  return last;
}

const OPENS_THINK_RE = new RegExp(`^${WS}*<think>`);

/** formatOk of the model's turn: the prompt's trailing think markup, then the completion. */
export function formatOkAfterPrompt(prompt: string, completion: string): boolean {
  const tail = promptThinkTail(prompt);
  if (tail === '' || OPENS_THINK_RE.test(completion)) return formatOk(completion);
  return formatOk(tail + completion);
}

export const formatReward: RewardFunction = {
  name: 'format',
  compute: ({ prompt, completion }) => (formatOkAfterPrompt(prompt, completion) ? 1 : 0),
};

/**
 * What the accuracy reward checks: the last <answer>…</answer>; for a `math` problem without one,
 * the whole completion when it has a \boxed{} (the checker takes the last), as TRL's
 * accuracy_reward parses a completion's boxed answer with no answer tags (docs/grpo.md §1).
 */
export function answerText(completion: string, problem: Problem): string | null {
  const tagged = extractAnswer(completion);
  if (tagged !== null || problem.verifier.kind !== 'math') return tagged;
  return lastBoxed(completion) === undefined ? null : completion;
}

/** 1 when the task's verifier accepts the answer, 0 when wrong or missing, null when the problem
 * has no reference answer. */
export function accuracyReward(task?: Pick<Task, 'verify'>): RewardFunction {
  const verify = task ? task.verify : (text: string, p: Problem) => verifyAnswer(text, p.verifier);
  return {
    name: 'accuracy',
    compute({ completion, problem }) {
      if (problem.verifier.kind === 'none') return null;
      const answer = answerText(completion, problem);
      if (answer === null) return 0;
      const ok = verify(answer, problem);
      return ok === null ? null : ok ? 1 : 0;
    },
  };
}

/**
 * DeepSeek-R1's language-consistency reward (§2.3.3): the share of the chain of thought's words
 * written in `script` (language-consistency.ts), in [0, 1]; null when the think text has no word
 * with a letter (pure arithmetic says nothing about the language).
 */
export function languageConsistencyRewardFunction(script: LanguageScript): RewardFunction {
  return {
    name: 'language_consistency',
    compute: ({ completion }) => languageConsistencyReward(completion, script),
  };
}

/** Options of the built-in rewards (config fields of the same names). */
export interface BuiltinRewardOptions {
  /** Target script of language_consistency (default 'Latin'). */
  languageScript?: LanguageScript;
}

/**
 * The reward functions a config names, in order. Built-ins are created here; 'custom:<id>' names
 * are resolved by `custom` (the reward worker compiles user JS; this module never evaluates code).
 */
export function createRewardFunctions(
  names: readonly string[],
  task?: Pick<Task, 'verify'>,
  custom?: (id: string) => RewardFunction,
  options: BuiltinRewardOptions = {},
): RewardFunction[] {
  if (new Set(names).size !== names.length)
    throw new RangeError(`reward names must be unique: ${names.join(', ')}`);
  return names.map((name) => {
    if (name === 'format') return formatReward;
    if (name === 'accuracy') return accuracyReward(task);
    if (name === 'language_consistency')
      return languageConsistencyRewardFunction(options.languageScript ?? 'Latin');
    if (name.startsWith(CUSTOM_REWARD_PREFIX)) {
      if (!custom)
        throw new RangeError(`reward '${name}' is a custom JS reward: it needs the reward worker`);
      return custom(name.slice(CUSTOM_REWARD_PREFIX.length));
    }
    throw new RangeError(
      `unknown reward '${name}' (built-in: ${BUILTIN_REWARDS.join(', ')}; custom: custom:<id>)`,
    );
  });
}

function message(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

/** Turns what a function produced into a value, or 0 plus an error record. */
export function sanitizeReward(
  name: string,
  outcome: RewardOutcome,
): { value: RewardValue; error?: RewardError } {
  if ('error' in outcome) {
    const kind: RewardErrorKind = outcome.timedOut ? 'timeout' : 'threw';
    return { value: 0, error: { reward: name, kind, message: message(outcome.error) } };
  }
  const v = outcome.value;
  if (v === null) return { value: null };
  if (typeof v !== 'number') {
    const shown =
      v === undefined ? 'undefined' : typeof v === 'string' ? JSON.stringify(v) : typeof v;
    return {
      value: 0,
      error: {
        reward: name,
        kind: 'invalid',
        message: `returned ${shown}; a reward must return a finite number or null`,
      },
    };
  }
  if (!Number.isFinite(v)) {
    return { value: 0, error: { reward: name, kind: 'non-finite', message: `returned ${v}` } };
  }
  return { value: v };
}

/** Weights default to 1 each; a length mismatch is a configuration error. */
export function resolveWeights(
  names: readonly string[],
  weights?: readonly number[] | null,
): number[] {
  if (weights === undefined || weights === null) return names.map(() => 1);
  if (weights.length !== names.length) {
    throw new RangeError(
      `rewardWeights has ${weights.length} entries for ${names.length} reward functions (${names.join(', ')})`,
    );
  }
  return weights.slice();
}

export function combineOutcomes(
  names: readonly string[],
  weights: readonly number[] | null | undefined,
  outcomes: readonly RewardOutcome[],
): CompletionReward {
  const w = resolveWeights(names, weights);
  if (outcomes.length !== names.length)
    throw new RangeError(`${outcomes.length} outcomes for ${names.length} rewards`);
  const perFunction: Record<string, RewardValue> = {};
  const errors: RewardError[] = [];
  let total = 0;
  names.forEach((name, k) => {
    let { value, error } = sanitizeReward(name, outcomes[k]);
    // A finite value can still make the weighted sum non-finite (1e308 · 10, or two huge terms):
    // the term that does so is that reward's failure, as a non-finite return would be, so the
    // advantages never see a non-finite total.
    if (value !== null && !error && !Number.isFinite(total + w[k] * value)) {
      error = {
        reward: name,
        kind: 'non-finite',
        message: `returned ${value}, which with weight ${w[k]} makes the weighted total ${total + w[k] * value}`,
      };
      value = 0;
    }
    perFunction[name] = value;
    if (error) errors.push(error);
    if (value !== null) total += w[k] * value;
  });
  return { total, perFunction, errors };
}

function runSync(fn: RewardFunction, input: RewardInput): RewardOutcome {
  try {
    const value = fn.compute(input);
    if (value instanceof Promise) {
      value.catch(() => undefined); // it is reported below; do not leave it unhandled
      return { error: new Error('returned a Promise; asynchronous rewards need scoreCompletions') };
    }
    return { value };
  } catch (error) {
    return { error };
  }
}

/** Scores one completion with synchronous functions (the built-ins). */
export function scoreCompletionSync(
  fns: readonly RewardFunction[],
  weights: readonly number[] | null | undefined,
  input: RewardInput,
): CompletionReward {
  return combineOutcomes(
    fns.map((f) => f.name),
    weights,
    fns.map((f) => runSync(f, input)),
  );
}

/** Scores completions with functions that may be asynchronous (a worker-backed custom reward). */
export async function scoreCompletions(
  fns: readonly RewardFunction[],
  weights: readonly number[] | null | undefined,
  inputs: readonly RewardInput[],
): Promise<CompletionReward[]> {
  const names = fns.map((f) => f.name);
  const out: CompletionReward[] = [];
  for (const input of inputs) {
    const outcomes: RewardOutcome[] = [];
    for (const fn of fns) {
      try {
        outcomes.push({ value: await fn.compute(input) });
      } catch (error) {
        outcomes.push({ error });
      }
    }
    out.push(combineOutcomes(names, weights, outcomes));
  }
  return out;
}

export function meanStdIgnoringNull(values: readonly RewardValue[]): {
  mean: number;
  std: number;
  count: number;
} {
  const xs = values.filter((v): v is number => v !== null);
  if (xs.length === 0) return { mean: NaN, std: NaN, count: 0 };
  let sum = 0;
  for (const x of xs) sum += x;
  const mean = sum / xs.length;
  let ss = 0;
  for (const x of xs) ss += (x - mean) * (x - mean);
  return { mean, std: xs.length > 1 ? Math.sqrt(ss / (xs.length - 1)) : NaN, count: xs.length };
}

/**
 * A completion that no reward function scored (every value null): TRL's "unscorable" row,
 * docs/grpo.md §1. It is left out of its group's statistics and of `reward`/`reward_std`.
 */
export function isUnscorable(r: CompletionReward): boolean {
  const values = Object.values(r.perFunction);
  return values.length > 0 && values.every((v) => v === null);
}

/** The totals the advantages see: r.total, or null for an unscorable completion (§1, §2). */
export function rewardTotals(results: readonly CompletionReward[]): (number | null)[] {
  return results.map((r) => (isUnscorable(r) ? null : r.total));
}

/** (N, K) per-function values in `names` order (null = not applicable), for normalize_then_sum. */
export function perFunctionRows(
  results: readonly CompletionReward[],
  names: readonly string[],
): (number | null)[][] {
  return results.map((r) => names.map((name) => r.perFunction[name] ?? null));
}
