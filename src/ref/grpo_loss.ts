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

// ---------------------------------------------------------------------------------------------
// TRL's logged loss statistics (docs/grpo.md §6). TRL appends one value per micro-batch (and per
// optimizer step) and its log() averages the values appended since the last log, leaving NaNs out:
// with gradient accumulation that is the unweighted mean of per-micro-batch token means.
// ---------------------------------------------------------------------------------------------

export interface MicroBatchMetricsInputs {
  logp: ArrayLike<number>; // (N, L) this pass's log-probs
  oldLogp: ArrayLike<number>; // (N, L) the old log-probs (logp itself when μ = 1)
  refLogp: ArrayLike<number> | null; // (N, L) or null when β = 0
  entropy: ArrayLike<number>; // (N, L) entropy of softmax(z/T) at each position
  advantages: ArrayLike<number>; // (N)
  mask: ArrayLike<number>; // (N, L)
  N: number;
  L: number;
  epsilonLow: number;
  epsilonHigh: number;
  beta: number;
}

/** One micro-batch's values of TRL's loss metrics (`_compute_loss`). */
export interface MicroBatchMetrics {
  kl: number; // NaN when β = 0 (TRL logs no kl then)
  entropy: number;
  clipRatioLow: number;
  clipRatioHigh: number;
  clipRatioRegion: number;
  /** nanmin over sequences of the sequence's fraction of low-clipped tokens (NaN: none counted). */
  clipRatioLowMin: number;
  /** nanmax over sequences of the sequence's fraction of high-clipped tokens. */
  clipRatioHighMax: number;
}

/**
 * TRL's `global_masked_mean` (Σ m·x / max(Σ m, 1)) of kl, entropy and the clip flags, and
 * `nanmin`/`nanmax` of `masked_seq_mean` (Σ_t m·x / Σ_t m, NaN for an all-masked sequence) for
 * `clip_ratio/low_min` and `clip_ratio/high_max`, on one micro-batch.
 */
export function microBatchMetrics(x: MicroBatchMetricsInputs): MicroBatchMetrics {
  const { N, L, mask } = x;
  const useKl = x.beta !== 0 && x.refLogp !== null;
  let active = 0;
  let kl = 0;
  let entropy = 0;
  let low = 0;
  let high = 0;
  let region = 0;
  let lowMin = NaN;
  let highMax = NaN;
  for (let i = 0; i < N; i++) {
    const a = x.advantages[i];
    let seqActive = 0;
    let seqLow = 0;
    let seqHigh = 0;
    for (let t = 0; t < L; t++) {
      const j = i * L + t;
      const m = mask[j];
      if (m === 0) continue;
      const rho = Math.exp(x.logp[j] - x.oldLogp[j]);
      const isLow = rho < 1 - x.epsilonLow && a < 0;
      const isHigh = rho > 1 + x.epsilonHigh && a > 0;
      if (useKl) {
        const d = x.refLogp![j] - x.logp[j];
        kl += m * (Math.exp(d) - d - 1);
      }
      entropy += m * x.entropy[j];
      active += m;
      seqActive += m;
      if (isLow) {
        low += m;
        seqLow += m;
      }
      if (isHigh) {
        high += m;
        seqHigh += m;
      }
      if (isLow || isHigh) region += m;
    }
    if (seqActive > 0) {
      const fl = seqLow / seqActive;
      const fh = seqHigh / seqActive;
      lowMin = Number.isNaN(lowMin) ? fl : Math.min(lowMin, fl);
      highMax = Number.isNaN(highMax) ? fh : Math.max(highMax, fh);
    }
  }
  const d = Math.max(active, 1);
  return {
    kl: useKl ? kl / d : NaN,
    entropy: entropy / d,
    clipRatioLow: low / d,
    clipRatioHigh: high / d,
    clipRatioRegion: region / d,
    clipRatioLowMin: lowMin,
    clipRatioHighMax: highMax,
  };
}

/** TRL's log(): the mean of the appended values with NaNs left out (NaN when none is left). */
export function logMean(values: readonly number[]): number {
  let sum = 0;
  let k = 0;
  for (const v of values) {
    if (Number.isNaN(v)) continue;
    sum += v;
    k++;
  }
  return k === 0 ? NaN : sum / k;
}

/**
 * One step's row of TRL loss metrics from every micro-batch of every pass (μ·GA values each),
 * as TRL logs them with logging_steps = μ (docs/grpo.md §6).
 */
export function loggedLossMetrics(
  perMicroBatch: readonly MicroBatchMetrics[],
  beta: number,
): Record<string, number> {
  const col = (k: keyof MicroBatchMetrics) => logMean(perMicroBatch.map((m) => m[k]));
  return {
    ...(beta > 0 ? { kl: col('kl') } : {}),
    entropy: col('entropy'),
    'clip_ratio/low_mean': col('clipRatioLow'),
    'clip_ratio/high_mean': col('clipRatioHigh'),
    'clip_ratio/region_mean': col('clipRatioRegion'),
    'clip_ratio/low_min': col('clipRatioLowMin'),
    'clip_ratio/high_max': col('clipRatioHighMax'),
  };
}

/**
 * One pass over a batch with gradient accumulation, as the trainer runs it (docs/grpo.md §4):
 * GA micro-batches of N/GA sequences in order, each's loss and ∂loss/∂logp scaled by 1/GA except
 * for 'dapo' (whose denominator is already the whole batch's active-token count), summed; plus
 * each micro-batch's own result (its `stats` are the kernel's per-micro-batch statistics).
 */
export function accumulatedLossRef(
  inputs: GrpoLossInputs,
  GA: number,
): { loss: number; dLogp: Float64Array; microBatches: GrpoLossResult[] } {
  const { N, L } = inputs;
  if (!Number.isInteger(GA) || GA < 1 || N % GA !== 0) {
    throw new RangeError(`gradientAccumulationSteps ${GA} must divide N = ${N}`);
  }
  const Nm = N / GA;
  let total = 0;
  for (let i = 0; i < N * L; i++) total += inputs.mask[i];
  const scale = inputs.lossType === 'dapo' ? 1 : 1 / GA;
  const dLogp = new Float64Array(N * L);
  const microBatches: GrpoLossResult[] = [];
  let loss = 0;
  const rows = (a: ArrayLike<number>, m: number) =>
    Array.prototype.slice.call(a, m * Nm * L, (m + 1) * Nm * L) as number[];
  for (let m = 0; m < GA; m++) {
    const r = grpoLossRef({
      ...inputs,
      logp: rows(inputs.logp, m),
      oldLogp: rows(inputs.oldLogp, m),
      refLogp: inputs.refLogp ? rows(inputs.refLogp, m) : null,
      advantages: Array.prototype.slice.call(inputs.advantages, m * Nm, (m + 1) * Nm) as number[],
      mask: rows(inputs.mask, m),
      N: Nm,
      activeTokensInBatch: inputs.activeTokensInBatch ?? total,
    });
    microBatches.push(r);
    loss += r.loss * scale;
    for (let j = 0; j < Nm * L; j++) dLogp[m * Nm * L + j] = r.dLogp[j] * scale;
  }
  return { loss, dLogp, microBatches };
}
