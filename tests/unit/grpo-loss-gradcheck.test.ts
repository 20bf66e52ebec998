// Finite-difference check (f64) of grpoLossRef's dLogp for every loss type, with clipped and
// unclipped tokens, β = 0 and β > 0, masked tokens and an all-masked sequence.
import { describe, expect, it } from 'vitest';
import { grpoLossRef, type GrpoLossInputs } from '../../src/ref/grpo_loss';
import { LOSS_TYPES } from '../../src/core/loss-definitions';
import { mulberry32 } from '../../src/core/rng';

// Central differences in f64 with h = 1e-6: truncation ~h²·|f'''| ≈ 1e-12, rounding ~eps/h ≈ 1e-10.
const GRADCHECK_TOLERANCE = { atol: 1e-8, rtol: 1e-6 };
const H = 1e-6;

function makeInputs(seed: number, lossType: GrpoLossInputs['lossType'], beta: number) {
  const N = 5;
  const L = 7;
  const eps = 0.2;
  const epsHigh = 0.28;
  const rand = mulberry32(seed);
  const logp = new Float64Array(N * L);
  const oldLogp = new Float64Array(N * L);
  const refLogp = new Float64Array(N * L);
  const mask = new Float64Array(N * L);
  const advantages = new Float64Array(N);
  for (let i = 0; i < N; i++) advantages[i] = (rand() - 0.5) * 3;
  advantages[1] = 0; // a zero-std group: no surrogate gradient at all
  for (let j = 0; j < N * L; j++) {
    oldLogp[j] = -0.1 - 4 * rand();
    // log ρ in [−0.7, 0.47]: ρ in [0.5, 1.6], well beyond both clip edges on either side.
    let logRatio = -0.7 + 1.17 * rand();
    // Keep away from the clip edges, where the loss is not differentiable.
    for (const edge of [Math.log(1 - eps), Math.log(1 + epsHigh)]) {
      if (Math.abs(logRatio - edge) < 1e-3) logRatio += 3e-3;
    }
    logp[j] = oldLogp[j] + logRatio;
    refLogp[j] = logp[j] + (rand() - 0.5);
    mask[j] = rand() < 0.8 ? 1 : 0;
  }
  for (let t = 0; t < L; t++) mask[3 * L + t] = 0; // an all-masked sequence (truncated)
  const inputs: GrpoLossInputs = {
    logp,
    oldLogp,
    refLogp: beta > 0 ? refLogp : null,
    advantages,
    mask,
    N,
    L,
    lossType,
    epsilonLow: eps,
    epsilonHigh: epsHigh,
    beta,
    maxCompletionLength: 9,
    activeTokensInBatch: lossType === 'dapo' ? 61 : undefined,
  };
  return inputs;
}

describe('grpoLossRef gradient', () => {
  for (const lossType of LOSS_TYPES) {
    for (const beta of [0, 0.04]) {
      it(`${lossType} β=${beta}: dLogp matches central differences`, () => {
        const inputs = makeInputs(lossType.length * 31 + beta * 1000, lossType, beta);
        const { dLogp, stats } = grpoLossRef(inputs);
        // The case covers clipped and unclipped tokens and a real gradient.
        expect(stats.clipRatioRegion).toBeGreaterThan(0);
        expect(stats.clipRatioRegion).toBeLessThan(1);
        expect(dLogp.some((g) => Math.abs(g) > 1e-3)).toBe(true);
        const logp = Float64Array.from(inputs.logp);
        let checked = 0;
        for (let j = 0; j < logp.length; j++) {
          const x = logp[j];
          logp[j] = x + H;
          const up = grpoLossRef({ ...inputs, logp }).loss;
          logp[j] = x - H;
          const down = grpoLossRef({ ...inputs, logp }).loss;
          logp[j] = x;
          const numeric = (up - down) / (2 * H);
          const { atol, rtol } = GRADCHECK_TOLERANCE;
          expect(Math.abs(dLogp[j] - numeric)).toBeLessThanOrEqual(atol + rtol * Math.abs(numeric));
          if (inputs.mask[j] === 0) expect(dLogp[j]).toBe(0);
          checked++;
        }
        expect(checked).toBe(inputs.N * inputs.L);
      });
    }
  }

  it('clipped tokens carry only the KL gradient', () => {
    // One token, A > 0, ρ = 1.5 > 1 + ε: the surrogate is the constant 1.2·A.
    const base = {
      oldLogp: [0],
      advantages: [1],
      mask: [1],
      N: 1,
      L: 1,
      lossType: 'bnpo' as const,
      epsilonLow: 0.2,
      epsilonHigh: 0.2,
      maxCompletionLength: 1,
    };
    const noKl = grpoLossRef({ ...base, logp: [Math.log(1.5)], refLogp: null, beta: 0 });
    expect(noKl.dLogp[0]).toBe(0);
    expect(noKl.loss).toBeCloseTo(-1.2, 12);
    expect(noKl.stats.clipRatioHigh).toBe(1);
    const withKl = grpoLossRef({ ...base, logp: [Math.log(1.5)], refLogp: [0], beta: 0.1 });
    // ∂/∂logp of β·(e^{ref−logp} − (ref−logp) − 1) = β·(1 − 1/1.5)
    expect(withKl.dLogp[0]).toBeCloseTo(0.1 * (1 - 1 / 1.5), 12);
  });
});

// GSPO (one ratio per sequence) and two-sided clipping (δ): the same central differences, every
// loss type (docs/grpo.md §3). δ = 1.35 lies inside the ratios' range, so some tokens with A < 0
// sit past it; ratios are kept away from δ too (not differentiable there).
describe('grpoLossRef gradient: importanceSamplingLevel and delta', () => {
  const DELTA = 1.35;
  const variants = [
    { importanceSamplingLevel: 'sequence' as const, delta: null },
    { importanceSamplingLevel: 'token' as const, delta: DELTA },
    { importanceSamplingLevel: 'sequence' as const, delta: 1.05 },
  ];
  for (const lossType of LOSS_TYPES) {
    for (const variant of variants) {
      it(`${lossType} ${variant.importanceSamplingLevel}, δ=${variant.delta}: dLogp matches central differences`, () => {
        const base = makeInputs(lossType.length * 17 + 5, lossType, 0.04);
        const logp0 = Float64Array.from(base.logp);
        for (let j = 0; j < logp0.length; j++) {
          const r = Math.exp(logp0[j] - base.oldLogp[j]);
          if (Math.abs(r - DELTA) < 5e-3) logp0[j] += 1e-2;
        }
        const inputs: GrpoLossInputs = { ...base, logp: logp0, ...variant };
        const { dLogp, loss } = grpoLossRef(inputs);
        expect(Number.isFinite(loss)).toBe(true);
        expect(dLogp.some((g) => Math.abs(g) > 1e-3)).toBe(true);
        const logp = Float64Array.from(logp0);
        for (let j = 0; j < logp.length; j++) {
          const x = logp[j];
          logp[j] = x + H;
          const up = grpoLossRef({ ...inputs, logp }).loss;
          logp[j] = x - H;
          const down = grpoLossRef({ ...inputs, logp }).loss;
          logp[j] = x;
          const numeric = (up - down) / (2 * H);
          const { atol, rtol } = GRADCHECK_TOLERANCE;
          expect(Math.abs(dLogp[j] - numeric)).toBeLessThanOrEqual(atol + rtol * Math.abs(numeric));
          if (inputs.mask[j] === 0) expect(dLogp[j]).toBe(0);
        }
      });
    }
  }

  // sapo is smooth everywhere (cispo's weight is detached, so its loss is not the integral of its
  // gradient and is checked against TRL's formula in tests/unit/trl-parity.test.ts instead).
  for (const level of ['token', 'sequence'] as const) {
    it(`sapo ${level}: dLogp matches central differences`, () => {
      const inputs: GrpoLossInputs = {
        ...makeInputs(77, 'sapo', 0.04),
        importanceSamplingLevel: level,
        sapoTemperaturePos: 1.5,
        sapoTemperatureNeg: 0.7,
      };
      const { dLogp } = grpoLossRef(inputs);
      expect(dLogp.some((g) => Math.abs(g) > 1e-3)).toBe(true);
      const logp = Float64Array.from(inputs.logp);
      for (let j = 0; j < logp.length; j++) {
        const x = logp[j];
        logp[j] = x + H;
        const up = grpoLossRef({ ...inputs, logp }).loss;
        logp[j] = x - H;
        const down = grpoLossRef({ ...inputs, logp }).loss;
        logp[j] = x;
        const numeric = (up - down) / (2 * H);
        const { atol, rtol } = GRADCHECK_TOLERANCE;
        expect(Math.abs(dLogp[j] - numeric)).toBeLessThanOrEqual(atol + rtol * Math.abs(numeric));
      }
    });
  }

  it('delta: A < 0 past δ gives the constant δ·A and no surrogate gradient', () => {
    // One token, A = −1, ρ = 2, ε = 0.2, δ = 1.5: min(min(2, 1.5)·(−1), 1.2·(−1)) = −1.5 → ℓ = 1.5.
    // Without δ: ℓ = −min(−2, −1.2) = 2 and ∂ℓ/∂logp = −A·ρ = 2.
    const base = {
      logp: [Math.log(2)],
      oldLogp: [0],
      refLogp: null,
      advantages: [-1],
      mask: [1],
      N: 1,
      L: 1,
      lossType: 'bnpo' as const,
      epsilonLow: 0.2,
      epsilonHigh: 0.2,
      beta: 0,
      maxCompletionLength: 1,
    };
    const off = grpoLossRef(base);
    expect(off.loss).toBeCloseTo(2, 12);
    expect(off.dLogp[0]).toBeCloseTo(2, 12);
    const on = grpoLossRef({ ...base, delta: 1.5 });
    expect(on.loss).toBeCloseTo(1.5, 12);
    expect(on.dLogp[0]).toBe(0);
    // ρ = 1.4 < δ: the unclipped branch as without δ (ℓ = 1.4, gradient 1.4).
    const inside = grpoLossRef({ ...base, logp: [Math.log(1.4)], delta: 1.5 });
    expect(inside.loss).toBeCloseTo(1.4, 12);
    expect(inside.dLogp[0]).toBeCloseTo(1.4, 12);
  });
});
