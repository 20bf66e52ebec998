// Exports trained weights as a Hugging Face model folder that transformers' from_pretrained (and
// this app's loader) accepts: config.json (toHfConfig), generation_config.json, model.safetensors
// (or shards + model.safetensors.index.json) and the tokenizer files copied unchanged. Returns the
// files as bytes; the caller zips them, writes them to disk or hands them to a download.
// A LoRA run's export is the trained model: `lora` is merged into the base weights
// (W + s·B·A, src/export/peft-adapter.ts) before anything is written, never left out.

import { numel, parameterSpecs, toHfConfig, type LlamaConfig } from '../core/model-config';
import { ModelFileError } from '../formats/errors';
import type { GenerationDefaults } from '../formats/hf-folder';
import { writeSafetensors, type SafetensorsDtype } from '../formats/safetensors';
import { mergeLoraWeights, type LoraWeights } from './peft-adapter';

export interface HfExportInput {
  config: LlamaConfig;
  /** Every parameterSpecs(config) tensor; extra entries are ignored. */
  tensors: ReadonlyMap<string, Float32Array>;
  /** LoRA adapters on `tensors` (the base): written merged into their projections' weights. */
  lora?: LoraWeights | null;
  /** Copied verbatim (tokenizer.json, tokenizer_config.json, chat_template.jinja …). */
  tokenizerFiles?: ReadonlyMap<string, Uint8Array>;
  /** Written to generation_config.json; EOS/BOS default to the config's. */
  generation?: Partial<GenerationDefaults>;
  /** Storage dtype (default F32, exact; BF16 halves the size as most published checkpoints do). */
  dtype?: SafetensorsDtype;
  /** Extra safetensors metadata (format: 'pt' is always set, as transformers expects). */
  metadata?: Record<string, string>;
  /** Split into shards of at most this many bytes of tensor data (default: one file). */
  maxShardBytes?: number;
}

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value, null, 2) + '\n');

/** generation_config.json's object (EOS/BOS default to the config's). */
export function generationConfig(config: LlamaConfig, g: Partial<GenerationDefaults> = {}) {
  const eos = g.eosTokenIds ?? config.eosTokenIds;
  const out: Record<string, unknown> = {
    bos_token_id: g.bosTokenId ?? config.bosTokenId,
    eos_token_id: eos.length === 1 ? eos[0] : eos,
  };
  if (g.padTokenId != null) out.pad_token_id = g.padTokenId;
  if (g.doSample != null) out.do_sample = g.doSample;
  if (g.temperature != null) out.temperature = g.temperature;
  if (g.topP != null) out.top_p = g.topP;
  if (g.topK != null) out.top_k = g.topK;
  if (g.maxNewTokens != null) out.max_new_tokens = g.maxNewTokens;
  out.transformers_version = '4.46.0';
  return out;
}

/**
 * The safetensors dtype of a model's export given how its parameters are stored (ParameterStore
 * dtypes): BF16 from an NF4 base — its merged weights are the dequantised base plus s·B·A, written
 * in 16 bits as PEFT's merge of a 4-bit base into a bf16 model gives them (issue #37) — else F32.
 */
export function exportDtypeOf(stored: Iterable<string>): SafetensorsDtype {
  for (const dtype of stored) if (dtype === 'nf4') return 'BF16';
  return 'F32';
}

const TORCH_DTYPE: Record<SafetensorsDtype, string> = {
  F32: 'float32',
  BF16: 'bfloat16',
  F16: 'float16',
  U8: 'uint8',
};

/** The folder's files, name → bytes, in the order a listing would show them. */
export function exportHfFolder(input: HfExportInput): Map<string, Uint8Array> {
  const { config } = input;
  const dtype = input.dtype ?? 'F32';
  const elementBytes = dtype === 'F32' ? 4 : 2;
  const weights = input.lora ? mergeLoraWeights(config, input.tensors, input.lora) : input.tensors;
  const tensors = parameterSpecs(config).map((spec) => {
    const data = weights.get(spec.name);
    if (!data) throw new ModelFileError('model.safetensors', 'no weights to export', spec.name);
    if (data.length !== numel(spec.shape)) {
      throw new ModelFileError(
        'model.safetensors',
        `has ${data.length} values but shape [${spec.shape.join(', ')}] needs ${numel(spec.shape)}`,
        spec.name,
      );
    }
    return { name: spec.name, shape: spec.shape, data };
  });
  const metadata = { format: 'pt', ...input.metadata };

  // Greedy shards in parameter order (layers stay together, as transformers' own sharding does).
  const shards: (typeof tensors)[] = [[]];
  let shardBytes = 0;
  const limit = input.maxShardBytes ?? Infinity;
  for (const t of tensors) {
    const bytes = t.data.length * elementBytes;
    if (shardBytes > 0 && shardBytes + bytes > limit) {
      shards.push([]);
      shardBytes = 0;
    }
    shards[shards.length - 1].push(t);
    shardBytes += bytes;
  }

  const files = new Map<string, Uint8Array>();
  // torch_dtype names the weights' stored dtype, as transformers' save_pretrained writes it.
  files.set('config.json', json({ ...toHfConfig(config), torch_dtype: TORCH_DTYPE[dtype] }));
  files.set('generation_config.json', json(generationConfig(config, input.generation)));
  if (shards.length === 1) {
    files.set('model.safetensors', writeSafetensors(tensors, metadata, { dtype }));
  } else {
    const n = String(shards.length).padStart(5, '0');
    const weightMap: Record<string, string> = {};
    let totalSize = 0;
    shards.forEach((shard, i) => {
      const name = `model-${String(i + 1).padStart(5, '0')}-of-${n}.safetensors`;
      files.set(name, writeSafetensors(shard, metadata, { dtype, fileName: name }));
      for (const t of shard) {
        weightMap[t.name] = name;
        totalSize += t.data.length * elementBytes;
      }
    });
    files.set(
      'model.safetensors.index.json',
      json({ metadata: { total_size: totalSize }, weight_map: weightMap }),
    );
  }
  for (const [name, bytes] of input.tokenizerFiles ?? []) files.set(name, bytes);
  return files;
}
