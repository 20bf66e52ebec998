// shaders/rmsnorm_forward.wgsl, rmsnorm_backward.wgsl and rmsnorm_backward_weight.wgsl against
// src/ref/rmsnorm.ts on a shape sweep, with accumulation, a forced grid split, hand-worked rows,
// and the backward reference checked against a central finite difference; every variant (one
// invocation per row; a workgroup per row with a tree or subgroup sum, rmsnorm_*_subgroups.wgsl;
// the weight gradient in one pass or in row chunks) forced through KernelTuning.
import { describe, expect, it } from 'vitest';
import type { KernelTuning } from '../../src/engine/pipelines';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import {
  RMSNORM_VARIANTS,
  RMSNORM_WEIGHT_WG,
  RMSNORM_WG,
  RmsNormBackwardKernel,
  RmsNormBackwardWeightKernel,
  RmsNormForwardKernel,
  rmsnormSubgroups,
  runRmsNorm,
  weightGradientParts,
} from '../../src/kernels/rmsnorm';
import {
  rmsnormBackwardRef,
  rmsnormBackwardWeightRef,
  rmsnormForwardRef,
} from '../../src/ref/rmsnorm';
import {
  BARRIER_VARIANTS,
  seededUniform,
  testEngine,
  testEngineWith,
  worstMismatch,
  type Tolerance,
  centralDifference,
  dot,
} from './harness';

// f32 sum of squares over C in a tree against f64; one rsqrt, two products.
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-5 };
// dx: one row reduction plus cancellation between its two terms; dw: a sum over up to 300 rows.
const GRADIENT_TOLERANCE: Tolerance = { atol: 1e-5, rtol: 1e-4 };
const EPS = 1e-5;

interface Case {
  tuning: KernelTuning;
  R: number;
  C: number;
  seed: number;
  maxWorkgroupsPerDim?: number;
  accumulate?: boolean;
}

/** Runs forward, backward and weight gradient on one input; returns GPU results and refs. */
async function runAll({ tuning, R, C, seed, maxWorkgroupsPerDim, accumulate = false }: Case) {
  const engine = await testEngineWith(tuning);
  const { device, pipelines } = engine;
  const x = seededUniform(R * C, seed, -2, 2); // (R, C)
  const w = seededUniform(C, seed + 1, 0.5, 1.5); // (C)
  const dy = seededUniform(R * C, seed + 2); // (R, C)
  // Without accumulate the kernels must overwrite: start the outputs from garbage.
  const dxInit = seededUniform(R * C, seed + 3, accumulate ? -1 : 7, accumulate ? 1 : 8);
  const dwInit = seededUniform(C, seed + 4, accumulate ? -1 : 7, accumulate ? 1 : 8);
  const xBuf = uploadStorageBuffer(device, x);
  const wBuf = uploadStorageBuffer(device, w);
  const dyBuf = uploadStorageBuffer(device, dy);
  const yBuf = createStorageBuffer(device, R * C * 4);
  const rstdBuf = createStorageBuffer(device, R * 4);
  const dxBuf = uploadStorageBuffer(device, dxInit);
  const dwBuf = uploadStorageBuffer(device, dwInit);
  const opts = { maxWorkgroupsPerDim };
  const forward = new RmsNormForwardKernel(device, pipelines, opts);
  const backward = new RmsNormBackwardKernel(device, pipelines, opts);
  const backwardWeight = new RmsNormBackwardWeightKernel(device, pipelines, opts);
  await engine.run(async (enc) => {
    forward.encode(enc, { x: xBuf, w: wBuf, y: yBuf, rstd: rstdBuf, rows: R, C, eps: EPS });
    const common = { dy: dyBuf, x: xBuf, rstd: rstdBuf, rows: R, C, accumulate };
    backward.encode(enc, { ...common, w: wBuf, dx: dxBuf });
    backwardWeight.encode(enc, { ...common, dw: dwBuf });
  });
  const gpu = {
    y: await readF32(device, yBuf, R * C),
    rstd: await readF32(device, rstdBuf, R),
    dx: await readF32(device, dxBuf, R * C),
    dw: await readF32(device, dwBuf, C),
  };
  for (const b of [xBuf, wBuf, dyBuf, yBuf, rstdBuf, dxBuf, dwBuf]) b.destroy();
  const fwd = rmsnormForwardRef(x, w, R, C, EPS);
  const ref = {
    ...fwd,
    dx: rmsnormBackwardRef(dy, x, w, fwd.rstd, R, C, accumulate ? dxInit : undefined),
    dw: rmsnormBackwardWeightRef(dy, x, fwd.rstd, R, C, accumulate ? dwInit : undefined),
  };
  return { gpu, ref };
}

type Results = Awaited<ReturnType<typeof runAll>>;

function expectClose(gpu: Results['gpu'], ref: Results['ref']) {
  expect(worstMismatch(gpu.y, ref.y, FORWARD_TOLERANCE)).toBeNull();
  expect(worstMismatch(gpu.rstd, ref.rstd, FORWARD_TOLERANCE)).toBeNull();
  expect(worstMismatch(gpu.dx, ref.dx, GRADIENT_TOLERANCE)).toBeNull();
  expect(worstMismatch(gpu.dw, ref.dw, GRADIENT_TOLERANCE)).toBeNull();
}

// [R, C]
const SHAPES: Array<[number, number]> = [
  [1, 1],
  [7, 13], // primes
  [5, RMSNORM_WG + 1], // a row one past the workgroup width: threads loop twice
  [3, RMSNORM_WG - 1], // one thread idle in the reduction
  [11, 2 * RMSNORM_WEIGHT_WG + 3], // weight gradient across three workgroups
  [300, 257], // larger
  [4, 3],
  [6, 97],
  [3, 3000], // a row of a few thousand channels: 12 per thread
];

const [GPU_DEFAULT, BARRIER_FREE] = BARRIER_VARIANTS.map((v) => v.tuning);
// The forward / input-gradient and weight-gradient variants, forced (avoidBarriers false runs the
// GPU path on SwiftShader too).
const VARIANTS: Array<{ name: string; tuning: KernelTuning; needsSubgroups?: boolean }> = [
  {
    name: 'workgroup tree, one-pass weight gradient',
    tuning: { ...GPU_DEFAULT, subgroups: false, rmsnormWeightRowChunk: 0 },
  },
  {
    name: 'workgroup subgroups, weight gradient in 4-row parts',
    tuning: { ...GPU_DEFAULT, subgroups: true, rmsnormWeightRowChunk: 4 },
    needsSubgroups: true,
  },
  { name: 'GPU default', tuning: GPU_DEFAULT },
  { name: 'barrier-free', tuning: BARRIER_FREE },
];

describe('rmsnorm reference', () => {
  it('backward matches a central finite difference of Σ dy·y(x, w)', () => {
    const [R, C] = [3, 5];
    const x = Float64Array.from(seededUniform(R * C, 1, -2, 2));
    const w = Float64Array.from(seededUniform(C, 2, 0.5, 1.5));
    const dy = Float64Array.from(seededUniform(R * C, 3));
    const eps = 1e-3; // large enough to matter in the derivative
    const { rstd } = rmsnormForwardRef(x, w, R, C, eps);
    const numericDx = centralDifference((xv) => dot(dy, rmsnormForwardRef(xv, w, R, C, eps).y), x);
    const numericDw = centralDifference((wv) => dot(dy, rmsnormForwardRef(x, wv, R, C, eps).y), w);
    const fd: Tolerance = { atol: 1e-8, rtol: 1e-6 };
    expect(worstMismatch(rmsnormBackwardRef(dy, x, w, rstd, R, C), numericDx, fd)).toBeNull();
    expect(worstMismatch(rmsnormBackwardWeightRef(dy, x, rstd, R, C), numericDw, fd)).toBeNull();
  });

  it('hand-worked rows', () => {
    // mean(x²) = (1 + 4 + 4 + 16) / 4 = 6.25 → rstd = 0.4; second row: mean 4 → rstd 0.5.
    const x = [1, 2, -2, 4, 2, -2, 2, -2];
    const w = [1, 2, 3, 0.5];
    const { y, rstd } = rmsnormForwardRef(x, w, 2, 4, 0);
    expect(Array.from(rstd)).toEqual([0.4, 0.5]);
    expectArrayClose(y, [0.4, 1.6, -2.4, 0.8, 1, -2, 3, -0.5], 1e-12);
  });
});

for (const { name, tuning, needsSubgroups } of VARIANTS) {
  describe(`rmsnorm kernels (${name})`, () => {
    it('runs the variant it names', async (ctx) => {
      const { device } = await testEngineWith(tuning);
      const has = device.features.has('subgroups');
      if (needsSubgroups && !has) ctx.skip(`the adapter has no 'subgroups' feature (${name})`);
      expect(rmsnormSubgroups(tuning, has)).toBe(
        !tuning.avoidBarriers && has && tuning.subgroups !== false,
      );
      const parts = weightGradientParts(300, tuning);
      if (tuning.rmsnormWeightRowChunk === 4) expect(parts).toBe(75);
      else if (tuning.avoidBarriers || tuning.rmsnormWeightRowChunk === 0) expect(parts).toBe(1);
      else expect(parts).toBeGreaterThan(1); // the default chunk splits 300 rows
    });

    for (const [R, C] of SHAPES) {
      it(`R=${R} C=${C}: forward, dx, dw`, async () => {
        const { gpu, ref } = await runAll({ tuning, R, C, seed: R * 1000 + C });
        expectClose(gpu, ref);
        // With C = 1 the output is sign(x)·w whatever |x|: dx is ~0 there, legitimately.
        if (C > 1) expect(ref.dx.some((v) => Math.abs(v) > 1e-3)).toBe(true);
        expect(ref.dw.some((v) => Math.abs(v) > 1e-3)).toBe(true);
      });
    }

    it('accumulates into dx and dw', async () => {
      const { gpu, ref } = await runAll({ tuning, R: 9, C: 70, seed: 5, accumulate: true });
      expectClose(gpu, ref);
    });

    it('split grid (tail rows and channels guarded), same bits on a second run', async () => {
      // 10 rows at ≤ 4 workgroups per dim → grid (4, 3) = 12: two spare row workgroups;
      // 300 channels → 5 weight-gradient workgroups → grid (3, 2): one spare.
      // Barrier-free: 300 rows at 64 per workgroup → 5 workgroups → grid (4, 2): three spare
      // (cooperative: 300 workgroups at ≤ 18 per dim → grid (18, 17): six spare).
      for (const c of [
        { tuning, R: 10, C: 300, seed: 6, maxWorkgroupsPerDim: 4 },
        // (Weight gradient in parts: 75 · 30 threads → 36 workgroups → grid (18, 2).)
        { tuning, R: 300, C: 30, seed: 7, maxWorkgroupsPerDim: tuning.avoidBarriers ? 4 : 18 },
      ]) {
        const first = await runAll(c);
        expectClose(first.gpu, first.ref);
        const second = await runAll(c);
        expect(Array.from(second.gpu.dx)).toEqual(Array.from(first.gpu.dx));
        expect(Array.from(second.gpu.dw)).toEqual(Array.from(first.gpu.dw));
      }
    });

    it('hand-worked forward on the GPU', async () => {
      const engine = await testEngineWith(tuning);
      const { device, pipelines } = engine;
      const x = uploadStorageBuffer(device, Float32Array.from([1, 2, -2, 4, 2, -2, 2, -2]));
      const w = uploadStorageBuffer(device, Float32Array.from([1, 2, 3, 0.5]));
      const y = createStorageBuffer(device, 8 * 4);
      const rstd = createStorageBuffer(device, 2 * 4);
      const kernel = new RmsNormForwardKernel(device, pipelines);
      await engine.run((enc) => kernel.encode(enc, { x, w, y, rstd, rows: 2, C: 4, eps: 0 }));
      expectArrayClose(await readF32(device, rstd), [0.4, 0.5], 1e-7);
      expectArrayClose(await readF32(device, y), [0.4, 1.6, -2.4, 0.8, 1, -2, 3, -0.5], 1e-6);
      for (const b of [x, w, y, rstd]) b.destroy();
    });
  });
}

describe('rmsnorm variants for the GPU bench', () => {
  it('runRmsNorm runs a listed variant and reports what ran', async () => {
    const names = RMSNORM_VARIANTS.map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
    const engine = await testEngine();
    const { tuning } = RMSNORM_VARIANTS.find((v) => v.name === 'subgroups-split-weight-32')!;
    const result = await runRmsNorm(engine, { rows: 70, C: 96 }, tuning, { iterations: 2 });
    expect(result.subgroups).toBe(engine.device.features.has('subgroups'));
    expect(result.weightParts).toBe(3);
    expect(result.msPerStep.length).toBe(2);
    for (const ms of result.msPerStep) expect(ms).toBeGreaterThan(0);
  });
});

function expectArrayClose(actual: ArrayLike<number>, expected: number[], atol: number) {
  expect(worstMismatch(actual, expected, { atol, rtol: 0 })).toBeNull();
}
