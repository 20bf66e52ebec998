// What the GRPO loss is, shared by the trainer, its metrics and the CPU reference (src/ref, the
// oracle, which computes the loss itself): the loss types and which of them normalise by the whole
// batch's tokens, the importance-sampling levels, and GSPO's per-sequence log-ratio
// (docs/grpo.md §3–4).

/** The aggregations of the clipped surrogate (docs/grpo.md §4); Learn mode compares these. */
export const LOSS_TYPES = ['grpo', 'bnpo', 'dr_grpo', 'dapo'] as const;

/** TRL's loss types that replace the clipped surrogate itself (docs/grpo.md §3). */
export const SURROGATE_LOSS_TYPES = ['cispo', 'sapo'] as const;

/** Every loss type the config accepts (TRL `loss_type`). */
export const ALL_LOSS_TYPES = [...LOSS_TYPES, ...SURROGATE_LOSS_TYPES] as const;

export type LossType = (typeof ALL_LOSS_TYPES)[number];

/**
 * Loss types whose denominator is the whole accumulated batch's token count (TRL's
 * num_items_in_batch): their micro-batch losses add up, every other type's are averaged (§4).
 */
export function normalisesByBatchTokens(lossType: LossType): boolean {
  return lossType === 'dapo' || lossType === 'cispo';
}

/** TRL's `importance_sampling_level` (docs/grpo.md §3): one ratio per token or per sequence (GSPO). */
export const IMPORTANCE_SAMPLING_LEVELS = ['token', 'sequence'] as const;

export type ImportanceSamplingLevel = (typeof IMPORTANCE_SAMPLING_LEVELS)[number];

/**
 * GSPO (docs/grpo.md §3, TRL `importance_sampling_level='sequence'`): per sequence, the mean of
 * m·(logp − old) over its completion tokens, Σ_t m·(logp − old) / max(Σ_t m, 1). Only old is
 * detached, so each token's log-prob reaches the sequence ratio with weight m_t / max(Σ_t m, 1).
 * Masked positions are skipped, never multiplied (NaN at padding must not leak).
 */
export function sequenceLogRatios(
  logp: ArrayLike<number>,
  oldLogp: ArrayLike<number>,
  mask: ArrayLike<number>,
  N: number,
  L: number,
): { logRatio: Float64Array; count: Float64Array } {
  const logRatio = new Float64Array(N);
  const count = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    let s = 0;
    let c = 0;
    for (let t = 0; t < L; t++) {
      const j = i * L + t;
      if (mask[j] === 0) continue;
      s += mask[j] * (logp[j] - oldLogp[j]);
      c += mask[j];
    }
    logRatio[i] = s / Math.max(c, 1);
    count[i] = c;
  }
  return { logRatio, count };
}
