// ONNX export: the exported graph runs in onnxruntime-web's wasm backend in Node and its logits
// match the f64 CPU reference model (src/ref/llama.ts) on every real (non-padding) token of a
// left-padded batch; plus the hand-written protobuf encoder's wire format.
import * as ort from 'onnxruntime-web';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportOnnx } from '../../src/io/onnx-export';
import { ProtoMessage, nodeProto } from '../../src/io/onnx-proto';
import { parameterSpecs, parseHfConfig, type LlamaConfig } from '../../src/model/config';
import { RefLlama } from '../../src/ref/llama';

/** onnxruntime computes in f32, the reference in f64: |ort − ref| ≤ ATOL + RTOL·|ref|. */
const LOGITS_ATOL = 2e-4;
const LOGITS_RTOL = 1e-4;

const base = {
  hidden_size: 16,
  intermediate_size: 24,
  num_hidden_layers: 2,
  vocab_size: 40,
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

function weights(config: LlamaConfig, seed: number) {
  let s = seed;
  const out = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(config)) {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
    const isNorm = spec.shape.length === 1 && !spec.name.endsWith('.bias');
    for (let i = 0; i < data.length; i++) {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      const u = s / 2 ** 31 - 0.5;
      data[i] = isNorm ? 1 + 0.2 * u : 0.6 * u;
    }
    out.set(spec.name, data);
  }
  return out;
}

beforeAll(() => {
  ort.env.wasm.numThreads = 1;
});

describe('exportOnnx runs in onnxruntime-web (wasm) and matches the reference model', () => {
  for (const [label, config] of Object.entries(configs)) {
    it(label, async () => {
      const tensors = weights(config, label.length);
      const bytes = exportOnnx({ config, tensors });
      const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
      expect(session.inputNames).toEqual(['input_ids', 'attention_mask']);
      expect(session.outputNames).toEqual(['logits']);

      // Left padding: row 0 full, row 1 two pads, row 2 a single real token.
      const N = 3;
      const T = 6;
      const keyStart = Uint32Array.from([0, 2, 5]);
      const tokens = new Uint32Array(N * T);
      const mask = new BigInt64Array(N * T);
      for (let n = 0; n < N; n++) {
        for (let t = 0; t < T; t++) {
          const real = t >= keyStart[n];
          tokens[n * T + t] = real ? (7 * n + 3 * t + 1) % config.vocabSize : 0;
          mask[n * T + t] = real ? 1n : 0n;
        }
      }
      const result = await session.run({
        input_ids: new ort.Tensor(
          'int64',
          BigInt64Array.from(tokens, (v) => BigInt(v)),
          [N, T],
        ),
        attention_mask: new ort.Tensor('int64', mask, [N, T]),
      });
      const logits = result.logits;
      expect(logits.dims).toEqual([N, T, config.vocabSize]);
      const got = logits.data as Float32Array;
      const ref = new RefLlama(config, tensors).forward(tokens, N, T, keyStart).logits;

      let worst = 0;
      let compared = 0;
      const V = config.vocabSize;
      for (let n = 0; n < N; n++) {
        for (let t = keyStart[n]; t < T; t++) {
          for (let v = 0; v < V; v++) {
            const i = (n * T + t) * V + v;
            const excess =
              Math.abs(got[i] - ref[i]) - (LOGITS_ATOL + LOGITS_RTOL * Math.abs(ref[i]));
            worst = Math.max(worst, excess);
            compared++;
          }
        }
      }
      expect(compared).toBe((6 + 4 + 1) * V);
      expect(worst).toBeLessThanOrEqual(0);
      // The logits are not trivially small (the comparison would be vacuous).
      expect(Math.max(...Array.from(ref, Math.abs))).toBeGreaterThan(0.5);
      await session.release();
    });
  }

  it('refuses a missing weight', () => {
    const config = configs['Llama, GQA (4 heads / 2 kv-heads), untied head'];
    const tensors = weights(config, 1);
    tensors.delete('model.layers.1.mlp.down_proj.weight');
    expect(() => exportOnnx({ config, tensors })).toThrow(
      "model.onnx (tensor 'model.layers.1.mlp.down_proj.weight'): no weights to export",
    );
  });
});

describe('protobuf encoder wire format', () => {
  it('encodes varints (incl. negative int64), strings and nested messages', () => {
    expect([...new ProtoMessage().varint(1, 300).finish()]).toEqual([0x08, 0xac, 0x02]);
    expect([...new ProtoMessage().varint(3, -1).finish()]).toEqual([
      0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ]);
    expect([...new ProtoMessage().string(2, 'hi').finish()]).toEqual([0x12, 2, 0x68, 0x69]);
    expect([...new ProtoMessage().float(2, 1).finish()]).toEqual([0x15, 0, 0, 0x80, 0x3f]);
    const inner = new ProtoMessage().varint(1, 5);
    expect([...new ProtoMessage().message(7, inner).finish()]).toEqual([0x3a, 2, 0x08, 5]);
    // NodeProto: input 'a' (1), output 'b' (2), name 'n' (3), op_type 'Relu' (4)
    expect([...nodeProto('Relu', ['a'], ['b'], 'n').finish()]).toEqual([
      0x0a, 1, 0x61, 0x12, 1, 0x62, 0x1a, 1, 0x6e, 0x22, 4, 0x52, 0x65, 0x6c, 0x75,
    ]);
  });
});
