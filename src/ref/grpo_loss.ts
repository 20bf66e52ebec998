// CPU reference (f64) of the GRPO loss, its gradient with respect to the per-token log-probs, and
// the TRL clip/KL statistics, exactly as docs/grpo.md §3–5 define them. The GPU kernel
// shaders/grpo_loss.wgsl is tested against this; the finite-difference test checks dLogp here.
//
// Legend: N sequences, L completion columns (the loss sees a (N, L) grid of token log-probs).

/** The loss aggregations (docs/grpo.md §4); the config schema and Learn mode list these. */
export const LOSS_TYPES = ['grpo', 'bnpo', 'dr_grpo', 'dapo'] as const;

export type LossType = (typeof LOSS_TYPES)[number];

export interface GrpoLossInputs {
  logp: ArrayLike<number>; // (N, L) log π_θ of the sampled token
  oldLogp: ArrayLike<number>; // (N, L) log π_old (the sampling policy, detached)
  refLogp: ArrayLike<number> | null; // (N, L) log π_ref, null when β = 0 (reference not evaluated)
  advantages: ArrayLike<number>; // (N)
  mask: ArrayLike<number>; // (N, L) 1 = completion token that counts, 0 = prompt/pad/masked
  N: number;
  L: number;
  lossType: LossType;
  epsilonLow: number;
  epsilonHigh: number;
  beta: number;
  maxCompletionLength: number; // dr_grpo denominator N·maxCompletionLength
  activeTokensInBatch?: number; // dapo: Σ mask over the whole accumulated batch (default Σ mask here)
}

export interface GrpoLossStats {
  clipRatioLow: number;
  clipRatioHigh: number;
  clipRatioRegion: number;
  meanKl: number;
  activeTokens: number;
}

export interface GrpoLossResult {
  loss: number;
  dLogp: Float64Array; // (N, L) ∂loss/∂logp
  stats: GrpoLossStats;
}

/**
 * Per-token aggregation weight w_i,t (without the mask) so that L = Σ_i,t m_i,t · w_i,t · ℓ_i,t.
 * Denominators are clamped to ≥ 1 as TRL does (`.clamp(min=1.0)`), so an all-masked sequence or
 * batch contributes 0 instead of NaN.
 */
export function aggregationWeights(inputs: GrpoLossInputs): Float64Array {
  const { N, L, mask, lossType } = inputs;
  const weights = new Float64Array(N);
  let total = 0;
  for (let i = 0; i < N * L; i++) total += mask[i];
  for (let i = 0; i < N; i++) {
    let w: number;
    switch (lossType) {
      case 'grpo': {
        let count = 0;
        for (let t = 0; t < L; t++) count += mask[i * L + t];
        w = 1 / (N * Math.max(count, 1));
        break;
      }
      case 'bnpo':
        w = 1 / Math.max(total, 1);
        break;
      case 'dr_grpo':
        w = 1 / (N * inputs.maxCompletionLength);
        break;
      case 'dapo':
        w = 1 / Math.max(inputs.activeTokensInBatch ?? total, 1);
        break;
      default:
        throw new Error(`unknown lossType ${String(lossType)}`);
    }
    weights[i] = w;
  }
  return weights;
}

export function grpoLossRef(inputs: GrpoLossInputs): GrpoLossResult {
  const { N, L, logp, oldLogp, refLogp, advantages, mask, epsilonLow, epsilonHigh, beta } = inputs;
  const useKl = beta !== 0 && refLogp !== null;
  const weights = aggregationWeights(inputs);
  const dLogp = new Float64Array(N * L);
  let loss = 0;
  let active = 0;
  let low = 0;
  let high = 0;
  let region = 0;
  let klSum = 0;
  for (let i = 0; i < N; i++) {
    const a = advantages[i];
    for (let t = 0; t < L; t++) {
      const j = i * L + t;
      const m = mask[j];
      if (m === 0) continue;
      const rho = Math.exp(logp[j] - oldLogp[j]);
      const clipped = Math.min(Math.max(rho, 1 - epsilonLow), 1 + epsilonHigh);
      const surrogate = Math.min(rho * a, clipped * a);
      const isLow = rho < 1 - epsilonLow && a < 0;
      const isHigh = rho > 1 + epsilonHigh && a > 0;
      let perToken = -surrogate;
      // Where the clip is active the min picks the constant branch: no surrogate gradient.
      let grad = isLow || isHigh ? 0 : -a * rho;
      if (useKl) {
        const diff = refLogp[j] - logp[j];
        const e = Math.exp(diff);
        const kl = e - diff - 1;
        perToken += beta * kl;
        grad += beta * (1 - e);
        klSum += m * kl;
      }
      const w = m * weights[i];
      loss += w * perToken;
      dLogp[j] = w * grad;
      active += m;
      if (isLow) low += m;
      if (isHigh) high += m;
      if (isLow || isHigh) region += m;
    }
  }
  const denom = Math.max(active, 1);
  return {
    loss,
    dLogp,
    stats: {
      clipRatioLow: low / denom,
      clipRatioHigh: high / denom,
      clipRatioRegion: region / denom,
      meanKl: useKl ? klSum / denom : 0,
      activeTokens: active,
    },
  };
}
