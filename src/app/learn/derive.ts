// Learn mode's numbers, derived from a live StepReport exactly as the trainer computes them
// (docs/grpo.md §1–5): rewards, advantages (src/grpo/advantages.ts), the per-token ratio, clip
// and k3 KL, the loss of each aggregation type (src/ref/grpo_loss.ts) and how the sampled tokens'
// log-probs moved. Pure functions, no DOM: the Svelte views only lay these values out, and the
// tests check them against hand-computed values and against the trainer's own metrics.
//
// Legend: B prompts (groups) per step, G completions per group, N = B·G sequences,
// L the longest completion of the step (per-token arrays are laid out (N, L), zero-padded).
import { ADVANTAGE_STD_EPS, computeAdvantages, type ScaleRewards } from '../../grpo/advantages';
import type { Config } from '../../grpo/config';
import { rewardTotals, type RewardError } from '../../rewards/rewards';
import { stepAdvantages } from '../../grpo/step-rewards';
import type { CompletionRecord, GroupRecord, StepReport } from '../../grpo/trainer';
import {
  aggregationWeights,
  grpoLossRef,
  type GrpoLossInputs,
  type GrpoLossStats,
} from '../../ref/grpo_loss';
import { LOSS_TYPES, normalisesByBatchTokens, type LossType } from '../../core/loss-definitions';

export { LOSS_TYPES, type LossType };

/** The config fields Learn mode reads; a resolved Config has them all. */
export type LearnConfig = Pick<
  Config,
  | 'rewards'
  | 'rewardWeights'
  | 'scaleRewards'
  | 'epsilon'
  | 'epsilonHigh'
  | 'beta'
  | 'lossType'
  | 'numIterations'
  | 'maxCompletionLength'
  | 'gradientAccumulationSteps'
>;

/**
 * When a recomputed number is shown as matching the trainer's: the trainer computes on the GPU in
 * f32 (advantages are uploaded as f32), these functions in f64.
 */
export const MATCH_TOLERANCE = { atol: 1e-5, rtol: 1e-4 } as const;

export function matches(recomputed: number, reported: number, tol = MATCH_TOLERANCE): boolean {
  if (Number.isNaN(recomputed) && Number.isNaN(reported)) return true;
  return Math.abs(recomputed - reported) <= tol.atol + tol.rtol * Math.abs(reported);
}

/** Every completion of the step in trainer order (group-major: group b, member g → b·G + g). */
export function allCompletions(report: StepReport): CompletionRecord[] {
  return report.groups.flatMap((g) => g.completions);
}

// ---------------------------------------------------------------------------------------------
// 1. Rewards (docs/grpo.md §1)
// ---------------------------------------------------------------------------------------------

export interface RewardCell {
  name: string;
  /** After sanitising: null = not applicable (counts 0), 0 for a function that failed. */
  value: number | null;
  weight: number;
  /** weight · value (0 when not applicable). */
  contribution: number;
  error: RewardError | null;
}

export interface RewardRow {
  index: number;
  cells: RewardCell[];
  /** The trainer's total. */
  total: number;
  /** Σ_k w_k · r_k recomputed from the cells (equals `total`). */
  recomputed: number;
  errors: RewardError[];
}

export function rewardWeights(config: Pick<LearnConfig, 'rewards' | 'rewardWeights'>): number[] {
  const w = config.rewardWeights as number[] | null | undefined;
  return w && w.length === config.rewards.length ? w.slice() : config.rewards.map(() => 1);
}

export function rewardRows(
  group: GroupRecord,
  config: Pick<LearnConfig, 'rewards' | 'rewardWeights'>,
): RewardRow[] {
  const weights = rewardWeights(config);
  return group.completions.map((c, index) => {
    let recomputed = 0;
    const cells = config.rewards.map((name, k) => {
      const raw = c.reward.perFunction[name];
      const value = raw === undefined ? null : raw;
      const contribution = value === null ? 0 : weights[k] * value;
      recomputed += contribution;
      const error = c.reward.errors.find((e) => e.reward === name) ?? null;
      return { name, value, weight: weights[k], contribution, error };
    });
    return { index, cells, total: c.reward.total, recomputed, errors: c.reward.errors };
  });
}

// ---------------------------------------------------------------------------------------------
// 2. Advantages (docs/grpo.md §2)
// ---------------------------------------------------------------------------------------------

export interface AdvantageRow {
  reward: number;
  /** r − mean of the group. */
  centered: number;
  /** Recomputed with computeAdvantages over the whole step (the trainer's call). */
  advantage: number;
  /** What the trainer reported. */
  reported: number;
}

export interface AdvantageWalk {
  scale: ScaleRewards;
  groupSize: number;
  mean: number;
  /** Unbiased std of this group's rewards. */
  groupStd: number;
  /** Unbiased std over all N rewards of the step ('batch' scaling divides by this). */
  batchStd: number;
  /** What r − mean is divided by: std + 1e-4 ('group' or 'batch'), 1 for 'none'. */
  denominator: number;
  eps: number;
  /** Every reward of the group is identical: all advantages are exactly 0 (no signal). */
  allEqual: boolean;
  rows: AdvantageRow[];
  /** Σ of the group's advantages (≈ 0 for 'group' and 'none'). */
  sum: number;
}

function meanOf(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s / xs.length;
}

function unbiasedStd(xs: readonly number[]): number {
  const m = meanOf(xs);
  let ss = 0;
  for (const x of xs) ss += (x - m) * (x - m);
  return xs.length > 1 ? Math.sqrt(ss / (xs.length - 1)) : NaN;
}

/** Advantages of the whole step recomputed from the rewards, exactly as the trainer does. */
export function recomputeAdvantages(
  report: StepReport,
  config: Pick<LearnConfig, 'scaleRewards'> &
    Partial<Pick<Config, 'multiObjectiveAggregation' | 'rewardWeights'>>,
): Float64Array {
  const G = report.groups[0]?.completions.length ?? 0;
  if (config.multiObjectiveAggregation === 'normalize_then_sum') {
    // GDPO (docs/grpo.md §2): each reward function normalised per group first; the functions in
    // the order the trainer scored them.
    const results = allCompletions(report).map((c) => c.reward);
    const names = Object.keys(results[0]?.perFunction ?? {});
    const weights = config.rewardWeights ?? names.map(() => 1);
    return stepAdvantages(results, names, weights, G, config.scaleRewards, 'normalize_then_sum');
  }
  return computeAdvantages(
    rewardTotals(allCompletions(report).map((c) => c.reward)),
    G,
    config.scaleRewards,
  );
}

export function advantageWalk(
  report: StepReport,
  groupIndex: number,
  config: Pick<LearnConfig, 'scaleRewards'>,
): AdvantageWalk {
  const group = report.groups[groupIndex];
  const G = group.completions.length;
  const recomputed = recomputeAdvantages(report, config);
  // Unscorable completions (every reward null) are left out of the statistics (docs/grpo.md §1).
  const scored = (xs: readonly (number | null)[]) => xs.filter((x): x is number => x !== null);
  const rewards = scored(rewardTotals(group.completions.map((c) => c.reward)));
  const all = scored(rewardTotals(allCompletions(report).map((c) => c.reward)));
  const mean = meanOf(rewards);
  const groupStd = unbiasedStd(rewards);
  const batchStd = unbiasedStd(all);
  const denominator =
    config.scaleRewards === 'group'
      ? groupStd + ADVANTAGE_STD_EPS
      : config.scaleRewards === 'batch'
        ? batchStd + ADVANTAGE_STD_EPS
        : 1;
  const rows = group.completions.map((c, g) => ({
    reward: c.reward.total,
    centered: c.reward.total - mean,
    advantage: recomputed[groupIndex * G + g],
    reported: c.advantage,
  }));
  return {
    scale: config.scaleRewards,
    groupSize: G,
    mean,
    groupStd,
    batchStd,
    denominator,
    eps: ADVANTAGE_STD_EPS,
    // Equal in float32, as TRL's rewards tensor holds them (§2).
    allEqual: rewards.every((r) => Math.fround(r) === Math.fround(rewards[0])),
    rows,
    sum: rows.reduce((s, r) => s + r.reported, 0),
  };
}

// ---------------------------------------------------------------------------------------------
// 3. Per-token ratio, clip, KL and loss (docs/grpo.md §3)
// ---------------------------------------------------------------------------------------------

export type ClipSide = 'low' | 'high' | null;

/** min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A): the clipped surrogate the loss maximises. */
export function clippedObjective(rho: number, a: number, epsLow: number, epsHigh: number): number {
  const clipped = Math.min(Math.max(rho, 1 - epsLow), 1 + epsHigh);
  return Math.min(rho * a, clipped * a);
}

/** Where the clip is active (the min takes the constant branch and the gradient is 0). */
export function clipSide(rho: number, a: number, epsLow: number, epsHigh: number): ClipSide {
  if (rho < 1 - epsLow && a < 0) return 'low';
  if (rho > 1 + epsHigh && a > 0) return 'high';
  return null;
}

/** The k3 estimator exp(x) − x − 1 with x = ref − logp (R1 Eq. 2): ≥ 0, 0 only at x = 0. */
export function k3(refMinusLogp: number): number {
  return Math.exp(refMinusLogp) - refMinusLogp - 1;
}

export interface TokenTerm {
  t: number;
  token: number;
  counted: boolean;
  logp: number;
  oldLogp: number;
  refLogp: number | null;
  /** ρ = exp(logp − old). */
  ratio: number;
  clip: ClipSide;
  surrogate: number;
  /** k3 per token, null when β = 0 (the reference is not evaluated). */
  kl: number | null;
  /** ℓ = −surrogate + β·kl. */
  loss: number;
  logpAfter: number | null;
  /** logpAfter − logp: how the update moved this token's log-prob. */
  delta: number | null;
}

export function tokenTerms(
  c: CompletionRecord,
  config: Pick<LearnConfig, 'epsilon' | 'epsilonHigh' | 'beta'>,
): TokenTerm[] {
  const useKl = config.beta !== 0 && c.refLogp !== null;
  return c.logp.map((logp, t) => {
    const old = c.oldLogp[t];
    const ratio = Math.exp(logp - old);
    const surrogate = clippedObjective(ratio, c.advantage, config.epsilon, config.epsilonHigh);
    const ref = c.refLogp ? c.refLogp[t] : null;
    const kl = useKl && ref !== null ? k3(ref - logp) : null;
    const after = c.logpAfter ? c.logpAfter[t] : null;
    return {
      t,
      token: c.tokens[t],
      counted: c.counted[t],
      logp,
      oldLogp: old,
      refLogp: ref,
      ratio,
      clip: clipSide(ratio, c.advantage, config.epsilon, config.epsilonHigh),
      surrogate,
      kl,
      loss: -surrogate + (kl === null ? 0 : config.beta * kl),
      logpAfter: after,
      delta: after === null ? null : after - logp,
    };
  });
}

// ---------------------------------------------------------------------------------------------
// 4. Aggregation: the step's loss as the trainer computes it, and the four loss types
//    (docs/grpo.md §4)
// ---------------------------------------------------------------------------------------------

/** A set of completions as the loss sees them: (N, L) zero-padded per-token arrays. */
export interface FlatBatch {
  N: number;
  L: number;
  logp: Float64Array; // (N, L)
  oldLogp: Float64Array; // (N, L)
  refLogp: Float64Array | null; // (N, L), null when any completion lacks it (β = 0)
  mask: Float64Array; // (N, L)
  advantages: Float64Array; // (N)
  lengths: number[]; // (N)
}

export function flatten(completions: readonly CompletionRecord[]): FlatBatch {
  const N = completions.length;
  const L = Math.max(1, ...completions.map((c) => c.logp.length));
  const hasRef = N > 0 && completions.every((c) => c.refLogp !== null);
  const batch: FlatBatch = {
    N,
    L,
    logp: new Float64Array(N * L),
    oldLogp: new Float64Array(N * L),
    refLogp: hasRef ? new Float64Array(N * L) : null,
    mask: new Float64Array(N * L),
    advantages: new Float64Array(N),
    lengths: completions.map((c) => c.logp.length),
  };
  completions.forEach((c, i) => {
    batch.advantages[i] = c.advantage;
    c.logp.forEach((lp, t) => {
      const j = i * L + t;
      batch.logp[j] = lp;
      batch.oldLogp[j] = c.oldLogp[t];
      if (batch.refLogp && c.refLogp) batch.refLogp[j] = c.refLogp[t];
      batch.mask[j] = c.counted[t] ? 1 : 0;
    });
  });
  return batch;
}

/** The objective variants (docs/grpo.md §3) a recomputation follows when the config has them. */
type VariantConfig = Partial<
  Pick<Config, 'importanceSamplingLevel' | 'delta' | 'sapoTemperaturePos' | 'sapoTemperatureNeg'>
>;

function lossInputs(
  b: FlatBatch,
  config: Pick<LearnConfig, 'epsilon' | 'epsilonHigh' | 'beta' | 'maxCompletionLength'> &
    VariantConfig,
  lossType: LossType,
  activeTokensInBatch: number,
): GrpoLossInputs {
  return {
    logp: b.logp,
    oldLogp: b.oldLogp,
    refLogp: b.refLogp,
    advantages: b.advantages,
    mask: b.mask,
    N: b.N,
    L: b.L,
    lossType,
    epsilonLow: config.epsilon,
    epsilonHigh: config.epsilonHigh,
    beta: config.beta,
    maxCompletionLength: config.maxCompletionLength,
    activeTokensInBatch,
    importanceSamplingLevel: config.importanceSamplingLevel,
    delta: config.delta,
    sapoTemperaturePos: config.sapoTemperaturePos,
    sapoTemperatureNeg: config.sapoTemperatureNeg,
  };
}

function sliceBatch(b: FlatBatch, from: number, count: number): FlatBatch {
  const { L } = b;
  const rows = (a: Float64Array) => a.slice(from * L, (from + count) * L);
  return {
    N: count,
    L,
    logp: rows(b.logp),
    oldLogp: rows(b.oldLogp),
    refLogp: b.refLogp ? rows(b.refLogp) : null,
    mask: rows(b.mask),
    advantages: b.advantages.slice(from, from + count),
    lengths: b.lengths.slice(from, from + count),
  };
}

export interface StepLoss {
  loss: number;
  stats: GrpoLossStats;
}

/**
 * The loss and clip/KL statistics of the step, computed the trainer's way: the batch is cut into
 * `gradientAccumulationSteps` micro-batches in order; dapo divides by the active tokens of the
 * whole batch and sums the micro-batches, every other type averages them; the statistics are
 * token-weighted means across micro-batches (what TRL logs).
 */
export function stepLoss(
  report: StepReport,
  config: Pick<
    LearnConfig,
    'epsilon' | 'epsilonHigh' | 'beta' | 'maxCompletionLength' | 'gradientAccumulationSteps'
  > &
    VariantConfig,
  lossType: LossType,
): StepLoss {
  const batch = flatten(allCompletions(report));
  const GA = Math.max(1, config.gradientAccumulationSteps);
  if (batch.N % GA !== 0) {
    throw new RangeError(`gradientAccumulationSteps (${GA}) must divide N = ${batch.N}`);
  }
  const Nm = batch.N / GA;
  let active = 0;
  for (const m of batch.mask) active += m;
  let loss = 0;
  let tokens = 0;
  const sums = { clipRatioLow: 0, clipRatioHigh: 0, clipRatioRegion: 0, meanKl: 0 };
  for (let m = 0; m < GA; m++) {
    const micro = sliceBatch(batch, m * Nm, Nm);
    const r = grpoLossRef(lossInputs(micro, config, lossType, active));
    loss += normalisesByBatchTokens(lossType) ? r.loss : r.loss / GA;
    tokens += r.stats.activeTokens;
    sums.clipRatioLow += r.stats.clipRatioLow * r.stats.activeTokens;
    sums.clipRatioHigh += r.stats.clipRatioHigh * r.stats.activeTokens;
    sums.clipRatioRegion += r.stats.clipRatioRegion * r.stats.activeTokens;
    sums.meanKl += r.stats.meanKl * r.stats.activeTokens;
  }
  const w = Math.max(tokens, 1);
  return {
    loss,
    stats: {
      clipRatioLow: sums.clipRatioLow / w,
      clipRatioHigh: sums.clipRatioHigh / w,
      clipRatioRegion: sums.clipRatioRegion / w,
      meanKl: sums.meanKl / w,
      activeTokens: tokens,
    },
  };
}

export const LOSS_FORMULAS: Record<LossType, { formula: string; denominator: string }> = {
  grpo: {
    formula: 'L = (1/N) Σᵢ [ Σₜ mᵢₜ ℓᵢₜ / Σₜ mᵢₜ ]',
    denominator: 'each completion’s own length, then the number of completions',
  },
  bnpo: {
    formula: 'L = Σᵢₜ mᵢₜ ℓᵢₜ / Σᵢₜ mᵢₜ',
    denominator: 'the tokens of this (micro-)batch',
  },
  dr_grpo: {
    formula: 'L = Σᵢₜ mᵢₜ ℓᵢₜ / (N · maxCompletionLength)',
    denominator: 'a constant: N · maxCompletionLength',
  },
  dapo: {
    formula: 'L = Σᵢₜ mᵢₜ ℓᵢₜ / (active tokens of the whole accumulated batch)',
    denominator: 'the tokens of the whole batch, across micro-batches',
  },
  // TRL's other objectives (docs/grpo.md §3): ℓ is not the clipped surrogate.
  cispo: {
    formula: 'ℓ = −min(ρ, ε_high)·A·log π (ratio detached); L as dapo',
    denominator: 'the tokens of the whole batch, across micro-batches',
  },
  sapo: {
    formula: 'ℓ = −A·(4/τ)·σ(τ(ρ − 1)), τ = τ_pos (A > 0) or τ_neg; L as grpo',
    denominator: 'each completion’s own length, then the number of completions',
  },
};

export interface LossTypeValue {
  lossType: LossType;
  loss: number;
  formula: string;
  denominator: string;
  /** Per completion: the weight each of its counted tokens gets (w_i in L = Σ m·w·ℓ). */
  tokenWeight: number[];
  /** Per completion: w_i · (counted tokens): its share of the loss. */
  sequenceWeight: number[];
}

/**
 * The four aggregations on the same completions (one group: B = 1, N = G), with no gradient
 * accumulation, so bnpo and dapo coincide here: they differ only across micro-batches.
 */
export function compareLossTypes(
  completions: readonly CompletionRecord[],
  config: Pick<LearnConfig, 'epsilon' | 'epsilonHigh' | 'beta' | 'maxCompletionLength'>,
): LossTypeValue[] {
  const batch = flatten(completions);
  let active = 0;
  for (const m of batch.mask) active += m;
  const counted = completions.map((c) => c.counted.filter(Boolean).length);
  return LOSS_TYPES.map((lossType) => {
    const inputs = lossInputs(batch, config, lossType, active);
    const w = Array.from(aggregationWeights(inputs));
    return {
      lossType,
      loss: grpoLossRef(inputs).loss,
      ...LOSS_FORMULAS[lossType],
      tokenWeight: w,
      sequenceWeight: w.map((x, i) => x * counted[i]),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// 5. How the sampled tokens' log-probs moved (logpAfter − logp)
// ---------------------------------------------------------------------------------------------

export interface Movement {
  /** Counted tokens with a log-prob after the update. */
  tokens: number;
  /** Σ A·Δlogp over counted tokens: > 0 when the update moved toward positive advantages. */
  weighted: number;
  /** Mean Δlogp of tokens in completions with A > 0, and with A < 0 (NaN when none). */
  meanDeltaPositive: number;
  meanDeltaNegative: number;
  /** Share of tokens with A ≠ 0 whose Δlogp has the sign of A. */
  alignedFraction: number;
  perCompletion: { index: number; advantage: number; meanDelta: number; tokens: number }[];
}

/** Null when the report has no logpAfter (the trainer ran without recordLogpAfterUpdate). */
export function logpMovement(completions: readonly CompletionRecord[]): Movement | null {
  if (completions.length === 0 || completions.some((c) => c.logpAfter === null)) return null;
  let tokens = 0;
  let weighted = 0;
  const pos = { sum: 0, n: 0 };
  const neg = { sum: 0, n: 0 };
  let signed = 0;
  let aligned = 0;
  const perCompletion = completions.map((c, index) => {
    let sum = 0;
    let n = 0;
    c.logp.forEach((lp, t) => {
      if (!c.counted[t]) return;
      const d = c.logpAfter![t] - lp;
      sum += d;
      n++;
      weighted += c.advantage * d;
      if (c.advantage > 0) {
        pos.sum += d;
        pos.n++;
      } else if (c.advantage < 0) {
        neg.sum += d;
        neg.n++;
      }
      if (c.advantage !== 0) {
        signed++;
        if (Math.sign(d) === Math.sign(c.advantage)) aligned++;
      }
    });
    tokens += n;
    return { index, advantage: c.advantage, meanDelta: n ? sum / n : NaN, tokens: n };
  });
  return {
    tokens,
    weighted,
    meanDeltaPositive: pos.n ? pos.sum / pos.n : NaN,
    meanDeltaNegative: neg.n ? neg.sum / neg.n : NaN,
    alignedFraction: signed ? aligned / signed : NaN,
    perCompletion,
  };
}

// ---------------------------------------------------------------------------------------------
// KL summary (docs/grpo.md §3, metric `kl`)
// ---------------------------------------------------------------------------------------------

/** Mean k3 over the counted tokens of the completions; null when β = 0 (no reference). */
export function meanKl(
  completions: readonly CompletionRecord[],
  config: Pick<LearnConfig, 'beta'>,
): number | null {
  if (config.beta === 0 || completions.some((c) => c.refLogp === null)) return null;
  let sum = 0;
  let n = 0;
  for (const c of completions) {
    c.logp.forEach((lp, t) => {
      if (!c.counted[t]) return;
      sum += k3(c.refLogp![t] - lp);
      n++;
    });
  }
  return n ? sum / n : 0;
}

// ---------------------------------------------------------------------------------------------
// 6. Token text, and what this run's options let the step show
// ---------------------------------------------------------------------------------------------

/** Shown for a token whose text is empty (a special token the tokenizer prints as nothing). */
export const EMPTY_PIECE = '∅';

/**
 * A token's text with its whitespace made visible, for a cell that shows one token: space → ␣,
 * newline → ↵, tab → ⇥, carriage return → ␍, any other control character as \u{…}. The result is
 * still plain text: the views print it as text, never as HTML.
 */
export function visiblePiece(piece: string): string {
  if (piece.length === 0) return EMPTY_PIECE;
  let out = '';
  for (const ch of piece) {
    const code = ch.codePointAt(0)!;
    if (ch === ' ') out += '␣';
    else if (ch === '\n') out += '↵';
    else if (ch === '\t') out += '⇥';
    else if (ch === '\r') out += '␍';
    else if (code < 0x20 || (code >= 0x7f && code < 0xa0))
      out += `\\u{${code.toString(16).padStart(2, '0')}}`;
    else if (code === 0xa0) out += '⍽';
    else out += ch;
  }
  return out;
}

/** A completion as the page receives it: the worker adds each token's decoded text (`pieces`). */
export type CompletionWithPieces = CompletionRecord & { pieces?: readonly string[] };

/**
 * Each token's text as the model's tokenizer decodes it, whitespace made visible; `#id` where the
 * report carries no text (a report built without the page's worker, e.g. in tests).
 */
export function tokenTexts(c: CompletionWithPieces): string[] {
  return c.tokens.map((id, t) =>
    c.pieces && t < c.pieces.length ? visiblePiece(c.pieces[t]) : `#${id}`,
  );
}

export interface MoveRow {
  /** Completion index in the group and token position in it. */
  index: number;
  t: number;
  text: string;
  advantage: number;
  /** log π_after − log π_before of the sampled token. */
  delta: number;
}

/**
 * The counted tokens whose log-prob moved most (by |Δ|), largest first, at most `k`; ties keep
 * the trainer's order. Empty when the report has no log-probs after the update.
 */
export function largestMoves(completions: readonly CompletionWithPieces[], k: number): MoveRow[] {
  const rows: MoveRow[] = [];
  completions.forEach((c, index) => {
    if (!c.logpAfter) return;
    const texts = tokenTexts(c);
    c.logp.forEach((lp, t) => {
      if (!c.counted[t]) return;
      const delta = c.logpAfter![t] - lp;
      if (Number.isFinite(delta))
        rows.push({ index, t, text: texts[t], advantage: c.advantage, delta });
    });
  });
  return rows
    .map((r, order) => ({ r, order }))
    .sort((a, b) => Math.abs(b.r.delta) - Math.abs(a.r.delta) || a.order - b.order)
    .slice(0, Math.max(0, k))
    .map(({ r }) => r);
}

/** Whether the run computes KL at all: with β = 0 the reference model is neither loaded nor scored. */
export function computesKl(config: Pick<LearnConfig, 'beta'>): boolean {
  return config.beta > 0;
}

/**
 * Why a token moved although this step gave it no gradient (A = 0, or a clipped token): the
 * reasons that hold for this step. Two are always true of a model with shared weights and AdamW;
 * momentum only once an earlier optimizer step has left something in Adam's first moment (exp_avg);
 * decay only with weightDecay > 0.
 */
export function zeroGradientReasons(opts: {
  /** Optimizer steps taken before this step's first pass (0 on a fresh run's first step). */
  priorOptimizerSteps: number;
  numIterations: number;
  adamBeta1: number;
  weightDecay: number;
}): ('shared' | 'momentum' | 'decay')[] {
  const reasons: ('shared' | 'momentum' | 'decay')[] = ['shared'];
  // Within one step, passes after the first also carry the first pass's exp_avg.
  const earlier = opts.priorOptimizerSteps > 0 || opts.numIterations > 1;
  if (earlier && opts.adamBeta1 > 0) reasons.push('momentum');
  if (opts.weightDecay > 0) reasons.push('decay');
  return reasons;
}
