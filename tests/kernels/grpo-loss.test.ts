// shaders/grpo_loss.wgsl + grpo_loss_reduce.wgsl against src/ref/grpo_loss.ts: a hand-worked
// two-sequence example for every loss type, then a shape sweep with clipped tokens, KL, masks.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import {
  decodeGrpoLossOut,
  ENTROPY_MASK_WG,
  EntropyMaskKernel,
  GRPO_LOSS_OUT,
  GrpoLossKernel,
  GRPO_LOSS_WG,
} from '../../src/kernels/grpo-loss';
import {
  grpoLossRef,
  highEntropyMaskRef,
  type GrpoLossInputs,
  type GrpoLossResult,
} from '../../src/ref/grpo_loss';
import { LOSS_TYPES } from '../../src/core/loss-definitions';
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
  // topEntropyQuantile < 1: the entropy mask from the GPU kernel, as the trainer chains them.
  const rho = inputs.topEntropyQuantile ?? 1;
  const em =
    rho < 1
      ? {
          entropy: f32(inputs.entropy!),
          out: createStorageBuffer(d, N * L * 4),
        }
      : null;
  const masker = new EntropyMaskKernel(d, engine.pipelines);
  await engine.run((enc) => {
    if (em) {
      masker.encode(enc, {
        entropy: em.entropy,
        mask: bufs.mask,
        out: em.out,
        M: N * L,
        topEntropyQuantile: rho,
      });
    }
    kernel.encode(enc, { ...inputs, ...bufs, entropyMask: em?.out, maxWorkgroupsPerDim });
  });
  if (em) {
    em.entropy.destroy();
    em.out.destroy();
  }
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

/*
 * Objective variants (docs/grpo.md §3) on the hand-worked example above.
 * GSPO (importanceSamplingLevel 'sequence'): seq 0's mean log-ratio is ln(1.5)/2, ρ = √1.5 =
 *   1.224745 > 1.2 with A > 0: both tokens clipped high, ℓ = −1.2, no surrogate gradient.
 *   Seq 1: ln(0.5·1·1.1)/3, ρ = 0.55^(1/3) = 0.819321 inside [0.8, 1.2]: ℓ = 0.5ρ and gradient
 *   −Aρ = 0.5ρ on each of its 3 tokens.
 *   grpo: ½(−1.2 + 0.5ρ) = −0.395170; dLogp seq 1 = 0.5ρ/(2·3); clip high/region = 2/5 (token-weighted).
 * delta = 1.05 (< 1 + ε, so both sides of TRL's order show): (0,1) ρ = 1.5, A = 1: min(1.05, 1.2)
 *   picks the δ branch, ℓ = −1.05, gradient 0, not flagged high (c1 = 1.05); (1,2) ρ = 1.1, A = −0.5:
 *   min(−0.525, −0.55) picks the clip branch, unclamped at 1.1: ℓ = 0.55, gradient 0.55.
 *   grpo: ½((−1 − 1.05)/2 + 1.45/3) = −0.270833; dLogp as without δ; low 1/5, high 0, region 1/5.
 */
describe('grpo_loss.wgsl objective variants, hand-worked', () => {
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
  };
  const HAND: Tolerance = { atol: 1e-6, rtol: 1e-6 };

  it('GSPO: one ratio per sequence', async () => {
    const inputs: GrpoLossInputs = { ...base, importanceSamplingLevel: 'sequence' };
    const rho = Math.cbrt(0.55);
    for (const r of [grpoLossRef(inputs), await runLoss(inputs)]) {
      expect(r.loss).toBeCloseTo(0.5 * (-1.2 + 0.5 * rho), 6);
      const g = (0.5 * rho) / 6;
      expect(worstMismatch(r.dLogp, [0, 0, 0, g, g, g], HAND)).toBeNull();
      expect(r.stats.clipRatioLow).toBe(0);
      expect(r.stats.clipRatioHigh).toBeCloseTo(0.4, 6);
      expect(r.stats.clipRatioRegion).toBeCloseTo(0.4, 6);
    }
  });

  it('delta: TRL caps c1 after taking c2 from the uncapped ratio', async () => {
    const inputs: GrpoLossInputs = { ...base, delta: 1.05 };
    for (const r of [grpoLossRef(inputs), await runLoss(inputs)]) {
      expect(r.loss).toBeCloseTo(0.5 * ((-1 - 1.05) / 2 + 1.45 / 3), 6);
      expect(worstMismatch(r.dLogp, [-1 / 4, 0, 0, 0, 0.5 / 6, 0.55 / 6], HAND)).toBeNull();
      expect(r.stats.clipRatioLow).toBeCloseTo(0.2, 6);
      expect(r.stats.clipRatioHigh).toBe(0);
      expect(r.stats.clipRatioRegion).toBeCloseTo(0.2, 6);
    }
  });
});

/** randomInputs with per-sequence shifts (whole sequences clip under GSPO), away from every edge. */
function variantInputs(
  N: number,
  L: number,
  seed: number,
  lossType: GrpoLossInputs['lossType'],
  beta: number,
  importanceSamplingLevel: 'token' | 'sequence',
  delta: number | null,
): GrpoLossInputs {
  const r = randomInputs(N, L, seed, lossType, beta);
  const shift = seededUniform(N, seed + 5, -0.45, 0.45);
  const logp = Float32Array.from(r.logp, (x, j) => x + shift[Math.floor(j / L)]);
  const edges = [Math.log(1 - r.epsilonLow), Math.log(1 + r.epsilonHigh)];
  if (delta !== null) edges.push(Math.log(delta));
  const away = (x: number) => edges.every((e) => Math.abs(x - e) > 1e-3);
  for (let i = 0; i < N; i++) {
    for (let t = 0; t < L; t++) {
      const j = i * L + t;
      while (!away(logp[j] - r.oldLogp[j])) logp[j] += 3e-3;
    }
    // The sequence's mean log-ratio, in f64 from the f32 values the kernel sees.
    for (;;) {
      let s = 0;
      let c = 0;
      for (let t = 0; t < L; t++) {
        if (r.mask[i * L + t] === 0) continue;
        s += logp[i * L + t] - r.oldLogp[i * L + t];
        c++;
      }
      if (c === 0 || away(s / c)) break;
      const first = Array.from(r.mask)
        .slice(i * L, (i + 1) * L)
        .indexOf(1);
      logp[i * L + first] += 3e-3 * c;
    }
  }
  return { ...r, logp, importanceSamplingLevel, delta };
}

describe('grpo_loss.wgsl objective variants vs reference', () => {
  const variants = [
    { level: 'sequence' as const, delta: null },
    { level: 'token' as const, delta: 1.3 },
    { level: 'sequence' as const, delta: 1.3 },
  ];
  const shapes: Array<[number, number]> = [
    [1, 1],
    [5, GRPO_LOSS_WG + 1],
    [13, 97],
  ];
  for (const [N, L] of shapes) {
    for (const v of variants) {
      for (const lossType of ['grpo', 'dapo'] as const) {
        it(`N=${N} L=${L} ${lossType} ${v.level} δ=${v.delta}`, async () => {
          const inputs = variantInputs(N, L, N * 7 + L, lossType, 0.04, v.level, v.delta);
          const ref = grpoLossRef(inputs);
          expectMatches(await runLoss(inputs), ref);
          // 13 shifted sequences include clipped ones at every level (5 need not).
          if (N >= 13) expect(ref.stats.clipRatioRegion).toBeGreaterThan(0);
        });
      }
    }
  }
});

async function runEntropyMask(
  entropy: ArrayLike<number>,
  mask: ArrayLike<number>,
  rho: number,
  maxWorkgroupsPerDim?: number,
) {
  const engine = await testEngine();
  const d = engine.device;
  const M = mask.length;
  const bufs = {
    entropy: uploadStorageBuffer(d, Float32Array.from(entropy)),
    mask: uploadStorageBuffer(d, Float32Array.from(mask)),
    // Garbage first: every position must be written.
    out: uploadStorageBuffer(d, seededUniform(M, 5, 3, 4)),
  };
  const kernel = new EntropyMaskKernel(d, engine.pipelines);
  await engine.run((enc) =>
    kernel.encode(enc, { ...bufs, M, topEntropyQuantile: rho, maxWorkgroupsPerDim }),
  );
  const out = await readF32(d, bufs.out, M);
  for (const b of Object.values(bufs)) b.destroy();
  return Array.from(out);
}

// entropy_mask.wgsl against highEntropyMaskRef (TRL's get_high_entropy_mask, docs/grpo.md §3).
describe('entropy_mask.wgsl', () => {
  it('hand-worked: torch.quantile with a float32 rank, ties kept, padding and empty batches', async () => {
    const h = [3, 1, 5, 2, 4, 9];
    const mask = [1, 1, 1, 1, 1, 0];
    // ρ = 0.25: threshold s[3] = 4; ρ = 0.2: 4.2 (rank 3.2000000477); ρ = 0: the max; ρ = 1: all.
    const cases: [number, number[]][] = [
      [0.25, [0, 0, 1, 0, 1, 0]],
      [0.2, [0, 0, 1, 0, 0, 0]],
      [0, [0, 0, 1, 0, 0, 0]],
      [1, [1, 1, 1, 1, 1, 0]],
    ];
    for (const [rho, expected] of cases) {
      expect(await runEntropyMask(h, mask, rho)).toEqual(expected);
      expect(Array.from(highEntropyMaskRef(h, mask, rho))).toEqual(expected);
    }
    expect(await runEntropyMask([2, 2, 1, 2], [1, 1, 1, 1], 0.5)).toEqual([1, 1, 0, 1]);
    expect(await runEntropyMask([1, 2], [0, 0], 0.5)).toEqual([0, 0]);
  });

  for (const M of [1, ENTROPY_MASK_WG + 3, 997]) {
    for (const rho of [0.2, 0.5, 0.9]) {
      it(`M=${M} ρ=${rho}: matches the reference`, async () => {
        const entropy = seededUniform(M, M + 1, 0, 5);
        // Ties: some positions share an entropy.
        for (let j = 7; j < M; j += 11) entropy[j] = entropy[j - 7];
        const mask = Float32Array.from(seededUniform(M, M + 2, 0, 1), (u) => (u < 0.8 ? 1 : 0));
        const gpu = await runEntropyMask(entropy, mask, rho);
        expect(gpu).toEqual(Array.from(highEntropyMaskRef(entropy, mask, rho)));
      });
    }
  }

  it('split grid (grid limit lowered to 3: a 3×2 grid for 6 workgroups)', async () => {
    const M = 5 * ENTROPY_MASK_WG + 1;
    const entropy = seededUniform(M, 3, 0, 5);
    const mask = new Float32Array(M).fill(1);
    const gpu = await runEntropyMask(entropy, mask, 0.3, 3);
    expect(gpu).toEqual(Array.from(highEntropyMaskRef(entropy, mask, 0.3)));
  });
});

// The loss with the entropy mask (docs/grpo.md §3): GPU mask + loss against the reference.
describe('grpo_loss.wgsl with topEntropyQuantile', () => {
  /*
   * Hand-worked on the two-sequence example at the top, ρ = 0.4 (q = 0.6): counted entropies
   * [0.5, 2 | 1, 3, 1.5] sorted [0.5, 1, 1.5, 2, 3], rank float32(0.6)·4 = 2.4000001:
   * threshold 1.5 + 0.4·(2 − 1.5) = 1.7 → em = [0, 1, 0 | 0, 1, 0]. grpo, token level: the policy
   * terms left are (0,1) ℓ = −1.2 (clipped, g = 0) and (1,1) ℓ = 0.5 (g = 0.5):
   * loss = ½(−1.2/2 + 0.5/3) = −0.216667, dLogp = [0, 0, 0 | 0, 0.5/6, 0].
   */
  it('hand-worked, grpo, token level', async () => {
    const ln = Math.log;
    const inputs: GrpoLossInputs = {
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
      topEntropyQuantile: 0.4,
      entropy: [0.5, 2, 7, 1, 3, 1.5],
    };
    for (const r of [grpoLossRef(inputs), await runLoss(inputs)]) {
      expect(r.loss).toBeCloseTo(0.5 * (-1.2 / 2 + 0.5 / 3), 6);
      expect(
        worstMismatch(r.dLogp, [0, 0, 0, 0, 0.5 / 6, 0], { atol: 1e-6, rtol: 1e-6 }),
      ).toBeNull();
      // Clip statistics still count every counted token, as TRL's do.
      expect(r.stats.clipRatioHigh).toBeCloseTo(0.2, 6);
      expect(r.stats.clipRatioLow).toBeCloseTo(0.2, 6);
    }
  });

  for (const [N, L] of [
    [1, 1],
    [5, GRPO_LOSS_WG + 1],
    [13, 97],
  ] as const) {
    for (const level of ['token', 'sequence'] as const) {
      it(`N=${N} L=${L} ${level} ρ=0.3, β=0.04`, async () => {
        const base = variantInputs(N, L, N * 3 + L, 'grpo', 0.04, level, null);
        const inputs: GrpoLossInputs = {
          ...base,
          topEntropyQuantile: 0.3,
          entropy: seededUniform(N * L, N + L, 0, 4),
        };
        const ref = grpoLossRef(inputs);
        expectMatches(await runLoss(inputs), ref);
        if (N * L > 100) {
          expect(
            Math.abs(ref.loss - grpoLossRef({ ...inputs, topEntropyQuantile: 1 }).loss),
          ).toBeGreaterThan(1e-6);
        }
      });
    }
  }
});

/*
 * TRL's 'cispo' and 'sapo' (docs/grpo.md §3) on the two-sequence example at the top.
 * cispo, ε_high = 1.3 (a ratio cap), dapo weights 1/10: ℓ = −min(ρ, 1.3)·A·logp, g = −min(ρ, 1.3)·A
 *   (0,0) ρ 1, logp 0: ℓ 0, g −1 · (0,1) ρ 1.5 → 1.3, logp ln 1.5: ℓ −0.527105, g −1.3 (flagged)
 *   (1,0) ρ 0.5, logp ln 0.5: ℓ −0.173287, g 0.25 · (1,1) ℓ 0, g 0.5 · (1,2) ℓ 0.052421, g 0.55
 *   loss = −0.647971/10, dLogp = g/10; high (cispo) 1/5.
 * sapo, τ_pos 1, τ_neg 1.05, grpo weights: ℓ = −A·(4/τ)·σ(τ(ρ − 1)), g = −A·4σ(1 − σ)·ρ
 *   ℓ = [−2, −2.489837 | 0.707969, 0.952381, 1.002335], g = [−1, −1.410022 | 0.233535, 0.5, 0.548487]
 *   loss = ½((−2 − 2.489837)/2 + (0.707969 + 0.952381 + 1.002335)/3) = −0.678678; no clip flags.
 */
describe('grpo_loss.wgsl cispo and sapo, hand-worked', () => {
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
  const HAND: Tolerance = { atol: 1e-6, rtol: 1e-5 };

  it('cispo', async () => {
    const inputs: GrpoLossInputs = { ...base, lossType: 'cispo', epsilonHigh: 1.3 };
    const expected = [-0.1, -0.13, 0, 0.025, 0.05, 0.055];
    for (const r of [grpoLossRef(inputs), await runLoss(inputs)]) {
      expect(r.loss).toBeCloseTo(-0.0647971, 6);
      expect(worstMismatch(r.dLogp, expected, HAND)).toBeNull();
      expect(r.stats.clipRatioHigh).toBeCloseTo(0.2, 6);
      expect(r.stats.clipRatioLow).toBe(0);
    }
  });

  it('sapo', async () => {
    const inputs: GrpoLossInputs = { ...base, lossType: 'sapo' };
    const expected = [-0.25, -0.352506, 0, 0.038922, 0.083333, 0.091414];
    for (const r of [grpoLossRef(inputs), await runLoss(inputs)]) {
      expect(r.loss).toBeCloseTo(-0.678678, 5);
      expect(worstMismatch(r.dLogp, expected, HAND)).toBeNull();
      expect(r.stats.clipRatioRegion).toBe(0);
    }
  });
});

describe('grpo_loss.wgsl cispo and sapo vs reference', () => {
  for (const [N, L] of [
    [1, 1],
    [5, GRPO_LOSS_WG + 1],
    [13, 97],
  ] as const) {
    for (const lossType of ['cispo', 'sapo'] as const) {
      for (const level of ['token', 'sequence'] as const) {
        it(`N=${N} L=${L} ${lossType} ${level}, β=0.04, with and without an entropy mask`, async () => {
          const base = variantInputs(N, L, N * 5 + L, lossType, 0.04, level, null);
          const inputs: GrpoLossInputs = {
            ...base,
            // cispo caps the ratio at ε_high itself: 1.2 lies inside the ratios' spread.
            epsilonHigh: lossType === 'cispo' ? 1.2 : base.epsilonHigh,
            sapoTemperaturePos: 1.5,
            sapoTemperatureNeg: 0.8,
          };
          expectMatches(await runLoss(inputs), grpoLossRef(inputs));
          const masked = {
            ...inputs,
            topEntropyQuantile: 0.4,
            entropy: seededUniform(N * L, 9, 0, 3),
          };
          expectMatches(await runLoss(masked), grpoLossRef(masked));
        });
      }
    }
  }
});
