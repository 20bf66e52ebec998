// Group-relative advantages, docs/grpo.md §2 (DeepSeek-R1 Eq. 3), and the `frac_reward_zero_std`
// metric.
//
// Legend: B prompts per step, G completions per prompt (the group), N = B·G rewards, laid out
// group-major: rewards[g·G + j] is completion j of prompt g (the order rollout produces them).
//
// Arithmetic is in f64 with sums in index order, so the same rewards always give the same bits.

export type ScaleRewards = 'group' | 'batch' | 'none';

export const SCALE_REWARDS: readonly ScaleRewards[] = ['group', 'batch', 'none'];

/** Added to the std before dividing, as in TRL (`std + 1e-4`). */
export const ADVANTAGE_STD_EPS = 1e-4;

function checkShape(rewards: ArrayLike<number>, groupSize: number): number {
  if (!Number.isInteger(groupSize) || groupSize < 1) {
    throw new RangeError(`groupSize must be a positive integer, got ${groupSize}`);
  }
  if (groupSize === 1) {
    // One completion per prompt has no group to compare against: the unbiased std is undefined
    // (0/0) and every advantage would be 0, so training would silently do nothing.
    throw new RangeError(
      'groupSize (numGenerations) must be at least 2: GRPO compares completions within a group, ' +
        'and a group of 1 has no unbiased standard deviation',
    );
  }
  const n = rewards.length;
  if (n === 0 || n % groupSize !== 0) {
    throw new RangeError(
      `rewards length ${n} is not a positive multiple of groupSize ${groupSize}`,
    );
  }
  for (let i = 0; i < n; i++) {
    if (!Number.isFinite(rewards[i])) {
      throw new RangeError(
        `reward ${i} is not finite (${rewards[i]}); rewards must be sanitised first`,
      );
    }
  }
  return n / groupSize;
}

function mean(values: ArrayLike<number>, start: number, count: number): number {
  let sum = 0;
  for (let i = start; i < start + count; i++) sum += values[i];
  return sum / count;
}

/** Unbiased sample standard deviation (divides by count − 1, as torch.std). count ≥ 2. */
function unbiasedStd(values: ArrayLike<number>, start: number, count: number): number {
  const m = mean(values, start, count);
  let ss = 0;
  for (let i = start; i < start + count; i++) {
    const d = values[i] - m;
    ss += d * d;
  }
  return Math.sqrt(ss / (count - 1));
}

/** True when every member of group g has exactly the same reward. */
function groupAllEqual(rewards: ArrayLike<number>, start: number, groupSize: number): boolean {
  const first = rewards[start];
  for (let i = start + 1; i < start + groupSize; i++) if (rewards[i] !== first) return false;
  return true;
}

export interface GroupStats {
  mean: Float64Array; // (B,)
  std: Float64Array; // (B,) unbiased, per group
  zeroStd: Uint8Array; // (B,) 1 where every reward of the group is identical
}

/** Per-group mean, unbiased std and the all-equal flag (for the UI's group view). */
export function groupStats(rewards: ArrayLike<number>, groupSize: number): GroupStats {
  const groups = checkShape(rewards, groupSize);
  const stats: GroupStats = {
    mean: new Float64Array(groups),
    std: new Float64Array(groups),
    zeroStd: new Uint8Array(groups),
  };
  for (let g = 0; g < groups; g++) {
    const start = g * groupSize;
    stats.mean[g] = mean(rewards, start, groupSize);
    stats.std[g] = unbiasedStd(rewards, start, groupSize);
    stats.zeroStd[g] = groupAllEqual(rewards, start, groupSize) ? 1 : 0;
  }
  return stats;
}

/**
 * A_i = (r_i − mean_g(r)) / (std + 1e-4), docs/grpo.md §2.
 *   'group': std of the group (default); 'batch': std over all N rewards, mean still per group;
 *   'none':  A_i = r_i − mean_g(r) (Dr. GRPO).
 * A group whose rewards are all identical gives exactly 0 for each member (computed explicitly,
 * because r − mean can be a rounding residue such as 1e-17 that the 1e-4 division would amplify).
 * Returns (N,) advantages in the same order as `rewards`.
 */
export function computeAdvantages(
  rewards: ArrayLike<number>,
  groupSize: number,
  scaleRewards: ScaleRewards,
): Float64Array {
  const groups = checkShape(rewards, groupSize);
  if (!SCALE_REWARDS.includes(scaleRewards)) {
    throw new RangeError(
      `scaleRewards must be one of ${SCALE_REWARDS.join(', ')}, got ${String(scaleRewards)}`,
    );
  }
  const n = rewards.length;
  const out = new Float64Array(n); // (N,)
  const batchStd = scaleRewards === 'batch' ? unbiasedStd(rewards, 0, n) : 0;
  for (let g = 0; g < groups; g++) {
    const start = g * groupSize;
    if (groupAllEqual(rewards, start, groupSize)) continue; // stays 0
    const m = mean(rewards, start, groupSize);
    let scale = 1;
    if (scaleRewards === 'group')
      scale = unbiasedStd(rewards, start, groupSize) + ADVANTAGE_STD_EPS;
    else if (scaleRewards === 'batch') scale = batchStd + ADVANTAGE_STD_EPS;
    for (let i = start; i < start + groupSize; i++) out[i] = (rewards[i] - m) / scale;
  }
  return out;
}

/**
 * Fraction of groups whose rewards are all identical (TRL's `frac_reward_zero_std`): those groups
 * carry no learning signal because every advantage in them is 0.
 */
export function fracRewardZeroStd(rewards: ArrayLike<number>, groupSize: number): number {
  const groups = checkShape(rewards, groupSize);
  let zero = 0;
  for (let g = 0; g < groups; g++) if (groupAllEqual(rewards, g * groupSize, groupSize)) zero++;
  return zero / groups;
}
