// Group-relative advantages (docs/grpo.md §2) against hand-worked numbers.
import { describe, expect, it } from 'vitest';
import { computeAdvantages, fracRewardZeroStd, groupStats } from '../../src/grpo/advantages';

// Hand-computed values are exact rationals/square roots; only f64 rounding separates them.
const ADV_TOL = 1e-12;

function expectClose(actual: ArrayLike<number>, expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    expect(
      Math.abs(actual[i] - expected[i]),
      `index ${i}: ${actual[i]} vs ${expected[i]}`,
    ).toBeLessThanOrEqual(ADV_TOL);
  }
}

describe('computeAdvantages', () => {
  it('group scaling: (r − mean) / (unbiased std + 1e-4) per group', () => {
    // Group 0 [1,0,0,1]: mean 1/2, Σd² = 4·1/4 = 1, var = 1/3.
    // Group 1 [0,0,0,1]: mean 1/4, Σd² = 3/16 + 9/16 = 3/4, var = 1/4, std = 1/2.
    const a = computeAdvantages([1, 0, 0, 1, 0, 0, 0, 1], 4, 'group');
    const s0 = Math.sqrt(1 / 3) + 1e-4;
    const s1 = 0.5 + 1e-4;
    expectClose(a, [
      0.5 / s0,
      -0.5 / s0,
      -0.5 / s0,
      0.5 / s0,
      -0.25 / s1,
      -0.25 / s1,
      -0.25 / s1,
      0.75 / s1,
    ]);
  });

  it('group scaling with G = 2: std of [2, 4] is √2', () => {
    const a = computeAdvantages([2, 4], 2, 'group');
    expectClose(a, [-1 / (Math.SQRT2 + 1e-4), 1 / (Math.SQRT2 + 1e-4)]);
  });

  it('batch scaling: mean per group, unbiased std over all N rewards', () => {
    // All 8: mean 3/8, Σd² = 3·(5/8)² + 5·(3/8)² = 120/64, var = (120/64)/7.
    const a = computeAdvantages([1, 0, 0, 1, 0, 0, 0, 1], 4, 'batch');
    const s = Math.sqrt(120 / 64 / 7) + 1e-4;
    expectClose(a, [
      0.5 / s,
      -0.5 / s,
      -0.5 / s,
      0.5 / s,
      -0.25 / s,
      -0.25 / s,
      -0.25 / s,
      0.75 / s,
    ]);
  });

  it('none (Dr. GRPO): r − group mean, no division', () => {
    const a = computeAdvantages([1, 0, 0, 1, 0, 0, 0, 1, 3, 5, 7, 9], 4, 'none');
    expectClose(a, [0.5, -0.5, -0.5, 0.5, -0.25, -0.25, -0.25, 0.75, -3, -1, 1, 3]);
  });

  it('all-equal groups give exactly 0 in every mode, even where the mean rounds', () => {
    // 0.1·3/3 is not exactly 0.1 in f64; without the explicit check (r − mean)/1e-4 ≠ 0.
    for (const mode of ['group', 'batch', 'none'] as const) {
      const a = computeAdvantages([0.1, 0.1, 0.1, 1, 1, 1, 0, 1, 0], 3, mode);
      expect(Array.from(a.subarray(0, 6))).toEqual([0, 0, 0, 0, 0, 0]);
      expect(a[6]).toBeLessThan(0);
      expect(a[7]).toBeGreaterThan(0);
    }
  });

  it('rejects G = 1, ragged lengths, non-finite rewards and unknown modes', () => {
    expect(() => computeAdvantages([1, 0], 1, 'group')).toThrow(/at least 2/);
    expect(() => computeAdvantages([1, 0, 1], 2, 'group')).toThrow(/multiple of groupSize/);
    expect(() => computeAdvantages([], 2, 'group')).toThrow(/multiple of groupSize/);
    expect(() => computeAdvantages([1, NaN], 2, 'group')).toThrow(/not finite/);
    expect(() => computeAdvantages([1, 0], 2, 'mean' as never)).toThrow(/scaleRewards/);
  });

  it('is deterministic to the bit', () => {
    const r = Array.from({ length: 64 }, (_, i) => Math.sin(i * 1.7) * 3);
    expect(Array.from(computeAdvantages(r, 8, 'group'))).toEqual(
      Array.from(computeAdvantages(r, 8, 'group')),
    );
  });
});

describe('fracRewardZeroStd and groupStats', () => {
  it('counts groups whose rewards are all identical', () => {
    expect(fracRewardZeroStd([1, 1, 0, 1, 0, 0, 2, 2], 2)).toBe(0.75);
    expect(fracRewardZeroStd([1, 0, 0, 1], 2)).toBe(0);
    expect(() => fracRewardZeroStd([1], 1)).toThrow(/at least 2/);
  });

  it('reports per-group mean, unbiased std and the zero-std flag', () => {
    const s = groupStats([1, 0, 0, 1, 2, 2, 2, 2], 4);
    expectClose(s.mean, [0.5, 2]);
    expectClose(s.std, [Math.sqrt(1 / 3), 0]);
    expect(Array.from(s.zeroStd)).toEqual([0, 1]);
  });
});

describe('unscorable completions and TRL’s zero-std test (docs/grpo.md §1, §2)', () => {
  it('a null reward is left out of its group’s mean and std and gets A = 0', () => {
    // Group [1, 0, null, 0]: mean 1/3, std √(1/3) over the three scored rewards.
    const a = computeAdvantages([1, 0, null, 0, 1, 1, 0, 0], 4, 'group');
    const s = Math.sqrt(1 / 3) + 1e-4;
    expectClose(a.subarray(0, 4), [2 / 3 / s, -(1 / 3) / s, 0, -(1 / 3) / s]);
    expect(a[2]).toBe(0);
    const stats = groupStats([1, 0, null, 0, null, null, null, null], 4);
    expectClose(stats.mean.subarray(0, 1), [1 / 3]);
    expect(stats.mean[1]).toBeNaN();
    expect(Array.from(stats.zeroStd)).toEqual([0, 0]); // a NaN std is not zero
  });

  it('rewards equal in float32 but not in f64 count as zero-std and give A = 0', () => {
    const r = [0.1 + 0.2, 0.3, 0.3, 0.3, 1, 0, 0, 0];
    expect(Array.from(computeAdvantages(r, 4, 'group').subarray(0, 4))).toEqual([0, 0, 0, 0]);
    expect(fracRewardZeroStd(r, 4, 'group')).toBe(0.5);
    // Under 'batch' the test is on the batch std: not zero here, so nothing counts.
    expect(fracRewardZeroStd(r, 4, 'batch')).toBe(0);
    expect(fracRewardZeroStd([2, 2, 2, 2], 2, 'batch')).toBe(1);
  });
});
