// Limits on the counts that size work or memory (steps, prompts, completions per prompt, batch
// sizes, lengths, a dataset's line): one refusal message everywhere — a command-line flag, a config
// key, a recipe field, an SFT option — naming the option, the value and the limit, given before
// anything is allocated from the value. The limits themselves are declared once, with their
// options (src/grpo/config.ts CONFIG_SCHEMA, src/train/sft-config.ts SFT_OPTIONS,
// src/recipes/limits.ts, src/tasks/jsonl.ts); docs/guide/security.md (Limits) lists them
// (tests/unit/size-limits.test.ts keeps the list in step with the declarations).

/** The largest value a count may take, and what it counts (the message's unit). */
export interface SizeLimit {
  max: number;
  /** Plural noun of what is counted: "steps", "prompts", "tokens". */
  unit: string;
}

/** "--k 1000000000 is more than the limit of 1024 completions per prompt". */
export function overLimitMessage(label: string, value: number, limit: SizeLimit): string {
  return `${label} ${value} is more than the limit of ${limit.max} ${limit.unit}`;
}

/**
 * `value` as a count: an integer ≥ min and ≤ limit.max, or a RangeError naming `label`, the value
 * and the bound it breaks.
 */
export function checkCount(label: string, value: unknown, min: number, limit: SizeLimit): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min)
    throw new RangeError(`${label} must be an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  if (value > limit.max) throw new RangeError(overLimitMessage(label, value, limit));
  return value;
}

/** A command-line count: digits only (no 1e9, no sign), then checkCount. */
export function parseCount(label: string, text: string, min: number, limit: SizeLimit): number {
  if (!/^[0-9]+$/.test(text))
    throw new RangeError(`${label} must be an integer ≥ ${min}, got '${text}'`);
  return checkCount(label, Number(text), min, limit);
}
