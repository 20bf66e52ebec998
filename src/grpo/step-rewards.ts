// A step's rewards as GRPO uses them (docs/grpo.md §2, §6): the advantages under TRL's
// multi_objective_aggregation, and the reward metrics the trainer logs with TRL's names. The
// rewards themselves (built-in, custom, sandboxed) are src/rewards.
import {
  computeAdvantages,
  fracRewardZeroStd,
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
