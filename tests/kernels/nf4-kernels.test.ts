// shaders/matmul_nf4.wgsl and matmul_gpu_nf4.wgsl (frozen weights stored as NF4: 4-bit codes and
// an f32 absmax per block, one u32 buffer; dequantised in registers) on SwiftShader against
// src/ref/nf4-matmul.ts nf4MatmulRef (src/ref/nf4.ts dequantizeNf4, then matmulRef): a shape
// sweep (1, primes, non-multiples of the tile and of the 64-element block, so the last block is
// partial, one larger), y = x·Wᵀ and dX = dY·W, both tile paths (KernelTuning.avoidBarriers),
// every GPU variant, accumulate, alpha, continueSum, transposed A, batch, another block size.
// And the dequantised values themselves: with the f32 kernel on dequantizeNf4's weights the nf4
// kernels give the same bits (B's read is all that differs), and I·W returns them exactly.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import type { KernelTuning } from '../../src/engine/pipelines';
import { shaderSource } from '../../src/engine/shaders';
import {
  gpuNf4Aligned,
  MatmulKernel,
  nf4Words,
  type MatmulShape,
  type MatmulVariant,
} from '../../src/kernels/matmul';
import { dequantizeNf4, NF4_CODE, quantizeNf4, type Nf4Tensor } from '../../src/ref/nf4';
import { nf4MatmulRef, packNf4, unpackNf4 } from '../../src/ref/nf4-matmul';
import { BARRIER_VARIANTS, seededUniform, testEngineWith, worstMismatch } from './harness';

// f32 accumulation in another order than the f64 reference (as tests/kernels/matmul.test.ts).
const FORWARD_TOLERANCE = { atol: 1e-5, rtol: 1e-4 };

/** The GPU path (no barrier-free kernels) with `variant` for every product. */
const tuningOf = (variant: MatmulVariant): KernelTuning => ({
  avoidBarriers: false,
  vectorLoads: true,
  matmulLarge: variant,
  matmulSmall: variant,
});

/** Seeded weights whose blocks have different scales (so a wrong absmax index shows). */
function weights(count: number, seed: number, blockSize = 64): Nf4Tensor {
  const values = seededUniform(count, seed, -1, 1);
  for (let e = 0; e < count; e++) values[e] *= 1 + ((e / blockSize) % 5);
  return quantizeNf4(values, blockSize);
}

interface Run {
  gpu: Float32Array;
  /** The f32 kernel (same tuning) on dequantizeNf4's weights, from the same C (when asked). */
  f32Kernel: Float32Array | null;
  ref: Float32Array;
  shader: string;
}

/**
 * One product with an NF4 B and, with `f32`, the f32 kernel's product on its dequantised values
 * (only where asked: on SwiftShader each pipeline compile costs up to seconds).
 */
async function runNf4(
  tuning: KernelTuning,
  shape: MatmulShape,
  seed: number,
  { blockSize = 64, f32 = false } = {},
): Promise<Run> {
  const engine = await testEngineWith(tuning);
  const { M, N, K, batch = 1, transA = false } = shape;
  const w = weights(batch * K * N, seed + 1, blockSize);
  const words = packNf4(w);
  expect(words.length).toBe(nf4Words(w.count, blockSize));
  const a = seededUniform(batch * M * K, seed);
  const init = seededUniform(batch * M * N, seed + 2);
  const aBuf = uploadStorageBuffer(engine.device, a);
  const nf4Buf = uploadStorageBuffer(engine.device, words);
  const wideBuf = uploadStorageBuffer(engine.device, dequantizeNf4(w));
  const [cNf4, cWide] = [0, 1].map(() => uploadStorageBuffer(engine.device, init));
  const kernel = new MatmulKernel(engine.device, engine.pipelines);
  const args = { ...shape, transA, bDtype: 'nf4' as const, bBlockSize: blockSize };
  const { shader } = kernel.describe(args);
  await engine.run((enc) => {
    kernel.encode(enc, { a: aBuf, b: nf4Buf, c: cNf4, ...args });
    if (f32) kernel.encode(enc, { a: aBuf, b: wideBuf, c: cWide, ...shape, transA });
  });
  const gpu = await readF32(engine.device, cNf4, batch * M * N);
  const f32Kernel = f32 ? await readF32(engine.device, cWide, batch * M * N) : null;
  for (const buf of [aBuf, nf4Buf, wideBuf, cNf4, cWide]) buf.destroy();
  const from = shape.accumulate || shape.continueSum ? init : undefined;
  const ref = nf4MatmulRef(a, w, shape, from);
  expect(ref.some((v) => Math.abs(v) > 1e-3)).toBe(true);
  return { gpu, f32Kernel, ref, shader };
}

it("the shaders' code book is src/ref/nf4.ts NF4_CODE", () => {
  const m = /const NF4_CODE = array<f32, 16>\(([^)]*)\)/.exec(shaderSource('matmul_nf4'));
  const literals = m![1]
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  expect(Float32Array.from(literals.map(Number))).toEqual(NF4_CODE);
  expect(shaderSource('matmul_gpu_nf4')).toContain(m![0]);
});

it('packNf4: code bytes little-endian in words, then the absmax bits at word ceil(count / 8)', () => {
  const t: Nf4Tensor = {
    format: 'nf4',
    count: 9,
    blockSize: 64,
    codes: Uint8Array.from([0x12, 0x34, 0x56, 0x78, 0x90]),
    absmax: Float32Array.from([1.5]),
  };
  const words = packNf4(t);
  expect(Array.from(words.subarray(0, 2))).toEqual([0x78563412, 0x90]);
  expect(new Float32Array(words.buffer, 8, 1)[0]).toBe(1.5);
  expect(unpackNf4(words, 9, 64)).toEqual(t);
});

describe('the kernels dequantise what dequantizeNf4 does: I·W returns W exactly', () => {
  // W (K, N) = (24, 20): 480 elements, 7.5 blocks (a partial last one), every code present.
  const [K, N] = [24, 20];
  const w = weights(K * N, 11);
  const codes = new Set(Array.from(w.codes).flatMap((byte) => [byte >> 4, byte & 15]));
  const cases: Array<[string, KernelTuning, string]> = [
    ['emulation', BARRIER_VARIANTS[1].tuning, 'matmul_nf4'],
    ['reg64x64', tuningOf('reg64x64'), 'matmul_gpu_nf4'],
  ];
  for (const [name, tuning, shader] of cases) {
    it(name, async () => {
      expect(codes.size).toBe(16);
      const engine = await testEngineWith(tuning);
      const identity = new Float32Array(K * K);
      for (let i = 0; i < K; i++) identity[i * K + i] = 1;
      const aBuf = uploadStorageBuffer(engine.device, identity);
      const bBuf = uploadStorageBuffer(engine.device, packNf4(w));
      const cBuf = createStorageBuffer(engine.device, K * N * 4);
      const kernel = new MatmulKernel(engine.device, engine.pipelines);
      const args = { M: K, N, K, bDtype: 'nf4' as const };
      expect(kernel.describe(args).shader).toBe(shader);
      await engine.run((enc) => kernel.encode(enc, { a: aBuf, b: bBuf, c: cBuf, ...args }));
      const out = await readF32(engine.device, cBuf, K * N);
      expect(Array.from(out)).toEqual(Array.from(dequantizeNf4(w)));
      for (const buf of [aBuf, bBuf, cBuf]) buf.destroy();
    });
  }
});

// K·N: 1 (one partial block), 65 (a block and one element), 1207, 6437, 12480 (7.5, 100.6, 195
// blocks); M and N across the 64-wide tile's edges, M ≤ 16 (the short tile) and above.
const SHAPES: Array<[number, number, number]> = [
  [1, 1, 1],
  [7, 13, 5],
  [16, 71, 17],
  [65, 67, 33],
  [97, 31, 131],
];

// The emulation path (barrier-free, what SwiftShader runs) on every shape, also against the f32
// kernel's bits; staged64 (the staged tiles, the GPU variants' fallback; its short 16-row tile in
// the fallback test below) on the shapes of more than 16 rows, against the reference.
const TILE_PATHS: Array<[string, KernelTuning, boolean, Array<[number, number, number]>]> = [
  ['emulation', BARRIER_VARIANTS[1].tuning, true, SHAPES],
  ['staged64', tuningOf('staged64'), false, SHAPES.filter(([M]) => M > 16)],
];
for (const [name, tuning, f32, shapes] of TILE_PATHS) {
  describe(`matmul_nf4.wgsl (${name})`, () => {
    // transB: y = x·Wᵀ (forward); not: dX = dY·W (input gradient).
    for (const transB of [true, false]) {
      it(`transB=${transB}: reference${f32 ? ", the f32 kernel's bits" : ''}`, async () => {
        for (const [M, N, K] of shapes) {
          const shape = { M, N, K, transB };
          const r = await runNf4(tuning, shape, M + N + K, { f32 });
          expect(r.shader).toBe('matmul_nf4');
          expect(worstMismatch(r.gpu, r.ref, FORWARD_TOLERANCE), `${M}×${N}×${K}`).toBeNull();
          if (f32) expect(Array.from(r.gpu)).toEqual(Array.from(r.f32Kernel!));
        }
      });
    }
  });
}

it('matmul_nf4 (emulation): one larger product, transposed A, alpha, accumulate, batch, block 128', async () => {
  const tuning = BARRIER_VARIANTS[1].tuning;
  const cases: Array<[MatmulShape, number]> = [
    [{ M: 130, N: 200, K: 96, transB: true }, 64],
    [{ M: 19, N: 23, K: 17, transA: true, transB: true, alpha: 0.5, accumulate: true }, 64],
    [{ M: 9, N: 10, K: 13, batch: 2, transB: true, continueSum: true }, 64],
    [{ M: 5, N: 37, K: 41, alpha: -2 }, 128],
  ];
  for (const [shape, blockSize] of cases) {
    const r = await runNf4(tuning, shape, shape.M * 3 + shape.K, { blockSize, f32: true });
    expect(worstMismatch(r.gpu, r.ref, FORWARD_TOLERANCE), JSON.stringify(shape)).toBeNull();
    expect(Array.from(r.gpu)).toEqual(Array.from(r.f32Kernel!));
  }
});

describe('matmul_gpu_nf4.wgsl (4 elements per load)', () => {
  // [variant, shape]. Pipelines are the cost here (SwiftShader compiles each in seconds), so
  // reg64x64 (the default for > 16 rows) and splitk16x64 (the default for decoding) run the
  // shader's paths; the other variants are other tile constants of the same file. Its dequantised
  // values are the f32 kernel's: the I·W test above.
  const cases: Array<[MatmulVariant, MatmulShape]> = [
    ['reg64x64', { M: 130, N: 67, K: 100, transB: true }], // y = x·Wᵀ, W (N, K): K % 4 = 0
    ['reg64x64', { M: 33, N: 72, K: 17, alpha: 0.5, accumulate: true }], // dX = dY·W
    ['reg64x64', { M: 64, N: 64, K: 32, transB: true }], // one interior tile (unguarded loads)
    ['reg64x64', { M: 9, N: 23, K: 40, transB: true, batch: 2, continueSum: true }],
    ['splitk16x64', { M: 3, N: 21, K: 388, transB: true }], // decode: K split 4 ways
  ];
  for (const [variant, shape] of cases) {
    it(`${variant} ${JSON.stringify(shape)}`, async () => {
      expect(gpuNf4Aligned(shape)).toBe(true);
      const r = await runNf4(tuningOf(variant), shape, shape.K);
      expect(r.shader).toBe('matmul_gpu_nf4');
      expect(worstMismatch(r.gpu, r.ref, FORWARD_TOLERANCE)).toBeNull();
    });
  }

  it('block 128 (another bitsandbytes block size)', async () => {
    const shape = { M: 5, N: 24, K: 56, transB: true };
    const r = await runNf4(tuningOf('reg64x64'), shape, 7, { blockSize: 128 });
    expect(r.shader).toBe('matmul_gpu_nf4');
    expect(worstMismatch(r.gpu, r.ref, FORWARD_TOLERANCE)).toBeNull();
  });

  it('groups that do not line up fall back to matmul_nf4.wgsl (staged)', async () => {
    const shape = { M: 5, N: 9, K: 7, transB: true }; // K % 4 ≠ 0: groups straddle W's rows
    expect(gpuNf4Aligned(shape)).toBe(false);
    const r = await runNf4(tuningOf('reg64x64'), shape, 3);
    expect(r.shader).toBe('matmul_nf4');
    expect(worstMismatch(r.gpu, r.ref, FORWARD_TOLERANCE)).toBeNull();
  });

  it('refuses a block size that is not a power of two', async () => {
    const engine = await testEngineWith(tuningOf('reg64x64'));
    const kernel = new MatmulKernel(engine.device, engine.pipelines);
    const buf = createStorageBuffer(engine.device, 64);
    const args = { a: buf, b: buf, c: buf, M: 1, N: 4, K: 4, bDtype: 'nf4' as const };
    const encoder = engine.device.createCommandEncoder();
    expect(() => kernel.encode(encoder, { ...args, bBlockSize: 48 })).toThrow(/power of two/);
    buf.destroy();
  });
});
