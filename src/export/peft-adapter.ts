// LoRA adapters in and out, as PEFT reads and writes them, and merged into the base weights.
//
// Out: a PEFT adapter folder (what `PeftModel.from_pretrained(base, folder)` loads):
// adapter_config.json (LoraConfig's saved keys) and adapter_model.safetensors whose tensor names
// are PEFT's saved keys, `base_model.model.model.layers.{l}.self_attn.q_proj.lora_A.weight` (r, in)
// and `….lora_B.weight` (out, r). In memory the project names adapters without the
// `base_model.model.` prefix (src/ref/lora.ts); it is added here and removed on import.
//
// Merged: W' = W + s·B·A on every adapted projection (s = α/r, or α/√r with rslora; biases
// untouched), summed in f64 and rounded once to f32, so the HF and ONNX exports of a LoRA run are
// the trained model (its forward equals the adapter forward to f32 rounding), not the base.
//
// In: an adapter folder is untrusted input. Its config must describe what this project's LoRA
// computes (plain LoRA on decoder projections, no DoRA, no per-layer rank or alpha, no bias or
// extra trained modules), and every tensor must be one of the expected names with the model's
// shape; each error names the file and the key or tensor at fault.

import { numel, type LlamaConfig } from '../core/model-config';
import { ModelFileError } from '../formats/errors';
import { parseJsonFile, readOptional, type ModelSource } from '../formats/model-source';
import { MAX_HEADER_BYTES, parseSafetensors, writeSafetensors } from '../formats/safetensors';
import {
  LORA_ALPHA_MAX,
  LORA_PROJECTIONS,
  loraAdapterSpecs,
  loraTargets,
  mergeLoraAdapters,
  projectionDims,
  projectionPath,
  type LoraOptions,
  type LoraProjection,
} from '../core/lora';

export const PEFT_CONFIG_FILE = 'adapter_config.json';
export const PEFT_WEIGHTS_FILE = 'adapter_model.safetensors';
/** What PeftModel puts before the base model's own parameter names in saved adapter keys. */
export const PEFT_KEY_PREFIX = 'base_model.model.';
/** PEFT refuses adapter configs over this size long before; a bigger file is not a config. */
const MAX_CONFIG_BYTES = 1 << 20;

/** A LoRA run's adapters: its options and A/B tensors by the project's names (no PEFT prefix). */
export interface LoraWeights {
  options: LoraOptions;
  adapters: ReadonlyMap<string, Float32Array>;
}

/** The adapter tensors `options` implies for `config`, each present with its (r, in)/(out, r) size. */
function checkedAdapters(config: LlamaConfig, lora: LoraWeights, file: string) {
  return loraAdapterSpecs(config, lora.options).map((spec) => {
    const data = lora.adapters.get(spec.name);
    if (!data) throw new ModelFileError(file, 'no adapter to export', spec.name);
    if (data.length !== numel(spec.shape)) {
      throw new ModelFileError(
        file,
        `has ${data.length} values but shape [${spec.shape.join(', ')}] needs ${numel(spec.shape)}`,
        spec.name,
      );
    }
    return { name: spec.name, shape: spec.shape, data };
  });
}

/**
 * The base weights with every adapter merged in: W + s·B·A for each adapted projection (a new
 * array), every other tensor passed through as given (core/lora.ts mergeLoraAdapters), after
 * checking a file's adapters and the base's weights, with the tensor's name in the error.
 */
export function mergeLoraWeights(
  config: LlamaConfig,
  base: ReadonlyMap<string, Float32Array>,
  lora: LoraWeights,
): Map<string, Float32Array> {
  checkedAdapters(config, lora, 'merged model'); // every A and B present, of its size
  for (let l = 0; l < config.numLayers; l++) {
    for (const projection of loraTargets(lora.options.targetModules)) {
      const [inDim, outDim] = projectionDims(config, projection);
      const name = `${projectionPath(l, projection)}.weight`;
      const W = base.get(name);
      if (!W || W.length !== inDim * outDim)
        throw new ModelFileError('merged model', 'base weight missing or of the wrong size', name);
    }
  }
  return mergeLoraAdapters(config, base, lora.options, lora.adapters);
}

/**
 * adapter_config.json's object: LoraConfig's keys as PEFT saves them (the set shared by PEFT
 * releases since 0.10, so older and newer PEFT both load it; newer PEFT fills its later keys with
 * their defaults). target_modules is the explicit list of projections, as PEFT saves a resolved
 * 'all-linear'.
 */
export function peftAdapterConfig(
  options: LoraOptions,
  baseModelNameOrPath: string | null = null,
): Record<string, unknown> {
  return {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: baseModelNameOrPath,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layer_replication: null,
    layers_pattern: null,
    layers_to_transform: null,
    loftq_config: {},
    lora_alpha: options.alpha,
    lora_dropout: options.dropout,
    megatron_config: null,
    megatron_core: 'megatron.core',
    modules_to_save: null,
    peft_type: 'LORA',
    r: options.r,
    rank_pattern: {},
    revision: null,
    target_modules: loraTargets(options.targetModules),
    task_type: 'CAUSAL_LM',
    use_dora: false,
    use_rslora: options.useRslora,
  };
}

export interface PeftExportInput {
  config: LlamaConfig;
  lora: LoraWeights;
  /** adapter_config.json's base_model_name_or_path (the base model's folder, hub id or label;
   * baseModelName() turns a page's label into what PEFT expects there). */
  baseModelNameOrPath?: string | null;
}

/**
 * What adapter_config.json's base_model_name_or_path says for a model the page or the CLI loaded:
 * PEFT's from_pretrained loads the base from it, so a Hugging Face URL becomes its hub id
 * ('https://huggingface.co/org/model/resolve/main/' → 'org/model'), the bundled model's label
 * loses its '(bundled)', and a folder's name or path stays as it is.
 */
export function baseModelName(label: string | null | undefined): string | null {
  const name = label?.trim();
  if (!name) return null;
  const hub =
    /^https:\/\/huggingface\.co\/([\w.-]+\/[\w.-]+)(?:\/(?:resolve|tree|blob)\/[^?#]*)?\/?$/.exec(
      name,
    );
  if (hub) return hub[1];
  return name.replace(/\s+\(bundled\)$/, '');
}

/** The adapter folder's files: adapter_config.json and adapter_model.safetensors (F32). */
export function exportPeftAdapter(input: PeftExportInput): Map<string, Uint8Array> {
  const tensors = checkedAdapters(input.config, input.lora, PEFT_WEIGHTS_FILE).map((t) => ({
    ...t,
    name: PEFT_KEY_PREFIX + t.name,
  }));
  const config = peftAdapterConfig(input.lora.options, baseModelName(input.baseModelNameOrPath));
  return new Map([
    [PEFT_CONFIG_FILE, new TextEncoder().encode(JSON.stringify(config, null, 2) + '\n')],
    [
      PEFT_WEIGHTS_FILE,
      writeSafetensors(tensors, { format: 'pt' }, { fileName: PEFT_WEIGHTS_FILE }),
    ],
  ]);
}

/** An imported adapter: what the trainer needs, and the base model the config names. */
export interface ImportedAdapter extends LoraWeights {
  options: LoraOptions;
  adapters: Map<string, Float32Array>;
  baseModelNameOrPath: string | null;
}

/** A problem with one key of adapter_config.json. */
export class PeftConfigError extends ModelFileError {
  override name = 'PeftConfigError';
  constructor(
    readonly key: string,
    detail: string,
  ) {
    super(PEFT_CONFIG_FILE, `'${key}' ${detail}`);
  }
}

const isEmpty = (v: unknown) =>
  v === undefined ||
  v === null ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === 'object' && !Array.isArray(v) && Object.keys(v as object).length === 0);

/** target_modules as PEFT matches them (a name equals the module path or is a suffix of it after a
 * dot) resolved to this project's projections; a regex string or another module is refused. */
function targetsOf(value: unknown): LoraProjection[] {
  if (value === 'all-linear') return [...LORA_PROJECTIONS];
  if (typeof value === 'string') {
    throw new PeftConfigError(
      'target_modules',
      `is a pattern ('${value}'): only a list of projection names or 'all-linear' can be loaded`,
    );
  }
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string'))
    throw new PeftConfigError('target_modules', 'must be a non-empty list of module names');
  const found = new Set<LoraProjection>();
  for (const name of value as string[]) {
    const last = name.split('.').pop()!;
    const projection = LORA_PROJECTIONS.find((p) => p === last);
    const block = projection && projectionPath(0, projection).replace(/^model\.layers\.0\./, '');
    // 'q_proj', 'self_attn.q_proj' (a suffix of model.layers.{l}.self_attn.q_proj) are that
    // projection; lm_head, embed_tokens or 'mlp.q_proj' name nothing this LoRA adapts.
    if (!projection || !(name === projection || block!.endsWith(`.${name}`) || block === name)) {
      throw new PeftConfigError(
        'target_modules',
        `names '${name}', which is not one of the decoder projections LoRA is supported on (${LORA_PROJECTIONS.join(', ')})`,
      );
    }
    found.add(projection);
  }
  return LORA_PROJECTIONS.filter((p) => found.has(p));
}

/** LoraOptions from adapter_config.json, refusing what this project's LoRA does not compute. */
export function parsePeftConfig(json: unknown): {
  options: LoraOptions;
  baseModelNameOrPath: string | null;
} {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw new ModelFileError(PEFT_CONFIG_FILE, 'must be a JSON object');
  const c = json as Record<string, unknown>;
  if (c.peft_type !== 'LORA')
    throw new PeftConfigError('peft_type', `must be "LORA", got ${JSON.stringify(c.peft_type)}`);
  if (c.task_type != null && c.task_type !== 'CAUSAL_LM')
    throw new PeftConfigError(
      'task_type',
      `must be "CAUSAL_LM", got ${JSON.stringify(c.task_type)}`,
    );
  const r = c.r;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 1 || r > 1024)
    throw new PeftConfigError('r', `must be an integer in [1, 1024], got ${JSON.stringify(r)}`);
  const alpha = c.lora_alpha;
  if (typeof alpha !== 'number' || !Number.isFinite(alpha) || alpha <= 0 || alpha > LORA_ALPHA_MAX)
    throw new PeftConfigError(
      'lora_alpha',
      `must be a number in (0, ${LORA_ALPHA_MAX}], got ${JSON.stringify(alpha)}`,
    );
  const dropout = c.lora_dropout ?? 0;
  if (typeof dropout !== 'number' || !(dropout >= 0 && dropout < 1))
    throw new PeftConfigError('lora_dropout', `must be in [0, 1), got ${JSON.stringify(dropout)}`);
  const rslora = c.use_rslora ?? false;
  if (typeof rslora !== 'boolean')
    throw new PeftConfigError('use_rslora', `must be true or false, got ${JSON.stringify(rslora)}`);
  const refuse = (key: string, ok: boolean, why: string) => {
    if (!ok) throw new PeftConfigError(key, `${why} (got ${JSON.stringify(c[key])})`);
  };
  refuse('use_dora', !c.use_dora, 'must be false: DoRA is not supported');
  refuse(
    'bias',
    c.bias == null || c.bias === 'none',
    'must be "none": trained biases are not supported',
  );
  refuse('fan_in_fan_out', !c.fan_in_fan_out, 'must be false (Conv1D layouts are not Llama ones)');
  refuse('modules_to_save', isEmpty(c.modules_to_save), 'must be empty: only adapters are loaded');
  refuse('rank_pattern', isEmpty(c.rank_pattern), 'must be empty: one rank for every projection');
  refuse(
    'alpha_pattern',
    isEmpty(c.alpha_pattern),
    'must be empty: one alpha for every projection',
  );
  refuse(
    'layers_to_transform',
    isEmpty(c.layers_to_transform),
    'must be null: every layer has adapters',
  );
  refuse('layer_replication', isEmpty(c.layer_replication), 'must be null');
  refuse('use_qalora', !c.use_qalora, 'must be false');
  refuse('lora_bias', !c.lora_bias, 'must be false: lora_B has no bias here');
  refuse('exclude_modules', isEmpty(c.exclude_modules), 'must be empty');
  refuse('target_parameters', isEmpty(c.target_parameters), 'must be empty');
  refuse('trainable_token_indices', isEmpty(c.trainable_token_indices), 'must be empty');
  const targetModules = targetsOf(c.target_modules);
  const base = c.base_model_name_or_path;
  return {
    // Dropout acts in training only: the adapter computes the same function whatever it was, and
    // training it further here runs without dropout (the only setting this project implements).
    options: { r, alpha, targetModules, useRslora: rslora, dropout: 0 },
    baseModelNameOrPath: typeof base === 'string' ? base : null,
  };
}

/**
 * An adapter folder's two files, checked against `config`: the options, and every expected tensor
 * (PEFT's saved names) with its shape; a missing, unexpected or misshapen tensor is an error.
 */
export function parsePeftAdapter(
  files: { config: Uint8Array; weights: Uint8Array },
  config: LlamaConfig,
): ImportedAdapter {
  if (files.config.byteLength > MAX_CONFIG_BYTES)
    throw new ModelFileError(PEFT_CONFIG_FILE, `is larger than ${MAX_CONFIG_BYTES} bytes`);
  const { options, baseModelNameOrPath } = parsePeftConfig(
    parseJsonFile(files.config, PEFT_CONFIG_FILE),
  );
  const { tensors } = parseSafetensors(files.weights, PEFT_WEIGHTS_FILE);
  const specs = loraAdapterSpecs(config, options);
  const expected = new Set(specs.map((s) => PEFT_KEY_PREFIX + s.name));
  for (const name of tensors.keys()) {
    if (expected.has(name)) continue;
    const hint = name.startsWith(PEFT_KEY_PREFIX)
      ? `not an adapter of target_modules ${JSON.stringify(loraTargets(options.targetModules))} on this ${config.numLayers}-layer model`
      : `not a PEFT adapter key (they begin with '${PEFT_KEY_PREFIX}')`;
    throw new ModelFileError(PEFT_WEIGHTS_FILE, `unexpected tensor: ${hint}`, name);
  }
  const adapters = new Map<string, Float32Array>();
  for (const spec of specs) {
    const key = PEFT_KEY_PREFIX + spec.name;
    const t = tensors.get(key);
    if (!t) throw new ModelFileError(PEFT_WEIGHTS_FILE, 'missing adapter tensor', key);
    if (t.shape.length !== 2 || t.shape[0] !== spec.shape[0] || t.shape[1] !== spec.shape[1]) {
      throw new ModelFileError(
        PEFT_WEIGHTS_FILE,
        `has shape [${t.shape.join(', ')}], expected [${spec.shape.join(', ')}] (r = ${options.r} in ${PEFT_CONFIG_FILE})`,
        key,
      );
    }
    for (let i = 0; i < t.data.length; i++) {
      if (!Number.isFinite(t.data[i]))
        throw new ModelFileError(PEFT_WEIGHTS_FILE, `has a non-finite value at ${i}`, key);
    }
    // A copy: the parsed view shares the file's bytes, which a caller may transfer or reuse.
    adapters.set(spec.name, Float32Array.from(t.data));
  }
  return { options, adapters, baseModelNameOrPath };
}

/** Reads an adapter folder (adapter_config.json + adapter_model.safetensors) from any source. */
export async function loadPeftAdapter(
  source: ModelSource,
  config: LlamaConfig,
): Promise<ImportedAdapter> {
  const configBytes = await readOptional(source, PEFT_CONFIG_FILE, { maxBytes: MAX_CONFIG_BYTES });
  if (!configBytes)
    throw new ModelFileError(
      PEFT_CONFIG_FILE,
      `missing from ${source.label}: not a PEFT adapter folder`,
    );
  const { options } = parsePeftConfig(parseJsonFile(configBytes, PEFT_CONFIG_FILE));
  // What the config's adapters can take in F32, plus the largest header the format allows.
  const values = loraAdapterSpecs(config, options).reduce((n, s) => n + numel(s.shape), 0);
  const weights = await readOptional(source, PEFT_WEIGHTS_FILE, {
    maxBytes: 8 + MAX_HEADER_BYTES + 4 * values,
    maxBytesReason: `r = ${options.r} adapters on this model need at most that`,
  });
  if (!weights) {
    throw new ModelFileError(
      PEFT_WEIGHTS_FILE,
      `missing from ${source.label} (an adapter_model.bin from older PEFT cannot be read: save with safe_serialization)`,
    );
  }
  return parsePeftAdapter({ config: configBytes, weights }, config);
}

/** The run config fields that make a run train this adapter's shape (usePeft and its options). */
export function loraConfigFields(options: LoraOptions) {
  return {
    usePeft: true,
    loraR: options.r,
    loraAlpha: options.alpha,
    loraDropout: 0,
    loraTargetModules: loraTargets(options.targetModules) as string[],
    useRslora: options.useRslora,
  };
}
