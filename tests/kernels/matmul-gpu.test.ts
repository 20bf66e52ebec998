// The GPU matmul variants (shaders/matmul_gpu*.wgsl, chosen by KernelTuning.matmulLarge /
// matmulSmall) against src/ref/matmul.ts on SwiftShader: every variant (128×64, 64×64 and 16×64
// tiles, split-K), every transpose on one of them, the vec4 and packed bf16 / f16 loads, odd and
// prime shapes (tile edges, partial k-tiles) and whole interior tiles (the unguarded loads),
// alpha, accumulate 1 and 2, batch with strides, windows (ldA / offsetA, ldC / offsetC).
// Without split-K every output is one fma chain over k in order, so those variants must give the
// staged kernel's bits (checked); split-K sums in another order and must match the reference.
// Pipelines are what costs here (SwiftShader compiles each in seconds), so the cases reuse few.
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import type { KernelTuning } from '../../src/engine/pipelines';
import {
  gpuPackedAligned,
  MatmulKernel,
  matmulPartialsBytes,
  matmulSplit,
  MATMUL_VARIANTS,
  type MatmulArgs,
  type MatmulVariant,
} from '../../src/kernels/matmul';
import { matmulPacked16Ref, packHalfBits, toHalfBits, type HalfFormat } from '../../src/ref/half';
import { matmulRef } from '../../src/ref/matmul';
import { seededUniform, testEngineWith, worstMismatch, type Tolerance } from './harness';

// As tests/kernels/matmul.test.ts: f32 sums in another order than the f64 reference.
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-5, rtol: 1e-4 };

/** The GPU path (no barrier-free kernels) with `variant` for every product. */
const tuningOf = (variant: MatmulVariant): KernelTuning => ({
  avoidBarriers: false,
  vectorLoads: true,
  matmulLarge: variant,
  matmulSmall: variant,
});

type Shape = Omit<MatmulArgs, 'a' | 'b' | 'c'>;

/** Runs `shape` under `variant` on seeded operands; C starts from `init` when given. */
async function run(variant: MatmulVariant, shape: Shape, seed: number, init?: Float32Array) {
  const engine = await testEngineWith(tuningOf(variant));
  const { M, N, K, batch = 1 } = shape;
  const aLen = shape.strideA !== undefined ? shape.strideA * (batch - 1) + M * K : batch * M * K;
  const aLenWindow = Math.max(aLen, (shape.offsetA ?? 0) + (shape.ldA ?? K) * (M + K));
  const a = seededUniform(aLenWindow, seed);
  const b = seededUniform(batch * K * N, seed + 1);
  const cLen = init?.length ?? Math.max(batch * M * N, (shape.offsetC ?? 0) + (shape.ldC ?? N) * M);
  const c0 = init ?? new Float32Array(cLen);
  const [aBuf, bBuf, cBuf] = [a, b, c0].map((x) => uploadStorageBuffer(engine.device, x));
  const kernel = new MatmulKernel(engine.device, engine.pipelines);
  const info = kernel.describe(shape);
  await engine.run((enc) => kernel.encode(enc, { a: aBuf, b: bBuf, c: cBuf, ...shape }));
  const gpu = await readF32(engine.device, cBuf, cLen);
  for (const buf of [aBuf, bBuf, cBuf]) buf.destroy();
  return { gpu, a, b, c0, info };
}

/** Reference of a dense product (no windows). */
const reference = (a: Float32Array, b: Float32Array, shape: Shape, init?: Float32Array) =>
  matmulRef(a.subarray(0, (shape.batch ?? 1) * shape.M * shape.K), b, shape, init);

const TRANSPOSES: Array<[boolean, boolean]> = [
  [false, true], // y = x·Wᵀ
  [false, false], // dX = dY·W
  [true, false], // dW = dYᵀ·X
  [true, true],
];

// Shapes: 1, primes, tile edges in every dimension, K not a multiple of the k-tile.
const ODD_SHAPES: Array<[number, number, number]> = [
  [1, 1, 1],
  [3, 17, 5],
  [17, 67, 97],
  [130, 69, 33],
];

describe('every transpose (reg16x64: 16×64 tiles, scalar loads)', () => {
  for (const [transA, transB] of TRANSPOSES) {
    it(`transA=${transA} transB=${transB}: reference and the staged kernel's bits`, async () => {
      for (const [M, N, K] of ODD_SHAPES) {
        const shape = { M, N, K, transA, transB };
        const { gpu, a, b, info } = await run('reg16x64', shape, M + N + K);
        expect(info).toEqual({ variant: 'reg16x64', shader: 'matmul_gpu', splits: 1 });
        const ref = reference(a, b, shape);
        expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE), `${M}×${N}×${K}`).toBeNull();
        expect(ref.some((v) => Math.abs(v) > 1e-3)).toBe(true);
        const staged = await run('staged64', shape, M + N + K);
        expect(staged.info.shader).toBe('matmul');
        expect(Array.from(gpu)).toEqual(Array.from(staged.gpu));
      }
    });
  }
});

describe('tile configurations', () => {
  // [variant, M, N, K, transA, transB]: whole interior tiles (unguarded loads) and edges.
  const cases: Array<[MatmulVariant, number, number, number, boolean, boolean]> = [
    ['reg128x64', 128, 64, 32, false, true], // one interior 128×64 tile, two k-tiles
    ['reg128x64', 131, 67, 97, false, true],
    ['reg64x64', 64, 128, 48, false, false],
    ['reg64x64', 65, 67, 33, false, false],
    ['reg16x64', 16, 64, 32, false, true],
  ];
  for (const [variant, M, N, K, transA, transB] of cases) {
    it(`${variant} M=${M} N=${N} K=${K} transA=${transA} transB=${transB}`, async () => {
      const shape = { M, N, K, transA, transB };
      const { gpu, a, b, info } = await run(variant, shape, M * 7 + K);
      expect(info.variant).toBe(variant);
      expect(worstMismatch(gpu, reference(a, b, shape), FORWARD_TOLERANCE)).toBeNull();
      const staged = await run('staged64', shape, M * 7 + K);
      expect(Array.from(gpu)).toEqual(Array.from(staged.gpu));
    });
  }
});

describe('vec4 loads (matmul_gpu_vec4.wgsl)', () => {
  // Aligned products: K (and N without transB, M with transA) multiples of 4.
  const cases: Array<[MatmulVariant, number, number, number, boolean, boolean]> = [
    ['reg128x64', 132, 68, 36, false, true],
    ['reg128x64', 36, 68, 20, true, false],
    ['reg16x64', 5, 72, 100, false, true],
  ];
  for (const [variant, M, N, K, transA, transB] of cases) {
    it(`${variant} M=${M} N=${N} K=${K} transA=${transA} transB=${transB}`, async () => {
      const shape = { M, N, K, transA, transB };
      const { gpu, a, b, info } = await run(variant, shape, M + K);
      expect(info.shader).toBe('matmul_gpu_vec4');
      expect(worstMismatch(gpu, reference(a, b, shape), FORWARD_TOLERANCE)).toBeNull();
      const staged = await run('staged64', shape, M + K);
      expect(Array.from(gpu)).toEqual(Array.from(staged.gpu));
    });
  }
  it('a misaligned row pitch takes the scalar file', async () => {
    const engine = await testEngineWith(tuningOf('reg16x64'));
    const kernel = new MatmulKernel(engine.device, engine.pipelines);
    expect(kernel.describe({ M: 4, N: 8, K: 8, transB: true, ldA: 9 }).shader).toBe('matmul_gpu');
    expect(kernel.describe({ M: 4, N: 8, K: 8, transB: true }).shader).toBe('matmul_gpu_vec4');
  });
});

describe('split-K (splitk16x64) and its reduce pass', () => {
  it('splits only few tiles, never continueSum, in tileK-deep chunks', () => {
    const config = MATMUL_VARIANTS.splitk16x64;
    expect(matmulSplit(config, { M: 3, N: 17, K: 131 })).toEqual({ splits: 2, kChunk: 80 });
    expect(matmulSplit(config, { M: 1, N: 896, K: 896 })).toEqual({ splits: 14, kChunk: 64 });
    expect(matmulSplit(config, { M: 1, N: 896, K: 896, continueSum: true }).splits).toBe(1);
    expect(matmulSplit(config, { M: 16, N: 151936, K: 896 }).splits).toBe(1); // tiles fill it
    expect(matmulSplit(config, { M: 3, N: 17, K: 100 }).splits).toBe(1); // too shallow
    expect(matmulSplit(MATMUL_VARIANTS.reg16x64, { M: 1, N: 896, K: 896 }).splits).toBe(1);
  });

  it('prime K, every transpose, against the reference', async () => {
    for (const [transA, transB] of TRANSPOSES) {
      const shape = { M: 3, N: 17, K: 521, transA, transB };
      const { gpu, a, b, info } = await run('splitk16x64', shape, 5);
      expect(info.splits).toBe(7);
      expect(worstMismatch(gpu, reference(a, b, shape), FORWARD_TOLERANCE)).toBeNull();
    }
  });

  it('vec4 loads, batch with strides, alpha and accumulate into C', async () => {
    const shape = { M: 4, N: 20, K: 256, batch: 2, transB: true, alpha: 0.5, accumulate: true };
    const init = seededUniform(2 * 4 * 20, 9);
    const { gpu, a, b, info } = await run('splitk16x64', shape, 6, init);
    expect(info).toEqual({ variant: 'splitk16x64', shader: 'matmul_gpu_vec4', splits: 4 });
    expect(worstMismatch(gpu, reference(a, b, shape, init), FORWARD_TOLERANCE)).toBeNull();
  });

  it('windows: A rows ldA apart from offsetA, C a block of columns (ldC, offsetC)', async () => {
    // A: rows 2… of a (M, 200)-wide matrix; C: columns 3… of an (M, 30) output.
    const [M, N, K] = [5, 19, 197];
    const shape = { M, N, K, transB: true, ldA: 200, offsetA: 400, ldC: 30, offsetC: 3 };
    const init = seededUniform(M * 30, 4);
    const { gpu, a, b, info } = await run('splitk16x64', { ...shape, accumulate: true }, 8, init);
    expect(info.splits).toBe(3);
    const dense = new Float32Array(M * K);
    for (let m = 0; m < M; m++) dense.set(a.subarray(400 + m * 200, 400 + m * 200 + K), m * K);
    const plain = matmulRef(dense, b, { M, N, K, transB: true });
    for (let m = 0; m < M; m++) {
      const row = gpu.subarray(m * 30, (m + 1) * 30);
      const want = Array.from(init.subarray(m * 30, (m + 1) * 30));
      for (let n = 0; n < N; n++) want[3 + n] += plain[m * N + n];
      expect(worstMismatch(row, want, FORWARD_TOLERANCE), `row ${m}`).toBeNull();
    }
  });

  it('continueSum is never split: two calls over K halves give the bits of one', async () => {
    const engine = await testEngineWith(tuningOf('splitk16x64'));
    const [M, N, K] = [2, 24, 256];
    const a = seededUniform(M * K, 1);
    const b = seededUniform(K * N, 2); // stored (K, N): its halves over K are row blocks
    const init = seededUniform(M * N, 3);
    const aBuf = uploadStorageBuffer(engine.device, a);
    const bBuf = uploadStorageBuffer(engine.device, b);
    const b0 = uploadStorageBuffer(engine.device, b.subarray(0, 128 * N));
    const b1 = uploadStorageBuffer(engine.device, b.subarray(128 * N));
    const [whole, chained, single] = [0, 1, 2].map(() => uploadStorageBuffer(engine.device, init));
    const kernel = new MatmulKernel(engine.device, engine.pipelines);
    expect(kernel.describe({ M, N, K }).splits).toBe(4);
    expect(kernel.describe({ M, N, K, continueSum: true }).splits).toBe(1);
    await engine.run((enc) => {
      kernel.encode(enc, { a: aBuf, b: bBuf, c: whole, M, N, K, accumulate: true });
      const half = { M, N, K: 128, ldA: K, continueSum: true };
      kernel.encode(enc, { a: aBuf, b: b0, c: chained, ...half });
      kernel.encode(enc, { a: aBuf, b: b1, c: chained, ...half, offsetA: 128 });
      kernel.encode(enc, { a: aBuf, b: bBuf, c: single, M, N, K, continueSum: true });
    });
    const ref = matmulRef(a, b, { M, N, K }, init);
    const [w, ch, si] = await Promise.all(
      [whole, chained, single].map((buf) => readF32(engine.device, buf, M * N)),
    );
    expect(worstMismatch(w, ref, FORWARD_TOLERANCE)).toBeNull(); // split: another order
    expect(worstMismatch(si, ref, FORWARD_TOLERANCE)).toBeNull();
    expect(Array.from(ch)).toEqual(Array.from(si));
    for (const buf of [aBuf, bBuf, b0, b1, whole, chained, single]) buf.destroy();
  });
});

describe('split-K partials: one run scratch for every product of a run', () => {
  it('a smaller, a larger and the smaller again in one submission: each gives its own bits, and the scratch is what the first two asked', async () => {
    const tuning = tuningOf('splitk16x64');
    const engine = await testEngineWith(tuning);
    const kernel = new MatmulKernel(engine.device, engine.pipelines);
    const small = { M: 2, N: 24, K: 256 };
    const large = { M: 4, N: 40, K: 512 };
    const bytes = [small, large].map((shape) => matmulPartialsBytes(tuning, shape));
    expect(bytes).toEqual([4 * 4 * 2 * 24, 4 * 8 * 4 * 40]); // 4 and 8 splits
    const products = [small, large, small].map((shape, i) => {
      const a = uploadStorageBuffer(engine.device, seededUniform(shape.M * shape.K, 20 + i));
      const b = uploadStorageBuffer(engine.device, seededUniform(shape.K * shape.N, 30 + i));
      const [together, alone] = [0, 1].map(() =>
        uploadStorageBuffer(engine.device, new Float32Array(shape.M * shape.N)),
      );
      return { shape, a, b, together, alone };
    });
    const live = engine.memory.liveBytes;
    engine.memory.resetPeak();
    await engine.run((enc) => {
      for (const p of products) kernel.encode(enc, { a: p.a, b: p.b, c: p.together, ...p.shape });
    });
    // The third product reused the larger buffer (its stale partials overwritten): one buffer per
    // product would have peaked at bytes[0] more.
    expect(engine.memory.peakBytes - live).toBe(bytes[0] + bytes[1]);
    expect(engine.memory.liveBytes).toBe(live);
    for (const p of products) {
      await engine.run((enc) => kernel.encode(enc, { a: p.a, b: p.b, c: p.alone, ...p.shape }));
    }
    for (const p of products) {
      const n = p.shape.M * p.shape.N;
      const [together, alone] = await Promise.all(
        [p.together, p.alone].map((buf) => readF32(engine.device, buf, n)),
      );
      expect(Array.from(together)).toEqual(Array.from(alone));
      for (const buf of [p.a, p.b, p.together, p.alone]) buf.destroy();
    }
  });
});

describe('packed 16-bit B (matmul_gpu_packed16.wgsl): each word read once', () => {
  async function runPacked(variant: MatmulVariant, format: HalfFormat, shape: Shape, seed: number) {
    const engine = await testEngineWith(tuningOf(variant));
    const { M, N, K } = shape;
    const a = seededUniform(M * K, seed);
    const words = packHalfBits(toHalfBits(seededUniform(K * N, seed + 1, -2, 2), format));
    const aBuf = uploadStorageBuffer(engine.device, a);
    const bBuf = uploadStorageBuffer(engine.device, words);
    const init = seededUniform(M * N, seed + 2);
    const cBuf = uploadStorageBuffer(engine.device, init);
    const kernel = new MatmulKernel(engine.device, engine.pipelines);
    const args = { ...shape, bDtype: format };
    const info = kernel.describe(args);
    await engine.run((enc) => kernel.encode(enc, { a: aBuf, b: bBuf, c: cBuf, ...args }));
    const gpu = await readF32(engine.device, cBuf, M * N);
    for (const buf of [aBuf, bBuf, cBuf]) buf.destroy();
    const ref = matmulPacked16Ref(a, words, format, shape, shape.accumulate ? init : undefined);
    return { gpu, ref, info };
  }

  const cases: Array<[MatmulVariant, HalfFormat, Shape]> = [
    ['reg128x64', 'bf16', { M: 130, N: 67, K: 98, transB: true }], // y = x·Wᵀ, W (N, K)
    ['reg128x64', 'f16', { M: 33, N: 70, K: 17, alpha: 0.5, accumulate: true }], // dX = dY·W
    ['splitk16x64', 'bf16', { M: 3, N: 21, K: 390, transB: true }], // decode: split K
    ['reg16x64', 'f16', { M: 16, N: 64, K: 32, transB: true }], // one interior tile
  ];
  for (const [variant, format, shape] of cases) {
    it(`${variant} ${format} ${JSON.stringify(shape)}`, async () => {
      expect(gpuPackedAligned(shape)).toBe(true);
      const { gpu, ref, info } = await runPacked(variant, format, shape, shape.K);
      expect(info.shader).toBe('matmul_gpu_packed16');
      expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE)).toBeNull();
      expect(ref.some((v) => Math.abs(v) > 1e-3)).toBe(true);
    });
  }

  it('word pairs that do not line up fall back to matmul_packed16.wgsl', async () => {
    const shape = { M: 5, N: 9, K: 7, transB: true }; // odd K: pairs straddle W's rows
    expect(gpuPackedAligned(shape)).toBe(false);
    const { gpu, ref, info } = await runPacked('reg16x64', 'bf16', shape, 3);
    expect(info.shader).toBe('matmul_packed16');
    expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE)).toBeNull();
  });
});

it('accumulate 2 (continueSum) and alpha on a non-split variant keep the contract', async () => {
  const shape = { M: 19, N: 23, K: 40, transB: true };
  const init = seededUniform(19 * 23, 3);
  const cont = await run('reg64x64', { ...shape, continueSum: true }, 2, init);
  const ref = reference(cont.a, cont.b, shape, init);
  expect(worstMismatch(cont.gpu, ref, FORWARD_TOLERANCE)).toBeNull();
  const staged = await run('staged64', { ...shape, continueSum: true }, 2, init);
  expect(Array.from(cont.gpu)).toEqual(Array.from(staged.gpu));
  const scaled = await run('reg64x64', { ...shape, alpha: -0.25, batch: 2 }, 4);
  expect(
    worstMismatch(
      scaled.gpu,
      reference(scaled.a, scaled.b, { ...shape, alpha: -0.25, batch: 2 }),
      FORWARD_TOLERANCE,
    ),
  ).toBeNull();
});
