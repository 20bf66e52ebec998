// The loss statistics the trainer logs (docs/grpo.md §5–6), computed on the CPU from a pass's
// gathered log-probs exactly as TRL's GRPOTrainer logs them: per micro-batch clip ratios and means,
// their unweighted mean over the accumulated micro-batches, the entropy bonus, and the policy loss
// as logged. Production code: tests/unit/trl-parity.test.ts checks it against TRL's own code.
import {
  normalisesByBatchTokens,
  sequenceLogRatios,
  type ImportanceSamplingLevel,
  type LossType,
} from '../core/loss-definitions';

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
  importanceSamplingLevel?: ImportanceSamplingLevel; // default 'token'
  delta?: number | null; // two-sided clipping: the clip flags test min(ρ, δ)
  lossType?: LossType; // 'cispo': its own clip flag (ρ > ε_high, A > 0); default a clip type
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
  /** 'cispo': the fraction with ρ > ε_high and A > 0 (TRL's cispo_clip_ratio); else NaN. */
  cispoClipRatio: number;
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
  const delta = x.delta ?? null;
  const cap = (rho: number) => (delta === null ? rho : Math.min(rho, delta));
  const seq =
    x.importanceSamplingLevel === 'sequence'
      ? sequenceLogRatios(x.logp, x.oldLogp, mask, N, L)
      : null;
  // GSPO: TRL's clip tensors are (B, 1), so its global_masked_mean counts sequences (every one,
  // an all-masked one with ratio exp(0) = 1 included) and masked_seq_mean is the sequence's flag.
  let seqLowCount = 0;
  let seqHighCount = 0;
  let seqRegionCount = 0;
  const cispo = x.lossType === 'cispo';
  let cispoCount = 0;
  for (let i = 0; i < N; i++) {
    const a = x.advantages[i];
    let seqActive = 0;
    let seqLow = 0;
    let seqHigh = 0;
    if (seq) {
      if (cispo && Math.exp(seq.logRatio[i]) > x.epsilonHigh && a > 0) cispoCount++;
      const c1 = cap(Math.exp(seq.logRatio[i]));
      const fl = c1 < 1 - x.epsilonLow && a < 0 ? 1 : 0;
      const fh = c1 > 1 + x.epsilonHigh && a > 0 ? 1 : 0;
      seqLowCount += fl;
      seqHighCount += fh;
      seqRegionCount += fl || fh ? 1 : 0;
      lowMin = Number.isNaN(lowMin) ? fl : Math.min(lowMin, fl);
      highMax = Number.isNaN(highMax) ? fh : Math.max(highMax, fh);
    }
    for (let t = 0; t < L; t++) {
      const j = i * L + t;
      const m = mask[j];
      if (m === 0) continue;
      const c1 = seq ? 1 : cap(Math.exp(x.logp[j] - x.oldLogp[j]));
      if (cispo && !seq && Math.exp(x.logp[j] - x.oldLogp[j]) > x.epsilonHigh && a > 0) {
        cispoCount += m;
      }
      const isLow = !seq && c1 < 1 - x.epsilonLow && a < 0;
      const isHigh = !seq && c1 > 1 + x.epsilonHigh && a > 0;
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
    if (!seq && seqActive > 0) {
      const fl = seqLow / seqActive;
      const fh = seqHigh / seqActive;
      lowMin = Number.isNaN(lowMin) ? fl : Math.min(lowMin, fl);
      highMax = Number.isNaN(highMax) ? fh : Math.max(highMax, fh);
    }
  }
  const d = Math.max(active, 1);
  const ds = Math.max(N, 1);
  return {
    kl: useKl ? kl / d : NaN,
    entropy: entropy / d,
    clipRatioLow: seq ? seqLowCount / ds : low / d,
    clipRatioHigh: seq ? seqHighCount / ds : high / d,
    clipRatioRegion: seq ? seqRegionCount / ds : region / d,
    clipRatioLowMin: lowMin,
    clipRatioHighMax: highMax,
    cispoClipRatio: cispo ? cispoCount / (seq ? ds : d) : NaN,
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
  lossType?: LossType,
): Record<string, number> {
  const col = (k: keyof MicroBatchMetrics) => logMean(perMicroBatch.map((m) => m[k]));
  // TRL logs the clip ratios for the clip types, cispo_clip_ratio for cispo, none for sapo.
  if (lossType === 'cispo' || lossType === 'sapo') {
    return {
      ...(beta > 0 ? { kl: col('kl') } : {}),
      entropy: col('entropy'),
      ...(lossType === 'cispo' ? { cispo_clip_ratio: col('cispoClipRatio') } : {}),
    };
  }
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

// ---------------------------------------------------------------------------------------------
// The entropy bonus (docs/grpo.md §5, TRL `entropy_coef`, static coefficient): the step's loss is
// the policy loss minus entropyCoef · H, H the mean per-token entropy of the counted tokens,
// computed per micro-batch exactly as TRL's `_compute_loss` does, so that it accumulates over the
// GA micro-batches to the batch's token mean for 'dapo' and to the mean of micro-batch token means
// for the other loss types.
// ---------------------------------------------------------------------------------------------

export interface EntropyBonusInputs {
  entropy: ArrayLike<number>; // (N, L) the pass's per-position entropies
  mask: ArrayLike<number>; // (N, L)
  N: number;
  L: number;
  GA: number;
  lossType: LossType;
  entropyCoef: number;
}

/**
 * The bonus term added to one pass's loss (−entropyCoef · Σ_m Σ_{t∈m} m·H / D_m) and its
 * gradient ∂loss/∂H per position (−entropyCoef · m / D_m), with D_m TRL's normalizer: the whole
 * batch's active-token count for 'dapo' (num_items_in_batch), else GA · max(Σ m of micro-batch m, 1).
 */
export function entropyBonus(x: EntropyBonusInputs): {
  term: number;
  gradEntropy: Float64Array;
} {
  const { N, L, GA, mask } = x;
  const Nm = N / GA;
  let total = 0;
  for (let j = 0; j < N * L; j++) total += mask[j];
  const gradEntropy = new Float64Array(N * L);
  let term = 0;
  for (let m = 0; m < GA; m++) {
    const from = m * Nm * L;
    const to = (m + 1) * Nm * L;
    let count = 0;
    let sum = 0;
    for (let j = from; j < to; j++) {
      if (mask[j] === 0) continue;
      count += mask[j];
      sum += mask[j] * x.entropy[j];
    }
    const denom = normalisesByBatchTokens(x.lossType)
      ? Math.max(total, 1)
      : GA * Math.max(count, 1);
    term -= (x.entropyCoef * sum) / denom;
    for (let j = from; j < to; j++) {
      if (mask[j] !== 0) gradEntropy[j] = (-x.entropyCoef * mask[j]) / denom;
    }
  }
  return { term, gradEntropy };
}

/**
 * TRL's `policy_loss` metric of one pass (logged when the entropy bonus is on): the mean over
 * micro-batches of each one's policy loss before the gradient-accumulation division, from the
 * pass's policy loss summed over micro-batches as the gradient is (§4).
 */
export function policyLossMetric(passPolicyLoss: number, lossType: LossType, GA: number): number {
  return normalisesByBatchTokens(lossType) ? passPolicyLoss / GA : passPolicyLoss;
}
