// Loads a Hugging Face model folder from any ModelSource: config.json, generation_config.json,
// model.safetensors (or model.safetensors.index.json + shards) and the tokenizer files. Every
// parameter the config implies (parameterSpecs) must be present with the right shape; the errors
// say which file and which tensor. Cheap checks (config, tokenizer) run before any weights are read,
// so a bad folder fails before a large download.
//
// The folder is untrusted input: shard names must be plain names inside the folder, no file may be
// larger than what it can legitimately hold (JSON files a fixed cap, weight files what config.json's
// tensors need), token ids must lie inside vocab_size, and weights must be finite.

import {
  ModelConfigError,
  numel,
  parseHfConfig,
  parameterSpecs,
  tokenIdsOf,
  type LlamaConfig,
} from '../core/model-config';
import { ModelFileError, ModelSourceError } from './errors';
import {
  openRanged,
  parseJsonFile,
  readOptional,
  unsafeFileName,
  type ModelSource,
  type RangedFile,
  type ReadOptions,
  type ReadProgress,
} from './model-source';
import {
  decodeSafetensorsWeight,
  MAX_HEADER_BYTES,
  parseSafetensorsHeader,
  safetensorsHeaderLength,
  widenWeight,
  type SafetensorsDtype,
  type SafetensorsHeaderEntry,
} from './safetensors';
import { tokenizerIdProblem } from './tokenizer';
import type { ParameterSpec } from '../core/model-config';
import type { HalfTensor } from '../ref/half';
import { dequantizeNf4, type Nf4Tensor } from '../ref/nf4';
import {
  assembleNf4Tensor,
  bnbQuantizedWeights,
  bnbWeightName,
  parseQuantizationConfig,
  type BnbPart,
  type BnbQuantization,
} from './bnb-4bit';

/** The generation defaults a model ships with (generation_config.json), merged with config.json. */
export interface GenerationDefaults {
  /** Every token that ends a completion: generation_config.json's list, else config.json's. */
  eosTokenIds: number[];
  bosTokenId: number | null;
  padTokenId: number | null;
  temperature: number | null;
  topP: number | null;
  topK: number | null;
  maxNewTokens: number | null;
  doSample: boolean | null;
}

export interface LoadedHfModel {
  config: LlamaConfig;
  /** config.json as read (kept so an export can preserve fields we do not model). */
  configJson: Record<string, unknown>;
  generation: GenerationDefaults;
  /** Every parameterSpecs(config) tensor, f32, in parameterSpecs order. */
  tensors: Map<string, Float32Array>;
  /** dtype each tensor was stored in (for the UI: 'loaded from BF16'). */
  storedDtypes: Map<string, StoredDtype>;
  /** Tensors in the files that the model does not use (rotary inv_freq, a tied lm_head …). */
  ignoredTensors: string[];
  /** Raw bytes of the tokenizer files found (tokenizer.json always), for loadTokenizer and export. */
  tokenizerFiles: Map<string, Uint8Array>;
}

/**
 * A weight as its file stores it: F32 as f32, F16 / BF16 as their 16-bit values, a bitsandbytes
 * 4-bit weight as NF4 codes and f32 block scales (nested statistics dequantised).
 */
export type StoredWeight = Float32Array | HalfTensor | Nf4Tensor;

/** How a weight is stored, for the UI: a safetensors dtype, or NF4 (bitsandbytes 4-bit). */
export type StoredDtype = SafetensorsDtype | 'NF4';

/**
 * The weights of an opened model folder, read one tensor at a time (streamed load): only the
 * safetensors headers are held; read(name) reads that tensor's bytes from its shard and returns
 * them in their stored form, after the checks the whole-folder load does (finite values). The
 * shapes, duplicates and missing tensors are checked when the folder is opened, before any tensor
 * byte is read. A streamed load therefore holds at most one tensor's bytes (plus what its consumer
 * makes of it) besides the headers.
 */
export interface WeightReader {
  /** parameterSpecs(config): every tensor read() gives, in Hugging Face order. */
  readonly specs: readonly ParameterSpec[];
  /** dtype each tensor is stored in (for the UI: 'loaded from BF16'). */
  readonly storedDtypes: ReadonlyMap<string, StoredDtype>;
  /** The checkpoint's quantisation (bitsandbytes 4-bit NF4), or null for float weights. */
  readonly quantization: BnbQuantization | null;
  /** Tensors in the files that the model does not use (rotary inv_freq, a tied lm_head …). */
  readonly ignoredTensors: readonly string[];
  /** Bytes of the largest tensor as stored (the most one read() allocates). */
  readonly largestTensorBytes: number;
  /** One tensor, checked, as stored (a fresh buffer of its own). */
  read(name: string): Promise<StoredWeight>;
  /** Releases the shard files (further reads fail). */
  close(): Promise<void>;
}

/** A model folder opened for a streamed load: everything but the weights is read. */
export interface OpenedHfModel extends Omit<
  LoadedHfModel,
  'tensors' | 'storedDtypes' | 'ignoredTensors'
> {
  weights: WeightReader;
}

export type LoadPhase = 'config' | 'tokenizer' | 'weights';

export interface LoadHfOptions {
  onProgress?: (event: ReadProgress & { phase: LoadPhase }) => void;
  /** Default true; false loads weights only (e.g. a checkpoint without tokenizer files). */
  requireTokenizer?: boolean;
}

export const CONFIG_FILE = 'config.json';
export const GENERATION_CONFIG_FILE = 'generation_config.json';
export const SAFETENSORS_FILE = 'model.safetensors';
export const SAFETENSORS_INDEX_FILE = 'model.safetensors.index.json';
export const TOKENIZER_FILE = 'tokenizer.json';
/** Tokenizer files copied when present (besides tokenizer.json, which is required). */
export const OPTIONAL_TOKENIZER_FILES = [
  'tokenizer_config.json',
  'special_tokens_map.json',
  'chat_template.jinja',
  'chat_template.json',
];

/** config.json, generation_config.json and the shard index are small; 16 MiB is generous. */
export const MAX_JSON_FILE_BYTES = 16 * 2 ** 20;
/** tokenizer.json of a 256k vocabulary is about 35 MB. */
export const MAX_TOKENIZER_FILE_BYTES = 256 * 2 ** 20;

/**
 * The most bytes one weight file may have: every tensor the config implies in F32, plus a stored
 * lm_head (tied models often keep it), 1 MiB per layer of small extras (rotary inv_freq …) and the
 * largest header the format allows. A file beyond this is not this model's weights.
 */
export function maxWeightFileBytes(config: LlamaConfig): number {
  const params = parameterSpecs(config).reduce((sum, s) => sum + numel(s.shape), 0);
  return (
    4 * (params + config.vocabSize * config.hiddenSize) +
    2 ** 20 * (config.numLayers + 1) +
    8 +
    MAX_HEADER_BYTES
  );
}

const jsonLimit: Pick<ReadOptions, 'maxBytes' | 'maxBytesReason'> = {
  maxBytes: MAX_JSON_FILE_BYTES,
  maxBytesReason: 'a JSON settings file of a model folder',
};
const tokenizerLimit: Pick<ReadOptions, 'maxBytes' | 'maxBytesReason'> = {
  maxBytes: MAX_TOKENIZER_FILE_BYTES,
  maxBytesReason: 'a tokenizer file',
};

function asObject(value: unknown, file: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ModelFileError(file, 'expected a JSON object');
  }
  return value as Record<string, unknown>;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** generation_config.json (possibly absent) merged over config.json's token ids. */
export function parseGenerationConfig(
  json: unknown | null,
  config: LlamaConfig,
  file = GENERATION_CONFIG_FILE,
): GenerationDefaults {
  const g = json === null ? {} : asObject(json, file);
  // Token ids must name tokens of this model's vocabulary: an EOS id ≥ vocab_size can never be
  // sampled (a run would never stop) and a pad or BOS id that large would index past the embedding.
  const ids = (key: string) => {
    try {
      return tokenIdsOf(g[key], key, config.vocabSize, file);
    } catch (err) {
      if (err instanceof ModelConfigError) {
        throw new ModelFileError(file, err.message.slice(`${file}: `.length));
      }
      throw err;
    }
  };
  const eos = ids('eos_token_id');
  const bos = ids('bos_token_id');
  const pad = ids('pad_token_id');
  return {
    eosTokenIds: eos.length > 0 ? eos : config.eosTokenIds.slice(),
    bosTokenId: bos.length > 0 ? bos[0] : config.bosTokenId,
    padTokenId: pad.length > 0 ? pad[0] : null,
    temperature: num(g.temperature),
    topP: num(g.top_p),
    topK: num(g.top_k),
    maxNewTokens: num(g.max_new_tokens),
    doSample: typeof g.do_sample === 'boolean' ? g.do_sample : null,
  };
}

/** The shard files and which tensor each holds, from model.safetensors.index.json. */
export function parseSafetensorsIndex(
  json: unknown,
  file = SAFETENSORS_INDEX_FILE,
): Map<string, string> {
  const index = asObject(json, file);
  const weightMap = index.weight_map;
  if (typeof weightMap !== 'object' || weightMap === null || Array.isArray(weightMap)) {
    throw new ModelFileError(file, "has no 'weight_map' object (tensor name → shard file)");
  }
  const out = new Map<string, string>();
  for (const [name, shard] of Object.entries(weightMap as Record<string, unknown>)) {
    if (typeof shard !== 'string' || shard.length === 0) {
      throw new ModelFileError(
        file,
        `weight_map entry is not a file name: ${JSON.stringify(shard)}`,
        name,
      );
    }
    // The index is data from the folder: a shard name must not lead the loader anywhere else.
    const unsafe = unsafeFileName(shard);
    if (unsafe !== null || !shard.endsWith('.safetensors')) {
      throw new ModelFileError(
        file,
        `weight_map names shard ${JSON.stringify(shard)}, which is refused: ` +
          `${unsafe ?? 'it is not a .safetensors file'}; shards must be .safetensors files inside ` +
          `the model folder, named relative to it (e.g. "model-00001-of-00002.safetensors")`,
        name,
      );
    }
    out.set(name, shard);
  }
  return out;
}

const shapeText = (s: readonly number[]) => `[${s.join(', ')}]`;

/** Why the config implies this shape, so a mismatch message says which config.json field to check. */
function shapeReason(name: string, c: LlamaConfig): string {
  if (name.includes('embed_tokens') || name === 'lm_head.weight') {
    return `vocab_size=${c.vocabSize}, hidden_size=${c.hiddenSize}`;
  }
  if (/q_proj|o_proj/.test(name)) {
    return `num_attention_heads=${c.numHeads} × head_dim=${c.headDim}, hidden_size=${c.hiddenSize}`;
  }
  if (/k_proj|v_proj/.test(name)) {
    return `num_key_value_heads=${c.numKvHeads} × head_dim=${c.headDim}, hidden_size=${c.hiddenSize}`;
  }
  if (name.includes('mlp.'))
    return `intermediate_size=${c.intermediateSize}, hidden_size=${c.hiddenSize}`;
  return `hidden_size=${c.hiddenSize}`;
}

async function readRequired(
  source: ModelSource,
  name: string,
  what: string,
  onProgress?: (p: ReadProgress) => void,
): Promise<Uint8Array> {
  try {
    return await source.read(name, { onProgress, ...jsonLimit });
  } catch (err) {
    if (err instanceof ModelSourceError && err.reason === 'missing') {
      throw new ModelFileError(name, `missing from ${source.label}: ${what}`);
    }
    throw err;
  }
}

/**
 * Loads and validates a Hugging Face Llama/Qwen2 model folder, every weight widened to f32 (what
 * the CPU reference and the exporters work on). A GPU load streams instead: openHfFolder.
 */
export async function loadHfFolder(
  source: ModelSource,
  options: LoadHfOptions = {},
): Promise<LoadedHfModel> {
  const { weights, ...rest } = await openHfFolder(source, options);
  try {
    const tensors = await readWeights(weights, 'f32');
    return {
      ...rest,
      tensors,
      storedDtypes: new Map(weights.storedDtypes),
      ignoredTensors: [...weights.ignoredTensors],
    };
  } finally {
    await weights.close();
  }
}

/**
 * Every weight of `reader` in one Map, in parameterSpecs order: as stored ('stored': 16-bit values
 * stay 16-bit) or widened to f32. A whole-model copy: for what needs one at once (a run's initial
 * weights, the CPU reference); a GPU load streams (GpuLlama.loadStreamed) instead.
 */
export async function readWeights(
  reader: WeightReader,
  form: 'f32',
): Promise<Map<string, Float32Array>>;
export async function readWeights(
  reader: WeightReader,
  form: 'stored',
): Promise<Map<string, StoredWeight>>;
export async function readWeights(
  reader: WeightReader,
  form: 'f32' | 'stored',
): Promise<Map<string, StoredWeight>> {
  const out = new Map<string, StoredWeight>();
  for (const spec of reader.specs) {
    const data = await reader.read(spec.name);
    out.set(spec.name, form === 'f32' ? storedToF32(data) : data);
  }
  return out;
}

/**
 * Opens and validates a Hugging Face Llama/Qwen2 model folder: config, generation defaults and
 * tokenizer read, every shard's header read and checked against the config; the weights are left
 * in their files for WeightReader.read (see there). Close the reader when done.
 */
export async function openHfFolder(
  source: ModelSource,
  options: LoadHfOptions = {},
): Promise<OpenedHfModel> {
  const progress = (phase: LoadPhase) => (p: ReadProgress) => options.onProgress?.({ ...p, phase });

  const configJson = asObject(
    parseJsonFile(
      await readRequired(
        source,
        CONFIG_FILE,
        'a Hugging Face model folder needs config.json (the model architecture)',
        progress('config'),
      ),
      CONFIG_FILE,
    ),
    CONFIG_FILE,
  );
  const config = parseHfConfig(configJson, CONFIG_FILE);
  // Other quantisation methods are refused by name here, before any weight is read.
  const quantization = parseQuantizationConfig(configJson, CONFIG_FILE);
  const generationBytes = await readOptional(source, GENERATION_CONFIG_FILE, {
    onProgress: progress('config'),
    ...jsonLimit,
  });
  const generation = parseGenerationConfig(
    generationBytes === null ? null : parseJsonFile(generationBytes, GENERATION_CONFIG_FILE),
    config,
  );

  const tokenizerFiles = new Map<string, Uint8Array>();
  const tokenizerBytes = await readOptional(source, TOKENIZER_FILE, {
    onProgress: progress('tokenizer'),
    ...tokenizerLimit,
  });
  if (tokenizerBytes === null) {
    if (options.requireTokenizer !== false) {
      const listing = await source.list().catch(() => null);
      const hasSentencepiece = listing?.some((f) => f.endsWith('tokenizer.model')) ?? false;
      throw new ModelFileError(
        TOKENIZER_FILE,
        `missing from ${source.label}: the model needs its tokenizer (tokenizer.json, the Hugging Face ` +
          `"fast" tokenizer file${hasSentencepiece ? '; tokenizer.model (sentencepiece) alone is not supported' : ''}). ` +
          `Copy tokenizer.json and tokenizer_config.json from the model's repository into the folder.`,
      );
    }
  } else {
    tokenizerFiles.set(TOKENIZER_FILE, tokenizerBytes);
    for (const name of OPTIONAL_TOKENIZER_FILES) {
      const bytes = await readOptional(source, name, {
        onProgress: progress('tokenizer'),
        ...tokenizerLimit,
      });
      if (bytes !== null) tokenizerFiles.set(name, bytes);
    }
    const idProblem = tokenizerIdProblem(tokenizerFiles, config.vocabSize);
    if (idProblem) throw idProblem;
  }

  // Weights: a shard index when there is one, else the single file.
  const indexBytes = await readOptional(source, SAFETENSORS_INDEX_FILE, {
    onProgress: progress('weights'),
    ...jsonLimit,
  });
  let shardOf: Map<string, string> | null = null;
  let shardFiles: string[];
  if (indexBytes !== null) {
    shardOf = parseSafetensorsIndex(parseJsonFile(indexBytes, SAFETENSORS_INDEX_FILE));
    shardFiles = [...new Set(shardOf.values())];
  } else {
    shardFiles = [SAFETENSORS_FILE];
  }

  const specs = parameterSpecs(config);
  const wanted = new Map(specs.map((s) => [s.name, s.shape]));
  const weightLimit: ReadOptions = {
    onProgress: progress('weights'),
    maxBytes: maxWeightFileBytes(config),
    maxBytesReason: `what the tensors config.json describes can take, in F32`,
  };
  interface Found {
    entry: SafetensorsHeaderEntry;
    file: string;
    ranged: RangedFile;
    dataStart: number;
  }
  const found = new Map<string, Found>();
  /** Every entry of every shard by name (a 4-bit weight's statistics may sit in another shard). */
  const entries = new Map<string, Found>();
  const ignoredTensors: string[] = [];
  const opened: RangedFile[] = [];
  const closeAll = () => Promise.all(opened.map((f) => f.close().catch(() => undefined)));
  try {
    for (const shard of shardFiles) {
      let ranged: RangedFile;
      try {
        ranged = await openRanged(source, shard, weightLimit);
      } catch (err) {
        if (!(err instanceof ModelSourceError && err.reason === 'missing')) throw err;
        if (shardOf) {
          throw new ModelFileError(
            shard,
            `missing from ${source.label}, but ${SAFETENSORS_INDEX_FILE} lists it as a shard`,
          );
        }
        const listing = await source.list().catch(() => null);
        const legacy = listing?.find((f) => /\.(bin|pt|pth|gguf)$/.test(f));
        throw new ModelFileError(
          SAFETENSORS_FILE,
          `missing from ${source.label}: the folder needs model.safetensors or ` +
            `${SAFETENSORS_INDEX_FILE} with its shards` +
            (legacy
              ? ` (found ${legacy}; only safetensors weights can be loaded, convert it first)`
              : ''),
        );
      }
      opened.push(ranged);
      // The header only: 8 bytes of length, then the JSON; the tensors stay in the file.
      const first = await ranged.readRange(0, Math.min(8, ranged.size));
      const headerLength = safetensorsHeaderLength(first, shard, ranged.size);
      const headerBytes = new Uint8Array(8 + headerLength);
      headerBytes.set(first);
      headerBytes.set(await ranged.readRange(8, 8 + headerLength), 8);
      const header = parseSafetensorsHeader(headerBytes, shard, ranged.size);
      for (const [name, entry] of header.entries) {
        // The bytes are trusted over weight_map, but a tensor in two shards is a broken checkpoint.
        if (entries.has(name) && wanted.has(name)) {
          throw new ModelFileError(shard, `tensor also stored in ${entries.get(name)!.file}`, name);
        }
        entries.set(name, { entry, file: shard, ranged, dataStart: header.dataStart });
      }
    }
    // bitsandbytes 4-bit weights: those with a quant_state entry; their U8 bytes and statistics
    // are checked against the config when each is assembled (assembleNf4Tensor).
    const quantised = bnbQuantizedWeights(entries.keys());
    if (quantised.size > 0 && quantization === null) {
      const [first] = quantised;
      throw new ModelFileError(
        entries.get(first)!.file,
        `is stored bitsandbytes 4-bit, but config.json has no quantization_config`,
        first,
      );
    }
    for (const [name, { entry, file: shard, ranged, dataStart }] of entries) {
      const shape = wanted.get(name);
      if (!shape) {
        const owner = bnbWeightName(name);
        if (!(owner !== null && quantised.has(owner))) ignoredTensors.push(name);
        continue;
      }
      if (quantised.has(name)) {
        found.set(name, { entry, file: shard, ranged, dataStart });
        continue;
      }
      if (entry.dtype === 'U8') {
        throw new ModelFileError(
          shard,
          `dtype U8 is not a float weight (U8 holds a bitsandbytes 4-bit weight, which needs ` +
            `its quant_state entry)`,
          name,
        );
      }
      if (entry.shape.length !== shape.length || entry.shape.some((d, i) => d !== shape[i])) {
        throw new ModelFileError(
          shard,
          `shape ${shapeText(entry.shape)} disagrees with config.json, which implies ` +
            `${shapeText(shape)} (${shapeReason(name, config)})`,
          name,
        );
      }
      found.set(name, { entry, file: shard, ranged, dataStart });
    }
    /** A 4-bit weight's entries: the weight and every statistics entry that names it. */
    const partsOf = (name: string) =>
      [...entries].filter(([n]) => n === name || bnbWeightName(n) === name);

    const storedDtypes = new Map<string, StoredDtype>();
    let largestTensorBytes = 0;
    for (const spec of specs) {
      const t = found.get(spec.name);
      if (!t) {
        const where = shardOf?.get(spec.name) ?? shardFiles.join(', ');
        throw new ModelFileError(
          where,
          `tensor missing: config.json (${config.architecture}, ${config.numLayers} layers` +
            `${config.attentionBias ? ', q/k/v bias' : ''}${config.tieWordEmbeddings ? ', tied embeddings' : ''}) ` +
            `needs it with shape ${shapeText(spec.shape)}`,
          spec.name,
        );
      }
      const q = quantised.has(spec.name);
      storedDtypes.set(spec.name, q ? 'NF4' : t.entry.dtype);
      const bytes = (q ? partsOf(spec.name) : [[spec.name, t] as const]).reduce(
        (sum, [, p]) => sum + p.entry.dataOffsets[1] - p.entry.dataOffsets[0],
        0,
      );
      largestTensorBytes = Math.max(largestTensorBytes, bytes);
    }
    let closed = false;
    const weights: WeightReader = {
      specs,
      storedDtypes,
      quantization,
      ignoredTensors,
      largestTensorBytes,
      async read(name) {
        const t = found.get(name);
        if (!t || !wanted.has(name)) throw new Error(`${name} is not a parameter of this model`);
        if (closed) throw new Error(`${name}: the model's weight files are closed`);
        if (quantised.has(name)) {
          const parts = new Map<string, BnbPart>();
          for (const [n, p] of partsOf(name)) {
            const [b, e] = p.entry.dataOffsets;
            const bytes = await p.ranged.readRange(p.dataStart + b, p.dataStart + e);
            parts.set(n, { dtype: p.entry.dtype, shape: p.entry.shape, bytes });
          }
          const nf4 = assembleNf4Tensor(name, parts, wanted.get(name)!, quantization!, t.file);
          const nonFinite = countNonFinite(nf4);
          if (nonFinite > 0) {
            throw new ModelFileError(
              t.file,
              `${nonFinite} of ${nf4.count} values are NaN or infinite (their block scales are): ` +
                `the checkpoint is damaged (or was saved from a diverged run)`,
              name,
            );
          }
          return nf4;
        }
        const [begin, end] = t.entry.dataOffsets;
        const bytes = await t.ranged.readRange(t.dataStart + begin, t.dataStart + end);
        const data = decodeSafetensorsWeight(bytes, t.entry);
        // NaN or ±Inf weights make every forward pass NaN; say which tensor, at load.
        const nonFinite = countNonFinite(data);
        if (nonFinite > 0) {
          const count = data instanceof Float32Array ? data.length : lengthOf(data);
          throw new ModelFileError(
            t.file,
            `${nonFinite} of ${count} values are NaN or infinite: the checkpoint is damaged ` +
              `(or was saved from a diverged run)`,
            name,
          );
        }
        return data;
      },
      async close() {
        closed = true;
        await closeAll();
      },
    };
    return { config, configJson, generation, tokenizerFiles, weights };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** A stored weight's values as f32 (exact: 16-bit values widened; F32 as it is). */
export function storedToF32(data: StoredWeight): Float32Array {
  if (!(data instanceof Float32Array) && data.format === 'nf4') return dequantizeNf4(data);
  return widenWeight(data);
}

const lengthOf = (data: StoredWeight) =>
  data instanceof Float32Array
    ? data.length
    : data.format === 'nf4'
      ? data.count
      : data.bits.length;

/** How many values of a stored tensor are NaN or ±Inf (16-bit values by their exponent bits). */
function countNonFinite(data: StoredWeight): number {
  let n = 0;
  if (!(data instanceof Float32Array) && data.format === 'nf4') {
    // Codes are always finite; a NaN or infinite block scale makes its whole block so.
    for (let b = 0; b < data.absmax.length; b++) {
      if (!Number.isFinite(data.absmax[b]))
        n += Math.min(data.blockSize, data.count - b * data.blockSize);
    }
    return n;
  }
  if (data instanceof Float32Array) {
    for (let i = 0; i < data.length; i++) if (!Number.isFinite(data[i])) n++;
    return n;
  }
  // bf16: exponent 0x7f80 all ones; f16: exponent 0x7c00 all ones (Inf or NaN either way).
  const mask = data.format === 'bf16' ? 0x7f80 : 0x7c00;
  const bits = data.bits;
  for (let i = 0; i < bits.length; i++) if ((bits[i] & mask) === mask) n++;
  return n;
}
