// Qwen3 exports (issue 36): the qwen3_lora fixture's model (per-head q_norm / k_norm, head_dim 10 ≠
// hidden / heads, tied head) with its adapters merged, written as a Hugging Face folder and as
// ONNX, reproduces the PyTorch fixture: the folder loads back through the project's loader as a
// Qwen3 model whose completion log-probs are the fixture's (torch, adapters on), and onnxruntime
// runs the ONNX graph to the fixture's logits on every real token of its left-padded batch.
import * as ort from 'onnxruntime-web';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportHfFolder } from '../../src/export/hf-export';
import { exportOnnx } from '../../src/export/onnx-export';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { filesSource } from '../../src/formats/model-source';
import { completionLogprobsRef, RefLlama } from '../../src/ref/llama';
import { loadLoraFixture } from '../fixtures/load-lora';

// Merging W + s·B·A rounds each merged weight to f32 once (~6e-8 relative): the log-probs of the
// f64 reference on the merged f32 weights stay within 1e-6 of torch's on unmerged f64 adapters.
const LOGP_ATOL = 1e-6;
// onnxruntime computes in f32 (as tests/unit/onnx-export.test.ts).
const LOGITS_ATOL = 2e-4;
const LOGITS_RTOL = 1e-4;

const fx = loadLoraFixture('qwen3');
const { config, params } = fx.base;
const lora = { options: fx.options, adapters: fx.adapters };
const { N, T, tokens, keyStart, promptLength: P } = fx.base.batch;

// A tokenizer within the fixture's 47-id vocabulary (the loader refuses ids outside it): three
// specials and single letters, byte-level BPE without merges.
const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const specials = ['<pad>', '<s>', '</s>'];
const vocab = Object.fromEntries(
  [...specials, ...'abcdefghijklmnopqrstuvwxyz'].map((token, id) => [token, id]),
);
const tokenizerFiles = new Map([
  [
    'tokenizer.json',
    json({
      version: '1.0',
      added_tokens: specials.map((content, id) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: null,
      model: { type: 'BPE', dropout: null, unk_token: null, vocab, merges: [] },
    }),
  ],
  ['tokenizer_config.json', json({ bos_token: '<s>', eos_token: '</s>', pad_token: '<pad>' })],
]);

beforeAll(() => {
  ort.env.wasm.numThreads = 1;
});

describe('Qwen3 export with merged LoRA adapters', () => {
  it('HF folder loads back as Qwen3 with the fixture log-probs', async () => {
    const files = exportHfFolder({ config, tensors: params, lora, tokenizerFiles });
    const configJson = JSON.parse(new TextDecoder().decode(files.get('config.json')));
    expect(configJson).toMatchObject({
      architectures: ['Qwen3ForCausalLM'],
      model_type: 'qwen3',
      head_dim: 10,
      hidden_size: 24,
      num_attention_heads: 4,
      attention_bias: false,
    });
    const loaded = await loadHfFolder(
      filesSource([...files].map(([name, bytes]) => new File([bytes.slice()], name))),
    );
    expect(loaded.config).toEqual(config);
    // The per-head norms are written and read back unchanged (they carry no adapter).
    for (const name of ['q_norm', 'k_norm']) {
      const key = `model.layers.1.self_attn.${name}.weight`;
      expect(loaded.tensors.get(key)).toEqual(params.get(key));
    }
    const model = new RefLlama(loaded.config, loaded.tensors);
    const { logits } = model.forward(tokens, N, T, keyStart);
    const V = config.vocabSize;
    const logp = completionLogprobsRef(logits, tokens, N, T, V, P, fx.header.grpo.temperature);
    let worst = 0;
    for (let i = 0; i < fx.logp.length; i++)
      worst = Math.max(worst, Math.abs(logp[i] - fx.logp[i]));
    expect(worst).toBeLessThanOrEqual(LOGP_ATOL);
    // Not vacuous: the adapters move the log-probs by far more than the tolerance.
    let moved = 0;
    for (let i = 0; i < fx.logp.length; i++)
      moved = Math.max(moved, Math.abs(fx.logp[i] - fx.refLogp[i]));
    expect(moved).toBeGreaterThan(100 * LOGP_ATOL);
  });

  it('ONNX graph in onnxruntime-web gives the fixture logits on every real token', async () => {
    const bytes = exportOnnx({ config, tensors: params, lora });
    const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
    const mask = BigInt64Array.from({ length: N * T }, (_, i) =>
      i % T >= keyStart[Math.floor(i / T)] ? 1n : 0n,
    );
    const result = await session.run({
      input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens, BigInt), [N, T]),
      attention_mask: new ort.Tensor('int64', mask, [N, T]),
    });
    const got = result.logits.data as Float32Array;
    const V = config.vocabSize;
    let worst = -Infinity;
    for (let n = 0; n < N; n++) {
      for (let t = keyStart[n]; t < T; t++) {
        for (let v = 0; v < V; v++) {
          const i = (n * T + t) * V + v;
          const ref = fx.logits[i];
          worst = Math.max(
            worst,
            Math.abs(got[i] - ref) - (LOGITS_ATOL + LOGITS_RTOL * Math.abs(ref)),
          );
        }
      }
    }
    expect(worst).toBeLessThanOrEqual(0);
    await session.release();
  });
});
