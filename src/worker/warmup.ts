// The warm-up that times this device before the first step (grpo/step-estimate.ts turns it into
// a step's time), in two parts:
// - sampling: a model of the same config with seeded random weights decodes the step's B·G
//   sequences on the GPU, as a step does (prefill, then 8 tokens a submission): the first call
//   compiles the model's and the sampler's pipelines (timed: the first step pays that), then
//   calls of DECODE_TOKENS tokens give the mean time per token (prefill included);
// - the update's throughput: every matrix product of one token through the model (q, k, v, o,
//   gate, up, down per layer and the LM head), with the model's own shapes, at a block of rows.
// Zero-filled or random operands: a product's time does not depend on its values. Everything goes
// through the engine (counted) and is destroyed after; the compiled pipelines stay in the
// engine's cache, so the real model reuses them.
import type { Engine } from '../engine/engine';
import { createStorageBuffer } from '../engine/buffers';
import { MatmulKernel, type MatmulShape } from '../kernels/matmul';
import type { LlamaConfig } from '../core/model-config';
import { GpuLlama } from '../model/llama';
import { initLlamaWeights } from '../model/init';
import { Sampler } from '../model/sampler';
import type { DeviceTiming, SamplingTiming } from '../grpo/step-estimate';

/** Both parts of the warm-up, in order (sampling first: it compiles the model's pipelines). */
export async function timeDevice(
  engine: Engine,
  llama: LlamaConfig,
  settings: SamplingSettings,
): Promise<DeviceTiming> {
  const sampling = await timeSampling(engine, llama, settings);
  const blockMs = await timeModelProducts(engine, llama);
  return { sampling, blockMs, blockRows: BLOCK_ROWS };
}

/** Tokens of each timed call (prefill and first token included), and how many calls. */
export const DECODE_TOKENS = 24;
export const DECODE_ROUNDS = 2;

export interface SamplingSettings {
  rows: number;
  promptTokens: number;
  temperature: number;
  topK: number;
  topP: number;
}

/** Times decoding `rows` sequences of `promptTokens` with a random model of `llama`. */
export async function timeSampling(
  engine: Engine,
  llama: LlamaConfig,
  settings: SamplingSettings,
): Promise<SamplingTiming> {
  const t0 = performance.now();
  const model = GpuLlama.load(engine, llama, initLlamaWeights(llama, 0));
  try {
    const sampler = new Sampler(engine, model);
    const P = Math.max(1, Math.min(settings.promptTokens, llama.maxPositions - DECODE_TOKENS));
    const prompts = Array.from({ length: settings.rows }, (_, r) =>
      Array.from({ length: P }, (_, i) => (r * 31 + i * 7 + 3) % llama.vocabSize),
    );
    // No EOS: every sequence runs its full length.
    const generate = (tokens: number) =>
      sampler.generate(prompts, {
        maxNewTokens: tokens,
        temperature: settings.temperature,
        topK: settings.topK,
        topP: settings.topP,
        seed: 1,
        stream: 0,
        eosTokenIds: [],
        // As a step decodes: 8 tokens a submission, one wait each (the sampler's default).
        checkEvery: 8,
      });
    await generate(2);
    const compileMs = performance.now() - t0;
    // The mean time per token of whole calls (prefill included): a difference of two call
    // lengths came out 0 to 4× apart on a loaded machine, the whole call's time does not.
    let total = 0;
    for (let r = 0; r < DECODE_ROUNDS; r++) {
      const t = performance.now();
      await generate(DECODE_TOKENS);
      total += performance.now() - t;
    }
    const tokenMs = total / (DECODE_ROUNDS * DECODE_TOKENS);
    return { compileMs, tokenMs, tokens: DECODE_TOKENS, rows: settings.rows, promptTokens: P };
  } finally {
    model.destroy();
  }
}

/** Rows of the throughput block: large enough to fill the device, small enough to stay tiny. */
export const BLOCK_ROWS = 256;
/** Timed repetitions of each chain after one untimed run (pipeline compilation); min is kept. */
const REPEATS = 3;

/** The (K, N) of each product of one token through the model (weights stored (N, K)). */
export function modelProducts(llama: LlamaConfig): [number, number][] {
  const C = llama.hiddenSize;
  const q = llama.numHeads * llama.headDim;
  const kv = llama.numKvHeads * llama.headDim;
  const I = llama.intermediateSize;
  const layer: [number, number][] = [
    [C, q],
    [C, kv],
    [C, kv],
    [q, C],
    [C, I],
    [C, I],
    [I, C],
  ];
  return [...Array.from({ length: llama.numLayers }, () => layer).flat(), [C, llama.vocabSize]];
}

/** Times the model's matrix products at BLOCK_ROWS rows (ms, the fastest of REPEATS). */
export async function timeModelProducts(engine: Engine, llama: LlamaConfig): Promise<number> {
  const products = modelProducts(llama);
  const maxK = Math.max(...products.map(([k]) => k));
  const maxN = Math.max(...products.map(([, n]) => n));
  const maxRows = BLOCK_ROWS;
  const device = engine.device;
  const kernel = new MatmulKernel(device, engine.pipelines);
  // One weight per distinct shape: time does not depend on which copy is read.
  const weights = new Map<string, GPUBuffer>();
  const buffers: GPUBuffer[] = [];
  const make = (bytes: number, label: string) => {
    const b = createStorageBuffer(device, bytes, label);
    buffers.push(b);
    return b;
  };
  const x = make(maxRows * maxK * 4, 'warmup.x'); // (rows, K)
  const y = make(maxRows * maxN * 4, 'warmup.y'); // (rows, N)
  for (const [K, N] of products)
    if (!weights.has(`${K}x${N}`)) weights.set(`${K}x${N}`, make(K * N * 4, 'warmup.w')); // (N, K)
  try {
    const chain = async (rows: number) => {
      const shapes: MatmulShape[] = products.map(([K, N]) => ({ M: rows, N, K, transB: true }));
      for (const s of shapes) await kernel.prepare(s);
      const once = () =>
        engine.run((encoder) => {
          shapes.forEach((s, i) =>
            kernel.encode(encoder, {
              ...s,
              a: x,
              b: weights.get(`${products[i][0]}x${products[i][1]}`)!,
              c: y,
            }),
          );
        }, 'warmup');
      await once();
      let best = Infinity;
      for (let r = 0; r < REPEATS; r++) {
        const t0 = performance.now();
        await once();
        best = Math.min(best, performance.now() - t0);
      }
      return best;
    };
    return await chain(BLOCK_ROWS);
  } finally {
    for (const b of buffers) b.destroy();
  }
}
