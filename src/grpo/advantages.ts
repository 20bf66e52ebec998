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

/**
 * torch.isclose(std, 0) with its default tolerances (atol 1e-8, rtol 1e-5): TRL's zero-std test
 * for `frac_reward_zero_std` (docs/grpo.md §2). A NaN std (fewer than 2 scored rewards) is not
 * close to 0, as in torch.
 */
export const ZERO_STD_ATOL = 1e-8;

function checkShape(rewards: ArrayLike<number | null>, groupSize: number): number {
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
    const r = rewards[i];
    if (r !== null && !Number.isFinite(r)) {
      throw new RangeError(`reward ${i} is not finite (${r}); rewards must be sanitised first`);
    }
  }
  return n / groupSize;
}

/** Mean over the scored (non-null) rewards of [start, start + count): TRL's nanmean. NaN if none. */
function nanMean(values: ArrayLike<number | null>, start: number, count: number): number {
  let sum = 0;
  let k = 0;
  for (let i = start; i < start + count; i++) {
    const v = values[i];
    if (v === null) continue;
    sum += v;
    k++;
  }
  return k === 0 ? NaN : sum / k;
}

/**
 * Unbiased std over the scored rewards (divides by count − 1): TRL's nanstd, NaN for fewer than
 * 2 scored values. `round` maps each value first (Math.fround: TRL's float32 rewards).
 */
function nanStd(
  values: ArrayLike<number | null>,
  start: number,
  count: number,
  round: (x: number) => number = (x) => x,
): number {
  let sum = 0;
  let k = 0;
  for (let i = start; i < start + count; i++) {
    const v = values[i];
    if (v === null) continue;
    sum += round(v);
    k++;
  }
  if (k < 2) return NaN;
  const m = sum / k;
  let ss = 0;
  for (let i = start; i < start + count; i++) {
    const v = values[i];
    if (v === null) continue;
    const d = round(v) - m;
    ss += d * d;
  }
  return Math.sqrt(ss / (k - 1));
}

/**
 * The std TRL tests for zero: of the float32 rewards (TRL's rewards tensor is float32, so rewards
 * equal in float32 but not in f64 have std 0 there), within torch.isclose's tolerance.
 */
function stdIsZero(values: ArrayLike<number | null>, start: number, count: number): boolean {
  const s = nanStd(values, start, count, Math.fround);
  return Math.abs(s) <= ZERO_STD_ATOL; // false for NaN
}

/** True when the group's scored rewards are all equal in float32 (TRL's arithmetic gives A = 0). */
function groupAllEqual(
  rewards: ArrayLike<number | null>,
  start: number,
  groupSize: number,
): boolean {
  let first: number | null = null;
  for (let i = start; i < start + groupSize; i++) {
    const v = rewards[i];
    if (v === null) continue;
    if (first === null) first = Math.fround(v);
    else if (Math.fround(v) !== first) return false;
  }
  return true;
}

export interface GroupStats {
  mean: Float64Array; // (B,) over the group's scored rewards (NaN when none is scored)
  std: Float64Array; // (B,) unbiased, per group, over the scored rewards (NaN below 2)
  zeroStd: Uint8Array; // (B,) 1 where the group's std is zero in TRL's sense (float32, isclose)
}

/**
 * Per-group mean, unbiased std and the zero-std flag (for the UI's group view). A null reward is
 * an unscorable completion (every reward function returned null): left out, as TRL does.
 */
export function groupStats(rewards: ArrayLike<number | null>, groupSize: number): GroupStats {
  const groups = checkShape(rewards, groupSize);
  const stats: GroupStats = {
    mean: new Float64Array(groups),
    std: new Float64Array(groups),
    zeroStd: new Uint8Array(groups),
  };
  for (let g = 0; g < groups; g++) {
    const start = g * groupSize;
    stats.mean[g] = nanMean(rewards, start, groupSize);
    stats.std[g] = nanStd(rewards, start, groupSize);
    stats.zeroStd[g] = stdIsZero(rewards, start, groupSize) ? 1 : 0;
  }
  return stats;
}

function checkScale(scaleRewards: ScaleRewards): void {
  if (!SCALE_REWARDS.includes(scaleRewards)) {
    throw new RangeError(
      `scaleRewards must be one of ${SCALE_REWARDS.join(', ')}, got ${String(scaleRewards)}`,
    );
  }
}

/**
 * A_i = (r_i − mean_g(r)) / (std + 1e-4), docs/grpo.md §2.
 *   'group': std of the group (default); 'batch': std over all N rewards, mean still per group;
 *   'none':  A_i = r_i − mean_g(r) (Dr. GRPO).
 * A null reward (an unscorable completion: every reward function returned null) is left out of
 * its group's mean and std and of the batch std, and gets A = 0, as TRL does. So does every member
 * of a group with fewer than 2 scored completions under 'group'/'batch' (TRL: a NaN std, then
 * nan_to_num). A group whose scored rewards are all equal in float32 gives exactly 0 for each
 * member (computed explicitly, because r − mean can be a rounding residue such as 1e-17 that the
 * 1e-4 division would amplify; TRL's float32 arithmetic gives 0 there).
 * Returns (N,) advantages in the same order as `rewards`.
 */
export function computeAdvantages(
  rewards: ArrayLike<number | null>,
  groupSize: number,
  scaleRewards: ScaleRewards,
): Float64Array {
  const groups = checkShape(rewards, groupSize);
  checkScale(scaleRewards);
  const n = rewards.length;
  const out = new Float64Array(n); // (N,)
  const batchStd = scaleRewards === 'batch' ? nanStd(rewards, 0, n) : 0;
  for (let g = 0; g < groups; g++) {
    const start = g * groupSize;
    if (groupAllEqual(rewards, start, groupSize)) continue; // stays 0
    const m = nanMean(rewards, start, groupSize);
    let scale = 1;
    if (scaleRewards === 'group') scale = nanStd(rewards, start, groupSize) + ADVANTAGE_STD_EPS;
    else if (scaleRewards === 'batch') scale = batchStd + ADVANTAGE_STD_EPS;
    for (let i = start; i < start + groupSize; i++) {
      const r = rewards[i];
      const a = r === null ? NaN : (r - m) / scale;
      out[i] = Number.isNaN(a) ? 0 : a; // TRL: nan_to_num(advantages, nan=0)
    }
  }
  return out;
}

/**
 * TRL's `frac_reward_zero_std`: the fraction of the N completions whose *scaling* std is zero
 * (float32 rewards, torch.isclose tolerance): the group's std under 'group' and 'none', the batch
 * std under 'batch' (then 0 or 1). With equal group sizes and 'group' this is the fraction of
 * groups that carry no learning signal.
 */
export function fracRewardZeroStd(
  rewards: ArrayLike<number | null>,
  groupSize: number,
  scaleRewards: ScaleRewards = 'group',
): number {
  const groups = checkShape(rewards, groupSize);
  checkScale(scaleRewards);
  if (scaleRewards === 'batch') return stdIsZero(rewards, 0, rewards.length) ? 1 : 0;
  let zero = 0;
  for (let g = 0; g < groups; g++) if (stdIsZero(rewards, g * groupSize, groupSize)) zero++;
  return zero / groups;
}

// ---------------------------------------------------------------------------------------------
// GDPO: TRL's multi_objective_aggregation='normalize_then_sum' (docs/grpo.md §2).
// ---------------------------------------------------------------------------------------------

/** TRL's `multi_objective_aggregation`; 'sum_then_normalize' is computeAdvantages above. */
export const MULTI_OBJECTIVE_AGGREGATIONS = ['sum_then_normalize', 'normalize_then_sum'] as const;

export type MultiObjectiveAggregation = (typeof MULTI_OBJECTIVE_AGGREGATIONS)[number];

/**
 * 'normalize_then_sum' (GDPO), as TRL computes it: each reward function k is normalised within
 * each group over the completions it scored, ñ_ik = (r_ik − mean_g,k) / (std_g,k + 1e-4) (a null
 * r_ik, or a group where k scored fewer than 2, gives NaN, which the weighted nansum drops); the
 * completion's reward is Σ_k w_k·ñ_ik (null for an unscorable completion); the advantage is
 * (r_i − mean(r)) / (std(r) + 1e-4) over the whole batch (mean and std over the scored ones; an
 * unscorable completion gets 0). scaleRewards is not used. Values equal in float32 give exactly 0
 * deviations, as TRL's float32 arithmetic does (computeAdvantages' reason). zeroStd: TRL's
 * is_std_zero of the batch std, so frac_reward_zero_std is 0 or 1.
 * perFunction: (N, K) values (null = not applicable), rows group-major as computeAdvantages'.
 */
export function normalizeThenSumAdvantages(
  perFunction: readonly (readonly (number | null)[])[],
  weights: readonly number[],
  groupSize: number,
): { advantages: Float64Array; rewards: (number | null)[]; zeroStd: boolean } {
  const n = perFunction.length;
  const groups = checkShape(
    perFunction.map(() => 0),
    groupSize,
  );
  const K = weights.length;
  const rewards: (number | null)[] = perFunction.map((row) => {
    if (row.length !== K) throw new RangeError(`a reward row has ${row.length} values, not ${K}`);
    return row.every((v) => v === null) ? null : 0;
  });
  for (let k = 0; k < K; k++) {
    const column = perFunction.map((row) => row[k]);
    for (const v of column) {
      if (v !== null && !Number.isFinite(v)) throw new RangeError(`reward ${v} is not finite`);
    }
    for (let g = 0; g < groups; g++) {
      const start = g * groupSize;
      const equal = groupAllEqual(column, start, groupSize);
      const m = nanMean(column, start, groupSize);
      const s = nanStd(column, start, groupSize);
      for (let i = start; i < start + groupSize; i++) {
        const v = column[i];
        if (v === null || rewards[i] === null) continue;
        const z = equal && !Number.isNaN(s) ? 0 : (v - m) / (s + ADVANTAGE_STD_EPS);
        if (!Number.isNaN(z)) rewards[i] = (rewards[i] as number) + weights[k] * z; // nansum
      }
    }
  }
  const advantages = new Float64Array(n);
  const zeroStd = stdIsZero(rewards, 0, n);
  if (!groupAllEqual(rewards, 0, n)) {
    const m = nanMean(rewards, 0, n);
    const s = nanStd(rewards, 0, n);
    for (let i = 0; i < n; i++) {
      const r = rewards[i];
      const a = r === null ? NaN : (r - m) / (s + ADVANTAGE_STD_EPS);
      advantages[i] = Number.isNaN(a) ? 0 : a;
    }
  }
  return { advantages, rewards, zeroStd };
}
