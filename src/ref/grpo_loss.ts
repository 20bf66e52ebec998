// CPU reference (f64) of the GRPO loss, its gradient with respect to the per-token log-probs, and
// the TRL clip/KL statistics, exactly as docs/grpo.md §3–5 define them. The GPU kernel
// shaders/grpo_loss.wgsl is tested against this; the finite-difference test checks dLogp here.
//
// Legend: N sequences, L completion columns (the loss sees a (N, L) grid of token log-probs).
import {
  normalisesByBatchTokens,
  sequenceLogRatios,
  type ImportanceSamplingLevel,
  type LossType,
} from '../core/loss-definitions';

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
  /** 'sequence' (GSPO): one ratio per sequence, exp of its mean log-ratio (default 'token'). */
  importanceSamplingLevel?: ImportanceSamplingLevel;
  /** Two-sided clipping (INTELLECT-2): the unclipped ratio is capped at δ; null/undefined = off. */
  delta?: number | null;
  /**
   * TRL's top_entropy_quantile ρ (default 1: every token): below 1, the policy term counts only on
   * this (micro-)batch's counted tokens whose entropy is at least the (1 − ρ)-quantile.
   */
  topEntropyQuantile?: number;
  entropy?: ArrayLike<number>; // (N, L) per-position entropies, needed when topEntropyQuantile < 1
  /** 'sapo': the gate temperatures for A > 0 and A ≤ 0 (TRL defaults 1.0 and 1.05). */
  sapoTemperaturePos?: number;
  sapoTemperatureNeg?: number;
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
      case 'grpo':
      case 'sapo': {
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
      case 'cispo':
        w = 1 / Math.max(inputs.activeTokensInBatch ?? total, 1);
        break;
      default:
        throw new Error(`unknown lossType ${String(lossType)}`);
    }
    weights[i] = w;
  }
  return weights;
}

/** torch.lerp as torch computes it (a + w·(b − a) for w < 0.5, else b − (b − a)·(1 − w)). */
const torchLerp = (a: number, b: number, w: number) =>
  w < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);

/**
 * TRL's `get_high_entropy_mask` (docs/grpo.md §3): 1 for counted tokens whose entropy is ≥
 * torch.quantile(counted entropies, 1 − ρ) (linear interpolation, the rank q·(n − 1) in float32 as
 * torch computes it with a float32 input), else 0; all 0 when nothing is counted.
 */
export function highEntropyMaskRef(
  entropy: ArrayLike<number>,
  mask: ArrayLike<number>,
  topEntropyQuantile: number,
): Float64Array {
  const out = new Float64Array(mask.length);
  const values: number[] = [];
  for (let j = 0; j < mask.length; j++) if (mask[j] !== 0) values.push(entropy[j]);
  if (values.length === 0) return out;
  values.sort((a, b) => a - b);
  const f32 = Math.fround;
  const rank = f32(f32(1 - topEntropyQuantile) * (values.length - 1));
  const lo = Math.floor(rank);
  const hi = Math.min(Math.ceil(rank), values.length - 1);
  const threshold = torchLerp(values[lo], values[hi], rank - lo);
  for (let j = 0; j < mask.length; j++) {
    if (mask[j] !== 0 && entropy[j] >= threshold) out[j] = 1;
  }
  return out;
}

/**
 * The clipped surrogate of one ratio (docs/grpo.md §3): the per-token policy loss −min(c1·A, c2·A)
 * and its derivative with respect to the ratio's log, with c2 = clip(ρ, 1 − ε_low, 1 + ε_high) and
 * c1 = ρ, or min(ρ, δ) with two-sided clipping (TRL clamps c1 at δ after c2 is taken from the
 * unclamped ρ). Without δ the gradient is the clip-flag rule of §5; with δ it is autograd's rule
 * for torch.min (the branch the min picks; half to each on a tie) and clamp (no gradient past δ).
 */
export function clippedSurrogate(
  rho: number,
  a: number,
  epsilonLow: number,
  epsilonHigh: number,
  delta: number | null,
): { perToken: number; grad: number; isLow: boolean; isHigh: boolean } {
  const clipped = Math.min(Math.max(rho, 1 - epsilonLow), 1 + epsilonHigh);
  if (delta === null) {
    const surrogate = Math.min(rho * a, clipped * a);
    const isLow = rho < 1 - epsilonLow && a < 0;
    const isHigh = rho > 1 + epsilonHigh && a > 0;
    // Where the clip is active the min picks the constant branch: no surrogate gradient.
    return { perToken: -surrogate, grad: isLow || isHigh ? 0 : -a * rho, isLow, isHigh };
  }
  const c1 = Math.min(rho, delta);
  const l1 = c1 * a;
  const l2 = clipped * a;
  const g1 = rho > delta ? 0 : -a * rho;
  const g2 = rho < 1 - epsilonLow || rho > 1 + epsilonHigh ? 0 : -a * rho;
  const grad = l1 < l2 ? g1 : l2 < l1 ? g2 : 0.5 * (g1 + g2);
  // TRL's clip flags test the δ-capped c1.
  return {
    perToken: -Math.min(l1, l2),
    grad,
    isLow: c1 < 1 - epsilonLow && a < 0,
    isHigh: c1 > 1 + epsilonHigh && a > 0,
  };
}

/**
 * CISPO (docs/grpo.md §3, TRL loss_type='cispo'): −min(ρ, ε_high)·A·logp with the capped ratio
 * detached, so ∂/∂logp = −min(ρ, ε_high)·A; the flag is TRL's cispo_clip_ratio test
 * (ρ > ε_high and A > 0). Note ε_high caps the ratio itself here, not 1 + ε_high.
 */
export function cispoTerm(
  rho: number,
  a: number,
  logpValue: number,
  epsilonHigh: number,
): { perToken: number; grad: number; isLow: boolean; isHigh: boolean } {
  const c = Math.min(rho, epsilonHigh);
  return {
    perToken: -c * a * logpValue,
    grad: -c * a,
    isLow: false,
    isHigh: rho > epsilonHigh && a > 0,
  };
}

/**
 * SAPO (docs/grpo.md §3, TRL loss_type='sapo'): −A · (4/τ)·σ(τ(ρ − 1)), τ = τ_pos for A > 0 else
 * τ_neg; its derivative with respect to log ρ is −A · 4·σ(1 − σ) · ρ. No clip flags.
 */
export function sapoTerm(
  rho: number,
  a: number,
  temperaturePos: number,
  temperatureNeg: number,
): { perToken: number; grad: number; isLow: boolean; isHigh: boolean } {
  const tau = a > 0 ? temperaturePos : temperatureNeg;
  const sig = 1 / (1 + Math.exp(-tau * (rho - 1)));
  return {
    perToken: (-sig * 4 * a) / tau,
    grad: -a * 4 * sig * (1 - sig) * rho,
    isLow: false,
    isHigh: false,
  };
}

export function grpoLossRef(inputs: GrpoLossInputs): GrpoLossResult {
  const { N, L, logp, oldLogp, refLogp, advantages, mask, epsilonLow, epsilonHigh, beta } = inputs;
  const useKl = beta !== 0 && refLogp !== null;
  const weights = aggregationWeights(inputs);
  const delta = inputs.delta ?? null;
  const seq =
    inputs.importanceSamplingLevel === 'sequence'
      ? sequenceLogRatios(logp, oldLogp, mask, N, L)
      : null;
  const rho = inputs.topEntropyQuantile ?? 1;
  let em: Float64Array | null = null;
  if (rho < 1) {
    if (!inputs.entropy) throw new Error('topEntropyQuantile < 1 needs the entropies');
    em = highEntropyMaskRef(inputs.entropy, mask, rho);
  }
  const dLogp = new Float64Array(N * L);
  let loss = 0;
  let active = 0;
  let low = 0;
  let high = 0;
  let region = 0;
  let klSum = 0;
  for (let i = 0; i < N; i++) {
    const a = advantages[i];
    // GSPO: every token of the sequence shares one ratio and its surrogate; the loss Σ_t m·w·ℓ
    // depends on the sequence ratio through Σ_t m = max(Σ_t m, 1) tokens, whose derivative with
    // respect to logp_t is ratio · m_t / max(Σ_t m, 1): the same m·w·(−A·ratio) per token.
    // The policy term of one ratio (and, for cispo, the token's own log-prob).
    const term = (rho: number, lp: number) =>
      inputs.lossType === 'cispo'
        ? cispoTerm(rho, a, lp, epsilonHigh)
        : inputs.lossType === 'sapo'
          ? sapoTerm(rho, a, inputs.sapoTemperaturePos ?? 1, inputs.sapoTemperatureNeg ?? 1.05)
          : clippedSurrogate(rho, a, epsilonLow, epsilonHigh, delta);
    // CISPO detaches its ratio: with GSPO each token keeps its own term (no shared surrogate).
    const shared = seq !== null && inputs.lossType !== 'cispo';
    const seqPart = shared ? term(Math.exp(seq.logRatio[i]), NaN) : null;
    // With an entropy mask the shared surrogate counts Σ_t m·em times (of Σ_t m): its gradient
    // per token scales by Σ_t m·em / max(Σ_t m, 1).
    let seqScale = 1;
    if (shared && seq && em) {
      let ce = 0;
      for (let t = 0; t < L; t++) if (mask[i * L + t] !== 0) ce += mask[i * L + t] * em[i * L + t];
      seqScale = ce / Math.max(seq.count[i], 1);
    }
    for (let t = 0; t < L; t++) {
      const j = i * L + t;
      const m = mask[j];
      if (m === 0) continue;
      const part = seqPart ?? term(Math.exp(seq ? seq.logRatio[i] : logp[j] - oldLogp[j]), logp[j]);
      const { isLow, isHigh } = part;
      let perToken = part.perToken;
      let grad = part.grad;
      if (em) {
        perToken *= em[j];
        grad *= shared ? seqScale : em[j];
      }
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
  const scale = normalisesByBatchTokens(inputs.lossType) ? 1 : 1 / GA;
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
      entropy: inputs.entropy ? rows(inputs.entropy, m) : undefined,
      N: Nm,
      activeTokensInBatch: inputs.activeTokensInBatch ?? total,
    });
    microBatches.push(r);
    loss += r.loss * scale;
    for (let j = 0; j < Nm * L; j++) dLogp[m * Nm * L + j] = r.dLogp[j] * scale;
  }
  return { loss, dLogp, microBatches };
}
