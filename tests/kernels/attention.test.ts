// The attention kernels (forward, backward dq/dkv, kv_cache_write) against src/ref/attention.ts on
// a shape sweep (T = 1, primes, rows past one workgroup, GQA with Hkv = 1, Hkv < H and Hkv = H,
// left padding, D up to 128), the reference backward against central finite differences,
// decoding one query at a time from a KV cache against the full-sequence forward, and the
// barrier-free training kernels against the cooperative ones bit for bit.
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer, createStorageBuffer } from '../../src/engine/buffers';
import {
  ATTENTION_MAX_HEAD_DIM,
  AttentionBackwardKernel,
  AttentionForwardKernel,
  KvCacheWriteKernel,
} from '../../src/kernels/attention';
import {
  attentionBackwardRef,
  attentionForwardRef,
  kvCacheWriteRef,
  type AttentionRefShape,
} from '../../src/ref/attention';
import {
  BARRIER_VARIANTS,
  seededUniform,
  testEngineWith,
  worstMismatch,
  type Tolerance,
} from './harness';
import type { KernelTuning } from '../../src/engine/pipelines';

// f32 dot products of length D and an online (tile-by-tile rescaled) softmax against an f64 naive
// softmax: errors are a few ulps of the largest terms; lse and o are O(1).
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-5 };
// Gradients sum T·(H/Hkv) terms of P·(dP − Δ) products where Δ and dP nearly cancel; P comes from
// the f32 lse rather than a fresh softmax.
const GRADIENT_TOLERANCE: Tolerance = { atol: 5e-6, rtol: 5e-5 };
// Decoding visits the same keys in the same tiles as the full forward; only the workgroup's row
// set differs, so the two agree to rounding (in practice bit for bit).
const DECODE_TOLERANCE: Tolerance = { atol: 1e-7, rtol: 1e-6 };
// With scores up to ~100 (the rising case) one f32 rounding of a score is ~1e-5 absolute, which
// moves each softmax weight by ~1e-5 relative: the error bound scales with max|score|, and for
// dq also with |k| (up to ~37 there), since dq = scale·Σ dS·k.
const LARGE_SCORE_FORWARD_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 1e-4 };
const LARGE_SCORE_GRADIENT_TOLERANCE: Tolerance = { atol: 2e-4, rtol: 1e-3 };
// Reference backward (f64) against central differences with step FD_STEP: truncation ~ step².
const FD_STEP = 1e-5;
const FD_TOLERANCE: Tolerance = { atol: 1e-8, rtol: 1e-6 };

interface Case {
  N: number;
  T: number;
  H: number;
  Hkv: number;
  D: number;
  keyStart: number[];
  /**
   * Scores grow with the key column up to ~100: each tile raises the running max, so the online
   * rescaling is exercised, and exp without max subtraction would overflow f32.
   */
  rising?: boolean;
}

const CASES: Case[] = [
  { N: 1, T: 1, H: 1, Hkv: 1, D: 8, keyStart: [0] },
  { N: 2, T: 7, H: 4, Hkv: 2, D: 8, keyStart: [0, 3] }, // GQA 2:1, padding
  { N: 3, T: 13, H: 4, Hkv: 1, D: 16, keyStart: [0, 5, 12] }, // multi-query, one valid column
  { N: 2, T: 13, H: 4, Hkv: 4, D: 16, keyStart: [2, 0] }, // plain multi-head
  { N: 2, T: 37, H: 2, Hkv: 2, D: 64, keyStart: [0, 7] }, // rows past one workgroup and tile
  { N: 2, T: 67, H: 4, Hkv: 2, D: 64, keyStart: [0, 10] }, // larger
  { N: 1, T: 19, H: 2, Hkv: 1, D: 128, keyStart: [1] }, // largest head dim, smallest tiles
  { N: 2, T: 41, H: 2, Hkv: 1, D: 16, keyStart: [0, 5], rising: true }, // max grows tile by tile
  { N: 1, T: 6, H: 2, Hkv: 2, D: 5, keyStart: [1] }, // D not a multiple of 4
];

const caseName = (c: Case) =>
  `N=${c.N} T=${c.T} H=${c.H} Hkv=${c.Hkv} D=${c.D} keyStart=[${c.keyStart}]${c.rising ? ' rising scores' : ''}`;

function inputs(c: Case, seed: number) {
  const { N, T, H, Hkv, D } = c;
  if (c.rising) {
    const k = seededUniform(N * T * Hkv * D, seed + 1, 0.5, 1.5);
    for (let idx = 0; idx < k.length; idx++) {
      const t = Math.floor(idx / (Hkv * D)) % T;
      k[idx] *= (25 * (t + 1)) / T;
    }
    return {
      q: seededUniform(N * T * H * D, seed, 0.5, 1.5), // (N, T, H, D)
      k, // (N, T, Hkv, D)
      v: seededUniform(N * T * Hkv * D, seed + 2), // (N, T, Hkv, D)
      dO: seededUniform(N * T * H * D, seed + 3), // (N, T, H, D)
      keyStart: Uint32Array.from(c.keyStart), // (N)
    };
  }
  return {
    // Wider q than k so that softmax rows are peaked, not flat: exercises the running max.
    q: seededUniform(N * T * H * D, seed, -4, 4), // (N, T, H, D)
    k: seededUniform(N * T * Hkv * D, seed + 1), // (N, T, Hkv, D)
    v: seededUniform(N * T * Hkv * D, seed + 2), // (N, T, Hkv, D)
    dO: seededUniform(N * T * H * D, seed + 3), // (N, T, H, D)
    keyStart: Uint32Array.from(c.keyStart), // (N)
  };
}

function expectClose(name: string, gpu: Float32Array, ref: Float64Array, tol: Tolerance) {
  const worst = worstMismatch(gpu, ref, tol);
  expect(worst, `${name}: ${JSON.stringify(worst)}`).toBeNull();
}

/** Every element of rows [row·width, (row+1)·width) for which `pick(row)` holds is exactly 0. */
function expectZeroRows(
  name: string,
  data: Float32Array,
  width: number,
  pick: (row: number) => boolean,
) {
  for (let row = 0; row < data.length / width; row++) {
    if (!pick(row)) continue;
    for (let x = 0; x < width; x++) {
      expect(data[row * width + x], `${name} row ${row}`).toBe(0);
    }
  }
}

async function runTraining(c: Case, seed: number, tuning: KernelTuning) {
  const engine = await testEngineWith(tuning);
  const { device } = engine;
  const { N, T, H, Hkv, D } = c;
  const x = inputs(c, seed);
  const buf = {
    q: uploadStorageBuffer(device, x.q),
    k: uploadStorageBuffer(device, x.k),
    v: uploadStorageBuffer(device, x.v),
    dO: uploadStorageBuffer(device, x.dO),
    keyStart: uploadStorageBuffer(device, x.keyStart),
    o: createStorageBuffer(device, N * T * H * D * 4), // (N, T, H, D)
    lse: createStorageBuffer(device, N * H * T * 4), // (N, H, T)
    dq: createStorageBuffer(device, N * T * H * D * 4), // (N, T, H, D)
    dk: createStorageBuffer(device, N * T * Hkv * D * 4), // (N, T, Hkv, D)
    dv: createStorageBuffer(device, N * T * Hkv * D * 4), // (N, T, Hkv, D)
  };
  const forward = new AttentionForwardKernel(device, engine.pipelines);
  const backward = new AttentionBackwardKernel(device, engine.pipelines);
  await engine.run(async (enc) => {
    forward.encode(enc, { ...buf, N, Tq: T, H, Hkv, D });
    backward.encode(enc, { ...buf, N, T, H, Hkv, D });
  });
  const gpu = {
    o: await readF32(device, buf.o, N * T * H * D),
    lse: await readF32(device, buf.lse, N * H * T),
    dq: await readF32(device, buf.dq, N * T * H * D),
    dk: await readF32(device, buf.dk, N * T * Hkv * D),
    dv: await readF32(device, buf.dv, N * T * Hkv * D),
  };
  backward.destroy();
  for (const b of Object.values(buf)) b.destroy();
  return { x, gpu };
}

for (const { name, tuning } of BARRIER_VARIANTS) {
  describe(`attention_forward.wgsl + attention_backward_{dq,dkv}.wgsl (${name})`, () => {
    CASES.forEach((c, index) => {
      it(caseName(c), async () => {
        const { N, T, H, Hkv, D, keyStart } = c;
        const { x, gpu } = await runTraining(c, 1000 + 17 * index, tuning);
        const fwd = attentionForwardRef(x.q, x.k, x.v, x.keyStart, { N, Tq: T, H, Hkv, D });
        const bwd = attentionBackwardRef(x.dO, x.q, x.k, x.v, x.keyStart, { N, T, H, Hkv, D });
        const fwdTol = c.rising ? LARGE_SCORE_FORWARD_TOLERANCE : FORWARD_TOLERANCE;
        const gradTol = c.rising ? LARGE_SCORE_GRADIENT_TOLERANCE : GRADIENT_TOLERANCE;
        expectClose('o', gpu.o, fwd.o, fwdTol);
        expectClose('lse', gpu.lse, fwd.lse, fwdTol);
        expectClose('dq', gpu.dq, bwd.dq, gradTol);
        expectClose('dk', gpu.dk, bwd.dk, gradTol);
        expectClose('dv', gpu.dv, bwd.dv, gradTol);
        // The references are not trivially zero, so a kernel writing zeros fails. (With a single
        // visible key per row, T = 1, softmax is constant and dq = dk = 0 exactly.)
        const refs = T > 1 ? [fwd.o, bwd.dq, bwd.dk, bwd.dv] : [fwd.o, bwd.dv];
        for (const ref of refs) expect(ref.some((v) => Math.abs(v) > 1e-2)).toBe(true);
        // Pad rows (columns before keyStart) are exactly zero: o, dq per (n, t, h); dk, dv per (n, t, g).
        const isPad = (row: number, heads: number) =>
          row % (T * heads) < keyStart[Math.floor(row / (T * heads))] * heads;
        expectZeroRows('o', gpu.o, D, (row) => isPad(row, H));
        expectZeroRows('dq', gpu.dq, D, (row) => isPad(row, H));
        expectZeroRows('dk', gpu.dk, D, (row) => isPad(row, Hkv));
        expectZeroRows('dv', gpu.dv, D, (row) => isPad(row, Hkv));
        expectZeroRows('lse', gpu.lse, 1, (row) => row % T < keyStart[Math.floor(row / (H * T))]);
      });
    });

    it('backward is deterministic (same bits twice, GQA group summed in a fixed order)', async () => {
      const c: Case = { N: 2, T: 37, H: 4, Hkv: 1, D: 16, keyStart: [0, 4] };
      const first = await runTraining(c, 5, tuning);
      const second = await runTraining(c, 5, tuning);
      for (const key of ['o', 'lse', 'dq', 'dk', 'dv'] as const) {
        expect(Array.from(second.gpu[key])).toEqual(Array.from(first.gpu[key]));
      }
    });

    it('forward over a partly filled cache: Tq = 3 at qOffset = 5, S = 8 < S_cap = 11', async () => {
      const engine = await testEngineWith(tuning);
      const { device } = engine;
      const shape: Required<Omit<AttentionRefShape, 'scale'>> = {
        N: 2,
        Tq: 3,
        H: 4,
        Hkv: 2,
        D: 16,
        qOffset: 5,
        S: 8,
        sCap: 11,
      };
      const { N, Tq, H, Hkv, D, sCap, S } = shape;
      // Sequence 1 starts at column 6, so its first query (column 5) is a pad row.
      const keyStart = Uint32Array.from([0, 6]);
      const q = seededUniform(N * Tq * H * D, 21, -4, 4); // (N, Tq, H, D)
      const k = seededUniform(N * sCap * Hkv * D, 22); // (N, S_cap, Hkv, D)
      const v = seededUniform(N * sCap * Hkv * D, 23); // (N, S_cap, Hkv, D)
      // Columns ≥ S are not filled yet: NaN there poisons the output if the kernel reads them.
      for (const cache of [k, v]) {
        for (let n = 0; n < N; n++)
          cache.fill(NaN, (n * sCap + S) * Hkv * D, (n + 1) * sCap * Hkv * D);
      }
      const buf = {
        q: uploadStorageBuffer(device, q),
        k: uploadStorageBuffer(device, k),
        v: uploadStorageBuffer(device, v),
        keyStart: uploadStorageBuffer(device, keyStart),
        o: createStorageBuffer(device, N * Tq * H * D * 4), // (N, Tq, H, D)
        lse: createStorageBuffer(device, N * H * Tq * 4), // (N, H, Tq)
      };
      const forward = new AttentionForwardKernel(device, engine.pipelines);
      await engine.run((enc) => forward.encode(enc, { ...buf, ...shape }));
      const o = await readF32(device, buf.o, N * Tq * H * D);
      const lse = await readF32(device, buf.lse, N * H * Tq);
      const ref = attentionForwardRef(q, k, v, keyStart, shape);
      expectClose('o', o, ref.o, FORWARD_TOLERANCE);
      expectClose('lse', lse, ref.lse, FORWARD_TOLERANCE);
      expectZeroRows('o', o, D, (row) => row >= Tq * H && row < (Tq + 1) * H);
      for (const b of Object.values(buf)) b.destroy();
    });

    it(`refuses D > ${ATTENTION_MAX_HEAD_DIM} and H not a multiple of Hkv`, async () => {
      const engine = await testEngineWith(tuning);
      const { device } = engine;
      const b = createStorageBuffer(device, 4);
      const forward = new AttentionForwardKernel(device, engine.pipelines);
      const backward = new AttentionBackwardKernel(device, engine.pipelines);
      const fwdArgs = { q: b, k: b, v: b, keyStart: b, o: b, lse: b, N: 1, Tq: 1 };
      const enc = device.createCommandEncoder();
      expect(() =>
        forward.encode(enc, { ...fwdArgs, H: 1, Hkv: 1, D: ATTENTION_MAX_HEAD_DIM + 1 }),
      ).toThrow(/ATTENTION_MAX_HEAD_DIM/);
      expect(() => forward.encode(enc, { ...fwdArgs, H: 3, Hkv: 2, D: 8 })).toThrow(
        /multiple of Hkv/,
      );
      expect(() =>
        backward.encode(enc, {
          ...{ dO: b, q: b, k: b, v: b, o: b, lse: b, keyStart: b, dq: b, dk: b, dv: b },
          ...{ N: 1, T: 1, H: 2, Hkv: 1, D: 256 },
        }),
      ).toThrow(/ATTENTION_MAX_HEAD_DIM/);
      b.destroy();
    });
  });
}

describe('attention training kernels: barrier-free (main_direct) vs cooperative (main)', () => {
  // The two entry points walk the same tiles with the same per-tile arithmetic, so the Node engine
  // on SwiftShader (barrier-free) and a browser on a real GPU (cooperative) train the same bits.
  const [cooperative, barrierFree] = BARRIER_VARIANTS;
  const cases: Case[] = [
    { N: 2, T: 37, H: 4, Hkv: 2, D: 16, keyStart: [0, 11] }, // GQA, tiles cut by keyStart
    { N: 3, T: 70, H: 5, Hkv: 5, D: 16, keyStart: [3, 0, 33] }, // keys past two workgroups
    { N: 1, T: 23, H: 2, Hkv: 1, D: 5, keyStart: [2] }, // D not a multiple of 4
  ];
  for (const c of cases) {
    it(caseName(c), async () => {
      const a = await runTraining(c, 77, cooperative.tuning);
      const b = await runTraining(c, 77, barrierFree.tuning);
      for (const key of ['o', 'lse', 'dq', 'dk', 'dv'] as const) {
        expect(
          a.gpu[key].some((v) => v !== 0),
          key,
        ).toBe(true);
        const firstDiff = a.gpu[key].findIndex((v, i) => !Object.is(v, b.gpu[key][i]));
        expect(firstDiff, `${key}: first differing element`).toBe(-1);
      }
    });
  }
});

describe('attention reference', () => {
  it('backward matches central finite differences of Σ dO∘o (f64)', () => {
    const shape = { N: 2, T: 4, H: 2, Hkv: 1, D: 3 };
    const { N, T, H, Hkv, D } = shape;
    const keyStart = [0, 1];
    const toF64 = (a: Float32Array) => Float64Array.from(a);
    const q = toF64(seededUniform(N * T * H * D, 31, -2, 2)); // (N, T, H, D)
    const k = toF64(seededUniform(N * T * Hkv * D, 32, -2, 2)); // (N, T, Hkv, D)
    const v = toF64(seededUniform(N * T * Hkv * D, 33)); // (N, T, Hkv, D)
    const dO = toF64(seededUniform(N * T * H * D, 34)); // (N, T, H, D)
    const loss = () => {
      const { o } = attentionForwardRef(q, k, v, keyStart, { N, Tq: T, H, Hkv, D });
      return o.reduce((sum, x, idx) => sum + x * dO[idx], 0);
    };
    const analytic = attentionBackwardRef(dO, q, k, v, keyStart, shape);
    for (const [name, x, grad] of [
      ['q', q, analytic.dq],
      ['k', k, analytic.dk],
      ['v', v, analytic.dv],
    ] as const) {
      const numeric = new Float64Array(x.length);
      for (let idx = 0; idx < x.length; idx++) {
        const saved = x[idx];
        x[idx] = saved + FD_STEP;
        const plus = loss();
        x[idx] = saved - FD_STEP;
        const minus = loss();
        x[idx] = saved;
        numeric[idx] = (plus - minus) / (2 * FD_STEP);
      }
      const worst = worstMismatch(grad, numeric, FD_TOLERANCE);
      expect(worst, `d${name}: ${JSON.stringify(worst)}`).toBeNull();
      expect(numeric.some((g) => Math.abs(g) > 1e-2)).toBe(true);
    }
  });
});

for (const { name, tuning } of BARRIER_VARIANTS) {
  describe(`kv_cache_write.wgsl and decoding (${name})`, () => {
    it('writes Tsrc columns at t0 and leaves the rest of the cache alone', async () => {
      const engine = await testEngineWith(tuning);
      const { device } = engine;
      const shape = { N: 3, Tsrc: 5, sCap: 11, Hkv: 2, D: 7, t0: 4 };
      const { N, Tsrc, sCap, Hkv, D } = shape;
      const src = seededUniform(N * Tsrc * Hkv * D, 41); // (N, Tsrc, Hkv, D)
      const cache = seededUniform(N * sCap * Hkv * D, 42); // (N, S_cap, Hkv, D)
      const srcBuf = uploadStorageBuffer(device, src);
      const cacheBuf = uploadStorageBuffer(device, cache);
      const kernel = new KvCacheWriteKernel(device, engine.pipelines);
      await engine.run((enc) => kernel.encode(enc, { src: srcBuf, cache: cacheBuf, ...shape }));
      const gpu = await readF32(device, cacheBuf, N * sCap * Hkv * D);
      expect(Array.from(gpu)).toEqual(Array.from(kvCacheWriteRef(src, cache, shape)));
      expect(() =>
        kernel.encode(device.createCommandEncoder(), {
          src: srcBuf,
          cache: cacheBuf,
          ...shape,
          t0: 7,
        }),
      ).toThrow(/exceed S_cap/);
      srcBuf.destroy();
      cacheBuf.destroy();
    });

    it('prefill + one-token decode steps through the cache equal the full-sequence forward', async () => {
      const engine = await testEngineWith(tuning);
      const { device } = engine;
      const c: Case = { N: 2, T: 9, H: 4, Hkv: 2, D: 16, keyStart: [0, 3] };
      const { N, T, H, Hkv, D } = c;
      const sCap = 12;
      const prefill = 4;
      const x = inputs(c, 51);
      const rowKv = Hkv * D;
      const rowQ = H * D;
      /** Columns [t0, t0 + len) of a (N, T, width) tensor, as (N, len, width). */
      const columns = (a: Float32Array, width: number, t0: number, len: number) => {
        const out = new Float32Array(N * len * width);
        for (let n = 0; n < N; n++) {
          out.set(a.subarray((n * T + t0) * width, (n * T + t0 + len) * width), n * len * width);
        }
        return out;
      };

      const keyStart = uploadStorageBuffer(device, x.keyStart);
      // Unwritten cache columns hold NaN: reading one would poison the output.
      const kCache = uploadStorageBuffer(device, new Float32Array(N * sCap * rowKv).fill(NaN));
      const vCache = uploadStorageBuffer(device, new Float32Array(N * sCap * rowKv).fill(NaN));
      const full = {
        q: uploadStorageBuffer(device, x.q), // (N, T, H, D)
        k: uploadStorageBuffer(device, x.k), // (N, T, Hkv, D)
        v: uploadStorageBuffer(device, x.v), // (N, T, Hkv, D)
        o: createStorageBuffer(device, N * T * rowQ * 4), // (N, T, H, D)
        lse: createStorageBuffer(device, N * H * T * 4), // (N, H, T)
      };
      // Step s covers columns [t0, t0 + len): the prompt first, then one token at a time.
      const steps = [{ t0: 0, len: prefill }];
      for (let t = prefill; t < T; t++) steps.push({ t0: t, len: 1 });
      const stepBuffers = steps.map(({ t0, len }) => ({
        t0,
        len,
        q: uploadStorageBuffer(device, columns(x.q, rowQ, t0, len)), // (N, len, H, D)
        k: uploadStorageBuffer(device, columns(x.k, rowKv, t0, len)), // (N, len, Hkv, D)
        v: uploadStorageBuffer(device, columns(x.v, rowKv, t0, len)), // (N, len, Hkv, D)
        o: createStorageBuffer(device, N * len * rowQ * 4), // (N, len, H, D)
        lse: createStorageBuffer(device, N * H * len * 4), // (N, H, len)
      }));

      const forward = new AttentionForwardKernel(device, engine.pipelines);
      const write = new KvCacheWriteKernel(device, engine.pipelines);
      await engine.run(async (enc) => {
        forward.encode(enc, { ...full, keyStart, N, Tq: T, H, Hkv, D });
        for (const s of stepBuffers) {
          const cacheShape = { N, Tsrc: s.len, sCap, Hkv, D, t0: s.t0 };
          write.encode(enc, { src: s.k, cache: kCache, ...cacheShape });
          write.encode(enc, { src: s.v, cache: vCache, ...cacheShape });
          forward.encode(enc, {
            q: s.q,
            k: kCache,
            v: vCache,
            keyStart,
            o: s.o,
            lse: s.lse,
            ...{ N, Tq: s.len, H, Hkv, D, qOffset: s.t0, S: s.t0 + s.len, sCap },
          });
        }
      });

      const fullO = await readF32(device, full.o, N * T * rowQ);
      const fullLse = await readF32(device, full.lse, N * H * T);
      // The full forward itself is right (so agreement below means both are right).
      const ref = attentionForwardRef(x.q, x.k, x.v, x.keyStart, { N, Tq: T, H, Hkv, D });
      expectClose('full o', fullO, ref.o, FORWARD_TOLERANCE);
      for (const s of stepBuffers) {
        const o = await readF32(device, s.o, N * s.len * rowQ);
        const lse = await readF32(device, s.lse, N * H * s.len);
        const expectedLse = new Float64Array(N * H * s.len);
        for (let nh = 0; nh < N * H; nh++) {
          for (let i = 0; i < s.len; i++) expectedLse[nh * s.len + i] = fullLse[nh * T + s.t0 + i];
        }
        expectClose(
          `o at t0=${s.t0}`,
          o,
          Float64Array.from(columns(fullO, rowQ, s.t0, s.len)),
          DECODE_TOLERANCE,
        );
        expectClose(`lse at t0=${s.t0}`, lse, expectedLse, DECODE_TOLERANCE);
      }
      // The cache now holds the k projections in columns < T and is untouched (NaN) after.
      const kFinal = await readF32(device, kCache, N * sCap * rowKv);
      for (let n = 0; n < N; n++) {
        const base = n * sCap * rowKv;
        expect(Array.from(kFinal.subarray(base, base + T * rowKv))).toEqual(
          Array.from(x.k.subarray(n * T * rowKv, (n + 1) * T * rowKv)),
        );
        expect(kFinal.subarray(base + T * rowKv, base + sCap * rowKv).every(Number.isNaN)).toBe(
          true,
        );
      }

      for (const b of [keyStart, kCache, vCache, ...Object.values(full)]) b.destroy();
      for (const s of stepBuffers) for (const b of [s.q, s.k, s.v, s.o, s.lse]) b.destroy();
    });
  });
}
