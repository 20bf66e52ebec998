// Qwen3's config.json (issue 36): the architecture parses with its own head_dim and q/k norm
// weights in Hugging Face order, a Qwen3 with attention biases (on o_proj too) is refused, and the
// CPU reference's KV-cache decoding (the CPU fallback sampler's path) runs the q/k norms as its
// full forward does on the qwen3 PyTorch fixture.
import { describe, expect, it } from 'vitest';
import {
  hasQkNorm,
  ModelConfigError,
  parameterSpecs,
  parseHfConfig,
  toHfConfig,
} from '../../src/core/model-config';
import { findKnownModel, knownModelConfig } from '../../src/model/known-models';
import { RefLlama } from '../../src/ref/llama';
import { loadFixture } from '../fixtures/load';

describe('Qwen3ForCausalLM config', () => {
  it("Qwen3-0.6B's config.json: head_dim 128 with hidden 1024 / 16 heads, q_norm and k_norm of 128", () => {
    const config = knownModelConfig(findKnownModel('Qwen/Qwen3-0.6B')!);
    expect(config).toMatchObject({
      architecture: 'Qwen3ForCausalLM',
      hiddenSize: 1024,
      numHeads: 16,
      numKvHeads: 8,
      headDim: 128,
      attentionBias: false,
      tieWordEmbeddings: true,
    });
    expect(hasQkNorm(config)).toBe(true);
    const layer0 = parameterSpecs(config)
      .filter((s) => s.name.startsWith('model.layers.0.'))
      .map((s) => `${s.name.slice('model.layers.0.'.length)} [${s.shape.join(', ')}]`);
    // transformers' Qwen3DecoderLayer state-dict order.
    expect(layer0).toEqual([
      'input_layernorm.weight [1024]',
      'self_attn.q_proj.weight [2048, 1024]',
      'self_attn.k_proj.weight [1024, 1024]',
      'self_attn.v_proj.weight [1024, 1024]',
      'self_attn.o_proj.weight [1024, 2048]',
      'self_attn.q_norm.weight [128]',
      'self_attn.k_norm.weight [128]',
      'post_attention_layernorm.weight [1024]',
      'mlp.gate_proj.weight [3072, 1024]',
      'mlp.up_proj.weight [3072, 1024]',
      'mlp.down_proj.weight [1024, 3072]',
    ]);
    expect(toHfConfig(config)).toMatchObject({ model_type: 'qwen3', head_dim: 128 });
    expect(parseHfConfig(toHfConfig(config))).toEqual(config);
    // Llama and Qwen2 have no q/k norms.
    const qwen2 = knownModelConfig(findKnownModel('qwen2.5-0.5b')!);
    expect(parameterSpecs(qwen2).some((s) => s.name.includes('q_norm'))).toBe(false);
  });

  it('refuses attention_bias true (Qwen3 would add an o_proj bias the model lacks)', () => {
    const json = { ...toHfConfig(knownModelConfig(findKnownModel('qwen3-0.6b')!)) };
    expect(() => parseHfConfig({ ...json, attention_bias: true })).toThrow(ModelConfigError);
    expect(() => parseHfConfig({ ...json, attention_bias: true })).toThrow(
      "config.json: 'attention_bias' is true; Qwen3 with attention biases (on o_proj too) is not supported",
    );
  });
});

describe('CPU reference, qwen3 fixture', () => {
  it('prefill + decode steps give the full-forward logits of every column', () => {
    const fx = loadFixture('qwen3');
    const { N, T, tokens, keyStart, promptLength: P } = fx.batch;
    const V = fx.config.vocabSize;
    const model = new RefLlama(fx.config, fx.params);
    const full = model.forward(tokens, N, T, keyStart).logits;
    const prompt = new Uint32Array(N * P);
    for (let n = 0; n < N; n++) prompt.set(tokens.subarray(n * T, n * T + P), n * P);
    const { logits: first, kv } = model.prefill(prompt, N, P, keyStart, T);
    let worst = 0;
    const compare = (got: Float64Array, column: number) => {
      for (let n = 0; n < N; n++)
        for (let v = 0; v < V; v++)
          worst = Math.max(worst, Math.abs(got[n * V + v] - full[(n * T + column) * V + v]));
    };
    compare(first, P - 1);
    for (let t = P; t < T; t++) {
      const column = Uint32Array.from({ length: N }, (_, n) => tokens[n * T + t]);
      compare(model.decodeStep(kv, column), t);
    }
    expect(worst).toBeLessThan(1e-12);
    // And the forward is torch's (the fixture test's claim, restated at the columns compared).
    expect(Math.abs(full[(P - 1) * V] - fx.logits[(P - 1) * V])).toBeLessThan(1e-12);
  });
});
