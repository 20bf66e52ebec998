// shaders/bias_add.wgsl and bias_grad.wgsl against src/ref/bias.ts on a shape sweep, with
// accumulation, a forced grid split, hand-worked values, and the gradient reference checked
// against a central finite difference.
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { BIAS_GRAD_WG, BiasAddKernel, BiasGradKernel } from '../../src/kernels/bias';
import { biasAddRef, biasGradRef } from '../../src/ref/bias';
import {
  seededUniform,
  testEngine,
  worstMismatch,
  type Tolerance,
  centralDifference,
  dot,
} from './harness';

// One f32 add per element.
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-7, rtol: 1e-6 };
// f32 sum over up to 300 rows against f64.
const GRADIENT_TOLERANCE: Tolerance = { atol: 1e-5, rtol: 1e-5 };

async function runBias(
  R: number,
  C: number,
  seed: number,
  opts: { accumulate?: boolean; maxPerDim?: number } = {},
) {
  const engine = await testEngine();
  const { device, pipelines } = engine;
  const y = seededUniform(R * C, seed); // (R, Cout)
  const bias = seededUniform(C, seed + 1); // (Cout)
  const dy = seededUniform(R * C, seed + 2); // (R, Cout)
  // Without accumulate the kernel must overwrite: start db from garbage.
  const dbInit = opts.accumulate ? seededUniform(C, seed + 3) : seededUniform(C, seed + 3, 7, 8);
  const yBuf = uploadStorageBuffer(device, y);
  const bBuf = uploadStorageBuffer(device, bias);
  const dyBuf = uploadStorageBuffer(device, dy);
  const dbBuf = uploadStorageBuffer(device, dbInit);
  const grid = { maxWorkgroupsPerDim: opts.maxPerDim };
  const add = new BiasAddKernel(device, pipelines, grid);
  const grad = new BiasGradKernel(device, pipelines, grid);
  await engine.run(async (enc) => {
    add.encode(enc, { y: yBuf, bias: bBuf, rows: R, C });
    grad.encode(enc, { dy: dyBuf, db: dbBuf, rows: R, C, accumulate: opts.accumulate });
  });
  const gpu = { y: await readF32(device, yBuf, R * C), db: await readF32(device, dbBuf, C) };
  for (const b of [yBuf, bBuf, dyBuf, dbBuf]) b.destroy();
  const ref = {
    y: biasAddRef(y, bias),
    db: biasGradRef(dy, R, C, opts.accumulate ? dbInit : undefined),
  };
  expect(worstMismatch(gpu.y, ref.y, FORWARD_TOLERANCE)).toBeNull();
  expect(worstMismatch(gpu.db, ref.db, GRADIENT_TOLERANCE)).toBeNull();
  return { gpu, ref };
}

// [R, Cout]
const SHAPES: Array<[number, number]> = [
  [1, 1],
  [7, 13], // primes
  [5, 2 * BIAS_GRAD_WG + 1], // db over three workgroups
  [300, 257], // larger
];

describe('bias reference', () => {
  it('bias gradient matches a central finite difference of Σ dy·(y + b)', () => {
    const [R, C] = [4, 3];
    const y = seededUniform(R * C, 1);
    const dy = Float64Array.from(seededUniform(R * C, 2));
    const b = Float64Array.from(seededUniform(C, 3));
    const numeric = centralDifference((bv) => dot(dy, biasAddRef(y, bv)), b);
    expect(worstMismatch(biasGradRef(dy, R, C), numeric, { atol: 1e-8, rtol: 1e-7 })).toBeNull();
  });
});

describe('bias kernels', () => {
  for (const [R, C] of SHAPES) {
    it(`R=${R} Cout=${C}: bias_add, bias_grad`, async () => {
      const { ref } = await runBias(R, C, R * 1000 + C);
      expect(ref.db.some((v) => Math.abs(v) > 1e-3)).toBe(true);
    });
  }

  it('accumulates into db', () => runBias(9, 33, 5, { accumulate: true }));

  // bias_add: 7 · 300 = 2100 elements → 9 workgroups, ≤ 4 per dim → grid (3, 3);
  // bias_grad: 300 channels → 5 workgroups → grid (3, 2) with one spare.
  it('split grid (tail workgroups guarded)', () => runBias(7, 300, 6, { maxPerDim: 4 }));

  it('hand-worked', async () => {
    const engine = await testEngine();
    const { device, pipelines } = engine;
    const y = uploadStorageBuffer(device, Float32Array.from([1, 2, 3, 4, 5, 6])); // (2, 3)
    const bias = uploadStorageBuffer(device, Float32Array.from([10, 20, 30]));
    const db = uploadStorageBuffer(device, Float32Array.from([100, 100, 100]));
    await engine.run(async (enc) => {
      await new BiasAddKernel(device, pipelines).encode(enc, { y, bias, rows: 2, C: 3 });
      // dy = the updated y: db = column sums + 100 (accumulate).
      await new BiasGradKernel(device, pipelines).encode(enc, {
        dy: y,
        db,
        rows: 2,
        C: 3,
        accumulate: true,
      });
    });
    expect(Array.from(await readF32(device, y))).toEqual([11, 22, 33, 14, 25, 36]);
    expect(Array.from(await readF32(device, db))).toEqual([125, 147, 169]);
    for (const b of [y, bias, db]) b.destroy();
  });
});
