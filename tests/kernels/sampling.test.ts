// shaders/sample.wgsl against src/ref/sampling.ts + src/ref/rng.ts: the same token for the same
// (seed, sequence, step) on many rows and options, log-probs within tolerance, ties, greedy,
// output layout, split grids, and a frequency check against the filtered distribution; for both
// entry points (a workgroup per row with tree reductions, and one thread per row without barriers,
// which the barrier-free tuning takes for V ≤ SAMPLE_ROW_PER_THREAD_MAX_V); min-p and the repetition
// penalty (its seen-token bitmap read, and the chosen token's bit set, over several steps).
import { describe, expect, it } from 'vitest';
import { readF32, readU32, uploadStorageBuffer } from '../../src/engine/buffers';
import type { KernelTuning } from '../../src/engine/pipelines';
import {
  SAMPLE_ROW_PER_THREAD_MAX_V,
  SAMPLE_WG,
  SampleKernel,
  sampleRowPerThread,
  seenBitmap,
  seenWords,
  type SamplingOptions,
} from '../../src/kernels/sampling';
import { philox4x32, sampleUniform, uniformFromBits } from '../../src/ref/rng';
import { filteredDistributionRef, sampleRef } from '../../src/ref/sampling';
import {
  BARRIER_VARIANTS,
  seededUniform,
  testEngineWith,
  worstMismatch,
  type Tolerance,
} from './harness';

// Log-prob of the chosen token: f32 online softmax vs f64 (as in logprob.test.ts).
const LOGP_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 2e-5 };

const PLAIN: SamplingOptions = { temperature: 1, topK: 0, topP: 1, greedy: false };

async function runSample(
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
    /** The (N, ceil(V/32)) seen bitmap (a 4-byte placeholder when absent). */
    seen?: Uint32Array;
  } = {},
) {
  const engine = await testEngineWith(tuning);
  const d = engine.device;
  const outLength = N * (extra.outStride ?? 1) + (extra.outOffset ?? 0);
  const logitsBuf = uploadStorageBuffer(d, logits);
  // Pre-filled so that unwritten slots are recognisable.
  const tokens = uploadStorageBuffer(d, new Uint32Array(outLength).fill(0xdeadbeef));
  const logps = uploadStorageBuffer(d, new Float32Array(outLength).fill(123));
  const { seen: seenInit, ...layout } = extra;
  const seen = uploadStorageBuffer(d, seenInit ?? new Uint32Array(1));
  const kernel = new SampleKernel(d, engine.pipelines);
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
  const out = {
    tokens: await readU32(d, tokens, outLength),
    logps: await readF32(d, logps, outLength),
    seen: await readU32(d, seen, seenInit?.length ?? 1),
  };
  for (const b of [logitsBuf, tokens, logps, seen]) b.destroy();
  return out;
}

describe('Philox-4x32-10 (src/ref/rng.ts)', () => {
  it('matches the Random123 known-answer vectors', () => {
    const hex = (a: Uint32Array) => Array.from(a, (x) => x.toString(16).padStart(8, '0'));
    expect(hex(philox4x32([0, 0, 0, 0], [0, 0]))).toEqual([
      '6627e8d5',
      'e169c58d',
      'bc57ac4c',
      '9b00dbd8',
    ]);
    const ones = 0xffffffff;
    expect(hex(philox4x32([ones, ones, ones, ones], [ones, ones]))).toEqual([
      '408f276d',
      '41c83b0e',
      'a20bc7c6',
      '6d5451fd',
    ]);
    expect(
      hex(philox4x32([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0])),
    ).toEqual(['d16cfe09', '94fdcceb', '5001e420', '24126ea1']);
  });

  it('uniforms lie in [0, 1) and look uniform', () => {
    expect(uniformFromBits(0)).toBe(0);
    expect(uniformFromBits(0xffffffff)).toBe(1 - 2 ** -24);
    let sum = 0;
    const n = 20_000;
    for (let i = 0; i < n; i++) sum += sampleUniform(42, i, 7);
    expect(Math.abs(sum / n - 0.5)).toBeLessThan(0.01); // σ of the mean ≈ 0.002
  });
});

const SHAPES: Array<[number, number]> = [
  [1, 1],
  [3, 7],
  [17, SAMPLE_WG + 1],
  [24, 1000],
  [5, 5003],
];

const OPTIONS: Array<[string, SamplingOptions]> = [
  ['T=1', PLAIN],
  ['T=0.7', { ...PLAIN, temperature: 0.7 }],
  ['top-k 5', { ...PLAIN, topK: 5 }],
  ['top-p 0.9', { ...PLAIN, topP: 0.9 }],
  ['T=1.3 top-k 50 top-p 0.8', { temperature: 1.3, topK: 50, topP: 0.8, greedy: false }],
  ['greedy', { ...PLAIN, greedy: true }],
];

for (const { name: variant, tuning } of BARRIER_VARIANTS) {
  describe(`sample.wgsl vs reference (same uniform → same token), ${variant}`, () => {
    for (const [N, V] of SHAPES) {
      for (const [name, options] of OPTIONS) {
        it(`N=${N} V=${V} ${name}`, async () => {
          const seed = N * 1009 + V;
          const logits = seededUniform(N * V, seed, -3, 3);
          for (const step of [0, 11]) {
            const gpu = await runSample(tuning, logits, N, V, options, seed, step);
            const ref = sampleRef(logits, N, V, options, seed, step);
            expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
            expect(worstMismatch(gpu.logps, ref.logps, LOGP_TOLERANCE)).toBeNull();
          }
        });
      }
    }

    it('ties: top-k keeps a whole tie group, greedy takes the lowest index', async () => {
      const V = 12;
      // Values 2 (×3 at 4, 7, 9), 1 (×4), 0 (rest): top-2 keeps all three 2s.
      const row = new Float32Array(V);
      for (const i of [1, 2, 5, 11]) row[i] = 1;
      for (const i of [4, 7, 9]) row[i] = 2;
      const N = 64;
      const logits = new Float32Array(N * V);
      for (let n = 0; n < N; n++) logits.set(row, n * V);
      const topK = { ...PLAIN, topK: 2 };
      const gpu = await runSample(tuning, logits, N, V, topK, 3, 0);
      expect(Array.from(gpu.tokens)).toEqual(
        Array.from(sampleRef(logits, N, V, topK, 3, 0).tokens),
      );
      expect(new Set(gpu.tokens)).toEqual(new Set([4, 7, 9]));
      const greedy = await runSample(tuning, logits, N, V, { ...PLAIN, greedy: true }, 3, 0);
      expect(Array.from(greedy.tokens).every((t) => t === 4)).toBe(true);
      // logp of a 2 under the full softmax: 2 − log(3e² + 4e + 5).
      const logp = 2 - Math.log(3 * Math.E ** 2 + 4 * Math.E + 5);
      expect(greedy.logps[0]).toBeCloseTo(logp, 5);
    });

    it('temperature ≤ 0 is greedy', async () => {
      const logits = seededUniform(4 * 50, 8, -2, 2);
      const gpu = await runSample(tuning, logits, 4, 50, { ...PLAIN, temperature: 0 }, 1, 0);
      const ref = sampleRef(logits, 4, 50, { ...PLAIN, greedy: true }, 1, 0);
      expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
    });

    // Beyond SAMPLE_ROW_PER_THREAD_MAX_V both tunings take the tree: tested once.
    if (variant === 'cooperative')
      it('a 150k vocabulary with top-k and top-p', async () => {
        const N = 2;
        const V = 150_001;
        const logits = seededUniform(N * V, 19, -8, 8);
        const options = { temperature: 0.9, topK: 1000, topP: 0.95, greedy: false };
        for (const step of [0, 1, 2]) {
          const gpu = await runSample(tuning, logits, N, V, options, 5, step);
          const ref = sampleRef(logits, N, V, options, 5, step);
          expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
          expect(worstMismatch(gpu.logps, ref.logps, LOGP_TOLERANCE)).toBeNull();
        }
      });

    it('output stride/offset, sequence offset and a split grid (limit 4)', async () => {
      const N = 13;
      const V = 97;
      const logits = seededUniform(N * V, 4, -2, 2);
      const extra = { sequenceOffset: 100, outStride: 3, outOffset: 2, maxWorkgroupsPerDim: 4 };
      const gpu = await runSample(tuning, logits, N, V, PLAIN, 9, 4, extra);
      const ref = sampleRef(logits, N, V, PLAIN, 9, 4, 100);
      for (let n = 0; n < N; n++) {
        expect(gpu.tokens[n * 3 + 2]).toBe(ref.tokens[n]);
        expect(gpu.tokens[n * 3]).toBe(0xdeadbeef);
      }
    });
  });

  describe(`sample.wgsl frequencies, ${variant}`, () => {
    it('match the filtered distribution (T=0.8, top-k 6, top-p 0.9)', async () => {
      const V = 8;
      const N = 2000;
      const row = new Float32Array([1.2, 0.3, 2.0, -0.5, 1.9, 0.8, -2.0, 1.0]);
      const options = { temperature: 0.8, topK: 6, topP: 0.9, greedy: false };
      const { probs } = filteredDistributionRef(row, options);
      // The case filters something by each rule: two by top-k, more by top-p.
      expect(probs.filter((p) => p > 0).length).toBeLessThan(6);
      const logits = new Float32Array(N * V);
      for (let n = 0; n < N; n++) logits.set(row, n * V);
      const gpu = await runSample(tuning, logits, N, V, options, 2024, 0);
      const counts = new Array(V).fill(0);
      for (const t of gpu.tokens) counts[t]++;
      let chi2 = 0;
      for (let v = 0; v < V; v++) {
        if (probs[v] === 0) expect(counts[v]).toBe(0);
        else chi2 += (counts[v] - N * probs[v]) ** 2 / (N * probs[v]);
      }
      // ≤ 4 degrees of freedom: P(χ² > 18.5) < 0.001.
      expect(chi2).toBeLessThan(18.5);
    });
  });
}

describe('sample entry point choice', () => {
  it('one thread per row only for barrier-free tunings and vocabularies up to the limit', () => {
    const free = BARRIER_VARIANTS[1].tuning;
    const cooperative = BARRIER_VARIANTS[0].tuning;
    expect(sampleRowPerThread(69, free)).toBe(true);
    expect(sampleRowPerThread(SAMPLE_ROW_PER_THREAD_MAX_V, free)).toBe(true);
    expect(sampleRowPerThread(SAMPLE_ROW_PER_THREAD_MAX_V + 1, free)).toBe(false);
    expect(sampleRowPerThread(69, cooperative)).toBe(false);
  });
});

describe('one thread per row vs a workgroup per row', () => {
  it('draw the same tokens (the same chunked inverse CDF) and log-probs within f32 rounding', async () => {
    const [cooperative, free] = BARRIER_VARIANTS.map((v) => v.tuning);
    for (const V of [69, 449]) {
      const N = 64;
      const logits = seededUniform(N * V, V, -4, 4);
      for (const options of [PLAIN, { ...PLAIN, temperature: 0.7, topK: 20 }]) {
        for (const step of [0, 1, 2, 3]) {
          const tree = await runSample(cooperative, logits, N, V, options, 77, step);
          const rows = await runSample(free, logits, N, V, options, 77, step);
          expect(Array.from(rows.tokens)).toEqual(Array.from(tree.tokens));
          expect(worstMismatch(rows.logps, tree.logps, { atol: 1e-5, rtol: 1e-5 })).toBeNull();
        }
      }
    }
  });
});

// min-p (TRL min_p, transformers' MinPLogitsWarper after top-k and top-p): keep the tokens whose
// probability is at least minP times the most likely one's, i.e. exp(x − max x) ≥ minP.
const MIN_P_OPTIONS: Array<[string, SamplingOptions]> = [
  ['min-p 0.1', { ...PLAIN, minP: 0.1 }],
  ['T=0.7 min-p 0.3', { ...PLAIN, temperature: 0.7, minP: 0.3 }],
  [
    'T=1.3 top-k 50 top-p 0.9 min-p 0.85',
    { temperature: 1.3, topK: 50, topP: 0.9, greedy: false, minP: 0.85 },
  ],
];

for (const { name: variant, tuning } of BARRIER_VARIANTS) {
  describe(`sample.wgsl min-p vs reference, ${variant}`, () => {
    for (const [N, V] of [
      [3, 7],
      [17, SAMPLE_WG + 1],
      [24, 1000],
    ] as const) {
      for (const [name, options] of MIN_P_OPTIONS) {
        it(`N=${N} V=${V} ${name}`, async () => {
          const seed = N * 31 + V;
          const logits = seededUniform(N * V, seed, -3, 3);
          for (const step of [0, 5]) {
            const gpu = await runSample(tuning, logits, N, V, options, seed, step);
            const ref = sampleRef(logits, N, V, options, seed, step);
            expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
            expect(worstMismatch(gpu.logps, ref.logps, LOGP_TOLERANCE)).toBeNull();
          }
          // The filter is active: fewer tokens kept than without it.
          const row = logits.subarray(0, V);
          const kept = (o: SamplingOptions) =>
            filteredDistributionRef(row, o).probs.filter((p) => p > 0).length;
          if (V > 7) expect(kept(options)).toBeLessThan(kept({ ...options, minP: 0 }));
        });
      }
    }

    it('hand-worked: x = [0, −0.5, −3, −1.2], min-p 0.25 keeps tokens 0, 1, 3; frequencies match', async () => {
      // exp(x − max) = [1, 0.6065, 0.0498, 0.3012]: token 2 is below 0.25; the rest renormalised.
      const row = new Float32Array([0, -0.5, -3, -1.2]);
      const options = { ...PLAIN, minP: 0.25 };
      const { probs } = filteredDistributionRef(row, options);
      const z = 1 + Math.exp(-0.5) + Math.exp(-1.2);
      expect(Array.from(probs)).toEqual(
        [1 / z, Math.exp(-0.5) / z, 0, Math.exp(-1.2) / z].map((p) => expect.closeTo(p, 6)),
      );
      // minP = 1 keeps the most likely token only; 0 is off.
      expect(Array.from(filteredDistributionRef(row, { ...PLAIN, minP: 1 }).probs)).toEqual([
        1, 0, 0, 0,
      ]);
      const N = 2000;
      const V = 4;
      const logits = new Float32Array(N * V);
      for (let n = 0; n < N; n++) logits.set(row, n * V);
      const gpu = await runSample(tuning, logits, N, V, options, 99, 0);
      const counts = new Array(V).fill(0);
      for (const t of gpu.tokens) counts[t]++;
      expect(counts[2]).toBe(0);
      let chi2 = 0;
      for (const v of [0, 1, 3]) chi2 += (counts[v] - N * probs[v]) ** 2 / (N * probs[v]);
      // 2 degrees of freedom: P(χ² > 13.8) < 0.001.
      expect(chi2).toBeLessThan(13.8);
    });

    it('minP 0 draws exactly what no min-p draws', async () => {
      const logits = seededUniform(5 * 300, 3, -3, 3);
      const off = await runSample(tuning, logits, 5, 300, PLAIN, 4, 1);
      const zero = await runSample(tuning, logits, 5, 300, { ...PLAIN, minP: 0 }, 4, 1);
      expect(Array.from(zero.tokens)).toEqual(Array.from(off.tokens));
      expect(Array.from(zero.logps)).toEqual(Array.from(off.logps));
    });
  });
}

// Repetition penalty (TRL repetition_penalty, transformers' RepetitionPenaltyLogitsProcessor before
// the warpers): the logits of token ids the row has seen are divided by p (multiplied when < 0).
const PENALTY_OPTIONS: Array<[string, SamplingOptions]> = [
  ['penalty 1.3', { ...PLAIN, repetitionPenalty: 1.3 }],
  ['penalty 0.8 T=0.7 top-k 5', { ...PLAIN, temperature: 0.7, topK: 5, repetitionPenalty: 0.8 }],
  [
    'penalty 2 T=1.3 top-p 0.9 min-p 0.2',
    { temperature: 1.3, topK: 0, topP: 0.9, greedy: false, minP: 0.2, repetitionPenalty: 2 },
  ],
  ['penalty 1.5 greedy', { ...PLAIN, greedy: true, repetitionPenalty: 1.5 }],
];

/** Each row's "prompt": a seeded subset of about a third of the ids, as id lists. */
function seenIds(N: number, V: number, seed: number): number[][] {
  const u = seededUniform(N * V, seed, 0, 1);
  return Array.from({ length: N }, (_, n) =>
    Array.from({ length: V }, (_, v) => v).filter((v) => u[n * V + v] < 0.35),
  );
}

const bitmapSets = (bits: Uint32Array, N: number, V: number) =>
  Array.from({ length: N }, (_, n) => {
    const set = new Set<number>();
    for (let v = 0; v < V; v++)
      if ((bits[n * seenWords(V) + (v >>> 5)] >>> (v & 31)) & 1) set.add(v);
    return set;
  });

for (const { name: variant, tuning } of BARRIER_VARIANTS) {
  describe(`sample.wgsl repetition penalty vs reference, ${variant}`, () => {
    for (const [N, V] of [
      [1, 1],
      [3, 7],
      [5, 33],
      [17, SAMPLE_WG + 1],
      [4, 5003],
    ] as const) {
      for (const [name, options] of PENALTY_OPTIONS) {
        it(`N=${N} V=${V} ${name}, three chained steps`, async () => {
          const seed = N * 131 + V;
          const logits = seededUniform(N * V, seed, -3, 3);
          const prompts = seenIds(N, V, seed + 1);
          const refSeen = prompts.map((ids) => new Set(ids));
          let bits = seenBitmap(prompts, V);
          for (const step of [0, 1, 2]) {
            const gpu = await runSample(tuning, logits, N, V, options, seed, step, { seen: bits });
            const ref = sampleRef(logits, N, V, options, seed, step, 0, refSeen);
            expect(Array.from(gpu.tokens)).toEqual(Array.from(ref.tokens));
            expect(worstMismatch(gpu.logps, ref.logps, LOGP_TOLERANCE)).toBeNull();
            // The chosen token's bit is set (and only it): the reference added it to its set.
            expect(bitmapSets(gpu.seen, N, V)).toEqual(refSeen);
            bits = gpu.seen;
          }
          // The penalty is active: some row's kept distribution differs from the unpenalised one.
          if (V > 7) {
            const probs = (n: number, seen?: Set<number>) =>
              Array.from(
                filteredDistributionRef(logits.subarray(n * V, (n + 1) * V), options, seen).probs,
              );
            const changed = prompts.some(
              (ids, n) => probs(n, new Set(ids)).join() !== probs(n).join(),
            );
            expect(changed).toBe(true);
          }
        });
      }
    }

    it('hand-worked: z = [2, −1, 1.5, 0.5], prompt tokens {0, 1}, p = 2', async () => {
      // Penalised: 2/2 = 1, −1·2 = −2 (negative: multiplied), 1.5 and 0.5 unseen.
      const row = new Float32Array([2, -1, 1.5, 0.5]);
      const options = { ...PLAIN, repetitionPenalty: 2 };
      const prompt = new Set([0, 1]);
      const { probs } = filteredDistributionRef(row, options, prompt);
      const w = [Math.exp(1), Math.exp(-2), Math.exp(1.5), Math.exp(0.5)];
      const z = w.reduce((a, b) => a + b, 0);
      expect(Array.from(probs)).toEqual(w.map((x) => expect.closeTo(x / z, 12)));
      expect(probs[2]).toBeCloseTo(0.498851, 6);
      expect(probs[0]).toBeCloseTo(0.302568, 6);
      // Greedy: token 0 without the penalty, token 2 with it; the log-prob stays the raw softmax's.
      const N = 2000;
      const V = 4;
      const logits = new Float32Array(N * V);
      for (let n = 0; n < N; n++) logits.set(row, n * V);
      const bits = seenBitmap(
        Array.from({ length: N }, () => [0, 1]),
        V,
      );
      const greedy = await runSample(
        tuning,
        logits.subarray(0, V),
        1,
        V,
        { ...options, greedy: true },
        1,
        0,
        {
          seen: bits.subarray(0, 1),
        },
      );
      expect(greedy.tokens[0]).toBe(2);
      const rawLogp = 1.5 - Math.log(Math.exp(2) + Math.exp(-1) + Math.exp(1.5) + Math.exp(0.5));
      expect(greedy.logps[0]).toBeCloseTo(rawLogp, 5);
      expect(greedy.seen[0]).toBe(0b0111); // token 2 is now seen too
      const plain = await runSample(
        tuning,
        logits.subarray(0, V),
        1,
        V,
        { ...PLAIN, greedy: true },
        1,
        0,
      );
      expect(plain.tokens[0]).toBe(0);
      // Frequencies over many rows match the penalised distribution.
      const gpu = await runSample(tuning, logits, N, V, options, 5, 0, { seen: bits });
      const counts = new Array(V).fill(0);
      for (const t of gpu.tokens) counts[t]++;
      let chi2 = 0;
      for (let v = 0; v < V; v++) chi2 += (counts[v] - N * probs[v]) ** 2 / (N * probs[v]);
      // 3 degrees of freedom: P(χ² > 16.3) < 0.001.
      expect(chi2).toBeLessThan(16.3);
    });

    it('hand-worked greedy decode: the penalty applies once per id, not per occurrence', async () => {
      // z = [3, 2.9, 2.8, −1] every step, p = 2, empty prompt: 0, then 1 (z0 = 1.5), then 2
      // (z1 = 1.45), then 0 again (penalised values 1.5, 1.45, 1.4: a repeat is not penalised twice).
      const V = 4;
      const logits = new Float32Array([3, 2.9, 2.8, -1]);
      const options = { ...PLAIN, greedy: true, repetitionPenalty: 2 };
      let bits = seenBitmap([[]], V);
      const drawn: number[] = [];
      for (const step of [0, 1, 2, 3]) {
        const gpu = await runSample(tuning, logits, 1, V, options, 3, step, { seen: bits });
        drawn.push(gpu.tokens[0]);
        bits = gpu.seen;
      }
      expect(drawn).toEqual([0, 1, 2, 0]);
      expect(bits[0]).toBe(0b0111);
    });

    it('penalty 1 draws exactly what no penalty draws and leaves the bitmap alone', async () => {
      const N = 5;
      const V = 300;
      const logits = seededUniform(N * V, 3, -3, 3);
      const bits = seenBitmap(seenIds(N, V, 9), V);
      const off = await runSample(tuning, logits, N, V, PLAIN, 4, 1);
      const one = await runSample(tuning, logits, N, V, { ...PLAIN, repetitionPenalty: 1 }, 4, 1, {
        seen: bits,
      });
      expect(Array.from(one.tokens)).toEqual(Array.from(off.tokens));
      expect(Array.from(one.logps)).toEqual(Array.from(off.logps));
      expect(Array.from(one.seen)).toEqual(Array.from(bits));
    });
  });
}

describe('seenBitmap', () => {
  it('sets bit v % 32 of word v / 32 of each row and rejects ids outside the vocabulary', () => {
    const bits = seenBitmap([[0, 31, 32, 69], [5]], 70);
    expect(seenWords(70)).toBe(3);
    expect(Array.from(bits)).toEqual([0x80000001, 1, 1 << 5, 1 << 5, 0, 0]);
    expect(() => seenBitmap([[70]], 70)).toThrow(RangeError);
  });
});
