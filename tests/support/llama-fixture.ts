// A small Llama model as the loader tests write it to disk: config.json's fields for given sizes
// (the rest fixed: 64 positions, rope theta 10000, BOS 1, EOS 2) and seeded weights for every
// parameter, values k/divisor with |k| ≤ 127: seven significant bits over a power-of-two divisor are
// exact in F32, F16 and BF16, so every dtype must load them exactly.
import { numel, parameterSpecs, type LlamaConfig } from '../../src/core/model-config';

export interface LlamaSizes {
  hidden: number;
  intermediate: number;
  vocab: number;
  /** 2 unless given. */
  layers?: number;
  /** 2 unless given. */
  heads?: number;
  /** 1 unless given (grouped-query attention). */
  kvHeads?: number;
  /** Untied unless given. */
  tied?: boolean;
}

/** config.json of a LlamaForCausalLM with these sizes. */
export function tinyLlamaConfigJson(sizes: LlamaSizes) {
  const s = { layers: 2, heads: 2, kvHeads: 1, tied: false, ...sizes };
  return {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: s.hidden,
    intermediate_size: s.intermediate,
    num_hidden_layers: s.layers,
    num_attention_heads: s.heads,
    num_key_value_heads: s.kvHeads,
    vocab_size: s.vocab,
    max_position_embeddings: 64,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    tie_word_embeddings: s.tied,
    bos_token_id: 1,
    eos_token_id: 2,
  };
}

/** Every parameter of `config` in parameterSpecs order, from one linear congruential stream. */
export function lcgWeights(config: LlamaConfig, seed: number, divisor = 64) {
  let s = seed;
  return parameterSpecs(config).map((spec) => {
    const data = new Float32Array(numel(spec.shape));
    for (let i = 0; i < data.length; i++) {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      data[i] = ((s % 255) - 127) / divisor;
    }
    return { name: spec.name, shape: spec.shape, data };
  });
}
