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
import { numel, parameterSpecs, type LlamaConfig, type ParameterSpec } from '../core/model-config';
import { createStorageBuffer, readF32, uploadStorageBuffer, writeBuffer } from '../engine/buffers';
import { MATMUL_TILE_K } from '../kernels/matmul';

const F32 = 4;

/** A block of rows [rowStart, rowStart + rows) of a parameter, stored as its own buffer. */
export interface ParameterChunk {
  /** Key in params / grads / specs: the parameter's name, or `name[start:end]` when split. */
  key: string;
  rowStart: number;
  rows: number;
}

/** The parameters that may be stored as row chunks: (V, C) tables indexed by token id. */
const SPLITTABLE = new Set(['model.embed_tokens.weight', 'lm_head.weight']);

/** Row chunks of every parameter under `limit` bytes per buffer (one chunk when it fits). */
export function planParameterChunks(
  config: LlamaConfig,
  limit: number,
): Map<string, ParameterChunk[]> {
  const out = new Map<string, ParameterChunk[]>();
  for (const spec of parameterSpecs(config)) {
    const rows = spec.shape[0];
    const rowBytes = (numel(spec.shape) / rows) * F32;
    if (rows * rowBytes <= limit) {
      out.set(spec.name, [{ key: spec.name, rowStart: 0, rows }]);
      continue;
    }
    if (!SPLITTABLE.has(spec.name)) {
      throw new RangeError(
        `${spec.name} [${spec.shape}] needs ${rows * rowBytes} bytes, more than one buffer binding ` +
          `allows (${limit}); only the embedding table and the LM head are split`,
      );
    }
    // Multiples of the matmul's K tile keep the head's split input gradient bit-identical.
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
  /** The buffers that get gradients and optimizer state: the adapters with LoRA, else `specs`. */
  readonly trainableSpecs: ParameterSpec[];
  /** Whole-tensor specs of the trainable parameters (the adapters with LoRA, else tensorSpecs). */
  readonly trainableTensorSpecs: ParameterSpec[];

  /**
   * Uploads `tensors` (HF names, shapes as parameterSpecs) as row chunks of ≤ maxBindingBytes,
   * and `adapters` (LoRA A/B by PEFT name, shapes as their specs) when given.
   */
  constructor(
    private readonly device: GPUDevice,
    config: LlamaConfig,
    tensors: ReadonlyMap<string, Float32Array>,
    maxBindingBytes: number,
    adapters: { specs: ParameterSpec[]; tensors: ReadonlyMap<string, Float32Array> } | null = null,
  ) {
    this.tensorSpecs = parameterSpecs(config);
    this.chunks = planParameterChunks(config, maxBindingBytes);
    this.specs = this.tensorSpecs.flatMap((spec) =>
      this.chunks.get(spec.name)!.map((chunk) => ({
        name: chunk.key,
        shape: [chunk.rows, ...spec.shape.slice(1)],
      })),
    );
    this.adapterSpecs = adapters?.specs ?? [];
    for (const spec of this.adapterSpecs) {
      this.chunks.set(spec.name, [{ key: spec.name, rowStart: 0, rows: spec.shape[0] }]);
    }
    this.trainableSpecs = adapters ? this.adapterSpecs : this.specs;
    this.trainableTensorSpecs = adapters ? this.adapterSpecs : this.tensorSpecs;
    // Check every tensor before the first upload, so a bad model leaves nothing allocated.
    for (const spec of [...this.tensorSpecs, ...this.adapterSpecs]) {
      const data = tensors.get(spec.name) ?? adapters?.tensors.get(spec.name);
      if (!data) throw new Error(`missing parameter ${spec.name}`);
      if (data.length !== numel(spec.shape)) {
        throw new Error(
          `${spec.name}: ${data.length} values, expected ${numel(spec.shape)} for shape [${spec.shape}]`,
        );
      }
    }
    for (const spec of [...this.tensorSpecs, ...this.adapterSpecs]) {
      const data = tensors.get(spec.name) ?? adapters!.tensors.get(spec.name)!;
      for (const chunk of this.chunks.get(spec.name)!) {
        const part = rowsOf(data, spec, chunk);
        this.params.set(chunk.key, uploadStorageBuffer(device, part, chunk.key));
      }
    }
  }

  /** The parameter buffer under `key` (a name, or a chunk key). */
  param(key: string): GpuParameter {
    const buffer = this.params.get(key);
    if (!buffer) throw new Error(`no parameter ${key}`);
    return { name: key, buffer };
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
    const out = new Map<string, Float32Array>();
    for (const spec of specs) {
      const chunks = this.chunks.get(spec.name)!;
      if (!chunks.every((chunk) => buffers.has(chunk.key))) continue;
      const rowLength = numel(spec.shape) / spec.shape[0];
      const data = new Float32Array(numel(spec.shape));
      for (const chunk of chunks) {
        const part = await readF32(this.device, buffers.get(chunk.key)!, chunk.rows * rowLength);
        data.set(part, chunk.rowStart * rowLength);
      }
      out.set(spec.name, data);
    }
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
function rowsOf(data: Float32Array, spec: ParameterSpec, chunk: ParameterChunk): Float32Array {
  const rowLength = numel(spec.shape) / spec.shape[0];
  return data.subarray(chunk.rowStart * rowLength, (chunk.rowStart + chunk.rows) * rowLength);
}
