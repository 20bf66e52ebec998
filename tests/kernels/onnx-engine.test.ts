// The ONNX export against the WebGPU engine: the same tiny weights exported with exportOnnx and run
// in onnxruntime-web (wasm execution provider, in Node) give the logits GpuLlama.forward computes on
// Node WebGPU, on every real token of a left-padded batch (padding columns are not compared: the
// engine's rows there are unspecified, the ONNX graph's follow its mask).
import * as ort from 'onnxruntime-web';
import { beforeAll, describe, expect, it } from 'vitest';
import { readF32 } from '../../src/engine/buffers';
import { exportOnnx } from '../../src/io/onnx-export';
import { parseHfConfig, type LlamaConfig } from '../../src/model/config';
import { initLlamaWeights } from '../../src/model/init';
import { GpuLlama } from '../../src/model/llama';
import { testEngine, worstMismatch, type Tolerance } from './harness';

// Both sides compute in f32 but sum in different orders (tiled matmul and online softmax against
// onnxruntime's MLAS kernels). Measured worst difference here: 2.7e-6 on logits up to ~5.
const LOGITS_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 2e-5 };

const base = {
  hidden_size: 32,
  intermediate_size: 40,
  num_hidden_layers: 2,
  vocab_size: 67,
  max_position_embeddings: 64,
  rms_norm_eps: 1e-5,
};
const configs: Record<string, LlamaConfig> = {
  'Llama, GQA (4 heads / 2 kv-heads), untied head': parseHfConfig({
    ...base,
    architectures: ['LlamaForCausalLM'],
    num_attention_heads: 4,
    num_key_value_heads: 2,
    rope_theta: 10000,
  }),
  'Qwen2, q/k/v bias, tied embeddings, MHA': parseHfConfig({
    ...base,
    architectures: ['Qwen2ForCausalLM'],
    num_attention_heads: 2,
    num_key_value_heads: 2,
    rope_theta: 1000000,
    tie_word_embeddings: true,
  }),
};

/** HF-style initialisation with a wide range, plus non-trivial norm weights and biases. */
function weights(config: LlamaConfig, seed: number): Map<string, Float32Array> {
  const out = initLlamaWeights(config, seed, 0.25);
  let s = seed;
  for (const [name, data] of out) {
    if (name.endsWith('norm.weight') || name.endsWith('.bias')) {
      const centre = name.endsWith('.bias') ? 0 : 1;
      for (let i = 0; i < data.length; i++) {
        s = (s * 1103515245 + 12345) % 2 ** 31;
        data[i] = centre + 0.4 * (s / 2 ** 31 - 0.5);
      }
    }
  }
  return out;
}

beforeAll(() => {
  ort.env.wasm.numThreads = 1;
});

describe('ONNX export (onnxruntime-web, wasm) agrees with the WebGPU engine', () => {
  for (const [label, config] of Object.entries(configs)) {
    it(label, async () => {
      const V = config.vocabSize;
      const tensors = weights(config, label.length);
      // Left padding: row 0 full, row 1 three pads, row 2 a single real token.
      const N = 3;
      const T = 7;
      const keyStart = Uint32Array.from([0, 3, 6]);
      const tokens = new Uint32Array(N * T);
      const positions = new Uint32Array(N * T);
      const mask = new BigInt64Array(N * T);
      for (let n = 0; n < N; n++) {
        for (let t = 0; t < T; t++) {
          const real = t >= keyStart[n];
          tokens[n * T + t] = real ? (11 * n + 5 * t + 2) % V : 0;
          positions[n * T + t] = real ? t - keyStart[n] : 0;
          mask[n * T + t] = real ? 1n : 0n;
        }
      }

      const session = await ort.InferenceSession.create(exportOnnx({ config, tensors }), {
        executionProviders: ['wasm'],
      });
      const result = await session.run({
        input_ids: new ort.Tensor(
          'int64',
          BigInt64Array.from(tokens, (v) => BigInt(v)),
          [N, T],
        ),
        attention_mask: new ort.Tensor('int64', mask, [N, T]),
      });
      expect(result.logits.dims).toEqual([N, T, V]);
      const onnxLogits = result.logits.data as Float32Array; // (N, T, V)
      await session.release();

      const engine = await testEngine();
      const model = GpuLlama.load(engine, config, tensors);
      const batch = model.uploadBatch(tokens, keyStart, positions, N, T);
      let logitsBuf: GPUBuffer | null = null;
      await engine.run(async (enc) => {
        logitsBuf = (await model.forward(enc, batch, { start: 0, count: T })).logits;
      });
      const gpuLogits = await readF32(engine.device, logitsBuf!, N * T * V); // (N, T, V)
      model.destroy();

      // Real tokens only, one row at a time so a failure names the (sequence, column).
      let largest = 0;
      let rows = 0;
      for (let n = 0; n < N; n++) {
        for (let t = keyStart[n]; t < T; t++) {
          const from = (n * T + t) * V;
          const gpuRow = gpuLogits.subarray(from, from + V);
          const onnxRow = onnxLogits.subarray(from, from + V);
          expect(worstMismatch(onnxRow, gpuRow, LOGITS_TOLERANCE), `row (${n}, ${t})`).toBeNull();
          for (const v of gpuRow) largest = Math.max(largest, Math.abs(v));
          rows++;
        }
      }
      expect(rows).toBe(7 + 4 + 1);
      // Logits well away from zero: the comparison is not vacuous.
      expect(largest).toBeGreaterThan(1);
    });
  }
});
