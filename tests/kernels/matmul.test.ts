// shaders/matmul.wgsl against src/ref/matmul.ts on a shape sweep, every transpose combination,
// batching and accumulation, for both kernel variants (KernelTuning.avoidBarriers) and, for aligned
// shapes, the barrier-free variant's vec4 loads (shaders/matmul_vec4.wgsl), which must all agree
// bit for bit (same k order). The cooperative side is pinned to the staged kernel ('staged64');
// the GPU variants the GPU path now defaults to are tested in matmul-gpu.test.ts.
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer, createStorageBuffer } from '../../src/engine/buffers';
import { MatmulKernel, MATMUL_TILE_M, MATMUL_TILE_N, vec4Aligned } from '../../src/kernels/matmul';
import { matmulRef, type MatmulShape } from '../../src/ref/matmul';
import type { KernelTuning } from '../../src/engine/pipelines';
import {
  BARRIER_VARIANTS as HARNESS_VARIANTS,
  seededUniform,
  testEngineWith,
  worstMismatch,
  type Tolerance,
} from './harness';

// f32 accumulation in a different order than the f64 reference: error grows ~ √K·eps·|terms|.
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-5, rtol: 1e-4 };

async function runMatmul(
  tuning: KernelTuning,
  shape: MatmulShape,
  seed: number,
  accumulateInto?: Float32Array,
) {
  const engine = await testEngineWith(tuning);
  const { M, N, K, batch = 1 } = shape;
  const a = seededUniform(batch * M * K, seed);
  const b = seededUniform(batch * K * N, seed + 1);
  const aBuf = uploadStorageBuffer(engine.device, a);
  const bBuf = uploadStorageBuffer(engine.device, b);
  const cBuf = accumulateInto
    ? uploadStorageBuffer(engine.device, accumulateInto)
    : createStorageBuffer(engine.device, batch * M * N * 4);
  const kernel = new MatmulKernel(engine.device, engine.pipelines);
  await engine.run((enc) =>
    kernel.encode(enc, { a: aBuf, b: bBuf, c: cBuf, ...shape, accumulate: !!accumulateInto }),
  );
  const gpu = await readF32(engine.device, cBuf, batch * M * N);
  const ref = matmulRef(a, b, shape, accumulateInto);
  for (const buf of [aBuf, bBuf, cBuf]) buf.destroy();
  return { gpu, ref };
}

const SHAPES: Array<[number, number, number]> = [
  [1, 1, 1],
  [7, 13, 5], // primes, smaller than one tile
  [16, 67, 9], // the largest M that takes the short (16-row) tile used for decoding
  [MATMUL_TILE_M, MATMUL_TILE_N, 16], // exactly one tile
  [65, 67, 33], // one past the tile in every dimension
  [97, 31, 131], // primes straddling tiles, K not a multiple of TILE_K
  [256, 300, 129], // several tiles, ≥ 256
];

/** Both sides of avoidBarriers, the cooperative one on matmul.wgsl's staged tiles (the
 * barrier-free one names no variant: 'emulation' is what avoidBarriers picks). */
const BARRIER_VARIANTS = HARNESS_VARIANTS.map(({ name, tuning }) => ({
  name,
  tuning: (tuning.avoidBarriers
    ? { ...tuning }
    : { ...tuning, matmulLarge: 'staged64', matmulSmall: 'staged64' }) as KernelTuning,
}));

/** The barrier-free kernel without its vec4 loads: matmul.wgsl for every shape. */
const SCALAR_LOADS: KernelTuning = { avoidBarriers: true, vectorLoads: false };

// Shapes whose K (and N) are multiples of 4, so the barrier-free variant reads vec4s: a decode
// step of 8 sequences, a partial tile in every dimension, a 32-row product in a 64-row tile.
const VEC4_SHAPES: Array<[number, number, number]> = [
  [8, 96, 64],
  [36, 68, 36],
  [32, 136, 200],
  [MATMUL_TILE_M + 4, MATMUL_TILE_N + 4, 4],
];

for (const { name, tuning } of BARRIER_VARIANTS) {
  describe(`matmul.wgsl (${name})`, () => {
    for (const [M, N, K] of [...SHAPES, ...VEC4_SHAPES]) {
      for (const [transA, transB] of [
        [false, false],
        [false, true],
        [true, false],
        [true, true],
      ]) {
        it(`M=${M} N=${N} K=${K} transA=${transA} transB=${transB}`, async () => {
          const { gpu, ref } = await runMatmul(
            tuning,
            { M, N, K, transA, transB },
            M * 1000 + N * 10 + K,
          );
          expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE)).toBeNull();
          // The reference itself is not trivially zero: the test would catch a kernel writing 0s.
          expect(ref.some((v) => Math.abs(v) > 1e-3)).toBe(true);
        });
      }
    }

    it('batched with alpha, stride per batch', async () => {
      const { gpu, ref } = await runMatmul(
        tuning,
        { M: 17, N: 19, K: 23, batch: 3, transB: true, alpha: 0.5 },
        7,
      );
      expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE)).toBeNull();
    });

    it('accumulates into C', async () => {
      const init = seededUniform(33 * 35, 99);
      const { gpu, ref } = await runMatmul(tuning, { M: 33, N: 35, K: 9 }, 11, init);
      expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE)).toBeNull();
    });

    it('hand-worked 2×3 · 3×2', async () => {
      const engine = await testEngineWith(tuning);
      const a = uploadStorageBuffer(engine.device, new Float32Array([1, 2, 3, 4, 5, 6]));
      const b = uploadStorageBuffer(engine.device, new Float32Array([7, 8, 9, 10, 11, 12]));
      const c = createStorageBuffer(engine.device, 16);
      const kernel = new MatmulKernel(engine.device, engine.pipelines);
      await engine.run((enc) => kernel.encode(enc, { a, b, c, M: 2, N: 2, K: 3 }));
      expect(Array.from(await readF32(engine.device, c))).toEqual([58, 64, 139, 154]);
    });
  });
}

it('the staged and the barrier-free variant give the same bits', async () => {
  for (const [M, N, K] of SHAPES) {
    for (const [transA, transB] of [
      [false, true],
      [true, false],
    ]) {
      const shape = { M, N, K, transA, transB };
      const [staged, direct] = await Promise.all(
        BARRIER_VARIANTS.map(({ tuning }) => runMatmul(tuning, shape, M + N + K)),
      );
      expect(Array.from(direct.gpu)).toEqual(Array.from(staged.gpu));
    }
  }
});

it("vec4 loads: aligned products take matmul_vec4.wgsl and give the scalar kernel's bits", async () => {
  for (const [M, N, K] of VEC4_SHAPES) {
    for (const [transA, transB] of [
      [false, false],
      [false, true],
      [true, false],
      [true, true],
    ]) {
      const shape = { M, N, K, transA, transB };
      // The shapes above are the ones the vec4 kernel runs (else this would compare a kernel
      // with itself).
      expect(vec4Aligned(shape)).toBe(true);
      const [vec4, scalar] = await Promise.all([
        runMatmul({ avoidBarriers: true, vectorLoads: true }, shape, M + N + K),
        runMatmul(SCALAR_LOADS, shape, M + N + K),
      ]);
      expect(worstMismatch(vec4.gpu, vec4.ref, FORWARD_TOLERANCE)).toBeNull();
      expect(Array.from(vec4.gpu)).toEqual(Array.from(scalar.gpu));
    }
  }
  // Accumulating, batched with strides and alpha: same bits again (model-split.test.ts covers
  // windows of a wider A, aligned and not).
  const batched = { M: 9, N: 12, K: 20, batch: 3, transB: true, alpha: 0.5 };
  const init = seededUniform(3 * 9 * 12, 5);
  const [v, sc] = await Promise.all([
    runMatmul({ avoidBarriers: true, vectorLoads: true }, batched, 3, init),
    runMatmul(SCALAR_LOADS, batched, 3, init),
  ]);
  expect(worstMismatch(v.gpu, v.ref, FORWARD_TOLERANCE)).toBeNull();
  expect(Array.from(v.gpu)).toEqual(Array.from(sc.gpu));
});

it('vec4 loads are skipped exactly where an operand is misaligned', () => {
  expect(vec4Aligned({ M: 8, N: 68, K: 64 })).toBe(true);
  expect(vec4Aligned({ M: 8, N: 67, K: 64 })).toBe(false); // B's rows
  expect(vec4Aligned({ M: 8, N: 67, K: 64, transB: true })).toBe(true);
  expect(vec4Aligned({ M: 8, N: 68, K: 63, transB: true })).toBe(false);
  expect(vec4Aligned({ M: 8, N: 68, K: 64, transA: true })).toBe(true);
  expect(vec4Aligned({ M: 9, N: 68, K: 64, transA: true })).toBe(false); // A's rows
  expect(vec4Aligned({ M: 9, N: 68, K: 64 })).toBe(true);
  expect(vec4Aligned({ M: 8, N: 68, K: 64, ldA: 69, transB: true })).toBe(false);
  expect(vec4Aligned({ M: 8, N: 68, K: 64, offsetA: 2, transB: true })).toBe(false);
});
