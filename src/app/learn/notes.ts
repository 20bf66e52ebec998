// Learn's, Inspect's and the tour's explanatory sentences, each chosen by the numbers and settings
// it sits beside (docs/grpo.md §3–§6), so that no sentence claims what the step does not show:
// "nothing can be clipped" only where ρ ≡ 1 and no cap sits below 1, "why the loss is near 0" only
// under a loss that is near 0 beside its advantages, KL text only with β > 0. Pure functions of a
// StepReport and the config; tests/unit/learn-notes.test.ts walks the settings.
import type { Config } from '../../grpo/config';
import type { StepReport } from '../../grpo/trainer';
import { allCompletions, stepLoss } from './derive';
import { trainerPasses, type CheckConfig } from './checks';

/** The config fields the notes read. */
export type NoteConfig = CheckConfig & Partial<Pick<Config, 'usePeft' | 'entropyCoef'>>;

// ---------------------------------------------------------------------------------------------
// Clipping (docs/grpo.md §3)
// ---------------------------------------------------------------------------------------------

/**
 * What the clip can do in this run:
 * - 'single-pass': μ = 1, so the only pass's old log-prob is the current one detached and ρ = 1
 *   for every token, inside [1 − ε_low, 1 + ε_high] whatever ε is: nothing is clipped;
 * - 'cispo-cap': μ = 1 under CISPO with ε_high < 1: CISPO caps ρ itself at ε_high, so even ρ = 1
 *   is capped for every token with A > 0;
 * - 'no-clip': SAPO replaces the clip by a smooth gate: there is nothing to clip at any μ;
 * - 'passes': μ > 1, later passes score the batch with moved weights and ρ leaves 1.
 */
export type ClipRegime = 'single-pass' | 'cispo-cap' | 'no-clip' | 'passes';

export function clipRegime(
  config: Pick<NoteConfig, 'numIterations' | 'lossType' | 'epsilonHigh'>,
): ClipRegime {
  if (config.lossType === 'sapo') return 'no-clip';
  if (config.numIterations > 1) return 'passes';
  if (config.lossType === 'cispo' && config.epsilonHigh < 1) return 'cispo-cap';
  return 'single-pass';
}

// ---------------------------------------------------------------------------------------------
// The loss's size (docs/grpo.md §3–§4): why it is (or is not) near 0
// ---------------------------------------------------------------------------------------------

/** A policy loss below this share of mean |A| is called "near 0". */
export const NEAR_ZERO_SHARE = 0.05;

export interface LossNote {
  /** 'no-signal': every advantage is 0; 'near-zero' / 'not-near-zero' compare |policy| with mean |A|. */
  kind: 'no-signal' | 'near-zero' | 'not-near-zero';
  /** The pass's policy term, −(weighted mean of A) with ρ = 1. */
  policy: number;
  /** β·(weighted mean k3); 0 with β = 0. */
  klTerm: number;
  /** The loss the note explains: policy + klTerm (the trainer's pass-1 loss, up to f32). */
  loss: number;
  /** Mean |A| over the completions that count tokens: the scale "near 0" is measured against. */
  scale: number;
  /** Share of the counted tokens in completions with A > 0, and with A < 0. */
  positiveTokens: number;
  negativeTokens: number;
  /** Every group's advantages sum to 0 (within 1e-6). */
  groupsSumToZero: boolean;
}

/** The clipped-surrogate loss types, whose per-token loss at ρ = 1 is −A (+ β·k3). */
const SURROGATE_TYPES = new Set(['grpo', 'bnpo', 'dr_grpo', 'dapo']);

/**
 * The explanation of the loss's size, or null where ℓ = −A does not hold: μ > 1 (the later passes'
 * ρ ≠ 1), CISPO or SAPO (other per-token terms), topEntropyQuantile < 1 (a token mask), or a
 * skipped update (no loss).
 */
export function lossNote(report: StepReport, config: NoteConfig): LossNote | null {
  if (config.numIterations !== 1 || !SURROGATE_TYPES.has(config.lossType)) return null;
  if ((config.topEntropyQuantile ?? 1) < 1 || report.skipped) return null;
  const completions = allCompletions(report);
  if (completions.length === 0) return null;
  const total = stepLoss(report, config, config.lossType);
  const policy =
    config.beta > 0 ? stepLoss(report, { ...config, beta: 0 }, config.lossType).loss : total.loss;
  let absSum = 0;
  let n = 0;
  let pos = 0;
  let neg = 0;
  let tokens = 0;
  for (const c of completions) {
    const counted = c.counted.filter(Boolean).length;
    if (counted === 0) continue;
    absSum += Math.abs(c.advantage);
    n++;
    tokens += counted;
    if (c.advantage > 0) pos += counted;
    else if (c.advantage < 0) neg += counted;
  }
  const scale = n ? absSum / n : 0;
  const groupsSumToZero = report.groups.every(
    (g) => Math.abs(g.completions.reduce((s, c) => s + c.advantage, 0)) <= 1e-6,
  );
  const kind =
    scale === 0
      ? 'no-signal'
      : Math.abs(policy) <= NEAR_ZERO_SHARE * scale
        ? 'near-zero'
        : 'not-near-zero';
  return {
    kind,
    policy,
    klTerm: total.loss - policy,
    loss: total.loss,
    scale,
    positiveTokens: tokens ? pos / tokens : 0,
    negativeTokens: tokens ? neg / tokens : 0,
    groupsSumToZero,
  };
}

/** The sentence on how the run's loss type weighs −A, true for the note's numbers. */
export function weightingSentence(note: LossNote, lossType: string): string {
  const pct = (x: number) => `${Math.round(x * 100)}%`;
  if (lossType === 'grpo') {
    return note.groupsSumToZero
      ? 'grpo gives every completion the same weight, and each group’s advantages sum to 0, so the policy term cancels.'
      : 'grpo gives every completion the same weight; here the groups’ advantages do not sum to 0, so the policy term does not cancel.';
  }
  const per =
    lossType === 'dr_grpo'
      ? 'dr_grpo gives every token the same weight (over a constant)'
      : `${lossType} gives every token the same weight`;
  return `${per}, so a long completion weighs more than a short one: the completions with A > 0 hold ${pct(note.positiveTokens)} of the counted tokens, those with A < 0 ${pct(note.negativeTokens)}.`;
}

// ---------------------------------------------------------------------------------------------
// KL and the reference (docs/grpo.md §3)
// ---------------------------------------------------------------------------------------------

/** What the reference policy is in this run, for the KL section's sentences. */
export function referenceName(config: Pick<NoteConfig, 'usePeft'>): string {
  return config.usePeft
    ? 'the base weights with the LoRA adapters switched off'
    : 'a frozen copy of the starting weights';
}

/** The β = 0 note's sentence on the reference: what is (not) loaded or scored. */
export function noReferenceSentence(config: Pick<NoteConfig, 'usePeft'>): string {
  return config.usePeft
    ? 'the reference (the base weights with the adapters switched off) is never scored'
    : 'the reference model is not even loaded';
}

// ---------------------------------------------------------------------------------------------
// The logged numbers at μ > 1 (docs/grpo.md §6)
// ---------------------------------------------------------------------------------------------

/** How the logged loss and clip ratio relate to the passes shown beside them. */
export function loggedSentence(report: StepReport, config: NoteConfig): string | null {
  const passes = trainerPasses(report, config);
  if (config.numIterations <= 1 || passes.length <= 1) return null;
  return `The logged loss is the mean of the ${passes.length} passes’ losses, and the logged clip ratios and kl average every pass’s micro-batches (TRL’s row for the ${passes.length} optimizer steps), so neither equals any one pass: each check above compares one pass with itself.`;
}

// ---------------------------------------------------------------------------------------------
// The tour's update stop
// ---------------------------------------------------------------------------------------------

export type TourSettings = Pick<
  NoteConfig,
  'numIterations' | 'epsilon' | 'epsilonHigh' | 'beta' | 'lossType'
>;

/** The tour's "Update" stop, saying what the current μ, ε and β do. */
export function tourUpdateText(s: TourSettings | null): string {
  const head = 'The model was nudged toward the positive-advantage answers.';
  if (!s) return `${head} Loss, clip ratio, KL and grad norm show the update.`;
  const tail = `Loss, clip ratio${s.beta > 0 ? ', KL' : ''} and grad norm show the update.`;
  const eps =
    s.epsilon === s.epsilonHigh ? `ε = ${s.epsilon}` : `ε = ${s.epsilon} / ${s.epsilonHigh}`;
  const range = `[1 − ${s.epsilon}, 1 + ${s.epsilonHigh}]`;
  const regime = clipRegime(s);
  const clip =
    regime === 'passes'
      ? `With μ = ${s.numIterations} passes over each batch, the later passes clip the probability ratio to ${range} (${eps}) so one step cannot move a token far.`
      : regime === 'no-clip'
        ? 'SAPO has no clip: a smooth gate limits how far one step moves a token.'
        : regime === 'cispo-cap'
          ? `CISPO caps the ratio itself at ε_high = ${s.epsilonHigh}, so tokens with a positive advantage are capped even in the one pass.`
          : `With μ = 1 (one pass per batch) the ratio is exactly 1, so nothing is clipped whatever ${eps}; the clip acts only with μ > 1.`;
  const kl =
    s.beta > 0
      ? ` A KL penalty (β = ${s.beta}) keeps the model near where it started.`
      : ' β = 0: no KL penalty.';
  return `${head} ${clip}${kl} ${tail}`;
}

// ---------------------------------------------------------------------------------------------
// The per-token loss and the advantages' sums (docs/grpo.md §2–§3)
// ---------------------------------------------------------------------------------------------

/** The run's per-token loss ℓ as the update section writes it (CISPO and SAPO have their own). */
export function perTokenLoss(config: Pick<NoteConfig, 'lossType' | 'beta'>): string {
  const kl = config.beta > 0 ? ' + β·k3' : ' (β = 0: no KL term)';
  if (config.lossType === 'cispo') return `ℓ = −min(ρ, ε_high)·A·log π (ρ detached)${kl}`;
  if (config.lossType === 'sapo') return `ℓ = −A·(4/τ)·σ(τ(ρ − 1))${kl}`;
  return `ℓ = −min(ρA, clip(ρ)A)${kl}`;
}

/** What the advantage walk of one group needs for its sentences. */
export interface GroupAdvantages {
  scale: string;
  allEqual: boolean;
  sum: number;
  rows: readonly { reported: number }[];
}

/**
 * Whether "Σ A ≈ 0 by construction" is true of this group: the mean subtracted is the group's own
 * ('group' and 'none', and 'batch' whose mean is still per group, docs/grpo.md §2) and no batch-wide
 * normalisation follows (GDPO's normalize_then_sum re-normalises the sum over the batch); the
 * numbers must agree too.
 */
export function sumIsZeroByConstruction(
  walk: GroupAdvantages,
  config: Partial<Pick<Config, 'multiObjectiveAggregation'>>,
): boolean {
  return config.multiObjectiveAggregation !== 'normalize_then_sum' && Math.abs(walk.sum) <= 1e-4;
}

/**
 * Whether "every advantage of this group is exactly 0: it teaches nothing" is true: its rewards
 * are all equal and the trainer's advantages are 0 (under GDPO a tied group can still get a
 * non-zero advantage from the batch-wide normalisation).
 */
export function groupTeachesNothing(walk: GroupAdvantages): boolean {
  return walk.allEqual && walk.rows.every((r) => r.reported === 0);
}
