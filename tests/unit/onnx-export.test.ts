// ONNX export: the exported graph runs in onnxruntime-web's wasm backend in Node and its logits
// match the f64 CPU reference model (src/ref/llama.ts) on every real (non-padding) token of a
// left-padded batch; the past_key_values variant (what transformers.js generates with) gives the
// same logits when fed a prefill and then one token at a time through its own present outputs;
// plus the hand-written protobuf encoder's wire format.
import * as ort from 'onnxruntime-web';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  exportOnnx,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
} from '../../src/export/onnx-export';
import { ProtoMessage, nodeProto } from '../../src/formats/onnx-proto';
import { parameterSpecs, parseHfConfig, type LlamaConfig } from '../../src/core/model-config';
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

describe('exportOnnx with past_key_values (decoder-with-cache interface)', () => {
  for (const [label, config] of Object.entries(configs)) {
    it(`${label}: prefill + one-token steps give the reference logits`, async () => {
      const { numLayers, numKvHeads: Hkv, headDim: D, vocabSize: V } = config;
      const tensors = weights(config, 7 * label.length);
      const session = await ort.InferenceSession.create(
        exportOnnx({ config, tensors, pastKeyValues: true }),
        { executionProviders: ['wasm'] },
      );
      const cacheNames = (kind: 'past' | 'present') =>
        Array.from({ length: numLayers }, (_, l) =>
          kind === 'past'
            ? [pastKeyName(l), pastValueName(l)]
            : [presentKeyName(l), presentValueName(l)],
        ).flat();
      expect(session.inputNames).toEqual(['input_ids', 'attention_mask', ...cacheNames('past')]);
      expect(session.outputNames).toEqual(['logits', ...cacheNames('present')]);

      // Two sequences, the second left-padded by 2; prefill 4 columns, then 3 single steps.
      const N = 2;
      const T = 7;
      const prefill = 4;
      const keyStart = Uint32Array.from([0, 2]);
      const tokens = new Uint32Array(N * T);
      for (let n = 0; n < N; n++)
        for (let t = 0; t < T; t++)
          tokens[n * T + t] = t >= keyStart[n] ? (5 * n + 3 * t + 2) % V : 0;
      const ref = new RefLlama(config, tensors).forward(tokens, N, T, keyStart).logits;

      const i64 = (cols: number, from: number, value: (n: number, t: number) => number) =>
        new ort.Tensor(
          'int64',
          BigInt64Array.from({ length: N * cols }, (_, i) =>
            BigInt(value(Math.floor(i / cols), from + (i % cols))),
          ),
          [N, cols],
        );
      let past: Record<string, ort.Tensor> = {};
      for (const name of cacheNames('past'))
        past[name] = new ort.Tensor('float32', new Float32Array(0), [N, Hkv, 0, D]);
      let worst = 0;
      let compared = 0;
      for (let from = 0; from < T; from = from === 0 ? prefill : from + 1) {
        const cols = from === 0 ? prefill : 1;
        const out = await session.run({
          input_ids: i64(cols, from, (n, t) => tokens[n * T + t]),
          attention_mask: i64(from + cols, 0, (n, t) => (t >= keyStart[n] ? 1 : 0)),
          ...past,
        });
        expect(out.logits.dims).toEqual([N, cols, V]);
        expect(out[presentKeyName(0)].dims).toEqual([N, Hkv, from + cols, D]);
        const got = out.logits.data as Float32Array;
        for (let n = 0; n < N; n++) {
          for (let j = 0; j < cols; j++) {
            if (from + j < keyStart[n]) continue;
            for (let v = 0; v < V; v++) {
              const e = ref[(n * T + from + j) * V + v];
              const a = got[(n * cols + j) * V + v];
              worst = Math.max(worst, Math.abs(a - e) - (LOGITS_ATOL + LOGITS_RTOL * Math.abs(e)));
              compared++;
            }
          }
        }
        past = {};
        for (const [pastName, presentName] of cacheNames('past').map(
          (name, i) => [name, cacheNames('present')[i]] as const,
        ))
          past[pastName] = out[presentName];
      }
      expect(compared).toBe((7 + 5) * V);
      expect(worst).toBeLessThanOrEqual(0);
      await session.release();
    });
  }
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
