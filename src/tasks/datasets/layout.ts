// Which column of a dataset plays which role, recognised from the Hub's common layouts or given by
// the user (`--column prompt=question`, the page's selects), and the final answer a layout's
// answer column holds:
//   gsm8k            question / answer, the answer a worked solution ending "#### 72"
//   math             problem / solution (MATH, MATH-500: the answer \boxed{} in the solution,
//                    or an `answer` column when there is one)
//   trl              prompt / solution (TRL's math examples: a plain or conversational prompt)
//   countdown        nums / target (Countdown-Tasks: the countdown task's own problem)
//   prompt-answer    this project's own JSONL: prompt (or messages) / answer
//   sft              prompt / completion, messages or text (TRL's SFT formats)
//   custom           any other columns, mapped by name
// Every other column travels with its row, under its own name, to the rewards (as TRL passes a
// dataset's columns to reward functions).
import { JSONL_CHECKERS, type JsonlChecker } from '../jsonl';

export type DatasetLayout =
  'gsm8k' | 'math' | 'trl' | 'countdown' | 'prompt-answer' | 'sft' | 'custom';

/** The roles a column can play: a prompt set's (prompt, answer; nums, target for Countdown) and
 * an SFT set's (prompt, completion). */
export const COLUMN_ROLES = ['prompt', 'answer', 'nums', 'target', 'completion'] as const;
export type ColumnRole = (typeof COLUMN_ROLES)[number];
export type ColumnMapping = Partial<Record<ColumnRole, string>>;

export interface RecognisedLayout {
  layout: DatasetLayout;
  mapping: ColumnMapping;
}

const has = (columns: readonly string[], ...names: string[]) =>
  names.every((n) => columns.includes(n));

/** Column names tried, in order, for a role a layout does not name (the custom layout). */
const GUESSES: Record<'prompt' | 'answer' | 'completion', readonly string[]> = {
  prompt: ['prompt', 'question', 'problem', 'instruction', 'input', 'query'],
  answer: ['answer', 'solution', 'final_answer', 'target', 'label', 'output'],
  completion: ['completion', 'response', 'solution', 'answer', 'output'],
};

/** The layout a prompt set's columns show, with its mapping (before the user's overrides). */
export function recognisePromptLayout(columns: readonly string[]): RecognisedLayout {
  if (has(columns, 'nums', 'target') && !columns.includes('prompt'))
    return { layout: 'countdown', mapping: { nums: 'nums', target: 'target' } };
  const answer = columns.includes('answer') ? { answer: 'answer' } : {};
  if (columns.includes('messages'))
    return { layout: 'prompt-answer', mapping: { prompt: 'messages', ...answer } };
  if (has(columns, 'prompt', 'solution') && !columns.includes('answer'))
    return { layout: 'trl', mapping: { prompt: 'prompt', answer: 'solution' } };
  if (columns.includes('prompt'))
    return { layout: 'prompt-answer', mapping: { prompt: 'prompt', ...answer } };
  if (has(columns, 'question', 'answer'))
    return { layout: 'gsm8k', mapping: { prompt: 'question', answer: 'answer' } };
  if (columns.includes('problem') && (columns.includes('answer') || columns.includes('solution')))
    return {
      layout: 'math',
      mapping: { prompt: 'problem', answer: columns.includes('answer') ? 'answer' : 'solution' },
    };
  const guess = (role: 'prompt' | 'answer') => GUESSES[role].find((c) => columns.includes(c));
  const mapping: ColumnMapping = {};
  const prompt = guess('prompt');
  if (prompt) mapping.prompt = prompt;
  const guessed = GUESSES.answer.find((c) => columns.includes(c) && c !== prompt);
  if (guessed) mapping.answer = guessed;
  return { layout: 'custom', mapping };
}

/** The layout an SFT set's columns show (TRL's formats pass through; the others map). */
export function recogniseSftLayout(columns: readonly string[]): RecognisedLayout {
  if (has(columns, 'prompt', 'completion'))
    return { layout: 'sft', mapping: { prompt: 'prompt', completion: 'completion' } };
  if (columns.includes('messages') || columns.includes('text'))
    return { layout: 'sft', mapping: {} };
  if (has(columns, 'question', 'answer'))
    return { layout: 'gsm8k', mapping: { prompt: 'question', completion: 'answer' } };
  if (has(columns, 'problem', 'solution'))
    return { layout: 'math', mapping: { prompt: 'problem', completion: 'solution' } };
  if (has(columns, 'prompt', 'solution'))
    return { layout: 'trl', mapping: { prompt: 'prompt', completion: 'solution' } };
  const mapping: ColumnMapping = {};
  const prompt = GUESSES.prompt.find((c) => columns.includes(c));
  if (prompt) mapping.prompt = prompt;
  const completion = GUESSES.completion.find((c) => columns.includes(c) && c !== prompt);
  if (completion) mapping.completion = completion;
  return { layout: 'custom', mapping };
}

/**
 * `prompt=question,answer=final` (the `columns` task option, `--column` flags joined with commas)
 * as a mapping; a role that is not one, or a pair without '=', throws naming it.
 */
export function parseColumnMapping(text: string): ColumnMapping {
  const out: ColumnMapping = {};
  for (const part of text.split(',')) {
    const spec = part.trim();
    if (!spec) continue;
    const eq = spec.indexOf('=');
    const role = spec.slice(0, eq).trim();
    const column = spec.slice(eq + 1).trim();
    if (eq <= 0 || !column)
      throw new RangeError(
        `column mapping '${spec}': expected <role>=<column>, e.g. prompt=question`,
      );
    if (!(COLUMN_ROLES as readonly string[]).includes(role))
      throw new RangeError(
        `column mapping '${spec}': unknown role '${role}' (roles: ${COLUMN_ROLES.join(', ')})`,
      );
    out[role as ColumnRole] = column;
  }
  return out;
}

/** A mapping as the `columns` option writes it (roles in COLUMN_ROLES order). */
export function formatColumnMapping(mapping: ColumnMapping): string {
  return COLUMN_ROLES.filter((r) => mapping[r] !== undefined)
    .map((r) => `${r}=${mapping[r]}`)
    .join(',');
}

/**
 * The last `\boxed{…}` (or `\fbox{…}`) of a solution, braces balanced, or null: MATH's convention
 * for the final answer.
 */
export function lastBoxed(text: string): string | null {
  const at = Math.max(text.lastIndexOf('\\boxed'), text.lastIndexOf('\\fbox'));
  if (at < 0) return null;
  let i = text.indexOf('{', at);
  if (i < 0) {
    // "\boxed 5": the token after a space.
    const m = /^\\boxed ([^\s$]+)/.exec(text.slice(at));
    return m ? m[1] : null;
  }
  const start = ++i;
  for (let depth = 1; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return text.slice(start, i);
  }
  return null;
}

/**
 * The final answer an answer cell holds: after GSM8K's last "####" (thousands commas dropped), the
 * last \boxed{} of a MATH solution, else the cell as given.
 */
export function finalAnswer(text: string): string {
  const hash = text.lastIndexOf('####');
  if (hash >= 0)
    return text
      .slice(hash + 4)
      .trim()
      .replace(/,/g, '');
  return lastBoxed(text) ?? text;
}

/** The checker a layout's answers want: 'math' (symbolic equivalence) when this build has it;
 * without it GSM8K's integers are numeric and MATH's are compared exactly. null: keep the user's. */
export function suggestedChecker(layout: DatasetLayout): JsonlChecker | null {
  const math = (JSONL_CHECKERS as readonly string[]).includes('math')
    ? ('math' as JsonlChecker)
    : null;
  if (layout === 'gsm8k') return math ?? 'numeric';
  if (layout === 'math' || layout === 'trl') return math ?? 'exact';
  return null;
}
