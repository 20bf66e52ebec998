// TRL's GRPO formulas transcribed into plain f64 TypeScript from TRL's source, independent of the
// project's functions: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 (main, 2026-07-24,
// version 1.10.0.dev0), trl/trainer/grpo_trainer.py `_generate_and_score_completions` (advantages
// and reward metrics, sum_then_normalize), `_compute_loss` (loss, clip and KL metrics), `log`
// (NaN-skipping mean of the appended values), and trl/trainer/utils.py `nanstd`, `nanmin`, `nanmax`;
// the completions/* length metrics of `_generate_and_score_completions` (trlCompletionMetrics).
// One process; token- or sequence-level importance sampling (GSPO) and two-sided clipping (delta)
// as `_compute_loss` computes them. Used by tests/unit/trl-parity.test.ts (CPU
// reference) and tests/kernels/trl-parity.test.ts (GPU trainer path).
import type { LossType } from '../../src/core/loss-definitions';

// ------------------------------------------------------------------------------------------
// TRL, transcribed. NaN plays torch's NaN; float32 tensors are Math.fround'ed values.
// ------------------------------------------------------------------------------------------
const f32 = Math.fround;

export const nanmean = (xs: number[]) => {
  const v = xs.filter((x) => !Number.isNaN(x));
  return v.length ? v.reduce((s, x) => s + x, 0) / v.length : NaN;
};
/** trl.trainer.utils.nanstd: nanmean of squared deviations × count/(count − 1), NaN below 2. */
export const nanstd = (xs: number[]) => {
  const m = nanmean(xs);
  const v = xs.filter((x) => !Number.isNaN(x));
  if (v.length < 2) return NaN;
  const variance = nanmean(v.map((x) => (x - m) ** 2)) * (v.length / (v.length - 1));
  return Math.sqrt(variance);
};
export const nanmin = (xs: number[]) => {
  const v = xs.filter((x) => !Number.isNaN(x));
  return v.length ? Math.min(...v) : NaN;
};
export const nanmax = (xs: number[]) => {
  const v = xs.filter((x) => !Number.isNaN(x));
  return v.length ? Math.max(...v) : NaN;
};
/** torch.isclose(x, 0) with rtol 1e-5, atol 1e-8: |x| ≤ 1e-8; NaN is never close. */
export const iscloseZero = (x: number) => Math.abs(x) <= 1e-8;

export type Scale = 'group' | 'batch' | 'none';

/** `_generate_and_score_completions`, sum_then_normalize, one process. */
export function trlScore(perFunc: (number | null)[][], weights: number[], G: number, scale: Scale) {
  const N = perFunc.length;
  const K = weights.length;
  const rpf = perFunc.map((row) => row.map((r) => (r === null ? NaN : f32(r))));
  const unscorable = rpf.map((row) => row.every((x) => Number.isNaN(x)));
  const nansumRow = (row: number[]) =>
    row.reduce((s, x, k) => (Number.isNaN(x) ? s : s + x * weights[k]), 0);
  const rewards = rpf.map((row, i) => (unscorable[i] ? NaN : f32(nansumRow(row))));
  const groups = N / G;
  const meanG: number[] = [];
  const stdG: number[] = [];
  for (let g = 0; g < groups; g++) {
    const slice = rewards.slice(g * G, (g + 1) * G);
    meanG.push(nanmean(slice));
    stdG.push(nanstd(slice));
  }
  const batchStd = nanstd(rewards);
  const std = rewards.map((_, i) => (scale === 'batch' ? batchStd : stdG[Math.floor(i / G)]));
  const advantages = rewards.map((r, i) => {
    let a = r - meanG[Math.floor(i / G)];
    if (scale !== 'none') a = a / (std[i] + 1e-4);
    return Number.isNaN(a) ? 0 : a; // nan_to_num
  });
  const metrics: Record<string, number> = {};
  for (let k = 0; k < K; k++) {
    const col = rpf.map((row) => row[k]);
    metrics[`rewards/f${k}/mean`] = nanmean(col);
    metrics[`rewards/f${k}/std`] = nanstd(col);
  }
  metrics.reward = nanmean(rewards);
  metrics.reward_std = nanstd(rewards);
  metrics.frac_reward_zero_std = std.filter(iscloseZero).length / N;
  return { rewards, advantages, metrics };
}

/**
 * `_generate_and_score_completions` with multi_objective_aggregation='normalize_then_sum' (GDPO),
 * one process: per function and group, (x − nanmean) / (nanstd + 1e-4) of the float32 values
 * (NaN where x is NaN or the group has fewer than 2), weighted nansum per row, NaN for unscorable
 * rows, then (r − nanmean(r)) / (nanstd(r) + 1e-4) over the batch, nan_to_num; is_std_zero from
 * the batch std.
 */
export function trlScoreNormalizeThenSum(
  perFunc: (number | null)[][],
  weights: number[],
  G: number,
) {
  const N = perFunc.length;
  const K = weights.length;
  const rpf = perFunc.map((row) => row.map((r) => (r === null ? NaN : f32(r))));
  const unscorable = rpf.map((row) => row.every((x) => Number.isNaN(x)));
  const rewardK: number[][] = rpf.map((row) => row.map(() => NaN));
  for (let g = 0; g < N / G; g++) {
    for (let k = 0; k < K; k++) {
      const col = rpf.slice(g * G, (g + 1) * G).map((row) => row[k]);
      const meanK = f32(nanmean(col));
      const stdK = f32(nanstd(col));
      for (let j = 0; j < G; j++) rewardK[g * G + j][k] = f32((col[j] - meanK) / (stdK + 1e-4));
    }
  }
  const rewards = rewardK.map((row, i) =>
    unscorable[i]
      ? NaN
      : f32(row.reduce((s, z, k) => (Number.isNaN(z) ? s : s + z * weights[k]), 0)),
  );
  const std = nanstd(rewards);
  const mean = nanmean(rewards);
  const advantages = rewards.map((r) => {
    const a = (r - mean) / (std + 1e-4);
    return Number.isNaN(a) ? 0 : a;
  });
  return { rewards, advantages, fracRewardZeroStd: iscloseZero(std) ? 1 : 0 };
}

export interface LossBatch {
  logp: number[][]; // (N, L)
  old: number[][];
  ref: number[][] | null;
  entropy: number[][];
  mask: number[][];
  adv: number[];
}

/**
 * `_compute_loss` for one micro-batch (one process). `isLevel` 'sequence':
 *   log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  → (B, 1)
 * and `delta`: coef_2 = clamp(coef_1, 1 − ε_low, 1 + ε_high); coef_1 = clamp(coef_1, max=delta);
 * per_token_loss = −min(coef_1·A, coef_2·A), broadcast over the sequence's tokens at level
 * 'sequence'. Gradients by the chain rule of autograd: torch.min sends the gradient to the smaller
 * argument (half to each on a tie), torch.clamp passes it inside [min, max] (inclusive).
 */
export function trlMicroLoss(
  b: LossBatch,
  o: {
    lossType: LossType;
    epsLow: number;
    epsHigh: number;
    beta: number;
    GA: number;
    maxLen: number;
    numItems: number;
    isLevel?: 'token' | 'sequence';
    delta?: number | null;
    /** Static entropy bonus (use_adaptive_entropy False): loss = loss − entropy_coef·entropy_loss. */
    entropyCoef?: number;
    /** top_entropy_quantile: per_token_loss *= get_high_entropy_mask(entropies, mask, 1 − ρ). */
    topEntropyQuantile?: number;
    sapoPos?: number; // sapo_temperature_pos
    sapoNeg?: number; // sapo_temperature_neg
  },
) {
  const n = b.logp.length;
  const L = b.logp[0].length;
  const seqLevel = o.isLevel === 'sequence';
  const delta = o.delta ?? null;
  const ptl: number[][] = [];
  const grad: number[][] = []; // ∂ per_token_loss / ∂ logp (autograd of the same expression)
  const coef1: number[][] = [];
  const kl: number[][] = [];
  // ∂ policy part of ptl / ∂ log_importance_weights, per sequence (level 'sequence').
  const dSeq: number[] = [];
  const seqCoef1: number[] = [];
  const seqLoss: number[] = [];
  // −min(c1'·A, c2·A) and its derivative with respect to log c1 (c1 = exp(log weight)); for
  // 'cispo' −clamp(c1, max=ε_high).detach()·A·logp (lp: the token's log-prob; the derivative is
  // then ∂/∂logp, the weight being detached); for 'sapo' −sigmoid(τ(c1 − 1))·4/τ·A.
  const surrogate = (c1: number, A: number, lp = NaN) => {
    if (o.lossType === 'cispo') {
      const clamped = Math.min(c1, o.epsHigh);
      return { loss: -clamped * A * lp, dLogW: -clamped * A, c1 };
    }
    if (o.lossType === 'sapo') {
      const tau = A > 0 ? (o.sapoPos ?? 1) : (o.sapoNeg ?? 1.05);
      const sg = 1 / (1 + Math.exp(-tau * (c1 - 1)));
      return { loss: ((-sg * 4) / tau) * A, dLogW: -A * 4 * sg * (1 - sg) * c1, c1 };
    }
    const c2 = Math.min(Math.max(c1, 1 - o.epsLow), 1 + o.epsHigh);
    const c2Pass = c1 >= 1 - o.epsLow && c1 <= 1 + o.epsHigh ? 1 : 0;
    const c1d = delta === null ? c1 : Math.min(c1, delta);
    const c1Pass = delta === null || c1 <= delta ? 1 : 0;
    const l1 = c1d * A;
    const l2 = c2 * A;
    const [w1, w2] = l1 < l2 ? [1, 0] : l2 < l1 ? [0, 1] : [0.5, 0.5];
    const dmin = w1 * A * c1Pass + w2 * A * c2Pass; // ∂min/∂c1
    return { loss: -Math.min(l1, l2), dLogW: -dmin * c1, c1: c1d };
  };
  for (let i = 0; i < n; i++) {
    if (!seqLevel) continue;
    let s = 0;
    let c = 0;
    for (let t = 0; t < L; t++) {
      s += (b.logp[i][t] - b.old[i][t]) * b.mask[i][t];
      c += b.mask[i][t];
    }
    // torch: masked NaN·0 would be NaN; the tests' masked positions hold finite values.
    const r = surrogate(Math.exp(s / Math.max(c, 1)), b.adv[i]);
    dSeq.push(r.dLogW / Math.max(c, 1)); // ∂ptl/∂logp_u = dSeq · mask_u
    seqCoef1.push(r.c1);
    seqLoss.push(r.loss);
  }
  // get_high_entropy_mask: torch.quantile (linear) of the float32 entropies of non-pad tokens at
  // 1 − ρ (q as a float32 tensor, rank = q·(n − 1) in float32), then masked_entropies >= threshold
  // and mask; an empty selection gives an all-false mask.
  const rhoQ = o.topEntropyQuantile ?? 1;
  let entropyMask: number[][] | null = null;
  if (rhoQ < 1) {
    const local = b.entropy.flatMap((row, i) => row.filter((_, t) => b.mask[i][t] !== 0));
    if (local.length === 0) entropyMask = b.mask.map((row) => row.map(() => 0));
    else {
      const sorted = local.map((x) => f32(x)).sort((x, y) => x - y);
      const rank = f32(f32(1 - rhoQ) * (sorted.length - 1));
      const below = Math.floor(rank);
      const above = Math.min(Math.ceil(rank), sorted.length - 1);
      const wt = rank - below;
      const [va, vb] = [sorted[below], sorted[above]];
      const threshold = wt < 0.5 ? va + wt * (vb - va) : vb - (vb - va) * (1 - wt); // torch.lerp
      entropyMask = b.entropy.map((row, i) =>
        row.map((h, t) => (h * b.mask[i][t] >= threshold && b.mask[i][t] !== 0 ? 1 : 0)),
      );
    }
  }
  for (let i = 0; i < n; i++) {
    ptl.push([]);
    grad.push([]);
    coef1.push([]);
    kl.push([]);
    const A = b.adv[i];
    for (let t = 0; t < L; t++) {
      let loss: number;
      let g: number;
      let c1: number;
      if (seqLevel && o.lossType === 'cispo') {
        // cispo: the (B, 1) weight is detached; each token keeps −w·A·logp_t.
        const r = surrogate(seqCoef1[i], A, b.logp[i][t]);
        loss = r.loss;
        g = r.dLogW;
        c1 = seqCoef1[i];
      } else if (seqLevel) {
        // ptl_i,t = f(s_i) for every t: its gradient reaches each logp_i,u (cross-token, below).
        loss = seqLoss[i];
        g = 0;
        c1 = seqCoef1[i];
      } else {
        const r = surrogate(Math.exp(b.logp[i][t] - b.old[i][t]), A, b.logp[i][t]);
        loss = r.loss;
        g = r.dLogW;
        c1 = r.c1;
      }
      if (entropyMask) {
        loss *= entropyMask[i][t];
        g *= entropyMask[i][t];
      }
      let k = NaN;
      if (o.beta !== 0 && b.ref) {
        const d = b.ref[i][t] - b.logp[i][t];
        k = Math.exp(d) - d - 1;
        loss += o.beta * k;
        g += o.beta * (1 - Math.exp(d));
      }
      ptl[i].push(loss);
      grad[i].push(g);
      coef1[i].push(c1);
      kl[i].push(k);
    }
  }
  const m = b.mask;
  const seqSum = (x: number[][], i: number) => x[i].reduce((s, v, t) => s + v * m[i][t], 0);
  const seqCount = (i: number) => m[i].reduce((s, v) => s + v, 0);
  let allCount = 0;
  for (let i = 0; i < n; i++) allCount += seqCount(i);
  let loss = 0;
  const w: number[] = []; // ∂loss/∂ptl per sequence (times the mask)
  for (let i = 0; i < n; i++) {
    if (o.lossType === 'grpo' || o.lossType === 'sapo')
      w.push(1 / Math.max(seqCount(i), 1) / n / o.GA);
    else if (o.lossType === 'bnpo') w.push(1 / Math.max(allCount, 1) / o.GA);
    else if (o.lossType === 'dr_grpo') w.push(1 / (n * o.maxLen) / o.GA);
    else w.push(1 / Math.max(o.numItems, 1));
    loss += w[i] * seqSum(ptl, i);
  }
  const dLogp = grad.map((row, i) => {
    // Level 'sequence': Σ_t m_t·w_i·ptl_i,t depends on logp_i,u through s_i for every t.
    // (With the entropy mask, Σ_t m_t·em_t·w_i·ptl_i: the surrogate counts Σ_t m·em times.)
    const counted = entropyMask ? seqSum(entropyMask, i) : seqCount(i);
    const cross = seqLevel && o.lossType !== 'cispo' ? w[i] * counted * dSeq[i] : 0;
    return row.map((g, t) => m[i][t] * (w[i] * g + cross));
  });
  // Logging: global_masked_mean and nanmin/nanmax of masked_seq_mean.
  const gmm = (x: number[][]) => {
    let s = 0;
    for (let i = 0; i < n; i++) s += seqSum(x, i);
    return s / Math.max(allCount, 1);
  };
  const flag = (f: (c: number, A: number) => boolean) =>
    coef1.map((row, i) => row.map((c) => (f(c, b.adv[i]) ? 1 : 0)));
  const low = flag((c, A) => c < 1 - o.epsLow && A < 0);
  const high = flag((c, A) => c > 1 + o.epsHigh && A > 0);
  const region = low.map((row, i) => row.map((v, t) => (v || high[i][t] ? 1 : 0)));
  const seqMean = (x: number[][]) => x.map((_, i) => seqSum(x, i) / seqCount(i)); // NaN for 0/0
  // Level 'sequence': the flags are (B, 1): global_masked_mean is x.sum() / B and masked_seq_mean
  // is x.squeeze(1), every sequence counted (an all-masked one too).
  const sFlag = (f: (c: number, A: number) => boolean) =>
    seqCoef1.map((c, i) => (f(c, b.adv[i]) ? 1 : 0));
  const sLow = sFlag((c, A) => c < 1 - o.epsLow && A < 0);
  const sHigh = sFlag((c, A) => c > 1 + o.epsHigh && A > 0);
  const sRegion = sLow.map((v, i) => (v || sHigh[i] ? 1 : 0));
  const sMean = (x: number[]) => x.reduce((acc, v) => acc + v, 0) / Math.max(n, 1);
  const metrics: Record<string, number> = seqLevel
    ? {
        entropy: gmm(b.entropy),
        'clip_ratio/low_mean': sMean(sLow),
        'clip_ratio/high_mean': sMean(sHigh),
        'clip_ratio/region_mean': sMean(sRegion),
        'clip_ratio/low_min': nanmin(sLow),
        'clip_ratio/high_max': nanmax(sHigh),
      }
    : {
        entropy: gmm(b.entropy),
        'clip_ratio/low_mean': gmm(low),
        'clip_ratio/high_mean': gmm(high),
        'clip_ratio/region_mean': gmm(region),
        'clip_ratio/low_min': nanmin(seqMean(low)),
        'clip_ratio/high_max': nanmax(seqMean(high)),
      };
  // cispo logs cispo_clip_ratio (coef_1 > ε_high and A > 0) instead of the clip ratios; sapo
  // logs neither.
  if (o.lossType === 'cispo' || o.lossType === 'sapo') {
    for (const key of Object.keys(metrics)) if (key.startsWith('clip_ratio/')) delete metrics[key];
  }
  if (o.lossType === 'cispo') {
    metrics.cispo_clip_ratio = seqLevel
      ? sMean(seqCoef1.map((c, i) => (c > o.epsHigh && b.adv[i] > 0 ? 1 : 0)))
      : gmm(coef1.map((row, i) => row.map((c) => (c > o.epsHigh && b.adv[i] > 0 ? 1 : 0))));
  }
  if (o.beta !== 0) metrics.kl = gmm(kl.map((row) => row.map((v) => (Number.isNaN(v) ? 0 : v))));
  // Entropy bonus: entropy_loss = Σ H·m / normalizer for dapo (normalizer = num_items_in_batch
  // clamped), Σ H·m / clamp(Σ m) / GA otherwise; policy_loss is the loss before the bonus and
  // before the GA division. (entropy_coef is appended once per optimizer step in TRL; it is
  // constant here, so appending it per micro-batch gives the same logged mean.)
  const coef = o.entropyCoef ?? 0;
  const dEntropy = b.entropy.map((row) => row.map(() => 0));
  if (coef !== 0) {
    const global = o.lossType === 'dapo' || o.lossType === 'cispo';
    const policyLoss = global ? loss : loss * o.GA;
    const normalizer = global ? Math.max(o.numItems, 1) : Math.max(allCount, 1) * o.GA;
    let hSum = 0;
    for (let i = 0; i < n; i++) hSum += seqSum(b.entropy, i);
    loss -= (coef * hSum) / normalizer;
    for (let i = 0; i < n; i++)
      for (let t = 0; t < L; t++) dEntropy[i][t] = (-coef * m[i][t]) / normalizer;
    metrics.policy_loss = policyLoss;
    metrics.entropy_coef = coef;
  }
  return { loss, dLogp, dEntropy, metrics };
}

/** TRL's log() over every appended value (one optimizer-step window of μ steps × GA). */
export function trlLog(appended: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of Object.keys(appended[0])) out[key] = nanmean(appended.map((a) => a[key]));
  return out;
}

/**
 * `_generate_and_score_completions`' completions/* metrics, one process. `completionIds`: the
 * generated ids as TRL holds them, (N, L) with whatever follows the first EOS (generate pads
 * there; the sampler keeps drawing). As TRL computes it:
 *   is_eos = completion_ids == eos_token_id;  eos_idx = first EOS index, L where there is none
 *   completion_mask = arange(L) ≤ eos_idx;    completion_lengths = completion_mask.sum(1)
 *   mean/min/max_length = completion_lengths.float().mean()/min()/max()
 *   terminated = is_eos.any(dim=1);  clipped_ratio = 1 − len(term_lengths) / len(lengths)
 *   term_lengths = completion_lengths[terminated], torch.zeros(1) when empty
 *   mean/min/max_terminated_length = term_lengths.float().mean()/min()/max()
 * (float32 means: the integer sums are exact, the division is rounded to float32.)
 */
export function trlCompletionMetrics(
  completionIds: number[][],
  eosTokenId: number,
): Record<string, number> {
  const L = completionIds[0].length;
  const isEos = completionIds.map((row) => row.map((id) => id === eosTokenId));
  const eosIdx = isEos.map((row) => (row.includes(true) ? row.indexOf(true) : L));
  const lengths = eosIdx
    .map((e) => Array.from({ length: L }, (_, t) => (t <= e ? 1 : 0)))
    .map((mask) => mask.reduce((s: number, m) => s + m, 0));
  const terminated = isEos.map((row) => row.some(Boolean));
  const f32mean = (xs: number[]) => f32(xs.reduce((s, x) => s + x, 0) / xs.length);
  let term = lengths.filter((_, i) => terminated[i]);
  const clipped = 1 - term.length / lengths.length;
  if (term.length === 0) term = [0];
  return {
    'completions/mean_length': f32mean(lengths),
    'completions/min_length': Math.min(...lengths),
    'completions/max_length': Math.max(...lengths),
    'completions/clipped_ratio': clipped,
    'completions/mean_terminated_length': f32mean(term),
    'completions/min_terminated_length': Math.min(...term),
    'completions/max_terminated_length': Math.max(...term),
  };
}
