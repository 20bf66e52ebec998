// The Llama-family model configuration (Llama, Qwen2, SmolLM2, TinyLlama), parsed from a Hugging
// Face config.json, and the parameter list in Hugging Face naming so checkpoints load in PyTorch.
//
// Legend: C hidden size, I intermediate size, V vocab, L layers, H heads, Hkv kv-heads, D head dim.

export interface LlamaConfig {
  /** 'LlamaForCausalLM' or 'Qwen2ForCausalLM' (what config.json's `architectures[0]` said). */
  architecture: SupportedArchitecture;
  hiddenSize: number; // C
  intermediateSize: number; // I
  numLayers: number; // L
  numHeads: number; // H
  numKvHeads: number; // Hkv (grouped-query attention when < H)
  headDim: number; // D (usually C / H)
  vocabSize: number; // V
  maxPositions: number;
  ropeTheta: number;
  rmsNormEps: number;
  tieWordEmbeddings: boolean;
  /** q/k/v projections carry a bias (Qwen2); o_proj never does. */
  attentionBias: boolean;
  bosTokenId: number | null;
  eosTokenIds: number[];
}

export const SUPPORTED_ARCHITECTURES = ['LlamaForCausalLM', 'Qwen2ForCausalLM'] as const;
export type SupportedArchitecture = (typeof SUPPORTED_ARCHITECTURES)[number];

/** A config.json we cannot use; the message names the file and the field. */
export class ModelConfigError extends Error {
  override name = 'ModelConfigError';
}

function requireInt(json: Record<string, unknown>, key: string, file: string, min = 1): number {
  const value = json[key];
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new ModelConfigError(
      `${file}: '${key}' must be an integer ≥ ${min}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function optionalNumber(
  json: Record<string, unknown>,
  key: string,
  fallback: number,
  file: string,
): number {
  const value = json[key];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ModelConfigError(`${file}: '${key}' must be a number, got ${JSON.stringify(value)}`);
  }
  return value;
}

function tokenIds(value: unknown): number[] {
  if (typeof value === 'number') return [value];
  if (Array.isArray(value)) return value.filter((v): v is number => typeof v === 'number');
  return [];
}

/** Parses a Hugging Face config.json object; `file` names it in error messages. */
export function parseHfConfig(json: unknown, file = 'config.json'): LlamaConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new ModelConfigError(`${file}: expected a JSON object`);
  }
  const cfg = json as Record<string, unknown>;
  const architectures = Array.isArray(cfg.architectures) ? cfg.architectures : [];
  const architecture = architectures[0];
  if (!SUPPORTED_ARCHITECTURES.includes(architecture as SupportedArchitecture)) {
    const modelType = typeof cfg.model_type === 'string' ? ` (model_type '${cfg.model_type}')` : '';
    throw new ModelConfigError(
      `${file}: unsupported architecture ${JSON.stringify(architecture ?? null)}${modelType}; ` +
        `supported: ${SUPPORTED_ARCHITECTURES.join(', ')} (Llama 3.2, SmolLM2, TinyLlama, Qwen2/2.5)`,
    );
  }
  const ropeScaling = cfg.rope_scaling as Record<string, unknown> | null | undefined;
  if (
    ropeScaling &&
    typeof ropeScaling === 'object' &&
    ropeScaling.rope_type !== 'default' &&
    ropeScaling.type !== 'default'
  ) {
    throw new ModelConfigError(
      `${file}: rope_scaling ${JSON.stringify(ropeScaling)} is not supported (only plain rotary embeddings)`,
    );
  }
  const hiddenSize = requireInt(cfg, 'hidden_size', file);
  const numHeads = requireInt(cfg, 'num_attention_heads', file);
  const numKvHeads =
    cfg.num_key_value_heads === undefined ? numHeads : requireInt(cfg, 'num_key_value_heads', file);
  if (numHeads % numKvHeads !== 0) {
    throw new ModelConfigError(
      `${file}: num_attention_heads (${numHeads}) must be a multiple of num_key_value_heads (${numKvHeads})`,
    );
  }
  const headDim =
    cfg.head_dim === undefined || cfg.head_dim === null
      ? hiddenSize / numHeads
      : requireInt(cfg, 'head_dim', file);
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    throw new ModelConfigError(`${file}: head dimension ${headDim} must be an even integer`);
  }
  const isQwen2 = architecture === 'Qwen2ForCausalLM';
  return {
    architecture: architecture as SupportedArchitecture,
    hiddenSize,
    intermediateSize: requireInt(cfg, 'intermediate_size', file),
    numLayers: requireInt(cfg, 'num_hidden_layers', file),
    numHeads,
    numKvHeads,
    headDim,
    vocabSize: requireInt(cfg, 'vocab_size', file),
    maxPositions: requireInt(cfg, 'max_position_embeddings', file),
    ropeTheta: optionalNumber(cfg, 'rope_theta', 10000, file),
    rmsNormEps: optionalNumber(cfg, 'rms_norm_eps', 1e-6, file),
    tieWordEmbeddings: cfg.tie_word_embeddings === true,
    attentionBias: isQwen2 ? cfg.attention_bias !== false : cfg.attention_bias === true,
    bosTokenId: typeof cfg.bos_token_id === 'number' ? cfg.bos_token_id : null,
    eosTokenIds: tokenIds(cfg.eos_token_id),
  };
}

/** The config.json a Hugging Face `transformers` loader accepts for this model. */
export function toHfConfig(config: LlamaConfig): Record<string, unknown> {
  const isQwen2 = config.architecture === 'Qwen2ForCausalLM';
  return {
    architectures: [config.architecture],
    model_type: isQwen2 ? 'qwen2' : 'llama',
    hidden_size: config.hiddenSize,
    intermediate_size: config.intermediateSize,
    num_hidden_layers: config.numLayers,
    num_attention_heads: config.numHeads,
    num_key_value_heads: config.numKvHeads,
    head_dim: config.headDim,
    vocab_size: config.vocabSize,
    max_position_embeddings: config.maxPositions,
    rope_theta: config.ropeTheta,
    rms_norm_eps: config.rmsNormEps,
    tie_word_embeddings: config.tieWordEmbeddings,
    ...(isQwen2 ? {} : { attention_bias: config.attentionBias, mlp_bias: false }),
    hidden_act: 'silu',
    bos_token_id: config.bosTokenId,
    eos_token_id: config.eosTokenIds.length === 1 ? config.eosTokenIds[0] : config.eosTokenIds,
    torch_dtype: 'float32',
  };
}

export interface ParameterSpec {
  name: string;
  shape: number[];
}

/** Every trainable parameter in Hugging Face naming and storage order (Linear weights are (out, in)). */
export function parameterSpecs(config: LlamaConfig): ParameterSpec[] {
  const {
    hiddenSize: C,
    intermediateSize: I,
    numHeads: H,
    numKvHeads: Hkv,
    headDim: D,
    vocabSize: V,
  } = config;
  const specs: ParameterSpec[] = [{ name: 'model.embed_tokens.weight', shape: [V, C] }];
  for (let i = 0; i < config.numLayers; i++) {
    const p = `model.layers.${i}`;
    specs.push({ name: `${p}.input_layernorm.weight`, shape: [C] });
    specs.push({ name: `${p}.self_attn.q_proj.weight`, shape: [H * D, C] });
    if (config.attentionBias) specs.push({ name: `${p}.self_attn.q_proj.bias`, shape: [H * D] });
    specs.push({ name: `${p}.self_attn.k_proj.weight`, shape: [Hkv * D, C] });
    if (config.attentionBias) specs.push({ name: `${p}.self_attn.k_proj.bias`, shape: [Hkv * D] });
    specs.push({ name: `${p}.self_attn.v_proj.weight`, shape: [Hkv * D, C] });
    if (config.attentionBias) specs.push({ name: `${p}.self_attn.v_proj.bias`, shape: [Hkv * D] });
    specs.push({ name: `${p}.self_attn.o_proj.weight`, shape: [C, H * D] });
    specs.push({ name: `${p}.post_attention_layernorm.weight`, shape: [C] });
    specs.push({ name: `${p}.mlp.gate_proj.weight`, shape: [I, C] });
    specs.push({ name: `${p}.mlp.up_proj.weight`, shape: [I, C] });
    specs.push({ name: `${p}.mlp.down_proj.weight`, shape: [C, I] });
  }
  specs.push({ name: 'model.norm.weight', shape: [C] });
  if (!config.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [V, C] });
  return specs;
}

export const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

export function parameterCount(config: LlamaConfig): number {
  return parameterSpecs(config).reduce((sum, spec) => sum + numel(spec.shape), 0);
}
