// TRL's GRPO formulas transcribed into plain f64 TypeScript from TRL's source, independent of the
// project's functions: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 (main, 2026-07-24,
// version 1.10.0.dev0), trl/trainer/grpo_trainer.py `_generate_and_score_completions` (advantages
// and reward metrics, sum_then_normalize), `_compute_loss` (loss, clip and KL metrics), `log`
// (NaN-skipping mean of the appended values), and trl/trainer/utils.py `nanstd`, `nanmin`, `nanmax`.
// One process; token-level importance sampling. Used by tests/unit/trl-parity.test.ts (CPU
// reference) and tests/kernels/trl-parity.test.ts (GPU trainer path).
import type { LossType } from '../../src/ref/grpo_loss';

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

export interface LossBatch {
  logp: number[][]; // (N, L)
  old: number[][];
  ref: number[][] | null;
  entropy: number[][];
  mask: number[][];
  adv: number[];
}

/** `_compute_loss` for one micro-batch (token-level importance sampling, one process). */
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
  },
) {
  const n = b.logp.length;
  const L = b.logp[0].length;
  const ptl: number[][] = [];
  const grad: number[][] = []; // ∂ per_token_loss / ∂ logp (autograd of the same expression)
  const coef1: number[][] = [];
  const kl: number[][] = [];
  for (let i = 0; i < n; i++) {
    ptl.push([]);
    grad.push([]);
    coef1.push([]);
    kl.push([]);
    const A = b.adv[i];
    for (let t = 0; t < L; t++) {
      const c1 = Math.exp(b.logp[i][t] - b.old[i][t]);
      const c2 = Math.min(Math.max(c1, 1 - o.epsLow), 1 + o.epsHigh);
      const l1 = c1 * A;
      const l2 = c2 * A;
      let loss = -Math.min(l1, l2);
      // d/dlogp of −min(c1·A, clamp(c1)·A): the clamp passes gradient inside its range only.
      const clampActive = c1 < 1 - o.epsLow || c1 > 1 + o.epsHigh;
      let g = l1 <= l2 ? -A * c1 : clampActive ? 0 : -A * c1;
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
    if (o.lossType === 'grpo') w.push(1 / Math.max(seqCount(i), 1) / n / o.GA);
    else if (o.lossType === 'bnpo') w.push(1 / Math.max(allCount, 1) / o.GA);
    else if (o.lossType === 'dr_grpo') w.push(1 / (n * o.maxLen) / o.GA);
    else w.push(1 / Math.max(o.numItems, 1));
    loss += w[i] * seqSum(ptl, i);
  }
  const dLogp = grad.map((row, i) => row.map((g, t) => m[i][t] * w[i] * g));
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
  const metrics: Record<string, number> = {
    entropy: gmm(b.entropy),
    'clip_ratio/low_mean': gmm(low),
    'clip_ratio/high_mean': gmm(high),
    'clip_ratio/region_mean': gmm(region),
    'clip_ratio/low_min': nanmin(seqMean(low)),
    'clip_ratio/high_max': nanmax(seqMean(high)),
  };
  if (o.beta !== 0) metrics.kl = gmm(kl.map((row) => row.map((v) => (Number.isNaN(v) ? 0 : v))));
  return { loss, dLogp, metrics };
}

/** TRL's log() over every appended value (one optimizer-step window of μ steps × GA). */
export function trlLog(appended: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of Object.keys(appended[0])) out[key] = nanmean(appended.map((a) => a[key]));
  return out;
}
