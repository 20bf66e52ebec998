// Parameter storage of a GPU model: one GPU buffer per parameter (and per gradient), in Hugging
// Face names, and the row chunking of tables too large for one storage binding.
//
// Split tensors: the embedding table and the LM head (V, C) of a real model can exceed what one
// storage binding (or one buffer) may hold, so they are stored as row chunks (blocks of vocabulary
// ids), each its own buffer, gradient and AdamW state. Chunk sizes are multiples of MATMUL_TILE_K
// rows, so the head's input gradient, summed chunk after chunk (MatmulKernel continueSum), has the
// bits of one unsplit product (see GpuLlama's head).
//
// LoRA adapters (src/ref/lora.ts) are stored beside the base weights under their PEFT names, one
// buffer each (never split). With adapters the base is frozen: only the adapters get gradient
// buffers and are what the optimizer sees (trainableSpecs); without them every parameter trains.
//
// Half-precision frozen weights (config dtype): with adapters and frozenDtype bf16 / f16, the base's
// matrices (every 2-D tensor: projections, embedding, LM head) are stored as 16-bit values packed two
// per u32 (src/ref/half.ts), element e of a chunk in half e & 1 of word e >> 1, each chunk packed on
// its own (an odd count pads its last word); the kernels widen them to f32 (matmul_packed16.wgsl,
// embedding_forward_packed16.wgsl). Norm weights and biases stay f32 (they are tiny and their
// kernels read f32). Trainable tensors are always f32. Values given as f32 are rounded to nearest
// even; 16-bit values given in the stored format are kept as they are.
//
// NF4 frozen weights (config dtype 'nf4', QLoRA; issue #37): with adapters, each decoder projection
// (q/k/v/o/gate/up/down_proj) is quantised at load as bitsandbytes does (src/ref/nf4.ts: blocks of
// 64, an f32 absmax each; with nested quantisation the absmax go through bitsandbytes' double
// quantisation and back, so the weights are the values its double-quantised model computes with)
// and stored in ONE buffer: the code bytes as they are (byte b in bits 8·(b & 3) of word b >> 2),
// padded to a whole word, then the f32 absmax from word ceil(count / 8). The matmul dequantises in
// registers (shaders/matmul_nf4.wgsl). The embedding and LM head are stored bf16 (bitsandbytes
// leaves them 16-bit), norms and biases f32. An Nf4Tensor given as such (a pre-quantised
// checkpoint) is stored as it is; read back, NF4 parameters are dequantised to f32.
import { numel, parameterSpecs, type LlamaConfig, type ParameterSpec } from '../core/model-config';
import {
  createStorageBuffer,
  readRanges,
  uploadStorageBuffer,
  writeBuffer,
  type ReadRange,
} from '../engine/buffers';
import { MATMUL_TILE_K, type WeightDtype } from '../kernels/matmul';
import {
  f16BitsToF32,
  f32ToF16Bits,
  packHalfBits,
  toHalfBits,
  unpackHalfBits,
  widenHalfBits,
  type HalfFormat,
  type HalfTensor,
} from '../ref/half';
import {
  dequantizeAbsmaxNested,
  dequantizeNf4,
  NF4_BLOCK_SIZE,
  quantizeAbsmaxNested,
  quantizeNf4,
  type Nf4Tensor,
} from '../ref/nf4';

const F32 = 4;

/**
 * A parameter's values: f32, 16-bit values as a checkpoint ships them (kept when stored so), or
 * NF4 codes and block scales (a pre-quantised checkpoint; kept when stored as nf4).
 */
export type WeightTensor = Float32Array | HalfTensor | Nf4Tensor;

/** The element count of a WeightTensor. */
const lengthOf = (t: WeightTensor) =>
  t instanceof Float32Array ? t.length : t.format === 'nf4' ? t.count : t.bits.length;

/** u32 words of an NF4 parameter of `count` elements: its codes (a word per 8), then the absmax. */
export const nf4StoredWords = (count: number) =>
  Math.ceil(count / 8) + Math.ceil(count / NF4_BLOCK_SIZE);

/**
 * Bytes of `count` values stored as `dtype`: f32, 16-bit pairs in whole u32 words, or NF4 codes
 * padded to a word plus one f32 absmax per block of 64.
 */
export function storedBytes(count: number, dtype: WeightDtype): number {
  if (dtype === 'f32') return count * F32;
  if (dtype === 'nf4') return nf4StoredWords(count) * 4;
  return Math.ceil(count / 2) * 4;
}

/** The config's dtype option (TRL ModelConfig's names, and QLoRA's 4-bit): frozen weights' storage. */
export type DtypeOption = 'auto' | 'bfloat16' | 'float16' | 'float32' | 'nf4';

/** Whether parameter `name` is a decoder projection: what NF4 storage quantises. */
export function isNf4Quantised(name: string): boolean {
  return /^model\.layers\.\d+\.(self_attn|mlp)\.(q|k|v|o|gate|up|down)_proj\.weight$/.test(name);
}

/**
 * How parameter `spec` is stored when the frozen base's matrices are `frozen` (f32 for every
 * parameter when nothing is frozen): 1-D tensors f32; under NF4 the projections nf4 and the
 * embedding and LM head bf16; otherwise every matrix as `frozen`.
 */
export function storedDtypeOf(spec: ParameterSpec, frozen: WeightDtype): WeightDtype {
  if (spec.shape.length !== 2) return 'f32';
  if (frozen === 'nf4') return isNf4Quantised(spec.name) ? 'nf4' : 'bf16';
  return frozen;
}

/**
 * Weights read one tensor at a time (src/formats/hf-folder.ts WeightReader): a load streams them
 * into the GPU (GpuLlama.loadStreamed), so the host never holds the whole model.
 */
export interface StreamedWeights {
  /** Each tensor's dtype as stored in the checkpoint ('F32', 'BF16', 'F16', 'NF4' …). */
  readonly storedDtypes: ReadonlyMap<string, string>;
  /** One tensor in its stored form (a fresh buffer of its own). */
  read(name: string): Promise<WeightTensor>;
}

/** A model's initial weights: all on the host, or read tensor by tensor (streamed). */
export type WeightSource = ReadonlyMap<string, WeightTensor> | StreamedWeights;

/** Whether `weights` are read tensor by tensor (a reader) rather than held in a Map. */
export function isStreamed(weights: WeightSource): weights is StreamedWeights {
  return typeof (weights as Partial<StreamedWeights>).read === 'function';
}

/** The checkpoint format of `weights`' 2-D tensors (not pre-quantised): bf16 / f16 when every
 * matrix is, else f32. A reader says it from its stored
 * dtypes; a Map from its values (a BF16 checkpoint widened on load is still all bf16 values). */
function checkpointFormatOf(config: LlamaConfig, weights: WeightSource): WeightDtype {
  const matrices = parameterSpecs(config).filter((spec) => spec.shape.length === 2);
  if (isStreamed(weights)) {
    const stored = matrices
      .map((spec) => weights.storedDtypes.get(spec.name))
      .filter((d): d is string => d !== undefined);
    if (stored.length > 0 && stored.every((d) => d === 'BF16')) return 'bf16';
    if (stored.length > 0 && stored.every((d) => d === 'F16')) return 'f16';
    return 'f32';
  }
  const tensors = matrices
    .map((spec) => weights.get(spec.name))
    .filter((t): t is WeightTensor => t !== undefined);
  for (const format of ['bf16', 'f16'] as const) {
    if (tensors.every((t) => holdsExactly(t, format))) return format;
  }
  return 'f32';
}

/** Whether `weights` hold a pre-quantised (bitsandbytes 4-bit NF4) checkpoint's projections. */
export function isPrequantised(weights: WeightSource): boolean {
  if (isStreamed(weights)) return [...weights.storedDtypes.values()].includes('NF4');
  return [...weights.values()].some((t) => !(t instanceof Float32Array) && t.format === 'nf4');
}

/**
 * A 4-bit (NF4) checkpoint trains only under LoRA, as PEFT and transformers refuse to fine-tune a
 * quantised model without adapters (dtype 'nf4' itself is refused so by resolveConfig).
 */
export function checkQuantisedBase(config: { usePeft: boolean }, weights: WeightSource): void {
  if (config.usePeft || !isPrequantised(weights)) return;
  const quantised = isStreamed(weights)
    ? [...weights.storedDtypes].find(([, d]) => d === 'NF4')
    : [...weights].find(([, t]) => !(t instanceof Float32Array) && t.format === 'nf4');
  if (quantised) {
    throw new Error(
      `This model is 4-bit (NF4) quantised (${quantised[0]}): a full fine-tune cannot train it. ` +
        'Turn LoRA (usePeft) on to train adapters on the frozen 4-bit base.',
    );
  }
}

/**
 * The storage of frozen matrices for config dtype `option`. A pre-quantised (bitsandbytes 4-bit)
 * checkpoint keeps its NF4 projections whatever `option` says, as transformers does (its
 * torch_dtype applies only to the unquantised tensors; here those, the embedding and LM head, are
 * stored bf16 as under dtype nf4). Otherwise 'auto' keeps the checkpoint's format (bf16 when every
 * 2-D tensor is bf16, f16 when every one is f16, else f32), so 'auto' never changes a weight.
 */
export function frozenDtypeOf(
  option: DtypeOption,
  config: LlamaConfig,
  weights: WeightSource,
): WeightDtype {
  if (isPrequantised(weights)) return 'nf4';
  if (option === 'nf4') return 'nf4';
  if (option === 'bfloat16') return 'bf16';
  if (option === 'float16') return 'f16';
  if (option === 'float32') return 'f32';
  return checkpointFormatOf(config, weights);
}

/** Whether every value of `t` is a `format` value (16-bit values count in their own format). */
function holdsExactly(t: WeightTensor, format: HalfFormat): boolean {
  if (!(t instanceof Float32Array)) return t.format === format;
  if (format === 'bf16') {
    const bits = new Uint32Array(t.buffer, t.byteOffset, t.length);
    for (let i = 0; i < bits.length; i++) if ((bits[i] & 0xffff) !== 0) return false;
    return true;
  }
  for (let i = 0; i < t.length; i++) if (f16BitsToF32(f32ToF16Bits(t[i])) !== t[i]) return false;
  return true;
}

/** A block of rows [rowStart, rowStart + rows) of a parameter, stored as its own buffer. */
export interface ParameterChunk {
  /** Key in params / grads / specs: the parameter's name, or `name[start:end]` when split. */
  key: string;
  rowStart: number;
  rows: number;
}

/** The parameters that may be stored as row chunks: (V, C) tables indexed by token id. */
const SPLITTABLE = new Set(['model.embed_tokens.weight', 'lm_head.weight']);

/**
 * Row chunks of every parameter under `limit` bytes per buffer (one chunk when it fits);
 * `frozen`: how the frozen matrices are stored (storedDtypeOf; `true` is bf16, packed 16-bit).
 */
export function planParameterChunks(
  config: LlamaConfig,
  limit: number,
  frozen: WeightDtype | boolean = 'f32',
): Map<string, ParameterChunk[]> {
  const out = new Map<string, ParameterChunk[]>();
  const matrices = frozen === true ? 'bf16' : frozen === false ? 'f32' : frozen;
  for (const spec of parameterSpecs(config)) {
    const rows = spec.shape[0];
    const dtype = storedDtypeOf(spec, matrices);
    const valueBytes = dtype === 'f32' ? F32 : 2;
    const rowBytes = (numel(spec.shape) / rows) * valueBytes;
    if (storedBytes(numel(spec.shape), dtype) <= limit) {
      out.set(spec.name, [{ key: spec.name, rowStart: 0, rows }]);
      continue;
    }
    // An NF4 tensor's scales follow all of its codes: it is one buffer, never split.
    if (!SPLITTABLE.has(spec.name) || dtype === 'nf4') {
      throw new RangeError(
        `${spec.name} [${spec.shape}] needs ${storedBytes(numel(spec.shape), dtype)} bytes, more than one buffer binding ` +
          `allows (${limit}); only the embedding table and the LM head are split`,
      );
    }
    // Multiples of the matmul's K tile keep the head's split input gradient bit-identical (and
    // hold an even number of 16-bit values, so no word is shared by two chunks).
    const perChunk = Math.floor(limit / rowBytes / MATMUL_TILE_K) * MATMUL_TILE_K;
    if (perChunk < 1) {
      throw new RangeError(
        `${spec.name}: ${MATMUL_TILE_K} rows of ${rowBytes} bytes exceed the binding limit ${limit}`,
      );
    }
    const chunks: ParameterChunk[] = [];
    for (let start = 0; start < rows; start += perChunk) {
      const end = Math.min(rows, start + perChunk);
      chunks.push({ key: `${spec.name}[${start}:${end}]`, rowStart: start, rows: end - start });
    }
    out.set(spec.name, chunks);
  }
  return out;
}

/** A parameter (or one row chunk of it) on the GPU: its key and buffer. */
export interface GpuParameter {
  /** Key in ParameterStore.params / grads: the HF name, or `name[start:end]` for a chunk. */
  name: string;
  buffer: GPUBuffer;
  /** How the buffer stores the values: f32, bf16 / f16 packed two per u32, or nf4 (frozen only). */
  dtype: WeightDtype;
}

/** How ParameterStore quantises f32 / 16-bit weights it stores as nf4. */
export interface Nf4Options {
  /** bitsandbytes' double quantisation of the block scales (TRL use_bnb_nested_quant). */
  nested?: boolean;
}

/**
 * The NF4 tensor a parameter stored as nf4 holds: `data` as it is when already NF4 (a
 * pre-quantised checkpoint), else quantised as bitsandbytes quantize_4bit does (nested: the
 * absmax double-quantised and dequantised again, the values the double-quantised model uses).
 */
export function toNf4(data: WeightTensor, options: Nf4Options = {}): Nf4Tensor {
  if (!(data instanceof Float32Array) && data.format === 'nf4') return data;
  const values = data instanceof Float32Array ? data : widenHalfBits(data.bits, data.format);
  const t = quantizeNf4(values, NF4_BLOCK_SIZE);
  if (!options.nested) return t;
  return { ...t, absmax: dequantizeAbsmaxNested(quantizeAbsmaxNested(t.absmax)) };
}

/** An NF4 tensor in the stored one-buffer layout: code bytes padded to a word, then the absmax. */
export function packNf4Words(t: Nf4Tensor): Uint32Array {
  if (t.blockSize !== NF4_BLOCK_SIZE) {
    throw new Error(`NF4 block size ${t.blockSize}: only ${NF4_BLOCK_SIZE} is stored`);
  }
  const codeWords = Math.ceil(t.count / 8);
  const words = new Uint32Array(codeWords + t.absmax.length);
  new Uint8Array(words.buffer, 0, t.codes.length).set(t.codes);
  words.set(new Uint32Array(t.absmax.buffer, t.absmax.byteOffset, t.absmax.length), codeWords);
  return words;
}

/** The NF4 tensor of `count` elements held by stored words (packNf4Words' inverse). */
export function unpackNf4Words(words: Uint32Array, count: number): Nf4Tensor {
  const codeWords = Math.ceil(count / 8);
  const blocks = Math.ceil(count / NF4_BLOCK_SIZE);
  const bytes = new Uint8Array(words.buffer, words.byteOffset, codeWords * 4);
  return {
    format: 'nf4',
    count,
    blockSize: NF4_BLOCK_SIZE,
    codes: bytes.slice(0, Math.ceil(count / 2)),
    absmax: new Float32Array(words.slice(codeWords, codeWords + blocks).buffer),
  };
}

/** f32 values of any WeightTensor (16-bit widened, NF4 dequantised). */
export function toF32(data: WeightTensor): Float32Array {
  if (data instanceof Float32Array) return data;
  return data.format === 'nf4' ? dequantizeNf4(data) : widenHalfBits(data.bits, data.format);
}

/**
 * One tensor (or one row chunk of it) in the format a buffer of `dtype` stores: f32 values, 16-bit
 * values packed two per u32 (rounded to nearest even unless already in that format), or NF4 in the
 * one-buffer layout (quantised unless already NF4). The seam every upload path goes through.
 */
export function storedParameter(
  data: WeightTensor,
  dtype: WeightDtype,
  nf4: Nf4Options = {},
): Float32Array | Uint32Array {
  if (dtype === 'nf4') return packNf4Words(toNf4(data, nf4));
  if (dtype === 'f32') return toF32(data);
  // 16-bit values in the stored format are kept as shipped; anything else is rounded.
  if (!(data instanceof Float32Array) && data.format === dtype) return packHalfBits(data.bits);
  return packHalfBits(toHalfBits(toF32(data), dtype));
}

/** A value read back from a buffer of `dtype` holding `count` stored elements, as f32
 * (ParameterStore.readJoined's widening and dequantisation). */
function storedToF32(stored: Float32Array | Uint32Array, dtype: WeightDtype, count: number) {
  if (dtype === 'f32') return stored as Float32Array;
  if (dtype === 'nf4') return dequantizeNf4(unpackNf4Words(stored as Uint32Array, count));
  return widenHalfBits(unpackHalfBits(stored as Uint32Array, count), dtype);
}

/**
 * The f32 values a model's parameter buffers hold of `weights` when its frozen matrices are stored
 * as `frozen` (storedDtypeOf per tensor), computed on the host: what readParameters returns after
 * those weights were uploaded. 16-bit matrices rounded, NF4 ones quantised and dequantised, 1-D
 * tensors as given. A LoRA stage's end weights are these with the adapters merged (a recipe
 * resumed after one rebuilds them from its adapter-only checkpoint, src/recipes/recipe.ts).
 */
export function storedValues(
  config: LlamaConfig,
  weights: ReadonlyMap<string, WeightTensor>,
  frozen: WeightDtype,
  nf4: Nf4Options = {},
): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(config)) {
    const data = weights.get(spec.name);
    if (!data) throw new Error(`missing parameter ${spec.name}`);
    out.set(spec.name, storedValue(spec, data, frozen, nf4));
  }
  return out;
}

/** storedValues of weights that may be a reader (a recipe's base, streamed): each tensor is read
 * and converted before the next, so besides the result only one tensor as stored is held. */
export async function storedValuesOf(
  config: LlamaConfig,
  weights: WeightSource,
  frozen: WeightDtype,
  nf4: Nf4Options = {},
): Promise<Map<string, Float32Array>> {
  if (!isStreamed(weights)) return storedValues(config, weights, frozen, nf4);
  const out = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(config))
    out.set(spec.name, storedValue(spec, await weights.read(spec.name), frozen, nf4));
  return out;
}

/** One tensor's values as its parameter buffer holds them when stored as storedDtypeOf says (the
 * same array when nothing changes them: f32 kept as f32). */
export function storedValue(
  spec: ParameterSpec,
  data: WeightTensor,
  frozen: WeightDtype,
  nf4: Nf4Options,
): Float32Array {
  const dtype = storedDtypeOf(spec, frozen);
  return storedToF32(storedParameter(data, dtype, nf4), dtype, lengthOf(data));
}

/** Parameter and gradient buffers of one model, by chunk key. */
export class ParameterStore {
  /** Parameter buffers by chunk key (the parameter name unless the tensor is split). */
  readonly params = new Map<string, GPUBuffer>();
  /** Gradients by chunk key, allocated by allocateGradients(). */
  readonly grads = new Map<string, GPUBuffer>();
  /**
   * One spec per GPU buffer: the parameters in Hugging Face order, a split one replaced by its
   * row chunks (name = chunk key, shape = [rows, C]). The optimizer iterates these.
   */
  readonly specs: ParameterSpec[];
  /** The model's parameters in Hugging Face naming (what read/writeParameters exchange). */
  readonly tensorSpecs: ParameterSpec[];
  /** Row chunks by parameter name (a single chunk for a tensor that is not split). */
  readonly chunks: Map<string, ParameterChunk[]>;
  /** LoRA adapter tensors (PEFT names, one buffer each); empty without LoRA. */
  readonly adapterSpecs: ParameterSpec[];
  /** Storage of each parameter and chunk by key: 'f32' unless a frozen matrix is packed or NF4. */
  readonly dtypes = new Map<string, WeightDtype>();
  /** The buffers that get gradients and optimizer state: the adapters with LoRA, else `specs`. */
  readonly trainableSpecs: ParameterSpec[];
  /** Whole-tensor specs of the trainable parameters (the adapters with LoRA, else tensorSpecs). */
  readonly trainableTensorSpecs: ParameterSpec[];

  /**
   * Uploads `tensors` (HF names, shapes as parameterSpecs) as row chunks of ≤ maxBindingBytes,
   * and `adapters` (LoRA A/B by PEFT name, shapes as their specs) when given. `frozenDtype`: how
   * the frozen base's matrices are stored when there are adapters (default f32; see the header);
   * `nf4`: how weights stored as nf4 are quantised.
   */
  constructor(
    private readonly device: GPUDevice,
    config: LlamaConfig,
    tensors: ReadonlyMap<string, WeightTensor> | null,
    maxBindingBytes: number,
    adapters: { specs: ParameterSpec[]; tensors: ReadonlyMap<string, Float32Array> } | null = null,
    frozenDtype: WeightDtype = 'f32',
    private readonly nf4: Nf4Options = {},
  ) {
    this.tensorSpecs = parameterSpecs(config);
    // Only frozen tensors are packed: without adapters every parameter trains in f32.
    const frozen = adapters ? frozenDtype : 'f32';
    this.chunks = planParameterChunks(config, maxBindingBytes, frozen);
    for (const spec of this.tensorSpecs) {
      const dtype = storedDtypeOf(spec, frozen);
      this.dtypes.set(spec.name, dtype);
      for (const chunk of this.chunks.get(spec.name)!) this.dtypes.set(chunk.key, dtype);
    }
    this.specs = this.tensorSpecs.flatMap((spec) =>
      this.chunks.get(spec.name)!.map((chunk) => ({
        name: chunk.key,
        shape: [chunk.rows, ...spec.shape.slice(1)],
      })),
    );
    this.adapterSpecs = adapters?.specs ?? [];
    for (const spec of this.adapterSpecs) {
      this.chunks.set(spec.name, [{ key: spec.name, rowStart: 0, rows: spec.shape[0] }]);
      this.dtypes.set(spec.name, 'f32');
    }
    this.trainableSpecs = adapters ? this.adapterSpecs : this.specs;
    this.trainableTensorSpecs = adapters ? this.adapterSpecs : this.tensorSpecs;
    // Check every tensor before the first upload, so a bad model leaves nothing allocated. A
    // streamed load (tensors null) gets empty base buffers that uploadStreamed fills.
    const given = tensors ? [...this.tensorSpecs, ...this.adapterSpecs] : this.adapterSpecs;
    for (const spec of given) {
      const data = tensors?.get(spec.name) ?? adapters?.tensors.get(spec.name);
      if (!data) throw new Error(`missing parameter ${spec.name}`);
      if (lengthOf(data) !== numel(spec.shape)) {
        throw new Error(
          `${spec.name}: ${lengthOf(data)} values, expected ${numel(spec.shape)} for shape [${spec.shape}]`,
        );
      }
    }
    for (const spec of given) {
      const data = tensors?.get(spec.name) ?? adapters!.tensors.get(spec.name)!;
      this.upload(spec, data, (chunk, stored) =>
        this.params.set(chunk.key, uploadStorageBuffer(device, stored, chunk.key)),
      );
    }
    if (tensors) return;
    for (const spec of this.tensorSpecs) {
      const rowLength = numel(spec.shape) / spec.shape[0];
      for (const chunk of this.chunks.get(spec.name)!) {
        const bytes = storedBytes(chunk.rows * rowLength, this.dtypes.get(chunk.key)!);
        this.params.set(chunk.key, createStorageBuffer(device, bytes, chunk.key));
      }
    }
  }

  /**
   * Fills the base buffers of a store built without tensors (a streamed load, GpuLlama.
   * loadStreamed): one tensor at a time from `read`, converted to its stored format as the
   * constructor converts it and written to its buffers; the next tensor is read only once the
   * queue has taken this one's bytes, so the host holds about one tensor (and its stored form) at
   * a time. Tensors go in name order (sorted as weightsIdentity sorts them), so `onTensor` can
   * hash the weights on the way.
   */
  async uploadStreamed(
    read: (name: string) => Promise<WeightTensor>,
    onTensor?: (name: string, data: WeightTensor) => void | Promise<void>,
  ): Promise<void> {
    const specs = [...this.tensorSpecs].sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    for (const spec of specs) {
      const data = await read(spec.name);
      if (lengthOf(data) !== numel(spec.shape)) {
        throw new Error(
          `${spec.name}: ${lengthOf(data)} values, expected ${numel(spec.shape)} for shape [${spec.shape}]`,
        );
      }
      this.upload(spec, data, (chunk, stored) =>
        writeBuffer(this.device, this.params.get(chunk.key)!, stored),
      );
      await onTensor?.(spec.name, data);
      // writeBuffer copies into the queue's staging memory, released once the copy has run.
      await this.device.queue.onSubmittedWorkDone();
    }
  }

  /** Each chunk of `data` (a whole tensor of `spec`) in the stored format, handed to `put`. */
  private upload(
    spec: ParameterSpec,
    data: WeightTensor,
    put: (chunk: ParameterChunk, stored: Float32Array | Uint32Array) => void,
    nf4: Nf4Options = this.nf4,
  ): void {
    const dtype = this.dtypes.get(spec.name)!;
    // NF4 values stored otherwise (dtype bfloat16 / float32 on a 4-bit checkpoint, a full
    // fine-tune, a split table) are dequantised whole first; rows of f32 are cut from that.
    const whole = !(data instanceof Float32Array) && data.format === 'nf4' && dtype !== 'nf4';
    const values = whole ? toF32(data) : data;
    for (const chunk of this.chunks.get(spec.name)!) {
      // An nf4 parameter is never split (planParameterChunks): its chunk is the whole tensor.
      const part = dtype === 'nf4' ? values : rowsOf(values, spec, chunk);
      put(chunk, storedParameter(part, dtype, nf4));
    }
  }

  /** The parameter buffer under `key` (a name, or a chunk key). */
  param(key: string): GpuParameter {
    const buffer = this.params.get(key);
    if (!buffer) throw new Error(`no parameter ${key}`);
    return { name: key, buffer, dtype: this.dtypes.get(key) ?? 'f32' };
  }

  /** The gradient buffer of parameter `key`. */
  grad(key: string): GPUBuffer {
    const buffer = this.grads.get(key);
    if (!buffer) throw new Error(`no gradient for ${key}: call allocateGradients() first`);
    return buffer;
  }

  get parameterCount(): number {
    return this.specs.reduce((sum, spec) => sum + numel(spec.shape), 0);
  }

  /**
   * Bytes of every parameter buffer (base and adapters) as allocated: what the engine counts for
   * them. Packed 16-bit matrices take half of their f32 size (gradient buffers not included).
   */
  get parameterBytes(): number {
    let bytes = 0;
    for (const buffer of this.params.values()) bytes += buffer.size;
    return bytes;
  }

  /** Whether any parameter is stored as more than one buffer. */
  get isSplit(): boolean {
    return this.specs.length !== this.tensorSpecs.length;
  }

  /** Whether the base weights are frozen (LoRA: only the adapters have gradients). */
  get baseFrozen(): boolean {
    return this.adapterSpecs.length > 0;
  }

  /** Zero-filled gradient buffers for every trainable parameter (idempotent). */
  allocateGradients(): void {
    for (const spec of this.trainableSpecs) {
      if (!this.grads.has(spec.name)) {
        this.grads.set(
          spec.name,
          createStorageBuffer(this.device, numel(spec.shape) * F32, `grad:${spec.name}`),
        );
      }
    }
  }

  zeroGradients(encoder: GPUCommandEncoder): void {
    for (const grad of this.grads.values()) encoder.clearBuffer(grad);
  }

  /**
   * Whole tensors by parameter name from per-chunk buffers keyed like `specs` (parameters,
   * gradients, optimizer moments), row chunks joined; those of `specs` that `buffers` holds
   * (default: the base tensors, then the adapters).
   */
  async readJoined(
    buffers: ReadonlyMap<string, GPUBuffer>,
    specs: readonly ParameterSpec[] = [...this.tensorSpecs, ...this.adapterSpecs],
  ): Promise<Map<string, Float32Array>> {
    // Every chunk of every tensor in as few submissions and waits as readRanges batches them.
    const parts: { spec: ParameterSpec; chunk: ParameterChunk; dtype: WeightDtype }[] = [];
    const ranges: ReadRange[] = [];
    for (const spec of specs) {
      const chunks = this.chunks.get(spec.name)!;
      if (!chunks.every((chunk) => buffers.has(chunk.key))) continue;
      const rowLength = numel(spec.shape) / spec.shape[0];
      // Packed buffers are parameters only (gradients and moments are f32): widened (16-bit) or
      // dequantised (NF4) on read.
      const dtype = buffers === this.params ? (this.dtypes.get(spec.name) ?? 'f32') : 'f32';
      for (const chunk of chunks) {
        const count = chunk.rows * rowLength;
        parts.push({ spec, chunk, dtype });
        ranges.push({ buffer: buffers.get(chunk.key)!, bytes: storedBytes(count, dtype) });
      }
    }
    const bytes = await readRanges(this.device, ranges);
    const out = new Map<string, Float32Array>();
    parts.forEach(({ spec, chunk, dtype }, i) => {
      let data = out.get(spec.name);
      if (!data) out.set(spec.name, (data = new Float32Array(numel(spec.shape))));
      const rowLength = numel(spec.shape) / spec.shape[0];
      const count = chunk.rows * rowLength;
      const words = dtype === 'f32' ? new Float32Array(bytes[i]) : new Uint32Array(bytes[i]);
      const part = storedToF32(words, dtype, count);
      data.set(part, chunk.rowStart * rowLength);
    });
    return out;
  }

  /**
   * Writes whole tensors by parameter name into per-chunk buffers keyed like `specs`; every one of
   * `specs` (default: the base tensors) must be given.
   */
  writeSplit(
    buffers: ReadonlyMap<string, GPUBuffer>,
    tensors: ReadonlyMap<string, Float32Array>,
    what: string,
    specs: readonly ParameterSpec[] = this.tensorSpecs,
  ): void {
    for (const spec of specs) {
      const data = tensors.get(spec.name);
      if (!data || data.length !== numel(spec.shape))
        throw new Error(`${what}: bad or missing ${spec.name}`);
    }
    for (const spec of specs) {
      const data = tensors.get(spec.name)!;
      if (buffers === this.params) {
        // Parameters in their stored format (packed frozen matrices rounded to it; NF4 ones
        // quantised again, plainly: values read back from NF4 storage give back the same codes
        // and block scales, since each block's largest value is exactly its absmax).
        this.upload(
          spec,
          data,
          (chunk, stored) => writeBuffer(this.device, buffers.get(chunk.key)!, stored),
          {},
        );
        continue;
      }
      for (const chunk of this.chunks.get(spec.name)!) {
        writeBuffer(this.device, buffers.get(chunk.key)!, rowsOf(data, spec, chunk));
      }
    }
  }

  destroy(): void {
    for (const buffer of this.params.values()) buffer.destroy();
    for (const buffer of this.grads.values()) buffer.destroy();
    this.params.clear();
    this.grads.clear();
  }
}

/** The rows of `data` (a whole tensor of `spec`) that `chunk` stores. */
function rowsOf<T extends WeightTensor>(data: T, spec: ParameterSpec, chunk: ParameterChunk): T {
  const rowLength = numel(spec.shape) / spec.shape[0];
  const [start, end] = [chunk.rowStart * rowLength, (chunk.rowStart + chunk.rows) * rowLength];
  if (data instanceof Float32Array) return data.subarray(start, end) as T;
  if (data.format === 'nf4') throw new Error(`${spec.name}: NF4 values are stored whole`);
  return { format: data.format, bits: data.bits.subarray(start, end) } as T;
}
