// A step's rewards as GRPO uses them (docs/grpo.md §2, §6): the advantages under TRL's
// multi_objective_aggregation, and the reward metrics the trainer logs with TRL's names. The
// rewards themselves (built-in, custom, sandboxed) are src/rewards.
import {
  computeAdvantages,
  fracRewardZeroStd,
  groupStats,
  normalizeThenSumAdvantages,
  type MultiObjectiveAggregation,
  type ScaleRewards,
} from './advantages';
import {
  meanStdIgnoringNull,
  perFunctionRows,
  rewardTotals,
  type CompletionReward,
} from '../rewards/rewards';

/** Where a step's reward statistics overflow: the completions [start, start + count) and what. */
interface Overflow {
  start: number;
  count: number;
  what: string;
  /** The function to blame when the statistic is one function's own (normalize_then_sum). */
  reward?: string;
}

const shown = (x: number) => (Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity');

/** The first statistic of the step that is not finite, or null (see guardGroupStatistics). */
function firstOverflow(
  results: readonly CompletionReward[],
  names: readonly string[],
  weights: readonly number[],
  groupSize: number,
  scaleRewards: ScaleRewards,
  aggregation: MultiObjectiveAggregation,
): Overflow | null {
  const n = results.length;
  const totals = rewardTotals(results);
  const stats = groupStats(totals, groupSize);
  for (let g = 0; g < stats.mean.length; g++) {
    const scored = totals.slice(g * groupSize, (g + 1) * groupSize).filter((v) => v !== null);
    // NaN is the defined value of a group with nothing (mean) or one thing (std) scored.
    const bad = (x: number, min: number) => scored.length >= min && !Number.isFinite(x);
    if (bad(stats.mean[g], 1) || bad(stats.std[g], 2)) {
      const what = bad(stats.mean[g], 1) ? 'mean' : 'std';
      const value = what === 'mean' ? stats.mean[g] : stats.std[g];
      return {
        start: g * groupSize,
        count: groupSize,
        what: `group ${g + 1}'s reward ${what} (${shown(value)})`,
      };
    }
  }
  // The batch's mean and std (the logged reward and reward_std; the scale under 'batch'): blamed on
  // the group holding the largest total, so that the other groups keep their values.
  const batch = meanStdIgnoringNull(totals);
  if (
    (batch.count >= 1 && !Number.isFinite(batch.mean)) ||
    (batch.count >= 2 && !Number.isFinite(batch.std))
  ) {
    let worst = 0;
    totals.forEach((v, i) => {
      if (v !== null && Math.abs(v) > Math.abs(totals[worst] ?? 0)) worst = i;
    });
    const g = Math.floor(worst / groupSize);
    const what = Number.isFinite(batch.mean)
      ? `std (${shown(batch.std)})`
      : `mean (${shown(batch.mean)})`;
    return {
      start: g * groupSize,
      count: groupSize,
      what: `the batch's reward ${what}, through group ${g + 1}`,
    };
  }
  if (aggregation === 'normalize_then_sum') {
    // Each function is normalised within each group first: its own mean and std there.
    for (const name of names) {
      const column = results.map((r) => r.perFunction[name] ?? null);
      const own = groupStats(column, groupSize);
      for (let g = 0; g < own.mean.length; g++) {
        if (!Number.isFinite(own.mean[g]) && !Number.isNaN(own.mean[g])) {
          return {
            start: g * groupSize,
            count: groupSize,
            what: `group ${g + 1}'s mean of ${name} (${shown(own.mean[g])})`,
            reward: name,
          };
        }
        const scored = column.slice(g * groupSize, (g + 1) * groupSize).filter((v) => v !== null);
        if (scored.length >= 2 && !Number.isFinite(own.std[g]))
          return {
            start: g * groupSize,
            count: groupSize,
            what: `group ${g + 1}'s std of ${name} (${shown(own.std[g])})`,
            reward: name,
          };
      }
    }
  }
  // The update reads the advantages as float32: one past its range is as non-finite as Infinity.
  const advantages = stepAdvantages(results, names, weights, groupSize, scaleRewards, aggregation);
  for (let i = 0; i < n; i++) {
    if (!Number.isFinite(Math.fround(advantages[i]))) {
      const g = Math.floor(i / groupSize);
      return {
        start: g * groupSize,
        count: groupSize,
        what: `the advantage of completion ${i - g * groupSize + 1} of group ${g + 1} (${advantages[i]}, beyond float32)`,
      };
    }
  }
  return null;
}

/**
 * docs/grpo.md §1: rewards each finite, and finite as a weighted total, can still be so large that
 * a statistic of the step is not: a group's mean or std (±1.7e308 alternating: the squares
 * overflow, the std is Infinity and every advantage silently 0), the batch's, a function's own
 * under normalize_then_sum, or an advantage beyond float32. The reward whose values do it (the one
 * with the largest |w·r| in the group, or the function normalised on its own) fails there as a
 * non-finite return would: it scores 0 for each completion of that group, and each gets a
 * 'non-finite' error naming the reward, the step and the statistic (reward_error_frac counts them;
 * the CLI's step line and the page's step view show them). Repeats until every statistic is
 * finite (each round zeroes one function in one group, so it ends). Changes `results` in place.
 */
export function guardGroupStatistics(
  results: CompletionReward[],
  names: readonly string[],
  weights: readonly number[],
  groupSize: number,
  scaleRewards: ScaleRewards,
  aggregation: MultiObjectiveAggregation,
  step: number,
): void {
  const rounds = names.length * (results.length / groupSize + 1) + 1;
  for (let round = 0; round < rounds; round++) {
    const overflow = firstOverflow(results, names, weights, groupSize, scaleRewards, aggregation);
    if (!overflow) return;
    const scope = results.slice(overflow.start, overflow.start + overflow.count);
    let culprit = overflow.reward ?? null;
    let largest = 0;
    names.forEach((name, k) => {
      for (const r of scope) {
        const v = r.perFunction[name];
        if (typeof v !== 'number') continue;
        const size = Math.abs(weights[k] * v);
        if (overflow.reward === undefined && size > largest) {
          largest = size;
          culprit = name;
        } else if (name === overflow.reward) largest = Math.max(largest, Math.abs(v));
      }
    });
    if (culprit === null) break; // nothing left to zero: cannot happen with finite values
    for (const r of scope) {
      const v = r.perFunction[culprit];
      if (typeof v !== 'number') continue;
      r.perFunction[culprit] = 0;
      r.total = names.reduce((sum, name, k) => sum + weights[k] * (r.perFunction[name] ?? 0), 0);
      r.errors.push({
        reward: culprit,
        kind: 'non-finite',
        message:
          `step ${step}: returned ${v}; values up to ${largest} make ${overflow.what} not finite, ` +
          'so it scores 0 in this group',
      });
    }
  }
  throw new RangeError(`step ${step}: the rewards' statistics stay non-finite`);
}

/**
 * The step's advantages (docs/grpo.md §2) under TRL's multi_objective_aggregation:
 * 'sum_then_normalize' (computeAdvantages of the weighted totals, the default) or
 * 'normalize_then_sum' (GDPO: each function normalised per group, then weighted and summed).
 */
export function stepAdvantages(
  results: readonly CompletionReward[],
  names: readonly string[],
  weights: readonly number[],
  groupSize: number,
  scaleRewards: ScaleRewards,
  aggregation: MultiObjectiveAggregation = 'sum_then_normalize',
): Float64Array {
  if (aggregation === 'normalize_then_sum') {
    return normalizeThenSumAdvantages(perFunctionRows(results, names), weights, groupSize)
      .advantages;
  }
  return computeAdvantages(rewardTotals(results), groupSize, scaleRewards);
}

/**
 * Step metrics with TRL's names (docs/grpo.md §6): reward and reward_std (nanmean and nanstd of
 * the N weighted totals, unscorable completions left out), rewards/<name>/mean and /std over the
 * completions where the function applied (TRL's nanmean/nanstd), frac_reward_zero_std (the
 * scaling std, §2); plus this project's accuracy and format_rate (the means of those rewards when
 * present), rewards/<name>/na_frac and reward_error_frac. NaN where a value is undefined (no
 * applicable completion, or a single one for a std).
 */
export function rewardMetrics(
  results: readonly CompletionReward[],
  names: readonly string[],
  groupSize: number,
  scaleRewards: ScaleRewards = 'group',
  gdpo?: { weights: readonly number[] } | null,
): Record<string, number> {
  const totals = rewardTotals(results);
  const t = meanStdIgnoringNull(totals);
  const m: Record<string, number> = {
    reward: t.mean,
    reward_std: t.std,
    // normalize_then_sum: TRL tests the batch std of the normalised sums (docs/grpo.md §2).
    frac_reward_zero_std: gdpo
      ? normalizeThenSumAdvantages(perFunctionRows(results, names), gdpo.weights, groupSize).zeroStd
        ? 1
        : 0
      : fracRewardZeroStd(totals, groupSize, scaleRewards),
  };
  for (const name of names) {
    const s = meanStdIgnoringNull(results.map((r) => r.perFunction[name] ?? null));
    m[`rewards/${name}/mean`] = s.mean;
    m[`rewards/${name}/std`] = s.std;
    m[`rewards/${name}/na_frac`] = (results.length - s.count) / results.length;
  }
  if (names.includes('accuracy')) m.accuracy = m['rewards/accuracy/mean'];
  if (names.includes('format')) m.format_rate = m['rewards/format/mean'];
  m.reward_error_frac = results.filter((r) => r.errors.length > 0).length / results.length;
  return m;
}
