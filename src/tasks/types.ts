// The Task contract every prompt source implements (generated tasks and imported JSONL datasets),
// and the JSON-serialisable Problem it produces. A Problem carries everything its verifier needs
// (`verifier`), so the same object can cross to a reward worker and be written into the TRL
// export's dataset, where rewards.py reads the same fields.

import type { VerifierSpec } from './verify';

export type PromptTemplate = 'r1-zero' | 'chat';
export const PROMPT_TEMPLATES: readonly PromptTemplate[] = ['r1-zero', 'chat'];

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** A prompt ready for tokenisation: plain text (R1-Zero template) or chat messages. */
export type FormattedPrompt =
  { kind: 'text'; text: string } | { kind: 'chat'; messages: ChatMessage[] };

export interface Problem {
  /** Stable id: `<task>-<seed>-<index>` for generated tasks, `jsonl-<line>` for datasets. */
  id: string;
  /** Registry name of the task that produced it. */
  task: string;
  /** The user's question, the `{prompt}` of the template (no trailing period). */
  question: string;
  /** Chat-form prompt from a dataset (system/user turns), used instead of `question` when set. */
  messages?: ChatMessage[];
  /** One correct answer, for display and export; null when the dataset gave none. */
  reference: string | null;
  /** What the verifier needs (numbers and target, reference answer and checker …). */
  verifier: VerifierSpec;
  /** A dataset row's other columns by name (JSON values), passed to custom rewards under their
   * names as TRL passes dataset columns to reward functions; absent when the row has none. */
  columns?: Record<string, unknown>;
}

export interface Task {
  name: string;
  description: string;
  /** `count` problems from `seed`; the same (seed, count) always gives the same problems, and a
   * shorter count gives a prefix of a longer one. */
  generate(seed: number, count: number): Problem[];
  /** The prompt the model sees (docs/grpo.md §8 R1-Zero template, or chat messages). */
  formatPrompt(problem: Problem, template: PromptTemplate): FormattedPrompt;
  /** Checks the text inside <answer>: true correct, false wrong, null not checkable. */
  verify(answerText: string, problem: Problem): boolean | null;
  /** Task-specific reflection markers added to the defaults of docs/grpo.md §7. */
  reflectionMarkers?: readonly string[];
  /** Disjoint train and eval problems; tasks without it use generate() with two seeds. */
  splits?(
    seed: number,
    trainCount: number,
    evalCount: number,
  ): { train: Problem[]; eval: Problem[] };
}
