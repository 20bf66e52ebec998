// The sampling kernel's many-workgroups-per-row variant (shaders/sample_split.wgsl, then
// sample_combine.wgsl: the GPU path's choice for a long row without top-k / top-p / min-p) against
// src/ref/sampling.ts + src/ref/rng.ts: the same token for the same (seed, sequence, step), log-probs
// within f32 rounding, greedy's lowest index on ties, the repetition penalty's bitmap read and the
// chosen bit set, the output layout and split grids, a row of more parts than threads, and which
// rows take the variant. Small chunks (sampleChunk) give many parts at test-sized vocabularies;
// one case runs the default chunk on a 150k vocabulary.
import { describe, expect, it } from 'vitest';
import { readF32, readU32, uploadStorageBuffer } from '../../src/engine/buffers';
import type { KernelTuning } from '../../src/engine/pipelines';
import {
  SAMPLE_SPLIT_CHUNK,
  SampleKernel,
  sampleSplit,
  seenBitmap,
  seenWords,
  type SamplingOptions,
} from '../../src/kernels/sampling';
import { sampleRef } from '../../src/ref/sampling';
import { BARRIER_VARIANTS, seededUniform, testEngineWith, worstMismatch } from './harness';

const LOGP_TOLERANCE = { atol: 2e-5, rtol: 2e-5 };
const PLAIN: SamplingOptions = { temperature: 1, topK: 0, topP: 1, greedy: false };
const GPU_PATH = BARRIER_VARIANTS[0].tuning;
const chunked = (sampleChunk: number): KernelTuning => ({ ...GPU_PATH, sampleChunk });

async function run(
  tuning: KernelTuning,
  logits: Float32Array,
  N: number,
  V: number,
  options: SamplingOptions,
  seed: number,
  step: number,
  extra: {
    sequenceOffset?: number;
    outStride?: number;
    outOffset?: number;
    maxWorkgroupsPerDim?: number;
    seen?: Uint32Array;
  } = {},
) {
  const engine = await testEngineWith(tuning);
  const d = engine.device;
  const outLength = N * (extra.outStride ?? 1) + (extra.outOffset ?? 0);
  const logitsBuf = uploadStorageBuffer(d, logits);
  const tokens = uploadStorageBuffer(d, new Uint32Array(outLength).fill(0xdeadbeef));
  const logps = uploadStorageBuffer(d, new Float32Array(outLength).fill(123));
  const { seen: seenInit, ...layout } = extra;
  const seen = uploadStorageBuffer(d, seenInit ?? new Uint32Array(1));
  const kernel = new SampleKernel(d, engine.pipelines);
  await kernel.prepare(V);
  const before = engine.counters.snapshot().other.dispatches;
  await engine.run((enc) =>
    kernel.encode(enc, {
      logits: logitsBuf,
      tokens,
      logps,
      seen,
      N,
      V,
      options,
      seed,
      step,
      ...layout,
    }),
  );
  const dispatches = engine.counters.snapshot().other.dispatches - before;
  const out = {
    tokens: await readU32(d, tokens, outLength),
    logps: await readF32(d, logps, outLength),
    seen: await readU32(d, seen, seenInit?.length ?? 1),
    dispatches,
  };
  for (const b of [logitsBuf, tokens, logps, seen]) b.destroy();
  return out;
}

const OPTIONS: [string, SamplingOptions][] = [
  ['T=1', PLAIN],
  ['T=0.7', { ...PLAIN, temperature: 0.7 }],
  ['greedy', { ...PLAIN, greedy: true }],
  ['T=0 (greedy)', { ...PLAIN, temperature: 0 }],
];

describe('sample_split + sample_combine vs reference (same uniform → same token)', () => {
  // [N, V, chunk]: one extra token in a second part, several parts, more parts than threads.
  for (const [N, V, chunk] of [
    [3, 65, 64],
    [4, 1000, 64],
    [2, 4500, 16],
  ]) {
    for (const [name, options] of OPTIONS) {
      it(`N=${N} V=${V} chunk ${chunk} ${name}`, async () => {
        const seed = N * 31 + V;
        const logits = seededUniform(N * V, seed, -3, 3);
        expect(sampleSplit(V, options, chunked(chunk))).toBe(true);
        for (const step of [0, 7]) {
          const gpu = await run(chunked(chunk), logits, N, V, options, seed, step);
          expect(gpu.dispatches).toBe(2); // the split and the combine pass
          const ref = sampleRef(logits, N, V, options, seed, step);
          expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
          expect(worstMismatch(gpu.logps, ref.logps, LOGP_TOLERANCE)).toBeNull();
        }
      });
    }
  }

  it('a 150k vocabulary at the default chunk (37 parts a row)', async () => {
    const N = 2;
    const V = 150001;
    const logits = seededUniform(N * V, 5, -4, 4);
    expect(sampleSplit(V, PLAIN, GPU_PATH)).toBe(true);
    for (const options of [PLAIN, { ...PLAIN, greedy: true }]) {
      const gpu = await run(GPU_PATH, logits, N, V, options, 5, 3);
      const ref = sampleRef(logits, N, V, options, 5, 3);
      expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
      expect(worstMismatch(gpu.logps, ref.logps, LOGP_TOLERANCE)).toBeNull();
    }
  });

  it('greedy takes the lowest index of a tie across parts', async () => {
    const N = 2;
    const V = 300;
    const logits = seededUniform(N * V, 9, -3, -1);
    for (const n of [0, 1]) for (const v of [250, 70, 130]) logits[n * V + v] = 5; // parts 3, 1, 2
    const gpu = await run(chunked(64), logits, N, V, { ...PLAIN, greedy: true }, 1, 0);
    expect(Array.from(gpu.tokens)).toEqual([70, 70]);
  });

  it('repetition penalty: the bitmap is read and the chosen bit set, over several steps', async () => {
    const N = 3;
    const V = 700;
    const options = { ...PLAIN, temperature: 0.8, repetitionPenalty: 1.4 };
    const logits = seededUniform(N * V, 21, -2, 2);
    const history = [[1, 5, 600], [64, 65], [699]];
    const sets = history.map((h) => new Set(h));
    let bitmap = seenBitmap(history, V);
    for (const step of [0, 1, 2]) {
      const gpu = await run(chunked(64), logits, N, V, options, 4, step, { seen: bitmap });
      const ref = sampleRef(logits, N, V, options, 4, step, 0, sets); // adds each chosen token
      expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
      expect(worstMismatch(gpu.logps, ref.logps, LOGP_TOLERANCE)).toBeNull();
      const expected = seenBitmap(
        sets.map((s) => [...s]),
        V,
      );
      expect(Array.from(gpu.seen)).toEqual(Array.from(expected));
      expect(gpu.seen.length).toBe(N * seenWords(V));
      bitmap = gpu.seen;
    }
  });

  it('output stride/offset, sequence offset and a split grid (limit 5: 24 parts in a 5×5 grid)', async () => {
    const N = 6;
    const V = 200;
    const logits = seededUniform(N * V, 8, -3, 3);
    const extra = { sequenceOffset: 40, outStride: 3, outOffset: 2, maxWorkgroupsPerDim: 5 };
    const gpu = await run(chunked(64), logits, N, V, PLAIN, 9, 4, extra);
    const ref = sampleRef(logits, N, V, PLAIN, 9, 4, 40);
    for (let n = 0; n < N; n++) {
      expect(gpu.tokens[n * 3 + 2]).toBe(ref.tokens[n]);
      expect(gpu.tokens[n * 3]).toBe(0xdeadbeef);
    }
  });
});

describe('which rows take the split variant', () => {
  it('a long row on the GPU path without top-k, top-p or min-p; never on the emulation path by default', () => {
    const V = SAMPLE_SPLIT_CHUNK + 1;
    expect(sampleSplit(V, PLAIN, GPU_PATH)).toBe(true);
    expect(sampleSplit(SAMPLE_SPLIT_CHUNK, PLAIN, GPU_PATH)).toBe(false);
    expect(sampleSplit(V, { ...PLAIN, topK: 50 }, GPU_PATH)).toBe(false);
    expect(sampleSplit(V, { ...PLAIN, topK: V }, GPU_PATH)).toBe(true); // top-k ≥ V is off
    expect(sampleSplit(V, { ...PLAIN, topP: 0.9 }, GPU_PATH)).toBe(false);
    expect(sampleSplit(V, { ...PLAIN, minP: 0.1 }, GPU_PATH)).toBe(false);
    expect(sampleSplit(V, { ...PLAIN, topK: 50, greedy: true }, GPU_PATH)).toBe(true);
    expect(sampleSplit(V, PLAIN, BARRIER_VARIANTS[1].tuning)).toBe(false);
    expect(sampleSplit(V, PLAIN, { ...GPU_PATH, sampleChunk: 0 })).toBe(false);
  });
});
