// shaders/matmul_packed16.wgsl and embedding_forward_packed16.wgsl (16-bit weights packed two per
// u32, widened in the kernel) against src/ref/half.ts on a shape sweep (1, primes, odd element
// counts, non-multiples of the tile, one larger), bf16 and f16, both matmul variants
// (KernelTuning.avoidBarriers); and against the f32 kernels on the widened weights, bit for bit
// (same k order: the packed read changes only where B comes from).
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { EmbeddingForwardKernel } from '../../src/kernels/embedding';
import { MatmulKernel, MATMUL_TILE_M, MATMUL_TILE_N } from '../../src/kernels/matmul';
import {
  embeddingForwardPacked16Ref,
  matmulPacked16Ref,
  packHalfBits,
  toHalfBits,
  widenHalfBits,
  type HalfFormat,
} from '../../src/ref/half';
import type { MatmulShape } from '../../src/ref/matmul';
import {
  BARRIER_VARIANTS,
  seededUniform,
  testEngine,
  testEngineWith,
  worstMismatch,
} from './harness';
import type { KernelTuning } from '../../src/engine/pipelines';

// f32 accumulation in another order than the f64 reference (as tests/kernels/matmul.test.ts).
const FORWARD_TOLERANCE = { atol: 1e-5, rtol: 1e-4 };
// The embedding is a widening copy: exact.
const EXACT = { atol: 0, rtol: 0 };

const FORMATS: HalfFormat[] = ['bf16', 'f16'];

/** The packed product and the f32 kernel's product on B's widened values. */
async function runPacked(
  tuning: KernelTuning,
  format: HalfFormat,
  shape: MatmulShape,
  seed: number,
) {
  const engine = await testEngineWith(tuning);
  const { M, N, K, transA = false } = shape;
  const a = seededUniform(M * K, seed);
  const bits = toHalfBits(seededUniform(K * N, seed + 1, -2, 2), format);
  const words = packHalfBits(bits);
  const widened = widenHalfBits(bits, format);
  const aBuf = uploadStorageBuffer(engine.device, a);
  const packedBuf = uploadStorageBuffer(engine.device, words);
  const wideBuf = uploadStorageBuffer(engine.device, widened);
  const cPacked = createStorageBuffer(engine.device, M * N * 4);
  const cWide = createStorageBuffer(engine.device, M * N * 4);
  const kernel = new MatmulKernel(engine.device, engine.pipelines);
  await engine.run((enc) => {
    kernel.encode(enc, { a: aBuf, b: packedBuf, c: cPacked, ...shape, transA, bDtype: format });
    kernel.encode(enc, { a: aBuf, b: wideBuf, c: cWide, ...shape, transA });
  });
  const gpu = await readF32(engine.device, cPacked, M * N);
  const f32Kernel = await readF32(engine.device, cWide, M * N);
  const ref = matmulPacked16Ref(a, words, format, shape);
  for (const buf of [aBuf, packedBuf, wideBuf, cPacked, cWide]) buf.destroy();
  return { gpu, f32Kernel, ref };
}

// Odd K·N (odd word counts, pairs straddling rows) and even ones; 64×64 is one whole tile.
const SHAPES: Array<[number, number, number]> = [
  [1, 1, 1],
  [7, 13, 5],
  [16, 67, 9],
  [MATMUL_TILE_M, MATMUL_TILE_N, 16],
  [65, 67, 33],
  [97, 31, 131],
  [130, 200, 96],
];

for (const { name, tuning } of BARRIER_VARIANTS) {
  describe(`matmul_packed16.wgsl (${name})`, () => {
    for (const format of FORMATS) {
      for (const [M, N, K] of SHAPES) {
        // transB: y = x·Wᵀ (forward); not: dX = dY·W (input gradient).
        for (const transB of [true, false]) {
          it(`${format} M=${M} N=${N} K=${K} transB=${transB}`, async () => {
            const shape = { M, N, K, transB };
            const { gpu, f32Kernel, ref } = await runPacked(tuning, format, shape, M + N + K);
            expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE)).toBeNull();
            expect(ref.some((v) => Math.abs(v) > 1e-3)).toBe(true);
            expect(Array.from(gpu)).toEqual(Array.from(f32Kernel));
          });
        }
      }
    }
  });
}

it('matmul_packed16: transposed A, accumulate, alpha, and the head windows (ldC, offsetC)', async () => {
  const engine = await testEngine();
  const format: HalfFormat = 'bf16';
  const [M, N, K] = [19, 23, 17];
  const a = seededUniform(K * M, 3); // stored (K, M)
  const bits = toHalfBits(seededUniform(N * K, 4), format);
  const words = packHalfBits(bits);
  const init = seededUniform(M * N, 5);
  const aBuf = uploadStorageBuffer(engine.device, a);
  const bBuf = uploadStorageBuffer(engine.device, words);
  const cBuf = uploadStorageBuffer(engine.device, init);
  const kernel = new MatmulKernel(engine.device, engine.pipelines);
  const shape = { M, N, K, transA: true, transB: true, alpha: 0.5 };
  await engine.run((enc) =>
    kernel.encode(enc, { a: aBuf, b: bBuf, c: cBuf, ...shape, accumulate: true, bDtype: format }),
  );
  const gpu = await readF32(engine.device, cBuf, M * N);
  const ref = matmulPacked16Ref(a, words, format, shape, init);
  expect(worstMismatch(gpu, ref, FORWARD_TOLERANCE)).toBeNull();

  // A block of columns [5, 5 + N) of a (M, 40) output, as a head chunk writes its logits.
  const wide = createStorageBuffer(engine.device, M * 40 * 4);
  await engine.run((enc) =>
    kernel.encode(enc, {
      a: aBuf,
      b: bBuf,
      c: wide,
      M,
      N,
      K,
      transA: true,
      transB: true,
      ldC: 40,
      offsetC: 5,
      bDtype: format,
    }),
  );
  const out = await readF32(engine.device, wide, M * 40);
  const plain = matmulPacked16Ref(a, words, format, { M, N, K, transA: true, transB: true });
  for (let m = 0; m < M; m++) {
    expect(
      worstMismatch(
        out.subarray(m * 40 + 5, m * 40 + 5 + N),
        plain.subarray(m * N, (m + 1) * N),
        FORWARD_TOLERANCE,
      ),
    ).toBeNull();
    expect(out[m * 40]).toBe(0); // columns outside the window untouched
  }
  for (const buf of [aBuf, bBuf, cBuf, wide]) buf.destroy();
});

describe('embedding_forward_packed16.wgsl', () => {
  for (const format of FORMATS) {
    // Odd V·C (the last word half used), C odd (rows start mid-word), one larger table.
    for (const [R, V, C] of [
      [1, 1, 1],
      [7, 13, 5],
      [37, 11, 33],
      [300, 257, 64],
    ]) {
      it(`${format} R=${R} V=${V} C=${C}, ids out of range give 0`, async () => {
        const engine = await testEngine();
        const tokens = Uint32Array.from({ length: R }, (_, r) => (r * 7919 + 3) % (V + 2));
        const bits = toHalfBits(seededUniform(V * C, R + V + C, -3, 3), format);
        const words = packHalfBits(bits);
        const tokBuf = uploadStorageBuffer(engine.device, tokens);
        const wBuf = uploadStorageBuffer(engine.device, words);
        const xBuf = createStorageBuffer(engine.device, R * C * 4);
        const kernel = new EmbeddingForwardKernel(engine.device, engine.pipelines);
        await engine.run((enc) =>
          kernel.encode(enc, {
            tokens: tokBuf,
            weight: wBuf,
            weightDtype: format,
            x: xBuf,
            rows: R,
            V,
            C,
          }),
        );
        const gpu = await readF32(engine.device, xBuf, R * C);
        const ref = embeddingForwardPacked16Ref(tokens, words, format, V, C);
        expect(worstMismatch(gpu, ref, EXACT)).toBeNull();
        expect(ref.some((v) => v !== 0)).toBe(true);
        for (const buf of [tokBuf, wBuf, xBuf]) buf.destroy();
      });
    }
  }

  it('a split table: the second chunk (odd row start) overwrites only its own ids', async () => {
    const engine = await testEngine();
    const [V, C, split] = [9, 3, 5];
    const full = toHalfBits(seededUniform(V * C, 8), 'f16');
    const tokens = Uint32Array.from([0, 8, 5, 4, 7, 2]);
    const tokBuf = uploadStorageBuffer(engine.device, tokens);
    const chunks = [full.subarray(0, split * C), full.subarray(split * C)].map((bits) =>
      uploadStorageBuffer(engine.device, packHalfBits(bits)),
    );
    const xBuf = createStorageBuffer(engine.device, tokens.length * C * 4);
    const kernel = new EmbeddingForwardKernel(engine.device, engine.pipelines);
    await engine.run((enc) => {
      kernel.encode(enc, {
        tokens: tokBuf,
        weight: chunks[0],
        weightDtype: 'f16',
        x: xBuf,
        rows: 6,
        V: split,
        C,
      });
      kernel.encode(enc, {
        tokens: tokBuf,
        weight: chunks[1],
        weightDtype: 'f16',
        x: xBuf,
        rows: 6,
        V: V - split,
        C,
        rowStart: split,
        zeroMisses: false,
      });
    });
    const gpu = await readF32(engine.device, xBuf, tokens.length * C);
    const ref = embeddingForwardPacked16Ref(tokens, packHalfBits(full), 'f16', V, C);
    expect(worstMismatch(gpu, ref, EXACT)).toBeNull();
    for (const buf of [tokBuf, ...chunks, xBuf]) buf.destroy();
  });
});
