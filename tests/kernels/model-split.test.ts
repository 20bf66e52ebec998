// Tensors larger than one storage binding allows are split: with a tiny maxBindingBytes the
// embedding table and the LM head are stored as row chunks (separate buffers, gradients and AdamW
// moments), and the model still computes the same bits as the unsplit one: logits of a
// left-padded batch, every gradient, KV-cache generation, AdamW steps. Also the matmul windows the
// split head relies on (row pitch / offset of A and C, sums continued across calls) against the
// CPU reference.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { MATMUL_TILE_K, MatmulKernel, vec4Aligned } from '../../src/kernels/matmul';
import { packBatch } from '../../src/model/batch';
import { numel, parseHfConfig, type LlamaConfig } from '../../src/core/model-config';
import { initLlamaWeights } from '../../src/model/init';
import { GpuLlama, planParameterChunks } from '../../src/model/llama';
import { Sampler } from '../../src/model/sampler';
import { EXP_AVG_PREFIX, EXP_AVG_SQ_PREFIX, GpuAdamW } from '../../src/optim/adamw';
import { matmulRef } from '../../src/ref/matmul';
import { seededUniform, testEngine, worstMismatch, type Tolerance } from './harness';

// The windowed matmul sums in the same order as the dense one: only the f64 reference differs.
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-5, rtol: 1e-4 };
// With gradient clipping on, the global norm sums per-buffer partials: the split model partitions
// the table's sum of squares differently, so the clip scale (and the update) may differ in the
// last bits. One step only: after it the weights differ slightly, and a second step's gradients
// of the k_proj bias (mathematically 0, softmax is shift-invariant, so pure f32 rounding noise)
// would differ arbitrarily, which AdamW turns into ±lr steps. A wrong update is off by ~lr = 1e-2.
// Without clipping, AdamW is elementwise and two steps give identical results.
const CLIPPED_ADAMW_TOLERANCE: Tolerance = { atol: 1e-7, rtol: 1e-5 };

const base = {
  hidden_size: 32,
  intermediate_size: 40,
  num_hidden_layers: 2,
  vocab_size: 300,
  max_position_embeddings: 64,
  rms_norm_eps: 1e-5,
};
const configs: Record<string, LlamaConfig> = {
  'Llama, untied head': parseHfConfig({
    ...base,
    architectures: ['LlamaForCausalLM'],
    num_attention_heads: 4,
    num_key_value_heads: 2,
  }),
  'Qwen2, tied embeddings (one split table serves both ends)': parseHfConfig({
    ...base,
    architectures: ['Qwen2ForCausalLM'],
    num_attention_heads: 2,
    num_key_value_heads: 2,
    tie_word_embeddings: true,
  }),
};
// 6 KiB per buffer: every layer tensor fits (≤ 40·32·4 = 5 KiB), the (300, 32) tables do not and
// go in chunks of 48 rows (6144 / 128 = 48, a multiple of MATMUL_TILE_K): 6 × 48 + 12.
const LIMIT = 6144;
const CHUNK_ROWS = [48, 48, 48, 48, 48, 48, 12];

/** Token ids spread over every chunk, left-padded prompts, completions of different lengths. */
function batchFor(V: number) {
  const prompts = [[3, 299, 150, 47, 48], [96], [200, 95, 251, 288]];
  const completions = [[290, 10, 144], [49, 97, 145, 193], [241]];
  expect(
    prompts
      .flat()
      .concat(completions.flat())
      .every((t) => t < V),
  ).toBe(true);
  return packBatch(prompts, completions, { padId: 0 });
}

const same = (a: Float32Array, b: Float32Array) =>
  a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

describe('planParameterChunks', () => {
  it('splits only the (V, C) tables, in multiples of the matmul K tile', () => {
    const config = configs['Llama, untied head'];
    const chunks = planParameterChunks(config, LIMIT);
    for (const name of ['model.embed_tokens.weight', 'lm_head.weight']) {
      expect(chunks.get(name)!.map((c) => c.rows)).toEqual(CHUNK_ROWS);
      expect(chunks.get(name)!.map((c) => c.rowStart)).toEqual([0, 48, 96, 144, 192, 240, 288]);
      expect(chunks.get(name)![6].key).toBe(`${name}[288:300]`);
    }
    expect(CHUNK_ROWS.slice(0, -1).every((r) => r % MATMUL_TILE_K === 0)).toBe(true);
    expect(chunks.get('model.layers.0.mlp.up_proj.weight')).toEqual([
      { key: 'model.layers.0.mlp.up_proj.weight', rowStart: 0, rows: 40 },
    ]);
    // Big enough for everything: one chunk each, keys are the parameter names.
    const whole = planParameterChunks(config, 1 << 20);
    expect([...whole.values()].every((c) => c.length === 1 && c[0].rows > 0)).toBe(true);
  });

  it('refuses a limit below a tensor it cannot split, naming it', () => {
    expect(() => planParameterChunks(configs['Llama, untied head'], 4096)).toThrow(
      'model.layers.0.mlp.gate_proj.weight [40,32] needs 5120 bytes, more than one buffer binding ' +
        'allows (4096); only the embedding table and the LM head are split',
    );
  });
});

for (const [label, config] of Object.entries(configs)) {
  describe(`split model = unsplit model: ${label}`, () => {
    const V = config.vocabSize;
    const weights = initLlamaWeights(config, 17, 0.2);

    async function pair() {
      const engine = await testEngine();
      const whole = GpuLlama.load(engine, config, weights);
      const split = GpuLlama.load(engine, config, weights, { maxBindingBytes: LIMIT });
      await Promise.all([whole.ready, split.ready]);
      expect(whole.isSplit).toBe(false);
      expect(split.isSplit).toBe(true);
      // Every buffer within the limit; the tables really are several buffers.
      for (const spec of split.specs) expect(numel(spec.shape) * 4).toBeLessThanOrEqual(LIMIT);
      const tables = config.tieWordEmbeddings ? 1 : 2;
      expect(split.specs.length).toBe(whole.specs.length + tables * (CHUNK_ROWS.length - 1));
      expect(split.parameterCount).toBe(whole.parameterCount);
      return { engine, whole, split };
    }

    it('weights round trip, logits and every gradient are bit-identical', async () => {
      const { engine, whole, split } = await pair();
      const read = await split.readParameters();
      for (const [name, data] of weights) expect(same(read.get(name)!, data), name).toBe(true);

      const b = batchFor(V);
      const head = { start: b.P - 1, count: b.L };
      const rows = b.N * b.L;
      const dLogits = uploadStorageBuffer(engine.device, seededUniform(rows * V, 5));
      const results = [];
      for (const model of [whole, split]) {
        const batch = model.uploadBatch(b.tokens, b.keyStart, b.positions, b.N, b.T);
        let logits: GPUBuffer | null = null;
        model.allocateGradients();
        await engine.run(async (enc) => {
          model.zeroGradients(enc);
          const state = model.forward(enc, batch, head);
          logits = state.logits;
          model.backward(enc, state, dLogits);
        });
        results.push({
          logits: await readF32(engine.device, logits!, rows * V),
          grads: await model.readGradients(),
        });
      }
      const [w, s] = results;
      expect(same(s.logits, w.logits)).toBe(true);
      expect(Math.max(...w.logits.map(Math.abs))).toBeGreaterThan(0.1);
      expect([...s.grads.keys()].sort()).toEqual([...w.grads.keys()].sort());
      for (const [name, grad] of w.grads) expect(same(s.grads.get(name)!, grad), name).toBe(true);
      // The table's gradient has rows in several chunks (tokens from every chunk occur).
      const table = s.grads.get('model.embed_tokens.weight')!;
      const C = config.hiddenSize;
      for (const start of [0, 48, 96, 144, 192, 240, 288]) {
        const touched = Array.from({ length: CHUNK_ROWS[start / 48] }, (_, r) =>
          table.subarray((start + r) * C, (start + r + 1) * C).some((v) => v !== 0),
        );
        expect(touched.some(Boolean), `rows ${start}…`).toBe(true);
      }
      whole.destroy();
      split.destroy();
    });

    it('KV-cache generation: same greedy tokens and log-probs', async () => {
      const { engine, whole, split } = await pair();
      const prompts = [[3, 299, 150, 47], [96], [200, 251]];
      const options = {
        maxNewTokens: 5,
        temperature: 0.7,
        topK: 0,
        topP: 1,
        seed: 3,
        stream: 1,
        eosTokenIds: [] as number[],
      };
      for (const greedy of [true, false]) {
        const a = await new Sampler(engine, whole).generate(prompts, { ...options, greedy });
        const b = await new Sampler(engine, split).generate(prompts, { ...options, greedy });
        expect(b.completions).toEqual(a.completions);
        b.logps.forEach((lp, n) => expect(same(lp, a.logps[n])).toBe(true));
      }
      whole.destroy();
      split.destroy();
    });

    for (const maxGradNorm of [0, 0.05]) {
      it(`AdamW (clip ${maxGradNorm || 'off'}): weights and moments ${maxGradNorm ? 'within tolerance' : 'identical'}`, async () => {
        const { engine, whole, split } = await pair();
        const b = batchFor(V);
        const head = { start: b.P - 1, count: b.L };
        const rows = b.N * b.L;
        const dLogits = uploadStorageBuffer(engine.device, seededUniform(rows * V, 9));
        const hyper = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm };
        const steps = maxGradNorm > 0 ? 1 : 2;
        const out = [];
        for (const model of [whole, split]) {
          const optimizer = new GpuAdamW(engine, model, hyper);
          const batch = model.uploadBatch(b.tokens, b.keyStart, b.positions, b.N, b.T);
          const norms: number[] = [];
          for (let step = 0; step < steps; step++) {
            await engine.run(async (enc) => {
              model.zeroGradients(enc);
              const state = model.forward(enc, batch, head);
              model.backward(enc, state, dLogits);
              optimizer.encodeStep(enc, 1e-2);
            });
            const stats = await optimizer.readStats();
            expect(stats.finite).toBe(true);
            optimizer.commitStep();
            norms.push(stats.norm);
          }
          // Moments come back as whole tensors under Hugging Face names, split or not, so a
          // checkpoint saved on one device restores on another.
          const moments = await optimizer.readState();
          expect([...moments.keys()].sort()).toEqual(
            model.tensorSpecs
              .flatMap((spec) => [EXP_AVG_PREFIX + spec.name, EXP_AVG_SQ_PREFIX + spec.name])
              .sort(),
          );
          out.push({ params: await model.readParameters(), moments, norms });
          optimizer.destroy();
        }
        const [w, s] = out;
        for (let i = 0; i < steps; i++)
          expect(Math.abs(s.norms[i] / w.norms[i] - 1)).toBeLessThan(1e-6);
        if (maxGradNorm > 0) expect(w.norms[0]).toBeGreaterThan(maxGradNorm); // clipping happened
        for (const [name, p] of w.params) {
          const moved = p.some((v, i) => v !== weights.get(name)![i]);
          expect(moved, `${name} was updated`).toBe(true);
          if (maxGradNorm === 0) expect(same(s.params.get(name)!, p), name).toBe(true);
          else
            expect(worstMismatch(s.params.get(name)!, p, CLIPPED_ADAMW_TOLERANCE), name).toBeNull();
        }
        for (const [name, m] of w.moments) {
          if (maxGradNorm === 0) expect(same(s.moments.get(name)!, m), name).toBe(true);
          else
            expect(
              worstMismatch(s.moments.get(name)!, m, CLIPPED_ADAMW_TOLERANCE),
              name,
            ).toBeNull();
        }
        whole.destroy();
        split.destroy();
      });
    }
  });
}

describe('matmul windows used by the split head (vs CPU reference)', () => {
  // A window of columns [c0, c0 + w) out of a (rows, width) row-major matrix.
  const columns = (m: Float32Array, rows: number, width: number, c0: number, w: number) => {
    const out = new Float32Array(rows * w);
    for (let r = 0; r < rows; r++) out.set(m.subarray(r * width + c0, r * width + c0 + w), r * w);
    return out;
  };

  it('writes a block of columns of a wider C (ldC, offsetC), leaving the rest untouched', async () => {
    const engine = await testEngine();
    const kernel = new MatmulKernel(engine.device, engine.pipelines);
    const [M, K, width, c0, Nw] = [37, 29, 101, 48, 53];
    const a = seededUniform(M * K, 1);
    const b = seededUniform(Nw * K, 2); // (Nw, K), used transposed
    const before = seededUniform(M * width, 3);
    const [aBuf, bBuf, cBuf] = [a, b, before].map((x) => uploadStorageBuffer(engine.device, x));
    await engine.run((enc) =>
      kernel.encode(enc, {
        a: aBuf,
        b: bBuf,
        c: cBuf,
        M,
        N: Nw,
        K,
        transB: true,
        ldC: width,
        offsetC: c0,
      }),
    );
    const got = await readF32(engine.device, cBuf, M * width);
    const expected = Float32Array.from(before);
    const block = matmulRef(a, b, { M, N: Nw, K, transB: true });
    for (let r = 0; r < M; r++) expected.set(block.subarray(r * Nw, (r + 1) * Nw), r * width + c0);
    expect(worstMismatch(got, expected, FORWARD_TOLERANCE)).toBeNull();
    // Outside the block: the old values, bit for bit.
    for (let r = 0; r < M; r++) {
      expect(
        same(got.subarray(r * width, r * width + c0), before.subarray(r * width, r * width + c0)),
      ).toBe(true);
    }
  });

  // Odd sizes take matmul.wgsl; multiples of 4 take matmul_vec4.wgsl on software adapters.
  it.each([
    [23, 70, 16, 37, 19],
    [23, 72, 16, 36, 20],
  ])(
    'reads a block of columns of a wider A, plain and transposed (ldA, offsetA): rows=%i width=%i',
    async (rows, width, c0, w, n) => {
      const engine = await testEngine();
      const kernel = new MatmulKernel(engine.device, engine.pipelines);
      expect(vec4Aligned({ M: rows, N: n, K: w, ldA: width, offsetA: c0 })).toBe(width % 4 === 0);
      const wide = seededUniform(rows * width, 4); // (rows, width)
      const block = columns(wide, rows, width, c0, w); // (rows, w)
      const other = seededUniform(w * n, 5); // (w, n)
      const other2 = seededUniform(rows * n, 6); // (rows, n)
      const bufs = [wide, other, other2].map((x) => uploadStorageBuffer(engine.device, x));
      const c1 = createStorageBuffer(engine.device, rows * n * 4);
      const c2 = createStorageBuffer(engine.device, w * n * 4);
      await engine.run(async (enc) => {
        // (rows, w)·(w, n): A read with row pitch `width` from column c0.
        kernel.encode(enc, {
          a: bufs[0],
          b: bufs[1],
          c: c1,
          M: rows,
          N: n,
          K: w,
          ldA: width,
          offsetA: c0,
        });
        // (w, rows)·(rows, n): A stored (rows, w) inside the wide matrix, used transposed.
        kernel.encode(enc, {
          a: bufs[0],
          b: bufs[2],
          c: c2,
          M: w,
          N: n,
          K: rows,
          transA: true,
          ldA: width,
          offsetA: c0,
        });
      });
      const ref1 = matmulRef(block, other, { M: rows, N: n, K: w });
      const ref2 = matmulRef(block, other2, { M: w, N: n, K: rows, transA: true });
      expect(
        worstMismatch(await readF32(engine.device, c1, rows * n), ref1, FORWARD_TOLERANCE),
      ).toBeNull();
      expect(
        worstMismatch(await readF32(engine.device, c2, w * n), ref2, FORWARD_TOLERANCE),
      ).toBeNull();
    },
  );

  it.each([
    [19, 41, 3 * MATMUL_TILE_K + 7],
    [19, 44, 3 * MATMUL_TILE_K + 8],
  ])(
    'continueSum: a K split into tile-multiple calls gives the bits of one call: M=%i N=%i K=%i',
    async (M, N, K) => {
      const engine = await testEngine();
      const kernel = new MatmulKernel(engine.device, engine.pipelines);
      expect(vec4Aligned({ M, N, K })).toBe(K % 4 === 0 && N % 4 === 0);
      const a = seededUniform(M * K, 7);
      const b = seededUniform(K * N, 8);
      const [aBuf, bBuf] = [a, b].map((x) => uploadStorageBuffer(engine.device, x));
      const one = createStorageBuffer(engine.device, M * N * 4);
      const parts = createStorageBuffer(engine.device, M * N * 4);
      const cuts = [0, MATMUL_TILE_K, 3 * MATMUL_TILE_K, K];
      await engine.run(async (enc) => {
        kernel.encode(enc, { a: aBuf, b: bBuf, c: one, M, N, K });
        for (let i = 0; i + 1 < cuts.length; i++) {
          // Rows cuts[i]… of B (K, N) and columns cuts[i]… of A (M, K): offsets into both buffers.
          const k0 = cuts[i];
          const kLen = cuts[i + 1] - k0;
          const bPart = uploadStorageBuffer(engine.device, b.subarray(k0 * N, (k0 + kLen) * N));
          kernel.encode(enc, {
            a: aBuf,
            b: bPart,
            c: parts,
            M,
            N,
            K: kLen,
            ldA: K,
            offsetA: k0,
            continueSum: i > 0,
          });
        }
      });
      const whole = await readF32(engine.device, one, M * N);
      expect(same(await readF32(engine.device, parts, M * N), whole)).toBe(true);
      expect(worstMismatch(whole, matmulRef(a, b, { M, N, K }), FORWARD_TOLERANCE)).toBeNull();
      expect(() =>
        kernel.encode(engine.device.createCommandEncoder(), {
          a: aBuf,
          b: bBuf,
          c: one,
          M,
          N,
          K,
          continueSum: true,
          alpha: 0.5,
        }),
      ).toThrow('continueSum needs alpha 1');
    },
  );
});
