// The Llama-family model configuration (Llama, Qwen2, Qwen3, SmolLM2, TinyLlama), parsed from a Hugging
// Face config.json, and the parameter list in Hugging Face naming so checkpoints load in PyTorch.
//
// Legend: C hidden size, I intermediate size, V vocab, L layers, H heads, Hkv kv-heads, D head dim.
//
// A config.json (or a checkpoint's model config) comes from a file the user picked, so every
// dimension is checked against CONFIG_LIMITS before anything is sized from it: a claim of 10⁷
// layers must fail in microseconds, not after building ten million parameter specs.

export interface LlamaConfig {
  /**
   * 'LlamaForCausalLM', 'Qwen2ForCausalLM' or 'Qwen3ForCausalLM' (config.json's `architectures[0]`).
   * Qwen3 adds a per-head RMSNorm on queries and keys (hasQkNorm), so the architecture is part of
   * the model's function, not only a label.
   */
  architecture: SupportedArchitecture;
  hiddenSize: number; // C
  intermediateSize: number; // I
  numLayers: number; // L
  numHeads: number; // H
  numKvHeads: number; // Hkv (grouped-query attention when < H)
  headDim: number; // D (usually C / H; Qwen3 sets its own, e.g. 128 with C = 1024, H = 16)
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

export const SUPPORTED_ARCHITECTURES = [
  'LlamaForCausalLM',
  'Qwen2ForCausalLM',
  'Qwen3ForCausalLM',
] as const;
export type SupportedArchitecture = (typeof SUPPORTED_ARCHITECTURES)[number];

/**
 * Whether attention normalises each head's query and key vector (Qwen3's q_norm, k_norm: RMSNorm
 * over D with its own weight (D) and rms_norm_eps, after the projection and before rotary, as
 * transformers' Qwen3Attention; docs/guide/models.md). Derived from the architecture, so configs
 * stored before Qwen3 existed read the same.
 */
export const hasQkNorm = (config: Pick<LlamaConfig, 'architecture'>): boolean =>
  config.architecture === 'Qwen3ForCausalLM';

/** A config.json we cannot use; the message names the file and the field. */
export class ModelConfigError extends Error {
  override name = 'ModelConfigError';
}

/**
 * The largest value of each dimension this app accepts, far above any model it can train (the
 * largest Llama-family models have 126 layers, C = 16384, I = 53248, V = 262144, 128 heads) and far
 * below what would exhaust memory merely by listing the parameters or sizing one tensor.
 */
export const CONFIG_LIMITS = {
  num_hidden_layers: 1024,
  hidden_size: 65_536,
  intermediate_size: 262_144,
  num_attention_heads: 1024,
  num_key_value_heads: 1024,
  head_dim: 1024,
  vocab_size: 4_194_304,
  max_position_embeddings: 16_777_216,
} as const;
type LimitedKey = keyof typeof CONFIG_LIMITS;

/** LlamaConfig field → config.json key, for messages about a checkpoint's model config. */
const LIMITED_FIELDS: [keyof LlamaConfig, LimitedKey][] = [
  ['numLayers', 'num_hidden_layers'],
  ['hiddenSize', 'hidden_size'],
  ['intermediateSize', 'intermediate_size'],
  ['numHeads', 'num_attention_heads'],
  ['numKvHeads', 'num_key_value_heads'],
  ['headDim', 'head_dim'],
  ['vocabSize', 'vocab_size'],
  ['maxPositions', 'max_position_embeddings'],
];

function requireInt(json: Record<string, unknown>, key: string, file: string, min = 1): number {
  const value = json[key];
  const max = (CONFIG_LIMITS as Record<string, number>)[key];
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new ModelConfigError(
      `${file}: '${key}' must be an integer ≥ ${min}, got ${JSON.stringify(value)}`,
    );
  }
  if (max !== undefined && value > max) {
    throw new ModelConfigError(
      `${file}: '${key}' is ${value}, more than the ${max} this app supports; ` +
        `the file is damaged or not a small Llama-family model`,
    );
  }
  return value;
}

/**
 * The first problem with an already-typed model config (a checkpoint's manifest, a stored run),
 * or null: every dimension within CONFIG_LIMITS, heads divisible by kv-heads, an even head dim,
 * positive rope_theta and rms_norm_eps, token ids inside the vocabulary. parseHfConfig enforces the
 * same rules on config.json; this is for configs that arrive in another form.
 */
export function llamaConfigProblem(c: LlamaConfig): string | null {
  for (const [field, key] of LIMITED_FIELDS) {
    const v = c[field] as number;
    if (!Number.isSafeInteger(v) || v < 1) return `${field} must be a positive integer`;
    if (v > CONFIG_LIMITS[key]) {
      return `${field} (${key}) is ${v}, more than the ${CONFIG_LIMITS[key]} this app supports`;
    }
  }
  if (c.numHeads % c.numKvHeads !== 0) {
    return `numHeads (${c.numHeads}) must be a multiple of numKvHeads (${c.numKvHeads})`;
  }
  if (c.headDim % 2 !== 0) return `headDim (${c.headDim}) must be even`;
  if (!(c.ropeTheta > 0)) return `ropeTheta must be > 0, got ${c.ropeTheta}`;
  if (!(c.rmsNormEps > 0)) return `rmsNormEps must be > 0, got ${c.rmsNormEps}`;
  const ids: [string, number][] = [
    ...(c.bosTokenId === null ? [] : ([['bosTokenId', c.bosTokenId]] as [string, number][])),
    ...c.eosTokenIds.map((id): [string, number] => ['eosTokenIds', id]),
  ];
  for (const [key, id] of ids) {
    if (id >= c.vocabSize) return `${key} has id ${id}, outside vocabSize ${c.vocabSize}`;
  }
  return null;
}

function positiveNumber(
  json: Record<string, unknown>,
  key: string,
  fallback: number,
  file: string,
): number {
  const value = optionalNumber(json, key, fallback, file);
  if (!(value > 0)) {
    throw new ModelConfigError(`${file}: '${key}' must be a number > 0, got ${value}`);
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

/**
 * A token-id field (`bos_token_id`, `eos_token_id`: one id, a list, or null/absent) checked against
 * the vocabulary: an id ≥ vocab_size would index past the embedding table when it is sampled.
 */
export function tokenIdsOf(value: unknown, key: string, vocabSize: number, file: string): number[] {
  if (value === undefined || value === null) return [];
  const list = Array.isArray(value) ? value : [value];
  for (const id of list) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) {
      throw new ModelConfigError(
        `${file}: '${key}' must be a token id (an integer ≥ 0) or a list of them, got ${JSON.stringify(value)}`,
      );
    }
    if (id >= vocabSize) {
      throw new ModelConfigError(
        `${file}: '${key}' has token id ${id}, outside the vocabulary (vocab_size ${vocabSize} in ` +
          `config.json allows 0…${vocabSize - 1})`,
      );
    }
  }
  return list as number[];
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
        `supported: ${SUPPORTED_ARCHITECTURES.join(', ')} (Llama 3.2, SmolLM2, TinyLlama, Qwen2/2.5, Qwen3)`,
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
  // The MLP is SwiGLU without biases; another activation or an MLP bias would load (the shapes
  // match) and then compute a different function, so they fail here instead.
  if (cfg.hidden_act !== undefined && cfg.hidden_act !== null && cfg.hidden_act !== 'silu') {
    throw new ModelConfigError(
      `${file}: 'hidden_act' is ${JSON.stringify(cfg.hidden_act)}; only "silu" (SwiGLU) is supported`,
    );
  }
  if (cfg.mlp_bias === true) {
    throw new ModelConfigError(
      `${file}: 'mlp_bias' is true; only MLPs without bias are supported (set it to false only if the ` +
        `checkpoint really has no MLP bias tensors)`,
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
    throw new ModelConfigError(
      `${file}: head dimension ${headDim} must be an even integer` +
        (cfg.head_dim === undefined || cfg.head_dim === null
          ? ` (hidden_size ${hiddenSize} / num_attention_heads ${numHeads}; set 'head_dim' or fix them)`
          : ''),
    );
  }
  const isQwen2 = architecture === 'Qwen2ForCausalLM';
  // Qwen3's attention_bias puts a bias on o_proj as well as q/k/v (transformers' Qwen3Attention);
  // the model has no o_proj bias, so such a checkpoint would load and compute another function.
  if (architecture === 'Qwen3ForCausalLM' && cfg.attention_bias === true) {
    throw new ModelConfigError(
      `${file}: 'attention_bias' is true; Qwen3 with attention biases (on o_proj too) is not supported`,
    );
  }
  const intermediateSize = requireInt(cfg, 'intermediate_size', file);
  const numLayers = requireInt(cfg, 'num_hidden_layers', file);
  const vocabSize = requireInt(cfg, 'vocab_size', file);
  const maxPositions = requireInt(cfg, 'max_position_embeddings', file);
  const bos = tokenIdsOf(cfg.bos_token_id, 'bos_token_id', vocabSize, file);
  return {
    architecture: architecture as SupportedArchitecture,
    hiddenSize,
    intermediateSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize,
    maxPositions,
    ropeTheta: positiveNumber(cfg, 'rope_theta', 10000, file),
    rmsNormEps: positiveNumber(cfg, 'rms_norm_eps', 1e-6, file),
    tieWordEmbeddings: cfg.tie_word_embeddings === true,
    attentionBias: isQwen2 ? cfg.attention_bias !== false : cfg.attention_bias === true,
    bosTokenId: bos.length > 0 ? bos[0] : null,
    eosTokenIds: tokenIdsOf(cfg.eos_token_id, 'eos_token_id', vocabSize, file),
  };
}

/** The config.json a Hugging Face `transformers` loader accepts for this model. */
export function toHfConfig(config: LlamaConfig): Record<string, unknown> {
  const isQwen2 = config.architecture === 'Qwen2ForCausalLM';
  const modelType = {
    LlamaForCausalLM: 'llama',
    Qwen2ForCausalLM: 'qwen2',
    Qwen3ForCausalLM: 'qwen3',
  };
  return {
    architectures: [config.architecture],
    model_type: modelType[config.architecture],
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
    if (hasQkNorm(config)) {
      specs.push({ name: `${p}.self_attn.q_norm.weight`, shape: [D] });
      specs.push({ name: `${p}.self_attn.k_norm.weight`, shape: [D] });
    }
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
