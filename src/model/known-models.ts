// Public models `npm run plan` knows by name, as the numbers of their Hugging Face config.json
// (the fields that size memory), read through the same parser as a local folder's config.json.
// Llama 3.2's rope_scaling (llama3) is left out: it changes no buffer size, and the parser refuses
// it because the model does not implement that scaling yet.
import { parseHfConfig, type LlamaConfig } from '../core/model-config';

export interface KnownModel {
  /** The name `npm run plan` takes (lower case). */
  name: string;
  /** The Hugging Face repository. */
  repo: string;
  /** config.json's torch_dtype: what dtype 'auto' keeps. */
  torchDtype: 'bfloat16' | 'float16' | 'float32';
  /** config.json's fields. */
  json: Record<string, unknown>;
}

const llama = (o: Record<string, unknown>) => ({
  architectures: ['LlamaForCausalLM'],
  hidden_act: 'silu',
  ...o,
});
// Llama 3.2 1B and 3B: one tokenizer and context, the same MLP width, 8 kv-heads, tied embeddings.
const llama32 = (o: Record<string, unknown>) =>
  llama({
    intermediate_size: 8192,
    num_key_value_heads: 8,
    vocab_size: 128256,
    max_position_embeddings: 131072,
    rope_theta: 500000,
    rms_norm_eps: 1e-5,
    tie_word_embeddings: true,
    bos_token_id: 128000,
    eos_token_id: 128001,
    ...o,
  });
const qwen2 = (o: Record<string, unknown>) => ({
  architectures: ['Qwen2ForCausalLM'],
  hidden_act: 'silu',
  rms_norm_eps: 1e-6,
  rope_theta: 1_000_000,
  tie_word_embeddings: true,
  vocab_size: 151936,
  bos_token_id: 151643,
  eos_token_id: 151643,
  ...o,
});

// Qwen3 sets head_dim (128) apart from hidden_size / heads, and its 8 kv-heads of 128 make the
// KV cache 8× Qwen2.5-0.5B's per layer.
const qwen3 = (o: Record<string, unknown>) => ({
  architectures: ['Qwen3ForCausalLM'],
  hidden_act: 'silu',
  attention_bias: false,
  head_dim: 128,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 1_000_000,
  tie_word_embeddings: true,
  vocab_size: 151936,
  max_position_embeddings: 40960,
  bos_token_id: 151643,
  eos_token_id: 151645,
  ...o,
});

export const KNOWN_MODELS: readonly KnownModel[] = [
  {
    name: 'smollm2-135m',
    repo: 'HuggingFaceTB/SmolLM2-135M',
    torchDtype: 'bfloat16',
    json: llama({
      hidden_size: 576,
      intermediate_size: 1536,
      num_hidden_layers: 30,
      num_attention_heads: 9,
      num_key_value_heads: 3,
      vocab_size: 49152,
      max_position_embeddings: 8192,
      rope_theta: 100000,
      rms_norm_eps: 1e-5,
      tie_word_embeddings: true,
      bos_token_id: 0,
      eos_token_id: 0,
    }),
  },
  {
    name: 'smollm2-360m',
    repo: 'HuggingFaceTB/SmolLM2-360M',
    torchDtype: 'bfloat16',
    json: llama({
      hidden_size: 960,
      intermediate_size: 2560,
      num_hidden_layers: 32,
      num_attention_heads: 15,
      num_key_value_heads: 5,
      vocab_size: 49152,
      max_position_embeddings: 8192,
      rope_theta: 100000,
      rms_norm_eps: 1e-5,
      tie_word_embeddings: true,
      bos_token_id: 0,
      eos_token_id: 0,
    }),
  },
  {
    name: 'qwen2.5-0.5b',
    repo: 'Qwen/Qwen2.5-0.5B',
    torchDtype: 'bfloat16',
    json: qwen2({
      hidden_size: 896,
      intermediate_size: 4864,
      num_hidden_layers: 24,
      num_attention_heads: 14,
      num_key_value_heads: 2,
      max_position_embeddings: 32768,
    }),
  },
  {
    name: 'qwen2.5-1.5b',
    repo: 'Qwen/Qwen2.5-1.5B',
    torchDtype: 'bfloat16',
    json: qwen2({
      hidden_size: 1536,
      intermediate_size: 8960,
      num_hidden_layers: 28,
      num_attention_heads: 12,
      num_key_value_heads: 2,
      max_position_embeddings: 131072,
    }),
  },
  {
    // Qwen/Qwen2.5-3B's config.json (model card: 3.09B parameters, 2.77B non-embedding).
    name: 'qwen2.5-3b',
    repo: 'Qwen/Qwen2.5-3B',
    torchDtype: 'bfloat16',
    json: qwen2({
      hidden_size: 2048,
      intermediate_size: 11008,
      num_hidden_layers: 36,
      num_attention_heads: 16,
      num_key_value_heads: 2,
      max_position_embeddings: 32768,
    }),
  },
  {
    name: 'qwen3-0.6b',
    repo: 'Qwen/Qwen3-0.6B',
    torchDtype: 'bfloat16',
    json: qwen3({
      hidden_size: 1024,
      intermediate_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 16,
    }),
  },
  {
    name: 'qwen3-1.7b',
    repo: 'Qwen/Qwen3-1.7B',
    torchDtype: 'bfloat16',
    json: qwen3({
      hidden_size: 2048,
      intermediate_size: 6144,
      num_hidden_layers: 28,
      num_attention_heads: 16,
    }),
  },
  {
    name: 'qwen3-4b',
    repo: 'Qwen/Qwen3-4B',
    torchDtype: 'bfloat16',
    json: qwen3({
      hidden_size: 2560,
      intermediate_size: 9728,
      num_hidden_layers: 36,
      num_attention_heads: 32,
    }),
  },
  {
    name: 'llama-3.2-1b',
    repo: 'meta-llama/Llama-3.2-1B',
    torchDtype: 'bfloat16',
    json: llama32({
      hidden_size: 2048,
      num_hidden_layers: 16,
      num_attention_heads: 32,
      head_dim: 64,
    }),
  },
  {
    // meta-llama/Llama-3.2-3B's config.json (3.21B parameters, tied); rope_scaling left out as
    // for Llama-3.2-1B above.
    name: 'llama-3.2-3b',
    repo: 'meta-llama/Llama-3.2-3B',
    torchDtype: 'bfloat16',
    json: llama32({
      hidden_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 24,
      head_dim: 128,
    }),
  },
];

/** A known model by name (case-insensitive, with or without its organisation), or undefined. */
export function findKnownModel(name: string): KnownModel | undefined {
  const key = name.toLowerCase();
  return KNOWN_MODELS.find((m) => m.name === key || m.repo.toLowerCase() === key);
}

/** A known model's LlamaConfig, parsed from its config.json numbers. */
export function knownModelConfig(model: KnownModel): LlamaConfig {
  return parseHfConfig(model.json, `${model.repo}/config.json`);
}
