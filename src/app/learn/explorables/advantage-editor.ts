// The numbers of the reward-group explorable (Learn §3): the reader edits one group's rewards and
// watches its advantages under 'group', 'batch' and 'none' scaling (docs/grpo.md §2). The other
// groups of the step keep their rewards, because 'batch' divides by the std of all N rewards.
// The advantages are the trainer's own computeAdvantages (src/grpo/advantages.ts) on the step's
// rewards with the edited group put in place; the mean, std and denominator shown beside them are
// the same formula's parts. Pure: no DOM.
import { ADVANTAGE_STD_EPS, computeAdvantages, type ScaleRewards } from '../../../grpo/advantages';
import { rewardTotals } from '../../../rewards/rewards';
import type { StepReport } from '../../../grpo/trainer';

export interface AdvantageTable {
  /** The group's mean reward (over its scored rewards). */
  mean: number;
  /** Unbiased std of the group's rewards (NaN below two). */
  groupStd: number;
  /** Unbiased std of all N rewards of the step with the edit in place. */
  batchStd: number;
  /** What r − mean is divided by: std + 1e-4, or 1 under 'none'. */
  denominator: number;
  /** Every reward of the group equal in float32: the advantages are exactly 0 (§2). */
  allEqual: boolean;
  /** The group's advantages (G). */
  advantages: number[];
}

function mean(xs: readonly number[]): number {
  return xs.reduce((s, x) => s + x, 0) / xs.length;
}

function std(xs: readonly number[]): number {
  if (xs.length < 2) return NaN;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) * (x - m), 0) / (xs.length - 1));
}

/**
 * The advantages of group `groupIndex` when its rewards are `edited`, the step's other groups
 * keeping `stepRewards` (group-major, N = B·G; a null is an unscorable completion, §1).
 */
export function editedAdvantages(
  stepRewards: readonly (number | null)[],
  groupIndex: number,
  edited: readonly number[],
  scale: ScaleRewards,
): AdvantageTable {
  const G = edited.length;
  const all = stepRewards.slice();
  for (let g = 0; g < G; g++) all[groupIndex * G + g] = edited[g];
  const A = computeAdvantages(all, G, scale);
  const scored = all.filter((r): r is number => r !== null);
  const m = mean(edited);
  const groupStd = std(edited);
  const batchStd = std(scored);
  return {
    mean: m,
    groupStd,
    batchStd,
    denominator:
      scale === 'group'
        ? groupStd + ADVANTAGE_STD_EPS
        : scale === 'batch'
          ? batchStd + ADVANTAGE_STD_EPS
          : 1,
    allEqual: edited.every((r) => Math.fround(r) === Math.fround(edited[0])),
    advantages: Array.from(A.slice(groupIndex * G, groupIndex * G + G)),
  };
}

/** A reward typed or dragged by the reader: finite, rounded to 0.01, within [lo, hi]. */
export function clampReward(v: number, lo = -2, hi = 2): number {
  if (!Number.isFinite(v)) return 0;
  return Math.round(Math.min(hi, Math.max(lo, v)) * 100) / 100;
}

/** The step's reward totals, group-major, null for an unscorable completion (§1), as the trainer
 * passes them to computeAdvantages. */
export function stepRewardTotals(report: StepReport): (number | null)[] {
  return rewardTotals(report.groups.flatMap((g) => g.completions.map((c) => c.reward)));
}
