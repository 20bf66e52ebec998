// Supervised fine-tuning data as TRL's SFTTrainer reads it: one JSON object a line, in one of the
// dataset formats TRL accepts, tokenised into a prompt, a completion and a per-token loss mask.
//   {"prompt": "…", "completion": "…"}             prompt-completion (what rejection sampling writes)
//   {"prompt": [msgs], "completion": [msgs]}       conversational prompt-completion
//   {"messages": [msgs]}                           conversational language modelling
//   {"text": "…"}                                  language modelling
// Loss masks follow SFTConfig: `completion_only_loss` (default: on for prompt-completion rows) puts
// the loss on completion tokens only; `assistant_only_loss` (default off) puts a "messages" row's
// loss on its assistant turns only. As TRL does, the completion of a plain-text prompt-completion
// row gets the tokenizer's EOS appended (so the model learns to stop), the prompt is tokenised
// alone and the completion is what tokenising prompt + completion adds after it, and `max_length`
// truncates the whole sequence from the end (TRL's truncation_mode "keep_end" is not offered).
//
// TRL finds assistant turns through {% generation %} markers in the chat template; a template
// without them cannot be used with assistant_only_loss there. Here an assistant turn's tokens are
// what rendering the conversation up to and including that turn adds to rendering it up to the
// turn's start (with the generation prompt), which needs no markers and agrees with them for
// templates whose renderings are prefixes of each other (ChatML, Llama 3, SmolLM2).
//
// The prompt/completion split is the packed layout of src/model/batch.ts: everything from the
// first loss token on is the "completion" (with mask 0 on tokens inside it that carry no loss),
// everything before it the prompt, which keeps at least one token (the first token of a sequence
// is never predicted).
import { jsonlLines, lineTooLongMessage, type JsonlIssue } from '../tasks/jsonl';
import type { ChatMessage } from '../tasks/types';
import type { TrainerTokenizer } from '../grpo/trainer';

export type SftRow =
  | { kind: 'prompt-completion'; line: number; prompt: string; completion: string }
  | {
      kind: 'chat-prompt-completion';
      line: number;
      prompt: ChatMessage[];
      completion: ChatMessage[];
    }
  | { kind: 'messages'; line: number; messages: ChatMessage[] }
  | { kind: 'text'; line: number; text: string };

export interface SftDataset {
  rows: SftRow[];
  issues: JsonlIssue[];
}

export interface SftTokenizeOptions {
  /** TRL completion_only_loss: null = on for prompt-completion rows (TRL's default). */
  completionOnlyLoss: boolean | null;
  /** TRL assistant_only_loss (messages rows): loss on assistant turns only. */
  assistantOnlyLoss: boolean;
  /** TRL max_length: longest sequence in tokens (truncated from the end); null = no limit. */
  maxLength: number | null;
}

export const SFT_TOKENIZE_DEFAULTS: SftTokenizeOptions = {
  completionOnlyLoss: null,
  assistantOnlyLoss: false,
  maxLength: 1024,
};

/** One tokenised example in the packed layout: prompt tokens, then completion tokens with a mask. */
export interface SftExample {
  line: number;
  prompt: number[];
  completion: number[];
  /** (completion.length) 1 where the token carries loss. */
  mask: number[];
  /** Tokens of the whole sequence (TRL's num_tokens counts these). */
  tokens: number;
}

const ROLES = new Set(['system', 'user', 'assistant']);

function parseMessages(value: unknown, key: string): ChatMessage[] | string {
  if (!Array.isArray(value) || value.length === 0) return `"${key}" must be a non-empty array`;
  const out: ChatMessage[] = [];
  for (let i = 0; i < value.length; i++) {
    const m = value[i] as Record<string, unknown> | null;
    if (typeof m !== 'object' || m === null) return `${key}[${i}] must be an object`;
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      return `${key}[${i}].role must be "system", "user" or "assistant"`;
    }
    if (typeof m.content !== 'string') return `${key}[${i}].content must be a string`;
    out.push({ role: m.role as ChatMessage['role'], content: m.content });
  }
  return out;
}

function parseRow(r: Record<string, unknown>, line: number): SftRow | string {
  if ('messages' in r) {
    const messages = parseMessages(r.messages, 'messages');
    if (typeof messages === 'string') return messages;
    if (!messages.some((m) => m.role === 'assistant')) return '"messages" has no assistant turn';
    return { kind: 'messages', line, messages };
  }
  if ('text' in r) {
    if (typeof r.text !== 'string' || r.text === '') return '"text" must be a non-empty string';
    return { kind: 'text', line, text: r.text };
  }
  if ('prompt' in r && 'completion' in r) {
    if (typeof r.prompt === 'string' && typeof r.completion === 'string') {
      if (r.completion === '') return '"completion" is empty';
      return { kind: 'prompt-completion', line, prompt: r.prompt, completion: r.completion };
    }
    const prompt = parseMessages(r.prompt, 'prompt');
    if (typeof prompt === 'string') return prompt;
    const completion = parseMessages(r.completion, 'completion');
    if (typeof completion === 'string') return completion;
    return { kind: 'chat-prompt-completion', line, prompt, completion };
  }
  return 'expected "prompt" and "completion", "messages" or "text"';
}

/**
 * Parses an SFT JSONL file line by line (jsonlLines: a line over the dataset line limit is reported
 * unread); every malformed line is reported with its 1-based number and skipped.
 */
export function parseSftJsonl(text: string): SftDataset {
  const rows: SftRow[] = [];
  const issues: JsonlIssue[] = [];
  for (const l of jsonlLines(text)) {
    const { line } = l;
    if ('tooLong' in l) {
      issues.push({ line, message: lineTooLongMessage(l.tooLong) });
      continue;
    }
    if (l.text.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(l.text);
    } catch (e) {
      issues.push({ line, message: `not valid JSON (${(e as Error).message})` });
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      issues.push({ line, message: 'expected a JSON object' });
      continue;
    }
    const row = parseRow(value as Record<string, unknown>, line);
    if (typeof row === 'string') issues.push({ line, message: row });
    else rows.push(row);
  }
  return { rows, issues };
}

function chat(tokenizer: TrainerTokenizer, kind: string) {
  const { encodeChat } = tokenizer;
  if (!encodeChat) {
    throw new Error(
      `SFT: a ${kind} row needs a tokenizer with a chat template (tokenizer_config.json's chat_template)`,
    );
  }
  return (messages: ChatMessage[], addGenerationPrompt: boolean) =>
    encodeChat.call(tokenizer, messages, { addGenerationPrompt });
}

/** Whole-sequence tokens with a per-token loss flag (the first token never carries loss). */
function sequenceOf(row: SftRow, tokenizer: TrainerTokenizer, o: SftTokenizeOptions) {
  switch (row.kind) {
    case 'prompt-completion': {
      const eos = tokenizer.eosTokenIds[0];
      const prompt = tokenizer.encode(row.prompt);
      const all = tokenizer.encode(row.prompt + row.completion);
      if (eos !== undefined && all[all.length - 1] !== eos) all.push(eos);
      const completionOnly = o.completionOnlyLoss ?? true;
      return { ids: all, loss: all.map((_, i) => !completionOnly || i >= prompt.length) };
    }
    case 'chat-prompt-completion': {
      const encode = chat(tokenizer, 'conversational');
      const prompt = encode(row.prompt, true);
      const all = encode([...row.prompt, ...row.completion], false);
      const completionOnly = o.completionOnlyLoss ?? true;
      return { ids: all, loss: all.map((_, i) => !completionOnly || i >= prompt.length) };
    }
    case 'messages': {
      const encode = chat(tokenizer, '"messages"');
      const all = encode(row.messages, false);
      if (!o.assistantOnlyLoss) return { ids: all, loss: all.map(() => true) };
      const loss = all.map(() => false);
      row.messages.forEach((m, i) => {
        if (m.role !== 'assistant') return;
        const from = encode(row.messages.slice(0, i), true).length;
        const to = encode(row.messages.slice(0, i + 1), false).length;
        for (let t = from; t < Math.min(to, all.length); t++) loss[t] = true;
      });
      return { ids: all, loss };
    }
    case 'text': {
      const ids = tokenizer.encode(row.text);
      return { ids, loss: ids.map(() => true) };
    }
  }
}

/**
 * Tokenises one row into the packed layout; null when nothing in it carries loss (a completion
 * cut away by max_length, or an assistant-only row whose assistant turns were truncated).
 */
export function tokenizeSftRow(
  row: SftRow,
  tokenizer: TrainerTokenizer,
  options: SftTokenizeOptions = SFT_TOKENIZE_DEFAULTS,
): SftExample | null {
  let { ids, loss } = sequenceOf(row, tokenizer, options);
  if (options.maxLength !== null && ids.length > options.maxLength) {
    ids = ids.slice(0, options.maxLength);
    loss = loss.slice(0, options.maxLength);
  }
  loss[0] = false;
  const first = loss.indexOf(true);
  if (first < 0) return null;
  return {
    line: row.line,
    prompt: ids.slice(0, first),
    completion: ids.slice(first),
    mask: loss.slice(first).map((l) => (l ? 1 : 0)),
    tokens: ids.length,
  };
}
