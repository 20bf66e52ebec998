// The LM head over row chunks (src/model/head-chunks.ts, Config.logitsMemoryMiB): a GRPO update
// and a supervised step with the head's logits made a few completion tokens at a time give the
// bits of the unchunked path (one chunk of every row): per-pass log-probs and entropies, reference
// log-probs, the loss and every logged metric, every parameter gradient and the updated weights.
// Tolerance: none (bit-identical). Each row's logits, log-prob, entropy and dLogits come from the
// same kernels on the same row; the head's dHeadInput rows are per row too; the head weight's
// gradient is a sum over rows that continues across chunk calls (MatmulKernel continueSum), which
// the matmul adds in the same order whatever the split. And the engine's byte count shows the
// (rows × V) buffers gone: no buffer that large is created, and the peak drops by their size.
import { describe, expect, it } from 'vitest';
import { parseHfConfig, type LlamaConfig } from '../../src/core/model-config';
import { PolicyObjective, type PolicyUpdate } from '../../src/grpo/policy-objective';
import { packBatch } from '../../src/model/batch';
import {
  DEFAULT_LOGITS_MEMORY_BYTES,
  headChunkBytes,
  headChunkRows,
  headChunks,
} from '../../src/model/head-chunks';
import { initLlamaWeights } from '../../src/model/init';
import { GpuLlama } from '../../src/model/llama';
import { GpuAdamW } from '../../src/optim/adamw';
import { config } from '../support/tiny-trainer';
import { seededUniform, testEngine } from './harness';

describe('head chunk sizes', () => {
  it('bytes per row are the logits and dLogits rows, f32', () => {
    expect(headChunkBytes(1, 1000)).toBe(8000);
    expect(headChunkBytes(7, 151_936)).toBe(7 * 151_936 * 8);
  });

  it('rows per chunk: floor(budget / bytes per row), whole fours, within the rows and a binding', () => {
    const V = 1000;
    expect(headChunkRows(8000 * 64, V, 1000)).toBe(64);
    expect(headChunkRows(8000 * 63 + 7999, V, 1000)).toBe(60); // 63 fit → a multiple of 4
    expect(headChunkRows(8000 * 3, V, 1000)).toBe(3); // fewer than 4: as many as fit
    expect(headChunkRows(100, V, 1000)).toBe(1); // not even one row fits: one at a time
    expect(headChunkRows(8000 * 64, V, 10)).toBe(10); // never more than there are
    expect(headChunkRows(8000 * 64, V, 1000, 4000 * 20)).toBe(20); // one (k, V) ≤ the binding
    // The default budget, Qwen2.5's vocabulary: 220 rows → 220 (a multiple of 4).
    expect(headChunkRows(DEFAULT_LOGITS_MEMORY_BYTES, 151_936, 4096)).toBe(220);
  });

  it('chunks cover the rows in order, the last one shorter', () => {
    expect(headChunks(15, 4)).toEqual([
      { start: 0, rows: 4 },
      { start: 4, rows: 4 },
      { start: 8, rows: 4 },
      { start: 12, rows: 3 },
    ]);
    expect(headChunks(15, 15)).toEqual([{ start: 0, rows: 15 }]);
    expect(headChunks(0, 4)).toEqual([]);
    expect(() => headChunks(3, 0)).toThrow(RangeError);
  });
});

// Hidden size 8, vocabulary 300: a micro-batch's (rows × V) logits (15 × 300 floats) are larger
// than any other buffer of the step (the (V, C) tables are 300 × 8), so the spy below can tell.
const base = {
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  vocab_size: 300,
  max_position_embeddings: 64,
  rms_norm_eps: 1e-5,
};
interface Case {
  label: string;
  config: LlamaConfig;
  maxBindingBytes?: number;
  /** logitsMemoryBytes of the chunked runs, and the rows per chunk each gives (of 15). */
  budgets: number[];
  chunkRows: number[];
}
const cases: Case[] = [
  {
    label: 'Llama, untied head; chunks of 4 rows and of 1',
    config: parseHfConfig({
      ...base,
      architectures: ['LlamaForCausalLM'],
      num_attention_heads: 2,
      num_key_value_heads: 1,
    }),
    budgets: [headChunkBytes(7, 300), 1], // 7 rows' worth → 4 (whole fours); 1 byte → 1 row
    chunkRows: [4, 1],
  },
  {
    // The row chunks cross the vocabulary chunks of a split table (ldA / offsets of both).
    label: 'Qwen2, tied embeddings split in vocabulary chunks; chunks of 4 rows',
    config: parseHfConfig({
      ...base,
      architectures: ['Qwen2ForCausalLM'],
      num_attention_heads: 2,
      num_key_value_heads: 2,
      tie_word_embeddings: true,
    }),
    maxBindingBytes: 2048, // (300, 8) table → row chunks of 64
    budgets: [headChunkBytes(4, 300)],
    chunkRows: [4],
  },
];

// Six sequences, two micro-batches of 3 × L = 5 → 15 head rows each; sequence 4 fully masked.
const prompts = [[3, 299, 150], [96], [200, 95, 251, 288], [7, 8], [120], [64, 65, 66]];
const completions = [[290, 10, 144], [49, 97, 145, 193, 2], [241], [5, 6, 7, 8], [11, 12], [1]];
const batch = packBatch(prompts, completions, {
  padId: 0,
  maskedOut: completions.map((_, i) => i === 4),
});
const ROWS = (batch.N / 2) * batch.L; // head rows of one micro-batch
const advantages = Float64Array.from([1.1, -0.3, 0.2, -0.9, 0.7, -0.6]);
const noise = seededUniform(batch.N * batch.L, 5, -0.4, 0.4);
const sampling = completions.map((c, i) =>
  Float32Array.from(c, (_, t) => -Math.log(300) + noise[i * batch.L + t]),
);
// Everything that reaches the head's backward: μ = 2 (old log-probs), GA 2, β > 0 (a reference
// model, chunked too), the entropy bonus (its gradient in the gather backward), temperature.
const cfg = config({
  perStepPrompts: 3,
  numGenerations: 2,
  numIterations: 2,
  gradientAccumulationSteps: 2,
  beta: 0.04,
  epsilon: 0.1,
  lossType: 'grpo',
  entropyCoef: 0.05,
  temperature: 0.8,
  maxGradNorm: 1,
});

/** Index of the first element that differs in bits (Object.is), or −1. */
const firstDifference = (a: Float32Array, b: Float32Array) =>
  a.length !== b.length ? -2 : a.findIndex((v, i) => !Object.is(v, b[i]));

interface Outcome {
  update: PolicyUpdate;
  grads: Map<string, Float32Array>;
  params: Map<string, Float32Array>;
  sft: { loss: number; gradNorm: number };
  sftGrads: Map<string, Float32Array>;
  /** Peak bytes above those live before the update, during the update. */
  peak: number;
  /** Sizes of the storage buffers created during the update. */
  created: number[];
}

describe.each(cases)(
  'chunked head = unchunked: $label',
  ({ config: model, maxBindingBytes, budgets, chunkRows }) => {
    const weights = initLlamaWeights(model, 11, 0.5);
    const V = model.vocabSize;

    async function run(logitsMemoryBytes: number | undefined): Promise<Outcome> {
      const engine = await testEngine();
      const options = { maxBindingBytes, logitsMemoryBytes };
      const policy = GpuLlama.load(engine, model, weights, options);
      const reference = GpuLlama.load(engine, model, weights, options);
      expect(policy.isSplit).toBe(maxBindingBytes !== undefined);
      const optimizer = new GpuAdamW(engine, policy, {
        beta1: cfg.adamBeta1,
        beta2: cfg.adamBeta2,
        eps: cfg.adamEpsilon,
        weightDecay: cfg.weightDecay,
        maxGradNorm: cfg.maxGradNorm,
      });
      const objective = new PolicyObjective(engine, policy, reference, optimizer);
      const { device, memory } = engine;
      const created: number[] = [];
      const create = device.createBuffer;
      // A spy on the real allocation (the engine's byte count wraps the same function).
      device.createBuffer = (descriptor: GPUBufferDescriptor) => {
        if (descriptor.usage & GPUBufferUsage.STORAGE) created.push(descriptor.size);
        return create.call(device, descriptor);
      };
      const live = memory.liveBytes;
      memory.resetPeak();
      let update: PolicyUpdate;
      try {
        update = await objective.update(cfg, batch, advantages, sampling, 3e-2);
      } finally {
        device.createBuffer = create;
      }
      const peak = memory.peakBytes - live;
      const grads = await policy.readGradients();
      const params = await policy.readParameters();
      const sft = await objective.supervised(batch, 3e-2);
      const sftGrads = await policy.readGradients();
      optimizer.destroy();
      policy.destroy();
      reference.destroy();
      return { update, grads, params, sft, sftGrads, peak, created };
    }

    it('log-probs, entropies, loss, metrics, every gradient and weight are bit-identical', async () => {
      const whole = await run(undefined);
      expect(whole.update.skipped).toBeNull();
      // 15 rows per micro-batch: chunks 4 + 4 + 4 + 3 (the last one shorter), or 15 × 1.
      expect(budgets.map((b) => headChunkRows(b, V, ROWS))).toEqual(chunkRows);
      for (const budget of budgets) {
        const k = headChunkRows(budget, V, ROWS);
        const what = `${k} rows per chunk`;
        const chunked = await run(budget);
        const [w, c] = [whole.update, chunked.update];
        expect(c.skipped, what).toBeNull();
        expect(c.metrics, what).toEqual(w.metrics);
        expect(c.passes.map((p) => [p.loss, p.policyLoss, p.gradNorm])).toEqual(
          w.passes.map((p) => [p.loss, p.policyLoss, p.gradNorm]),
        );
        w.passes.forEach((p, i) => {
          expect(firstDifference(c.passes[i].logp, p.logp), `${what}: pass ${i} logp`).toBe(-1);
          expect(firstDifference(c.passes[i].entropy, p.entropy), `pass ${i} entropy`).toBe(-1);
        });
        expect(firstDifference(c.refLogp!, w.refLogp!), `${what}: reference logp`).toBe(-1);
        expect([...chunked.grads.keys()].sort()).toEqual([...whole.grads.keys()].sort());
        for (const [name, g] of whole.grads) {
          expect(firstDifference(chunked.grads.get(name)!, g), `${what}: ∂${name}`).toBe(-1);
          expect(firstDifference(chunked.params.get(name)!, whole.params.get(name)!), name).toBe(
            -1,
          );
        }
        expect(chunked.sft, `${what}: supervised step`).toEqual(whole.sft);
        for (const [name, g] of whole.sftGrads)
          expect(firstDifference(chunked.sftGrads.get(name)!, g), `${what}: sft ∂${name}`).toBe(-1);

        // Memory, as the engine counts it: the unchunked step makes (rows, V) logits and dLogits
        // (policy) and (rows, V) logits (reference); the chunked one never makes a buffer that
        // large. Its peak is lower by exactly those less their (k, V) chunks, less what chunking
        // adds: a (k, C) copy of the head-input rows per model and six (k) per-token row buffers
        // (targets, logp, entropy, lse, gradLogp, gradEntropy).
        const rowsV = ROWS * V * 4;
        expect(whole.created.filter((size) => size === rowsV).length).toBe(3);
        expect(Math.max(...chunked.created), what).toBeLessThan(rowsV);
        expect(chunked.created.filter((size) => size === k * V * 4).length, what).toBe(3);
        const headBuffers = headChunkBytes(ROWS, V) - headChunkBytes(k, V) + (ROWS - k) * V * 4;
        const chunkExtras = 2 * k * model.hiddenSize * 4 + 6 * k * 4;
        expect(whole.peak - chunked.peak, what).toBe(headBuffers - chunkExtras);
      }
    }, 600_000);
  },
);
