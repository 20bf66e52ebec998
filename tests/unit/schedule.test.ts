// Learning-rate schedules against values worked out from transformers' formulas.
import { describe, expect, it } from 'vitest';
import { learningRateAt } from '../../src/optim/schedule';

describe('learningRateAt', () => {
  const base = { learningRate: 1e-3, warmupSteps: 2, totalSteps: 10 };
  it('warms up linearly from 0 for every scheduler', () => {
    for (const scheduler of ['constant', 'linear', 'cosine'] as const) {
      expect(learningRateAt(0, { ...base, scheduler })).toBe(0);
      expect(learningRateAt(1, { ...base, scheduler })).toBeCloseTo(5e-4, 15);
    }
  });
  it('constant stays at the peak', () => {
    expect(learningRateAt(2, { ...base, scheduler: 'constant' })).toBe(1e-3);
    expect(learningRateAt(9, { ...base, scheduler: 'constant' })).toBe(1e-3);
  });
  it('linear decays to 0 at totalSteps', () => {
    // step 6: progress (6−2)/8 = 0.5
    expect(learningRateAt(6, { ...base, scheduler: 'linear' })).toBeCloseTo(5e-4, 15);
    expect(learningRateAt(10, { ...base, scheduler: 'linear' })).toBe(0);
  });
  it('cosine follows 0.5·(1 + cos(π·progress))', () => {
    // step 4: progress 0.25 → 0.5·(1 + cos(π/4)) = 0.853553…
    expect(learningRateAt(4, { ...base, scheduler: 'cosine' })).toBeCloseTo(
      1e-3 * 0.8535533905932737,
      15,
    );
    expect(learningRateAt(6, { ...base, scheduler: 'cosine' })).toBeCloseTo(5e-4, 15);
    expect(learningRateAt(10, { ...base, scheduler: 'cosine' })).toBeCloseTo(0, 15);
  });
});
