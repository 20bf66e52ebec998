// Rewards whose statistics overflow (issue 33, item 3; docs/grpo.md §1): each value finite, the
// weighted totals finite, but a group's std (±1.7e308: the squares overflow), the batch's, a
// function's own under normalize_then_sum or an advantage beyond float32 is not. The reward that
// does it fails in that group as a non-finite return would (0 and a 'non-finite' error naming the
// reward and the step), so reward_error_frac says so and the advantages are finite.
import { describe, expect, it } from 'vitest';
import { guardGroupStatistics, rewardMetrics, stepAdvantages } from '../../src/grpo/step-rewards';
import { combineOutcomes, type CompletionReward } from '../../src/rewards/rewards';

const HUGE = 1.7e308;

/** One completion's record from its functions' raw values. */
const scored = (names: string[], values: (number | null)[], weights?: number[]) =>
  combineOutcomes(
    names,
    weights,
    values.map((value) => ({ value })),
  );

describe('guardGroupStatistics', () => {
  it('±1.7e308 alternating: the group std overflows; the reward fails there, named with the step', () => {
    const names = ['custom:huge', 'format'];
    const results: CompletionReward[] = [
      scored(names, [HUGE, 1]),
      scored(names, [-HUGE, 0]),
      scored(names, [HUGE, 1]),
      scored(names, [-HUGE, 1]),
      // A second group with ordinary values keeps them.
      scored(names, [0.5, 1]),
      scored(names, [0.25, 0]),
      scored(names, [0.5, 1]),
      scored(names, [0, 0]),
    ];
    guardGroupStatistics(results, names, [1, 1], 4, 'group', 'sum_then_normalize', 7);
    for (const r of results.slice(0, 4)) {
      expect(r.perFunction['custom:huge']).toBe(0);
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]).toMatchObject({ reward: 'custom:huge', kind: 'non-finite' });
      expect(r.errors[0].message).toMatch(
        /^step 7: returned -?1\.7e\+308; .*group 1's reward (mean|std)/,
      );
      expect(r.total).toBe(r.perFunction.format);
    }
    expect(results.slice(4).map((r) => r.perFunction['custom:huge'])).toEqual([0.5, 0.25, 0.5, 0]);
    expect(results.slice(4).every((r) => r.errors.length === 0)).toBe(true);
    const m = rewardMetrics(results, names, 4);
    expect(m.reward_error_frac).toBe(0.5);
    expect(Number.isFinite(m.reward_std)).toBe(true);
    const a = stepAdvantages(results, names, [1, 1], 4, 'group');
    expect(a.every((x) => Number.isFinite(x))).toBe(true);
    // Group 1 still learns from format: its advantages are not all 0.
    expect(a.slice(0, 4).some((x) => x !== 0)).toBe(true);
  });

  it('the batch std under scaleRewards "batch", a function alone under normalize_then_sum, an advantage beyond float32', () => {
    const names = ['custom:big'];
    // Each group's std is finite (1e154 apart), the batch's is not (values 1e308 apart).
    const batch = [1e154, 0, 1e308 / 2, 1e308 / 2 + 1e292].map((v) => scored(names, [v]));
    batch.push(...[1, 0, -1e308 / 2, -1e308 / 2 - 1e292].map((v) => scored(names, [v])));
    guardGroupStatistics(batch, names, [1], 2, 'batch', 'sum_then_normalize', 1);
    expect(batch.filter((r) => r.errors.length > 0).length).toBeGreaterThan(0);
    expect(batch[0].errors[0]?.message ?? batch[2].errors[0].message).toMatch(/^step 1: /);
    expect(stepAdvantages(batch, names, [1], 2, 'batch').every(Number.isFinite)).toBe(true);

    // Weight 0: the totals are format's alone; normalize_then_sum still normalises custom:big.
    const gdpo = [HUGE, -HUGE, 1, 0].map((v) => scored(['custom:big', 'format'], [v, 1], [0, 1]));
    guardGroupStatistics(
      gdpo,
      ['custom:big', 'format'],
      [0, 1],
      2,
      'group',
      'normalize_then_sum',
      3,
    );
    expect(gdpo[0].errors[0]?.message).toMatch(/^step 3: .*group 1's (mean|std) of custom:big/);
    expect(gdpo[2].errors).toEqual([]);

    // scaleRewards "none": A = r − mean = ±4e38 is finite in f64, Infinity as float32.
    const none = [4e38, -4e38].map((v) => scored(names, [v]));
    guardGroupStatistics(none, names, [1], 2, 'none', 'sum_then_normalize', 2);
    expect(none[0].errors[0].message).toMatch(/^step 2: .*advantage of completion 1 of group 1/);
    expect(stepAdvantages(none, names, [1], 2, 'none')).toEqual(new Float64Array([0, 0]));
  });

  it('ordinary rewards are left exactly as they are', () => {
    const names = ['custom:a'];
    const results = [1, 0, 1e150, -1e150].map((v) => scored(names, [v]));
    const before = structuredClone(results);
    guardGroupStatistics(results, names, [1], 2, 'group', 'sum_then_normalize', 1);
    expect(results).toEqual(before);
  });
});
