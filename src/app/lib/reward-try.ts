// What the Rewards panel's "try it" shows beside a custom reward's score: the built-in rewards on
// the same completion (rewards.ts's own functions, so the numbers are the ones training uses) and
// the weighted total of the shown rewards with the current weights, counted as training counts it
// (not applicable = 0, a failed reward = 0).

import type { TryResult } from '../../rewards/custom-reward';
import {
  accuracyReward,
  CUSTOM_REWARD_PREFIX,
  formatReward,
  type RewardValue,
} from '../../rewards/rewards';
import type { Problem, Task } from '../../tasks/types';

export interface BuiltinScores {
  format: RewardValue;
  accuracy: RewardValue;
}

/** format and accuracy of one completion; `task` verifies the answer (without one, the problem's
 * verifier spec, which is what every task's verify() uses). */
export function builtinScores(
  completion: string,
  problem: Problem,
  task?: Pick<Task, 'verify'>,
): BuiltinScores {
  const input = { completion, prompt: '', problem };
  return {
    format: formatReward.compute(input) as RewardValue,
    accuracy: accuracyReward(task).compute(input) as RewardValue,
  };
}

/**
 * Σ w·r over the shown rewards that are switched on (`enabled` with `weights` in the same order,
 * as the config holds them); the custom reward is `custom:<id>`. Null when none of them is on.
 */
export function shownTotal(
  id: string,
  builtin: BuiltinScores,
  custom: TryResult | undefined,
  enabled: readonly string[],
  weights: readonly number[] | null | undefined,
): number | null {
  const values: Record<string, RewardValue> = {
    format: builtin.format,
    accuracy: builtin.accuracy,
    [CUSTOM_REWARD_PREFIX + id]: custom && 'value' in custom ? custom.value : 0,
  };
  let total: number | null = null;
  enabled.forEach((name, k) => {
    if (!(name in values)) return;
    const v = values[name];
    total = (total ?? 0) + (v === null ? 0 : (weights?.[k] ?? 1) * v);
  });
  return total;
}
