// shaders/grpo_loss.wgsl + grpo_loss_reduce.wgsl against src/ref/grpo_loss.ts: a hand-worked
// two-sequence example for every loss type, then a shape sweep with clipped tokens, KL, masks.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import {
  decodeGrpoLossOut,
  GRPO_LOSS_OUT,
  GrpoLossKernel,
  GRPO_LOSS_WG,
} from '../../src/kernels/grpo-loss';
import {
  grpoLossRef,
  LOSS_TYPES,
  type GrpoLossInputs,
  type GrpoLossResult,
} from '../../src/ref/grpo_loss';
import { seededUniform, testEngine, worstMismatch, type Tolerance } from './harness';

// f32 exp and sums vs the f64 reference.
const LOSS_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-5 };
const GRADIENT_TOLERANCE: Tolerance = { atol: 1e-8, rtol: 1e-5 };
// Ratios of small integer counts: f32 division only.
const STATS_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-6 };

async function runLoss(inputs: GrpoLossInputs, maxWorkgroupsPerDim?: number) {
  const engine = await testEngine();
  const d = engine.device;
  const { N, L } = inputs;
  const f32 = (x: ArrayLike<number>) => uploadStorageBuffer(d, Float32Array.from(x));
  const bufs = {
    logp: f32(inputs.logp),
    oldLogp: f32(inputs.oldLogp),
    refLogp: inputs.refLogp ? f32(inputs.refLogp) : null,
    advantages: f32(inputs.advantages),
    mask: f32(inputs.mask),
    // Pre-filled with garbage: every element must be overwritten, masked ones with 0.
    dLogp: f32(seededUniform(N * L, 999, 5, 6)),
    out: createStorageBuffer(d, GRPO_LOSS_OUT.length * 4),
  };
  const kernel = new GrpoLossKernel(d, engine.pipelines);
  await engine.run((enc) => kernel.encode(enc, { ...inputs, ...bufs, maxWorkgroupsPerDim }));
  const dLogp = await readF32(d, bufs.dLogp, N * L);
  const out = await readF32(d, bufs.out, GRPO_LOSS_OUT.length);
  for (const b of Object.values(bufs)) b?.destroy();
  return { dLogp, ...decodeGrpoLossOut(out) };
}

function expectMatches(gpu: Awaited<ReturnType<typeof runLoss>>, ref: GrpoLossResult) {
  expect(worstMismatch([gpu.loss], [ref.loss], LOSS_TOLERANCE)).toBeNull();
  expect(worstMismatch(gpu.dLogp, ref.dLogp, GRADIENT_TOLERANCE)).toBeNull();
  const s = (x: GrpoLossResult['stats']) => [
    x.clipRatioLow,
    x.clipRatioHigh,
    x.clipRatioRegion,
    x.meanKl,
    x.activeTokens,
  ];
  expect(worstMismatch(s(gpu.stats), s(ref.stats), STATS_TOLERANCE)).toBeNull();
}

/*
 * Hand-worked example: N = 2 sequences, L = 3 columns, ε_low = ε_high = 0.2.
 *   seq 0: A = +1,   mask [1, 1, 0], ρ = [1.0, 1.5, (pad: logp NaN, must be ignored)]
 *   seq 1: A = −0.5, mask [1, 1, 1], ρ = [0.5, 1.0, 1.1]
 * Per token (ℓ = −min(ρA, clip(ρ)A), g = ∂ℓ/∂logp before aggregation = −Aρ unless clipped):
 *   (0,0) ρ=1,   ℓ = −1,                      g = −1
 *   (0,1) ρ=1.5 > 1.2, A>0: clipped high, ℓ = −1.2,     g = 0
 *   (1,0) ρ=0.5 < 0.8, A<0: clipped low, ℓ = −min(−0.25, −0.4) = 0.4, g = 0
 *   (1,1) ρ=1,   ℓ = 0.5,                     g = 0.5
 *   (1,2) ρ=1.1, ℓ = 0.55,                    g = 0.55
 * Σ_t ℓ: seq 0 = −2.2 over 2 tokens, seq 1 = 1.45 over 3 tokens; Σ = −0.75 over 5 tokens.
 *   grpo:    ½(−2.2/2 + 1.45/3) = −0.308333…;  dLogp = [−1/4, 0, 0 | 0, 0.5/6, 0.55/6]
 *   bnpo:    −0.75/5 = −0.15;                   dLogp = g/5
 *   dr_grpo: −0.75/(2·4) = −0.09375 (maxCompletionLength 4); dLogp = g/8
 *   dapo:    −0.75/10 = −0.075 (10 active tokens in the accumulated batch); dLogp = g/10
 * Stats: low 1/5, high 1/5, region 2/5, active 5, kl 0 (β = 0).
 * With β = 0.1 and ref − logp = ln 2 at (0,0), 0 elsewhere: kl(0,0) = 2 − ln 2 − 1 = 0.306853,
 *   its gradient β(1 − 2) = −0.1; grpo loss −0.308333 + 0.1·0.306853/4, dLogp(0,0) = (−1 − 0.1)/4,
 *   meanKl = 0.306853/5.
 */
describe('grpo_loss.wgsl hand-worked', () => {
  const ln = Math.log;
  const base: GrpoLossInputs = {
    logp: [ln(1), ln(1.5), NaN, ln(0.5), ln(1), ln(1.1)],
    oldLogp: [0, 0, 0, 0, 0, 0],
    refLogp: null,
    advantages: [1, -0.5],
    mask: [1, 1, 0, 1, 1, 1],
    N: 2,
    L: 3,
    lossType: 'grpo',
    epsilonLow: 0.2,
    epsilonHigh: 0.2,
    beta: 0,
    maxCompletionLength: 4,
    activeTokensInBatch: 10,
  };
  const g = [-1, 0, 0, 0, 0.5, 0.55];
  const expected = {
    grpo: { loss: 0.5 * (-2.2 / 2 + 1.45 / 3), dLogp: [-1 / 4, 0, 0, 0, 0.5 / 6, 0.55 / 6] },
    bnpo: { loss: -0.15, dLogp: g.map((x) => x / 5) },
    dr_grpo: { loss: -0.09375, dLogp: g.map((x) => x / 8) },
    dapo: { loss: -0.075, dLogp: g.map((x) => x / 10) },
  };
  const HAND_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-6 };
  for (const lossType of LOSS_TYPES) {
    it(`${lossType}: reference and GPU give the hand-computed numbers`, async () => {
      const inputs = { ...base, lossType };
      const ref = grpoLossRef(inputs);
      const gpu = await runLoss(inputs);
      for (const r of [ref, gpu]) {
        expect(r.loss).toBeCloseTo(expected[lossType].loss, 6);
        expect(worstMismatch(r.dLogp, expected[lossType].dLogp, HAND_TOLERANCE)).toBeNull();
        expect(r.stats.clipRatioLow).toBeCloseTo(0.2, 6);
        expect(r.stats.clipRatioHigh).toBeCloseTo(0.2, 6);
        expect(r.stats.clipRatioRegion).toBeCloseTo(0.4, 6);
        expect(r.stats.meanKl).toBe(0);
        expect(r.stats.activeTokens).toBe(5);
      }
    });
  }

  it('grpo with β = 0.1: the KL term and its statistic', async () => {
    const inputs = { ...base, refLogp: [ln(2), ln(1.5), 0, ln(0.5), 0, ln(1.1)], beta: 0.1 };
    const kl = 2 - ln(2) - 1;
    for (const r of [grpoLossRef(inputs), await runLoss(inputs)]) {
      expect(r.loss).toBeCloseTo(expected.grpo.loss + (0.1 * kl) / 4, 6);
      expect(r.dLogp[0]).toBeCloseTo((-1 - 0.1) / 4, 6);
      expect(r.stats.meanKl).toBeCloseTo(kl / 5, 6);
    }
  });
});

function randomInputs(
  N: number,
  L: number,
  seed: number,
  lossType: GrpoLossInputs['lossType'],
  beta: number,
): GrpoLossInputs {
  const epsilonLow = 0.2;
  const epsilonHigh = 0.28;
  const old = seededUniform(N * L, seed, -6, -0.05);
  const logRatio = seededUniform(N * L, seed + 1, -0.5, 0.5);
  const logp = new Float32Array(N * L);
  for (let j = 0; j < N * L; j++) {
    // f32 and f64 could disagree on a clip decision within rounding of an edge: stay away.
    for (const edge of [Math.log(1 - epsilonLow), Math.log(1 + epsilonHigh)]) {
      if (Math.abs(logRatio[j] - edge) < 1e-4) logRatio[j] += 3e-4;
    }
    logp[j] = old[j] + logRatio[j];
  }
  const refLogp = Float32Array.from(
    seededUniform(N * L, seed + 2, -0.7, 0.7),
    (x, j) => logp[j] + x,
  );
  const advantages = seededUniform(N, seed + 3, -2, 2);
  const maskU = seededUniform(N * L, seed + 4, 0, 1);
  const mask = Float32Array.from(maskU, (u) => (u < 0.85 ? 1 : 0));
  // Left-aligned completions of varying length: the tail of each sequence is padding.
  for (let i = 0; i < N; i++) {
    const len = Math.floor(L * (0.3 + 0.7 * ((i * 0.618) % 1)));
    for (let t = len; t < L; t++) mask[i * L + t] = 0;
  }
  return {
    logp,
    oldLogp: old,
    refLogp: beta > 0 ? refLogp : null,
    advantages,
    mask,
    N,
    L,
    lossType,
    epsilonLow,
    epsilonHigh,
    beta,
    maxCompletionLength: L + 3,
    activeTokensInBatch: undefined,
  };
}

const SHAPES: Array<[number, number]> = [
  [1, 1],
  [2, 7],
  [5, GRPO_LOSS_WG + 1], // one past the workgroup stride
  [13, 97], // primes
  [64, 600], // larger
];

describe('grpo_loss.wgsl vs reference', () => {
  for (const [N, L] of SHAPES) {
    for (const lossType of LOSS_TYPES) {
      const beta = (N + L) % 2 === 0 ? 0.04 : 0;
      it(`N=${N} L=${L} ${lossType} β=${beta}`, async () => {
        const inputs = randomInputs(N, L, N * 131 + L, lossType, beta);
        const ref = grpoLossRef(inputs);
        expectMatches(await runLoss(inputs), ref);
        if (N * L > 100) {
          expect(ref.stats.clipRatioRegion).toBeGreaterThan(0);
          expect(ref.dLogp.some((x) => Math.abs(x) > 1e-5)).toBe(true);
        }
      });
    }
  }

  it('β > 0 on a larger shape, dapo with an accumulated-batch token count', async () => {
    const inputs = { ...randomInputs(24, 301, 5, 'dapo', 0.04), activeTokensInBatch: 20_000 };
    const ref = grpoLossRef(inputs);
    expect(ref.stats.meanKl).toBeGreaterThan(0);
    expectMatches(await runLoss(inputs), ref);
  });

  it('an all-masked batch gives zeros, not NaN', async () => {
    const inputs = { ...randomInputs(3, 17, 8, 'bnpo', 0.04), mask: new Float32Array(51) };
    const gpu = await runLoss(inputs);
    expect(gpu.loss).toBe(0);
    expect(Array.from(gpu.dLogp).every((x) => x === 0)).toBe(true);
    expect(gpu.stats.activeTokens).toBe(0);
    expect(gpu.stats.meanKl).toBe(0);
  });

  it('split grid (grid limit lowered to 5: a 5×4 grid for 19 sequences)', async () => {
    const inputs = randomInputs(19, 33, 9, 'grpo', 0.04);
    expectMatches(await runLoss(inputs, 5), grpoLossRef(inputs));
  });
});
