// shaders/matmul.wgsl against src/ref/matmul.ts on a shape sweep, every transpose combination,
// batching and accumulation, for both kernel variants (KernelTuning.avoidBarriers), which must also
// agree bit for bit (same k order).
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer, createStorageBuffer } from '../../src/engine/buffers';
import { MatmulKernel, MATMUL_TILE_M, MATMUL_TILE_N } from '../../src/kernels/matmul';
import { matmulRef, type MatmulShape } from '../../src/ref/matmul';
import type { KernelTuning } from '../../src/engine/pipelines';
import {
  BARRIER_VARIANTS,
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

for (const { name, tuning } of BARRIER_VARIANTS) {
  describe(`matmul.wgsl (${name})`, () => {
    for (const [M, N, K] of SHAPES) {
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
