// The size limits of rejection sampling and of the recipes' cold-start set, declared once: the
// recipe parser (recipe-spec.ts), the sampler (rejection-sampling.ts) and `npm run
// rejection-sample`'s flags all check these, with the message of src/core/limits.ts. Apart from
// the sampler so that the page's recipe view reads them without loading GPU code.
import type { SizeLimit } from '../core/limits';

export const REJECTION_LIMITS = {
  /** Completions sampled per prompt: one decode holds batchSize × k sequences. */
  k: { max: 1024, unit: 'completions per prompt' },
  /** Training prompts sampled: 100 000 Countdown prompts take about 5 s to draw. */
  prompts: { max: 100_000, unit: 'prompts' },
  /** Prompts decoded per batch. */
  batchSize: { max: 1024, unit: 'prompts per batch' },
  /** prompts × k: every sample is kept (samples.jsonl) until the files are written. */
  samples: { max: 1_000_000, unit: 'samples' },
} as const satisfies Record<string, SizeLimit>;

/** The cold-start set's examples (data.coldStart.count): 10 000 traces take about 4 s to draw. */
export const COLD_START_LIMIT: SizeLimit = { max: 10_000, unit: 'examples' };
