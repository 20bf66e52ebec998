// shaders/embedding_forward.wgsl and embedding_backward.wgsl against src/ref/embedding.ts on a
// shape sweep, with repeated tokens, accumulation, a forced grid split and the CPU token index;
// the backward reference itself is checked against a central finite difference.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import {
  buildTokenIndex,
  EMBEDDING_WG,
  EmbeddingBackwardKernel,
  EmbeddingForwardKernel,
} from '../../src/kernels/embedding';
import { embeddingBackwardRef, embeddingForwardRef } from '../../src/ref/embedding';
import {
  seededUniform,
  testEngine,
  worstMismatch,
  type Tolerance,
  centralDifference,
  dot,
} from './harness';

// The forward is a copy: it must be exact.
const FORWARD_TOLERANCE: Tolerance = { atol: 0, rtol: 0 };
// f32 sums of at most R rows against f64 (R ≤ 300 here, values in [−1, 1)).
const GRADIENT_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-5 };

/** Deterministic token ids in [0, V), skewed so that some ids repeat many times. */
function seededTokens(R: number, V: number, seed: number): Uint32Array {
  const u = seededUniform(R, seed, 0, 1);
  return Uint32Array.from(u, (v) => Math.min(V - 1, Math.floor(v * v * V)));
}

async function runForward(
  tokens: Uint32Array,
  weight: Float32Array,
  V: number,
  C: number,
  maxWorkgroupsPerDim?: number,
) {
  const engine = await testEngine();
  const R = tokens.length;
  const tokBuf = uploadStorageBuffer(engine.device, tokens);
  const wBuf = uploadStorageBuffer(engine.device, weight);
  const xBuf = createStorageBuffer(engine.device, R * C * 4);
  const kernel = new EmbeddingForwardKernel(engine.device, engine.pipelines, {
    maxWorkgroupsPerDim,
  });
  await engine.run((enc) =>
    kernel.encode(enc, { tokens: tokBuf, weight: wBuf, x: xBuf, rows: R, V, C }),
  );
  const x = await readF32(engine.device, xBuf, R * C);
  for (const b of [tokBuf, wBuf, xBuf]) b.destroy();
  return x;
}

async function runBackward(
  tokens: Uint32Array,
  dx: Float32Array,
  V: number,
  C: number,
  dwInit?: Float32Array,
  maxWorkgroupsPerDim?: number,
) {
  const engine = await testEngine();
  const dxBuf = uploadStorageBuffer(engine.device, dx);
  // Without accumulate the kernel must overwrite, so start from garbage rather than zeros.
  const dwBuf = uploadStorageBuffer(engine.device, dwInit ?? seededUniform(V * C, 4242, 5, 6));
  const kernel = new EmbeddingBackwardKernel(engine.device, engine.pipelines, {
    maxWorkgroupsPerDim,
  });
  const index = buildTokenIndex(tokens);
  await engine.run((enc) =>
    kernel.encode(enc, { dx: dxBuf, dw: dwBuf, index, V, C, accumulate: !!dwInit }),
  );
  const dw = await readF32(engine.device, dwBuf, V * C);
  for (const b of [dxBuf, dwBuf]) b.destroy();
  return dw;
}

// [R, V, C]
const SHAPES: Array<[number, number, number]> = [
  [1, 1, 1],
  [7, 11, 13], // primes
  [13, 5, EMBEDDING_WG + 1], // R·C and U·C not multiples of the workgroup size; few distinct ids
  [300, 97, 257], // larger, many repeats
];

describe('buildTokenIndex', () => {
  it('groups rows by id, ascending ids and rows', () => {
    const index = buildTokenIndex(Uint32Array.from([5, 2, 5, 0, 2, 5]));
    expect(Array.from(index.uniqueIds)).toEqual([0, 2, 5]);
    expect(Array.from(index.offsets)).toEqual([0, 1, 3, 6]);
    expect(Array.from(index.order)).toEqual([3, 1, 4, 0, 2, 5]);
  });

  it('handles an empty batch', () => {
    const index = buildTokenIndex(new Uint32Array(0));
    expect(index.uniqueIds.length).toBe(0);
    expect(Array.from(index.offsets)).toEqual([0]);
  });
});

describe('embedding reference', () => {
  it('backward matches a central finite difference of Σ dy·forward(W)', () => {
    const [V, C] = [4, 3];
    const tokens = Uint32Array.from([1, 3, 1, 0, 1]);
    const dy = Float64Array.from(seededUniform(tokens.length * C, 1));
    const w = Float64Array.from(seededUniform(V * C, 2));
    const loss = (wv: Float64Array) => dot(dy, embeddingForwardRef(tokens, wv, V, C));
    const numeric = centralDifference(loss, w);
    const analytic = embeddingBackwardRef(tokens, dy, V, C);
    expect(worstMismatch(analytic, numeric, { atol: 1e-8, rtol: 1e-7 })).toBeNull();
    expect(analytic[2 * C]).toBe(0); // id 2 does not occur
  });
});

describe('embedding_forward.wgsl', () => {
  for (const [R, V, C] of SHAPES) {
    it(`R=${R} V=${V} C=${C}`, async () => {
      const tokens = seededTokens(R, V, R * 31 + C);
      const weight = seededUniform(V * C, V * 7 + C);
      const gpu = await runForward(tokens, weight, V, C);
      expect(
        worstMismatch(gpu, embeddingForwardRef(tokens, weight, V, C), FORWARD_TOLERANCE),
      ).toBeNull();
    });
  }

  it('hand-worked lookup; an id ≥ V gives a zero row', async () => {
    const weight = Float32Array.from([1, 2, 3, 4, 5, 6]); // V = 3, C = 2
    const gpu = await runForward(Uint32Array.from([2, 0, 7, 2]), weight, 3, 2);
    expect(Array.from(gpu)).toEqual([5, 6, 1, 2, 0, 0, 5, 6]);
  });

  it('split grid (tail workgroups guarded)', async () => {
    const [R, V, C] = [37, 9, 29]; // 5 workgroups of 256, at most 3 per dim → grid (3, 2)
    const tokens = seededTokens(R, V, 5);
    const weight = seededUniform(V * C, 6);
    const gpu = await runForward(tokens, weight, V, C, 3);
    expect(
      worstMismatch(gpu, embeddingForwardRef(tokens, weight, V, C), FORWARD_TOLERANCE),
    ).toBeNull();
  });
});

describe('embedding_backward.wgsl', () => {
  for (const [R, V, C] of SHAPES) {
    it(`R=${R} V=${V} C=${C}`, async () => {
      const tokens = seededTokens(R, V, R * 17 + C);
      const dx = seededUniform(R * C, R + C);
      const gpu = await runBackward(tokens, dx, V, C);
      const ref = embeddingBackwardRef(tokens, dx, V, C);
      expect(worstMismatch(gpu, ref, GRADIENT_TOLERANCE)).toBeNull();
      expect(ref.some((v) => Math.abs(v) > 1e-3)).toBe(true);
    });
  }

  it('accumulates into dW', async () => {
    const [R, V, C] = [23, 10, 19];
    const tokens = seededTokens(R, V, 3);
    const dx = seededUniform(R * C, 4);
    const init = seededUniform(V * C, 5);
    const gpu = await runBackward(tokens, dx, V, C, init);
    expect(
      worstMismatch(gpu, embeddingBackwardRef(tokens, dx, V, C, init), GRADIENT_TOLERANCE),
    ).toBeNull();
  });

  it('hand-worked scatter-add; unused rows become 0', async () => {
    // V = 3, C = 2; rows: id 2, id 0, id 2.
    const dx = Float32Array.from([1, 2, 10, 20, 100, 200]);
    const gpu = await runBackward(Uint32Array.from([2, 0, 2]), dx, 3, 2);
    expect(Array.from(gpu)).toEqual([10, 20, 0, 0, 101, 202]);
  });

  it('split grid, and the same bits on a second run', async () => {
    const [R, V, C] = [61, 40, 37]; // 27 distinct ids · 37 = 999 threads: 4 workgroups → grid (2, 2)
    const tokens = seededTokens(R, V, 8);
    const dx = seededUniform(R * C, 9);
    const first = await runBackward(tokens, dx, V, C, undefined, 3);
    expect(
      worstMismatch(first, embeddingBackwardRef(tokens, dx, V, C), GRADIENT_TOLERANCE),
    ).toBeNull();
    const second = await runBackward(tokens, dx, V, C, undefined, 3);
    expect(Array.from(second)).toEqual(Array.from(first));
  });

  it('rejects ids outside the vocabulary', async () => {
    const engine = await testEngine();
    const kernel = new EmbeddingBackwardKernel(engine.device, engine.pipelines);
    const dx = createStorageBuffer(engine.device, 8);
    const dw = createStorageBuffer(engine.device, 8);
    const index = buildTokenIndex(Uint32Array.from([0, 4]));
    const encoder = engine.device.createCommandEncoder();
    expect(() => kernel.encode(encoder, { dx, dw, index, V: 4, C: 1 })).toThrow(RangeError);
    dx.destroy();
    dw.destroy();
  });
});
