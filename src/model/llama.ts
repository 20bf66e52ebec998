// The Llama-family decoder on WebGPU: weights live once in GPU buffers and serve both training
// (forward keeping what backward needs, backward into per-parameter gradients) and generation
// (prefill + one-token decode steps against a KV cache). Shaped like its CPU reference
// (src/ref/llama.ts): per-layer weight records, one attention block and one MLP block shared by
// the training forward and the KV-cache extend, and their backward mirrors. Every op is a kernel
// from src/kernels; their pipelines are compiled when the model loads (prepare), so encoding is
// synchronous.
//
// Legend: N sequences, T columns, R = N·T token rows, C hidden, I intermediate, V vocab,
// H heads, Hkv kv-heads, D head dim, L completion width (rows that get logits).
// Layout: sequences are left-padded (src/model/batch.ts); keyStart (N) is each row's first valid
// column, positions (N·T) its rotary position ids. Linear weights are (out, in) as in Hugging Face,
// so every projection is y = x·Wᵀ (+ b).
// Split tensors (src/model/parameters.ts): the embedding lookup runs per row chunk, the head's
// matmul writes each chunk's block of logit columns, and the head's input gradient continues its
// sum across chunks (MatmulKernel continueSum), so a split model computes the bits of an unsplit one.
// Row chunks of the head (src/model/head-chunks.ts): training makes the logits of a few head rows
// at a time (chunkLogits) and backward recomputes them per chunk (ChunkedDLogits), so no
// (N·count, V) logits or dLogits exist; the head weight's gradient continues its sum over rows
// across the chunks, so the chunked head computes the bits of the unchunked one.
// LoRA (src/ref/lora.ts, PEFT semantics): a Linear may carry an adapter; its projection adds
// s·(x·Aᵀ)·Bᵀ after the bias, composed from two matmuls. The base weights are then frozen: backward
// computes only the adapters' gradients (and every input gradient they need). withAdaptersDisabled
// encodes the base model alone, bit for bit: the reference policy needs no second copy.
// Qwen3 (hasQkNorm): q_norm / k_norm normalise each head's query and key vector between the
// projection and rotary. They are the model's RMSNorm kernels run over (R·heads) rows of D
// channels, forward and backward, so they need no kernel of their own.
import { hasQkNorm, type LlamaConfig, type ParameterSpec } from '../core/model-config';
import { writeBuffer } from '../engine/buffers';
import type { Engine } from '../engine/engine';
import { Workspace } from '../engine/workspace';
import { AddKernel } from '../kernels/add';
import {
  AttentionBackwardKernel,
  AttentionForwardKernel,
  KvCacheWriteKernel,
  type AttentionForwardArgs,
} from '../kernels/attention';
import { BiasAddKernel, BiasGradKernel } from '../kernels/bias';
import {
  buildTokenIndex,
  EmbeddingBackwardKernel,
  EmbeddingForwardKernel,
  type TokenIndex,
} from '../kernels/embedding';
import { MatmulKernel, type MatmulShape, type WeightDtype } from '../kernels/matmul';
import {
  RmsNormBackwardKernel,
  RmsNormBackwardWeightKernel,
  RmsNormForwardKernel,
} from '../kernels/rmsnorm';
import { RopeKernel } from '../kernels/rope';
import { SwigluBackwardKernel, SwigluForwardKernel } from '../kernels/swiglu';
import { headShapes, linearShapes, loraShapes } from './matmul-products';
import {
  checkLoraOptions,
  initLoraAdapters,
  loraAdapterSpecs,
  loraAName,
  loraBName,
  loraScaling,
  type LoraOptions,
} from '../core/lora';
import {
  DEFAULT_LOGITS_MEMORY_BYTES,
  headChunkRows,
  headChunks,
  type RowChunk,
} from './head-chunks';
import {
  isStreamed,
  ParameterStore,
  type GpuParameter,
  type Nf4Options,
  type ParameterChunk,
  type WeightSource,
  type WeightTensor,
} from './parameters';

export { planParameterChunks, type ParameterChunk } from './parameters';

const F32 = 4;

/** A training (or scoring) batch already on the GPU. */
export interface GpuBatch {
  N: number;
  T: number;
  tokens: GPUBuffer; // u32 (N, T)
  keyStart: GPUBuffer; // u32 (N)
  positions: GPUBuffer; // u32 (N, T)
  /** CPU copy of the tokens: the embedding backward groups rows by token id without atomics. */
  tokensHost: Uint32Array; // (N, T)
}

/** Which columns get logits: `count` columns from `start` in every sequence → (N·count, V). */
export interface HeadRows {
  start: number;
  count: number;
}

/**
 * What the training forward keeps for backward, up to the LM head's input (buffers are
 * workspace-owned, reused per step). The head's logits are made per row chunk from it
 * (chunkLogits), so the (N·count, V) logits need not exist at once.
 */
export interface HeadState {
  batch: GpuBatch;
  head: HeadRows;
  headInput: GPUBuffer; // (N·count, C) final-norm output at the head rows
}

/** HeadState plus the logits of every head row (forward()). */
export interface ForwardState extends HeadState {
  logits: GPUBuffer; // (N·count, V)
}

/**
 * The head rows' dLogits one row chunk at a time (training): backward gets each chunk's logits
 * (k, V), recomputed unless they are still held, and `dLogitsOf` writes their gradient (k, V).
 */
export interface ChunkedDLogits {
  /** The chunks training's forward made the logits in (headChunks), in order. */
  chunks: readonly RowChunk[];
  dLogitsOf: (chunk: RowChunk, logits: GPUBuffer, dLogits: GPUBuffer) => void;
}

export interface KvCache {
  N: number;
  capacity: number; // S_cap
  keys: GPUBuffer[]; // per layer (N, S_cap, Hkv, D), rotary applied
  values: GPUBuffer[]; // per layer (N, S_cap, Hkv, D)
  keyStart: GPUBuffer; // u32 (N)
}

export interface GpuLlamaOptions {
  /**
   * Largest buffer one parameter chunk may take, in bytes. Default: the device's
   * min(maxStorageBufferBindingSize, maxBufferSize). Tests lower it to force a split.
   */
  maxBindingBytes?: number;
  /** LoRA adapters on the decoder's projections; the base weights are frozen. Default: none. */
  lora?: GpuLoraOptions;
  /**
   * Storage of the frozen base's matrices when `lora` is given (config dtype): bf16 / f16 packed
   * two per u32 and widened in the kernels (src/model/parameters.ts). Default and without LoRA: f32.
   */
  frozenDtype?: WeightDtype;
  /** With frozenDtype nf4: how projections are quantised (nested: double-quantised scales). */
  nf4?: Nf4Options;
  /**
   * Activation checkpointing (TRL gradient_checkpointing): the training forward keeps only each
   * layer's input; backward recomputes the layer from it. Same gradients, bit for bit; one more
   * forward of compute for (L − 1) layers' activations of memory. Default: off.
   */
  gradientCheckpointing?: boolean;
  /**
   * Bytes the LM head's logits chunk and its gradient may take at once (headChunkRows): training
   * makes the logits of that many head rows at a time. Default: DEFAULT_LOGITS_MEMORY_BYTES.
   */
  logitsMemoryBytes?: number;
}

/** LoRA settings and the adapters' starting values (given, or PEFT's init from `seed`). */
export interface GpuLoraOptions extends LoraOptions {
  /** A/B tensors by PEFT name (loraAdapterSpecs); default: initLoraAdapters(config, options, seed). */
  adapters?: ReadonlyMap<string, Float32Array>;
  seed?: number;
}

/** A LoRA adapter on one projection: y += scaling · (x·Aᵀ)·Bᵀ. */
export interface LoraAdapter {
  a: GpuParameter; // (r, in) lora_A
  b: GpuParameter; // (out, r) lora_B
  r: number;
  scaling: number;
}

/** One projection y (rows, out) = x (rows, in) · Wᵀ (+ b), W stored (out, in) as in HF. */
export interface Linear {
  weight: GpuParameter; // (out, in)
  bias: GpuParameter | null; // (out), Qwen2's q/k/v bias
  inDim: number;
  outDim: number;
  /** LoRA adapter on this projection, or null. */
  adapter: LoraAdapter | null;
}

/** The weights of one decoder layer, named as src/ref/llama.ts names them. */
export interface LayerWeights {
  inputNorm: GpuParameter; // (C) input_layernorm
  attn: { q: Linear; k: Linear; v: Linear; o: Linear };
  /** Qwen3's per-head norms q_norm, k_norm (D each), or null. */
  qkNorm: { q: GpuParameter; k: GpuParameter } | null;
  postNorm: GpuParameter; // (C) post_attention_layernorm
  mlp: { gate: Linear; up: Linear; down: Linear };
}

/**
 * Where one layer reads and writes, all R = N·Tq rows. Training keeps one set per layer for
 * backward; decoding reuses one set for every layer (`out` is then `x`: x is dead once x2 exists).
 */
interface LayerActs {
  x: GPUBuffer; // (R, C) layer input
  xn1: GPUBuffer; // (R, C) input_layernorm output
  rstd1: GPUBuffer; // (R)
  /** Qwen3: q_proj / k_proj outputs before q_norm / k_norm, and the norms' rstd; else null. */
  qkNorm: {
    qProj: GPUBuffer; // (N, Tq, H, D)
    kProj: GPUBuffer; // (N, Tq, Hkv, D)
    rstdQ: GPUBuffer; // (R·H)
    rstdK: GPUBuffer; // (R·Hkv)
  } | null;
  qRaw: GPUBuffer; // (N, Tq, H, D) before rotary
  kRaw: GPUBuffer; // (N, Tq, Hkv, D) before rotary
  q: GPUBuffer; // (N, Tq, H, D)
  k: GPUBuffer; // (N, Tq, Hkv, D)
  v: GPUBuffer; // (N, Tq, Hkv, D)
  o: GPUBuffer; // (N, Tq, H, D) attention output
  lse: GPUBuffer; // (N, H, Tq)
  x2: GPUBuffer; // (R, C) residual after attention
  xn2: GPUBuffer; // (R, C) post_attention_layernorm output
  rstd2: GPUBuffer; // (R)
  gate: GPUBuffer; // (R, I)
  up: GPUBuffer; // (R, I)
  h: GPUBuffer; // (R, I) silu(gate)·up
  out: GPUBuffer; // (R, C) layer output
}

/** What attention sees besides the layer's own q/k/v. */
interface AttentionInputs {
  N: number;
  Tq: number;
  positions: GPUBuffer; // u32 (N, Tq)
  keyStart: GPUBuffer; // u32 (N)
  /** Decoding: write k/v at columns t0… of the cache and attend over columns 0…t0+Tq−1. */
  cache?: { kv: KvCache; t0: number };
}

export class GpuLlama {
  readonly parameters: ParameterStore;
  readonly layers: LayerWeights[];
  readonly finalNorm: GpuParameter; // (C) model.norm
  /**
   * Resolves once every pipeline the model encodes with is compiled (started by load()). Await it
   * before encoding; a pipeline not ready yet is compiled synchronously on first use instead.
   */
  readonly ready: Promise<void>;
  /** The LoRA settings when the model has adapters (base frozen), else null. */
  readonly lora: LoraOptions | null;
  private readonly ws: Workspace;
  private readonly k: ReturnType<typeof createKernels>;
  /** False while withAdaptersDisabled() encodes: projections skip their adapters. */
  private adaptersOn = true;
  /**
   * Activation checkpointing (GpuLlamaOptions.gradientCheckpointing). Read by forward() and
   * backward(): change it between steps, never between a forward and its backward.
   */
  gradientCheckpointing = false;
  /** GpuLlamaOptions.logitsMemoryBytes; read by headChunks(). */
  logitsMemoryBytes = DEFAULT_LOGITS_MEMORY_BYTES;
  /** Which head rows the 'head.logits' buffer holds, as last encoded (chunkLogits). */
  private logitsHeld: { state: HeadState; chunk: RowChunk } | null = null;
  /** Whether the last training forward kept only layer inputs (backward must then recompute). */
  private forwardCheckpointed = false;

  private constructor(
    private readonly engine: Engine,
    readonly config: LlamaConfig,
    tensors: ReadonlyMap<string, WeightTensor> | null,
    maxBindingBytes: number,
    lora: GpuLoraOptions | null,
    frozenDtype: WeightDtype = 'f32',
    nf4: Nf4Options = {},
  ) {
    let adapters: { specs: ParameterSpec[]; tensors: ReadonlyMap<string, Float32Array> } | null =
      null;
    if (lora) {
      checkLoraOptions(lora);
      adapters = {
        specs: loraAdapterSpecs(config, lora),
        tensors: lora.adapters ?? initLoraAdapters(config, lora, lora.seed ?? 0),
      };
    }
    this.lora = lora
      ? {
          r: lora.r,
          alpha: lora.alpha,
          targetModules: lora.targetModules,
          useRslora: lora.useRslora,
          dropout: lora.dropout,
        }
      : null;
    this.parameters = new ParameterStore(
      engine.device,
      config,
      tensors,
      maxBindingBytes,
      adapters,
      frozenDtype,
      nf4,
    );
    const p = (name: string) => this.parameters.param(name);
    const { hiddenSize: C, intermediateSize: I, numHeads: H, numKvHeads: Hkv, headDim: D } = config;
    const scaling = lora ? loraScaling(lora) : 0;
    const adapterOf = (name: string): LoraAdapter | null =>
      lora && this.parameters.params.has(loraAName(name))
        ? { a: p(loraAName(name)), b: p(loraBName(name)), r: lora.r, scaling }
        : null;
    const linear = (name: string, inDim: number, outDim: number, bias = false): Linear => ({
      weight: p(`${name}.weight`),
      bias: bias ? p(`${name}.bias`) : null,
      inDim,
      outDim,
      adapter: adapterOf(name),
    });
    const qkvBias = config.attentionBias;
    const qkNorm = hasQkNorm(config);
    this.layers = Array.from({ length: config.numLayers }, (_, l) => {
      const pre = `model.layers.${l}`;
      return {
        inputNorm: p(`${pre}.input_layernorm.weight`),
        attn: {
          q: linear(`${pre}.self_attn.q_proj`, C, H * D, qkvBias),
          k: linear(`${pre}.self_attn.k_proj`, C, Hkv * D, qkvBias),
          v: linear(`${pre}.self_attn.v_proj`, C, Hkv * D, qkvBias),
          o: linear(`${pre}.self_attn.o_proj`, H * D, C),
        },
        qkNorm: qkNorm
          ? { q: p(`${pre}.self_attn.q_norm.weight`), k: p(`${pre}.self_attn.k_norm.weight`) }
          : null,
        postNorm: p(`${pre}.post_attention_layernorm.weight`),
        mlp: {
          gate: linear(`${pre}.mlp.gate_proj`, C, I),
          up: linear(`${pre}.mlp.up_proj`, C, I),
          down: linear(`${pre}.mlp.down_proj`, I, C),
        },
      };
    });
    this.finalNorm = p('model.norm.weight');
    this.ws = new Workspace(engine.device);
    this.k = createKernels(engine);
    this.ready = this.prepare();
    // A failed compile is reported to whoever awaits `ready`, not as an unhandled rejection.
    this.ready.catch(() => {});
  }

  /**
   * Uploads `tensors` (HF names, shapes as parameterSpecs; 16-bit or NF4 values as a checkpoint
   * ships them are stored or converted as frozenDtype asks) and starts compiling the pipelines.
   */
  static load(
    engine: Engine,
    config: LlamaConfig,
    tensors: ReadonlyMap<string, WeightTensor> | null,
    options: GpuLlamaOptions = {},
  ): GpuLlama {
    const limits = engine.device.limits;
    const maxBindingBytes =
      options.maxBindingBytes ?? Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
    const lora = options.lora ?? null;
    const model = new GpuLlama(
      engine,
      config,
      tensors,
      maxBindingBytes,
      lora,
      options.frozenDtype,
      options.nf4,
    );
    model.gradientCheckpointing = options.gradientCheckpointing ?? false;
    model.logitsMemoryBytes = options.logitsMemoryBytes ?? DEFAULT_LOGITS_MEMORY_BYTES;
    return model;
  }

  /**
   * load() from a streamed weight source (src/formats/hf-folder.ts WeightReader): the buffers are
   * allocated empty, then each tensor is read, converted to its stored format and written before
   * the next is read, so the host never holds the whole model (ParameterStore.uploadStreamed).
   * `onTensor` sees each tensor as read (in name order): e.g. to hash the weights on the way.
   * The pipelines compile meanwhile.
   */
  static async loadStreamed(
    engine: Engine,
    config: LlamaConfig,
    weights: { read(name: string): Promise<WeightTensor> },
    options: GpuLlamaOptions = {},
    onTensor?: (name: string, data: WeightTensor) => void | Promise<void>,
  ): Promise<GpuLlama> {
    const model = GpuLlama.load(engine, config, null, options);
    try {
      await model.parameters.uploadStreamed((name) => weights.read(name), onTensor);
    } catch (err) {
      model.destroy();
      throw err;
    }
    return model;
  }

  /** load() or loadStreamed(), as `weights` are a Map or a reader. */
  static async loadFrom(
    engine: Engine,
    config: LlamaConfig,
    weights: WeightSource,
    options: GpuLlamaOptions = {},
  ): Promise<GpuLlama> {
    return isStreamed(weights)
      ? GpuLlama.loadStreamed(engine, config, weights, options)
      : GpuLlama.load(engine, config, weights, options);
  }

  /**
   * Runs `encode` with every adapter skipped: what it encodes is the base model's computation,
   * kernel for kernel (the reference policy under LoRA). Encoding is synchronous, so the switch
   * cannot leak into other work.
   */
  withAdaptersDisabled<T>(encode: () => T): T {
    const before = this.adaptersOn;
    this.adaptersOn = false;
    try {
      return encode();
    } finally {
      this.adaptersOn = before;
    }
  }

  /** The adapters' current values by PEFT name (empty without LoRA). */
  readAdapters(): Promise<Map<string, Float32Array>> {
    return this.parameters.readJoined(this.parameters.params, this.parameters.adapterSpecs);
  }

  /** Replaces the adapters' values (checkpoint restore); every adapter must be given. */
  writeAdapters(tensors: ReadonlyMap<string, Float32Array>): void {
    const specs = this.parameters.adapterSpecs;
    this.parameters.writeSplit(this.parameters.params, tensors, 'writeAdapters', specs);
  }

  // The parameter store's surface, kept on the model for its users (optimizer, trainer, tests).
  /** Parameter buffers by chunk key (the parameter name unless the tensor is split). */
  get params(): Map<string, GPUBuffer> {
    return this.parameters.params;
  }
  /** Gradients by chunk key, allocated by allocateGradients(). */
  get grads(): Map<string, GPUBuffer> {
    return this.parameters.grads;
  }
  /** One spec per base GPU buffer (a split parameter's row chunks replace it). */
  get specs(): ParameterSpec[] {
    return this.parameters.specs;
  }
  /** The optimizer's list: the adapters with LoRA, else `specs`. */
  get trainableSpecs(): ParameterSpec[] {
    return this.parameters.trainableSpecs;
  }
  /** Whole-tensor specs of what trains (adapters with LoRA, else tensorSpecs): optimizer state. */
  get trainableTensorSpecs(): ParameterSpec[] {
    return this.parameters.trainableTensorSpecs;
  }
  /** The model's parameters in Hugging Face naming (what read/writeParameters exchange). */
  get tensorSpecs(): ParameterSpec[] {
    return this.parameters.tensorSpecs;
  }
  /** Row chunks by parameter name (a single chunk for a tensor that is not split). */
  get chunks(): Map<string, ParameterChunk[]> {
    return this.parameters.chunks;
  }
  get parameterCount(): number {
    return this.parameters.parameterCount;
  }
  /** Whether any parameter is stored as more than one buffer. */
  get isSplit(): boolean {
    return this.parameters.isSplit;
  }
  allocateGradients(): void {
    this.parameters.allocateGradients();
  }
  zeroGradients(encoder: GPUCommandEncoder): void {
    this.parameters.zeroGradients(encoder);
  }
  /** The base model's parameters in HF naming (adapters: readAdapters). */
  readParameters(): Promise<Map<string, Float32Array>> {
    return this.parameters.readJoined(this.parameters.params, this.parameters.tensorSpecs);
  }
  readGradients(): Promise<Map<string, Float32Array>> {
    return this.parameters.readJoined(this.parameters.grads);
  }
  /** Whole tensors by parameter name from per-chunk buffers keyed like `specs`. */
  readJoined(buffers: ReadonlyMap<string, GPUBuffer>): Promise<Map<string, Float32Array>> {
    return this.parameters.readJoined(buffers);
  }
  /** Replaces every parameter's values (checkpoint restore); shapes must match. */
  writeParameters(tensors: ReadonlyMap<string, Float32Array>): void {
    this.parameters.writeSplit(this.parameters.params, tensors, 'writeParameters');
  }
  /** Writes whole tensors by parameter name into per-chunk buffers keyed like `specs`. */
  writeSplit(
    buffers: ReadonlyMap<string, GPUBuffer>,
    tensors: ReadonlyMap<string, Float32Array>,
    what: string,
    specs?: readonly ParameterSpec[],
  ): void {
    this.parameters.writeSplit(buffers, tensors, what, specs);
  }

  /**
   * Compiles every pipeline forward, backward and extend encode with, in parallel: each kernel
   * at this model's sizes, and each product at short (≤ 16 rows: decoding) and tall row counts,
   * with row counts that are and are not multiples of 4 where that picks the vec4 variant.
   */
  private async prepare(): Promise<void> {
    const { hiddenSize: C, vocabSize: V, headDim: D } = this.config;
    const k = this.k;
    // Frozen weights stored packed (dtype bf16/f16 under LoRA) read through the packed kernels.
    const embedDtype = this.parameters.param(
      this.chunks.get('model.embed_tokens.weight')![0].key,
    ).dtype;
    const jobs: Promise<void>[] = [
      k.embedding.prepare(embedDtype),
      k.embeddingBackward.prepare(),
      k.rmsForward.prepare(C),
      k.rmsBackward.prepare(C),
      k.rmsBackwardWeight.prepare(),
      k.rope.prepare(false),
      k.rope.prepare(true),
      k.attention.prepare(D),
      k.attentionBackward.prepare(D),
      k.kvWrite.prepare(),
      k.swigluForward.prepare(),
      k.swigluBackward.prepare(),
      k.add.prepare(),
    ];
    if (this.config.attentionBias) jobs.push(k.biasAdd.prepare(), k.biasGrad.prepare());
    if (hasQkNorm(this.config)) jobs.push(k.rmsForward.prepare(D), k.rmsBackward.prepare(D));
    const products: MatmulShape[] = [];
    const layer = this.layers[0];
    const linears = layer ? [...Object.values(layer.attn), ...Object.values(layer.mlp)] : [];
    for (const rows of [4, 64]) {
      for (const lin of linears) {
        const s = linearShapes(lin, rows);
        const bDtype = lin.weight.dtype;
        products.push({ ...s.forward, bDtype }, { ...s.inputGrad, bDtype });
        if (lin.adapter) {
          const a = loraShapes(lin, lin.adapter.r, rows);
          products.push(a.down, a.up, a.dU, a.dX);
        }
      }
      for (const chunk of this.chunks.get(this.headWeightName())!) {
        const s = headShapes(chunk, C, V, rows);
        const bDtype = this.parameters.param(chunk.key).dtype;
        products.push({ ...s.forward, bDtype }, { ...s.inputGrad, bDtype });
      }
    }
    for (const rows of [64, 65]) {
      for (const lin of linears) {
        if (!lin.adapter) products.push(linearShapes(lin, rows).weightGrad);
        else {
          const a = loraShapes(lin, lin.adapter.r, rows);
          products.push(a.dB, a.dA);
        }
      }
      for (const chunk of this.chunks.get(this.headWeightName())!)
        products.push(headShapes(chunk, C, V, rows).weightGrad);
    }
    for (const shape of products) jobs.push(k.matmul.prepare(shape));
    await Promise.all(jobs);
  }

  /** Uploads a packed batch (src/model/batch.ts) into workspace buffers. */
  uploadBatch(
    tokens: Uint32Array,
    keyStart: Uint32Array,
    positions: Uint32Array,
    N: number,
    T: number,
  ): GpuBatch {
    const device = this.engine.device;
    const tokensBuf = this.ws.get('batch.tokens', N * T * 4);
    const keyStartBuf = this.ws.get('batch.keyStart', N * 4);
    const positionsBuf = this.ws.get('batch.positions', N * T * 4);
    writeBuffer(device, tokensBuf, tokens);
    writeBuffer(device, keyStartBuf, keyStart);
    writeBuffer(device, positionsBuf, positions);
    return {
      N,
      T,
      tokens: tokensBuf,
      keyStart: keyStartBuf,
      positions: positionsBuf,
      tokensHost: tokens,
    };
  }

  private headWeightName(): string {
    return this.config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  }

  // ---- building blocks -------------------------------------------------------------------

  /** y (rows, out) = x (rows, in) · Wᵀ (+ b). */
  private linear(enc: GPUCommandEncoder, lin: Linear, x: GPUBuffer, y: GPUBuffer, rows: number) {
    this.k.matmul.encode(enc, {
      a: x,
      b: lin.weight.buffer,
      bDtype: lin.weight.dtype,
      c: y,
      ...linearShapes(lin, rows).forward,
    });
    if (lin.bias) {
      this.k.biasAdd.encode(enc, { y, bias: lin.bias.buffer, rows, C: lin.outDim });
    }
    const ad = this.adaptersOn ? lin.adapter : null;
    if (ad) {
      // PEFT: result = base(x) + lora_B(lora_A(x)) · scaling, after the bias.
      const s = loraShapes(lin, ad.r, rows);
      const u = this.ws.get('lora.u', rows * ad.r * F32); // (rows, r)
      this.k.matmul.encode(enc, { a: x, b: ad.a.buffer, c: u, ...s.down });
      this.k.matmul.encode(enc, { a: u, b: ad.b.buffer, c: y, ...s.up, alpha: ad.scaling });
    }
  }

  /** Backward of linear(): dX (rows, in) = dY·W (written, or added into dX), dW += dYᵀ·X,
   * db += Σ dY. */
  private linearBackward(
    enc: GPUCommandEncoder,
    lin: Linear,
    dy: GPUBuffer,
    x: GPUBuffer,
    dx: GPUBuffer,
    rows: number,
    dxMode: 'write' | 'add',
  ) {
    const s = linearShapes(lin, rows);
    this.k.matmul.encode(enc, {
      a: dy,
      b: lin.weight.buffer,
      bDtype: lin.weight.dtype,
      c: dx,
      ...s.inputGrad,
      accumulate: dxMode === 'add',
    });
    if (!this.parameters.baseFrozen) {
      const dw = this.parameters.grad(lin.weight.name);
      this.k.matmul.encode(enc, { a: dy, b: x, c: dw, ...s.weightGrad, accumulate: true });
      if (lin.bias) {
        const db = this.parameters.grad(lin.bias.name);
        this.k.biasGrad.encode(enc, { dy, db, rows, C: lin.outDim, accumulate: true });
      }
    }
    const ad = this.adaptersOn ? lin.adapter : null;
    if (ad) {
      // u = x·Aᵀ is recomputed (r columns: cheaper than keeping one per projection and layer).
      const a = loraShapes(lin, ad.r, rows);
      const u = this.ws.get('lora.u', rows * ad.r * F32); // (rows, r)
      const du = this.ws.get('lora.du', rows * ad.r * F32); // (rows, r)
      const [dA, dB] = [this.parameters.grad(ad.a.name), this.parameters.grad(ad.b.name)];
      const mm = this.k.matmul;
      mm.encode(enc, { a: x, b: ad.a.buffer, c: u, ...a.down });
      mm.encode(enc, { a: dy, b: ad.b.buffer, c: du, ...a.dU, alpha: ad.scaling });
      mm.encode(enc, { a: dy, b: u, c: dB, ...a.dB, alpha: ad.scaling });
      mm.encode(enc, { a: du, b: x, c: dA, ...a.dA });
      mm.encode(enc, { a: du, b: ad.a.buffer, c: dx, ...a.dX });
    }
  }

  /** y (rows, C) = RMSNorm(x) · w, keeping rstd (rows) for backward. */
  private rmsNorm(
    enc: GPUCommandEncoder,
    x: GPUBuffer,
    w: GpuParameter,
    y: GPUBuffer,
    rstd: GPUBuffer,
    rows: number,
  ) {
    const { hiddenSize: C, rmsNormEps: eps } = this.config;
    this.k.rmsForward.encode(enc, { x, w: w.buffer, y, rstd, rows, C, eps });
  }

  /** Backward of rmsNorm(): dx = (or +=) dy through the norm, dw += its weight gradient. */
  private rmsNormBackward(
    enc: GPUCommandEncoder,
    dy: GPUBuffer,
    x: GPUBuffer,
    w: GpuParameter,
    rstd: GPUBuffer,
    dx: GPUBuffer,
    rows: number,
    dxMode: 'write' | 'add',
  ) {
    const C = this.config.hiddenSize;
    const accumulate = dxMode === 'add';
    this.k.rmsBackward.encode(enc, { dy, x, w: w.buffer, rstd, dx, rows, C, accumulate });
    if (this.parameters.baseFrozen) return;
    const dw = this.parameters.grad(w.name);
    this.k.rmsBackwardWeight.encode(enc, { dy, x, rstd, dw, rows, C, accumulate: true });
  }

  /** Rotary embedding of `heads` heads per row (inverse: its transpose, for gradients). */
  private rope(
    enc: GPUCommandEncoder,
    x: GPUBuffer,
    y: GPUBuffer,
    positions: GPUBuffer,
    rows: number,
    heads: number,
    inverse = false,
  ) {
    const { headDim: D, ropeTheta: theta } = this.config;
    this.k.rope.encode(enc, { x, positions, y, rows, heads, D, theta, inverse });
  }

  /** x (R, C) = embedding rows of tokens (R), chunk by chunk (the first writes every row). */
  private embed(enc: GPUCommandEncoder, tokens: GPUBuffer, x: GPUBuffer, rows: number): void {
    const C = this.config.hiddenSize;
    this.chunks.get('model.embed_tokens.weight')!.forEach((chunk, i) => {
      const { buffer: weight, dtype: weightDtype } = this.parameters.param(chunk.key);
      const { rows: V, rowStart } = chunk;
      this.k.embedding.encode(enc, {
        tokens,
        weight,
        weightDtype,
        x,
        rows,
        V,
        C,
        rowStart,
        zeroMisses: i === 0,
      });
    });
  }

  /** Embedding gradient: each chunk gets the token index restricted to its ids. */
  private embedBackward(enc: GPUCommandEncoder, dx: GPUBuffer, index: TokenIndex): void {
    const ids = index.uniqueIds;
    let u0 = 0;
    for (const chunk of this.chunks.get('model.embed_tokens.weight')!) {
      let u1 = u0;
      while (u1 < ids.length && ids[u1] < chunk.rowStart + chunk.rows) u1++;
      this.k.embeddingBackward.encode(enc, {
        dx,
        dw: this.parameters.grad(chunk.key),
        index: {
          uniqueIds: ids.subarray(u0, u1).map((id) => id - chunk.rowStart),
          offsets: index.offsets.subarray(u0, u1 + 1),
          order: index.order,
        },
        V: chunk.rows,
        C: this.config.hiddenSize,
        accumulate: true,
      });
      u0 = u1;
    }
    if (u0 < ids.length) {
      throw new RangeError(
        `embedding backward: token id ${ids[u0]} is outside the vocabulary (${this.config.vocabSize})`,
      );
    }
  }

  /** logits (rows, V) = x (rows, C) · Wᵀ, each head chunk writing its block of columns. */
  private head(enc: GPUCommandEncoder, x: GPUBuffer, logits: GPUBuffer, rows: number): void {
    const { hiddenSize: C, vocabSize: V } = this.config;
    for (const chunk of this.chunks.get(this.headWeightName())!) {
      const { buffer: w, dtype: bDtype } = this.parameters.param(chunk.key);
      this.k.matmul.encode(enc, {
        a: x,
        b: w,
        bDtype,
        c: logits,
        ...headShapes(chunk, C, V, rows).forward,
      });
    }
  }

  /**
   * Backward of head() over `rows` head rows from `dxRow` on: dX rows dxRow… (rows, C) of dx =
   * dLogits·W over all vocabulary chunks; dW_chunk += dLogits_chunkᵀ·x. The weight gradient's sum
   * over rows continues from dW's value (continueSum, not accumulate): calls over consecutive row
   * chunks then give the bits of one call over all rows.
   */
  private headBackward(
    enc: GPUCommandEncoder,
    dLogits: GPUBuffer, // (rows, V)
    x: GPUBuffer, // (rows, C)
    dx: GPUBuffer, // (≥ dxRow + rows, C)
    rows: number,
    dxRow = 0,
  ): void {
    const { hiddenSize: C, vocabSize: V } = this.config;
    this.chunks.get(this.headWeightName())!.forEach((chunk, i) => {
      const s = headShapes(chunk, C, V, rows);
      const { buffer: w, dtype: bDtype } = this.parameters.param(chunk.key);
      const inputGrad = { ...s.inputGrad, offsetC: dxRow * C, continueSum: i > 0 };
      this.k.matmul.encode(enc, { a: dLogits, b: w, bDtype, c: dx, ...inputGrad });
      if (this.parameters.baseFrozen) return;
      const dw = this.parameters.grad(chunk.key);
      this.k.matmul.encode(enc, { a: dLogits, b: x, c: dw, ...s.weightGrad, continueSum: true });
    });
  }

  /**
   * headBackward() chunk by chunk into dHead (N·count, C): bit for bit the call over all rows.
   * A chunk's logits are recomputed unless 'head.logits' still holds them (one chunk of every
   * row: the forward's own).
   */
  private headBackwardChunked(
    enc: GPUCommandEncoder,
    state: HeadState,
    { chunks, dLogitsOf }: ChunkedDLogits,
    dHead: GPUBuffer,
  ): void {
    const V = this.config.vocabSize;
    for (const chunk of chunks) {
      const x = this.chunkInput(enc, state, chunk); // (k, C)
      const held = this.logitsHeld;
      const reuse =
        held?.state === state && held.chunk.start === chunk.start && held.chunk.rows === chunk.rows;
      const logits = reuse
        ? this.ws.get('head.logits', chunk.rows * V * F32) // (k, V)
        : this.logitsFrom(enc, state, chunk, x);
      const dLogits = this.ws.get('head.dLogits', chunk.rows * V * F32); // (k, V)
      dLogitsOf(chunk, logits, dLogits);
      this.headBackward(enc, dLogits, x, dHead, chunk.rows, chunk.start);
    }
  }

  /** x2 = x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))), n = RMSNorm(x). */
  private attentionBlock(
    enc: GPUCommandEncoder,
    l: number,
    a: LayerActs,
    ctx: AttentionInputs,
  ): void {
    const { hiddenSize: C, numHeads: H, numKvHeads: Hkv, headDim: D } = this.config;
    const { inputNorm, attn } = this.layers[l];
    const { N, Tq } = ctx;
    const R = N * Tq;
    this.rmsNorm(enc, a.x, inputNorm, a.xn1, a.rstd1, R);
    const qkNorm = this.layers[l].qkNorm;
    if (qkNorm && a.qkNorm) {
      // Qwen3: each head's vector (R·heads rows of D) through its RMSNorm, before rotary.
      const { qProj, kProj, rstdQ, rstdK } = a.qkNorm;
      const eps = this.config.rmsNormEps;
      this.linear(enc, attn.q, a.xn1, qProj, R);
      this.linear(enc, attn.k, a.xn1, kProj, R);
      const rms = this.k.rmsForward;
      rms.encode(enc, {
        x: qProj,
        w: qkNorm.q.buffer,
        y: a.qRaw,
        rstd: rstdQ,
        rows: R * H,
        C: D,
        eps,
      });
      rms.encode(enc, {
        x: kProj,
        w: qkNorm.k.buffer,
        y: a.kRaw,
        rstd: rstdK,
        rows: R * Hkv,
        C: D,
        eps,
      });
    } else {
      this.linear(enc, attn.q, a.xn1, a.qRaw, R);
      this.linear(enc, attn.k, a.xn1, a.kRaw, R);
    }
    this.linear(enc, attn.v, a.xn1, a.v, R);
    this.rope(enc, a.qRaw, a.q, ctx.positions, R, H);
    this.rope(enc, a.kRaw, a.k, ctx.positions, R, Hkv);
    let keys = a.k; // (N, S_cap, Hkv, D)
    let values = a.v;
    let span: Pick<AttentionForwardArgs, 'qOffset' | 'S' | 'sCap'> = {}; // training: defaults
    if (ctx.cache) {
      const { kv, t0 } = ctx.cache;
      const sCap = kv.capacity;
      this.k.kvWrite.encode(enc, { src: a.k, cache: kv.keys[l], N, Tsrc: Tq, sCap, Hkv, D, t0 });
      this.k.kvWrite.encode(enc, { src: a.v, cache: kv.values[l], N, Tsrc: Tq, sCap, Hkv, D, t0 });
      [keys, values] = [kv.keys[l], kv.values[l]];
      span = { qOffset: t0, S: t0 + Tq, sCap };
    }
    this.k.attention.encode(enc, {
      ...{ q: a.q, k: keys, v: values, keyStart: ctx.keyStart, o: a.o, lse: a.lse },
      ...{ N, Tq, H, Hkv, D, ...span },
    });
    this.linear(enc, attn.o, a.o, a.x2, R);
    this.k.add.encode(enc, { a: a.x2, b: a.x, count: R * C });
  }

  /** out = x2 + down_proj(silu(gate_proj(n)) · up_proj(n)), n = RMSNorm(x2). */
  private mlpBlock(enc: GPUCommandEncoder, l: number, a: LayerActs, R: number): void {
    const { hiddenSize: C, intermediateSize: I } = this.config;
    const { postNorm, mlp } = this.layers[l];
    this.rmsNorm(enc, a.x2, postNorm, a.xn2, a.rstd2, R);
    this.linear(enc, mlp.gate, a.xn2, a.gate, R);
    this.linear(enc, mlp.up, a.xn2, a.up, R);
    this.k.swigluForward.encode(enc, { gate: a.gate, up: a.up, h: a.h, count: R * I });
    this.linear(enc, mlp.down, a.h, a.out, R);
    this.k.add.encode(enc, { a: a.out, b: a.x2, count: R * C });
  }

  /** Backward of mlpBlock(): dx holds d(out) and becomes d(x2). */
  private mlpBackward(
    enc: GPUCommandEncoder,
    l: number,
    a: LayerActs,
    d: GradScratch,
    dx: GPUBuffer,
    R: number,
  ): void {
    const I = this.config.intermediateSize;
    const { postNorm, mlp } = this.layers[l];
    this.linearBackward(enc, mlp.down, dx, a.h, d.dh, R, 'write');
    this.k.swigluBackward.encode(enc, {
      dh: d.dh,
      gate: a.gate,
      up: a.up,
      dgate: d.dgate,
      dup: d.dup,
      count: R * I,
    });
    this.linearBackward(enc, mlp.gate, d.dgate, a.xn2, d.dxn, R, 'write');
    this.linearBackward(enc, mlp.up, d.dup, a.xn2, d.dxn, R, 'add');
    // Through the residual, dx already holds d(x2)'s direct part; the norm's part is added.
    this.rmsNormBackward(enc, d.dxn, a.x2, postNorm, a.rstd2, dx, R, 'add');
  }

  /** Backward of attentionBlock(): dx holds d(x2) and becomes d(x). */
  private attentionBackward(
    enc: GPUCommandEncoder,
    l: number,
    a: LayerActs,
    d: GradScratch,
    dx: GPUBuffer,
    batch: GpuBatch,
  ): void {
    const { numHeads: H, numKvHeads: Hkv, headDim: D } = this.config;
    const { inputNorm, attn } = this.layers[l];
    const { N, T, positions } = batch;
    const R = N * T;
    this.linearBackward(enc, attn.o, dx, a.o, d.dO, R, 'write');
    this.k.attentionBackward.encode(enc, {
      ...{ dO: d.dO, q: a.q, k: a.k, v: a.v, o: a.o, lse: a.lse, keyStart: batch.keyStart },
      ...{ dq: d.dq, dk: d.dk, dv: d.dv, delta: d.delta, N, T, H, Hkv, D },
    });
    this.rope(enc, d.dq, d.dqRaw, positions, R, H, true);
    this.rope(enc, d.dk, d.dkRaw, positions, R, Hkv, true);
    // The projections' output gradients: dqRaw / dkRaw, or with Qwen3's q/k norms their input
    // gradients, written into dq / dk (dead once rotary's transpose has read them).
    let [dqProj, dkProj] = [d.dqRaw, d.dkRaw];
    const qkNorm = this.layers[l].qkNorm;
    if (qkNorm && a.qkNorm) {
      const { qProj, kProj, rstdQ, rstdK } = a.qkNorm;
      for (const [dy, x, w, rstd, dx, heads] of [
        [d.dqRaw, qProj, qkNorm.q, rstdQ, d.dq, H],
        [d.dkRaw, kProj, qkNorm.k, rstdK, d.dk, Hkv],
      ] as const) {
        const rows = R * heads;
        this.k.rmsBackward.encode(enc, { dy, x, w: w.buffer, rstd, dx, rows, C: D });
        if (!this.parameters.baseFrozen) {
          const dw = this.parameters.grad(w.name);
          this.k.rmsBackwardWeight.encode(enc, { dy, x, rstd, dw, rows, C: D, accumulate: true });
        }
      }
      [dqProj, dkProj] = [d.dq, d.dk];
    }
    this.linearBackward(enc, attn.q, dqProj, a.xn1, d.dxn, R, 'write');
    this.linearBackward(enc, attn.k, dkProj, a.xn1, d.dxn, R, 'add');
    this.linearBackward(enc, attn.v, d.dv, a.xn1, d.dxn, R, 'add');
    this.rmsNormBackward(enc, d.dxn, a.x, inputNorm, a.rstd1, dx, R, 'add');
  }

  // ---- training --------------------------------------------------------------------------

  /**
   * Training forward over (N, T), keeping every activation backward needs, up to the LM head's
   * input at the head rows (the columns that predict completion tokens) → state.headInput
   * (N·count, C). Training makes their logits per row chunk (headChunks, chunkLogits).
   */
  forwardToHead(enc: GPUCommandEncoder, batch: GpuBatch, head: HeadRows): HeadState {
    const { hiddenSize: C, numLayers } = this.config;
    const { N, T } = batch;
    const R = N * T;
    if (head.start < 0 || head.count < 1 || head.start + head.count > T) {
      throw new RangeError(`head rows [${head.start}, ${head.start + head.count}) outside 0…${T}`);
    }
    const ws = this.ws;
    const ctx: AttentionInputs = { N, Tq: T, positions: batch.positions, keyStart: batch.keyStart };
    this.embed(enc, batch.tokens, ws.get('act.x0', R * C * F32), R);
    // Checkpointed, every layer writes its intermediates into one shared set and only the layer
    // inputs act.x0…act.xL survive; backward recomputes each layer from its input.
    const checkpointed = this.gradientCheckpointing;
    this.forwardCheckpointed = checkpointed;
    for (let l = 0; l < numLayers; l++) {
      const a = this.trainingActs(l, N, T, checkpointed);
      this.attentionBlock(enc, l, a, ctx);
      this.mlpBlock(enc, l, a, R);
    }
    const x = ws.get(`act.x${numLayers}`, R * C * F32); // (R, C)
    const xn = ws.get('act.final.xn', R * C * F32); // (R, C)
    this.rmsNorm(enc, x, this.finalNorm, xn, ws.get('act.final.rstd', R * F32), R);
    const rows = N * head.count;
    const headInput = ws.get('act.head.input', rows * C * F32); // (N·count, C)
    for (let n = 0; n < N; n++) {
      const [from, to, count] = [(n * T + head.start) * C, n * head.count * C, head.count * C];
      enc.copyBufferToBuffer(xn, from * F32, headInput, to * F32, count * F32);
    }
    this.logitsHeld = null; // a new forward: whatever 'head.logits' holds is another state's
    return { batch, head, headInput };
  }

  /**
   * forwardToHead() and the logits of every head row → state.logits (N·count, V) at once: for
   * scoring and tests; training goes through row chunks (chunkLogits) instead.
   */
  forward(enc: GPUCommandEncoder, batch: GpuBatch, head: HeadRows): ForwardState {
    const state = this.forwardToHead(enc, batch, head);
    const rows = batch.N * head.count;
    const logits = this.ws.get('act.logits', rows * this.config.vocabSize * F32); // (N·count, V)
    this.head(enc, state.headInput, logits, rows);
    return { ...state, logits };
  }

  /**
   * The row chunks training makes the head's logits in: as many rows at a time as
   * logitsMemoryBytes allows (headChunkRows), each (k, V) buffer within one storage binding.
   */
  headChunks(totalRows: number): RowChunk[] {
    const limits = this.engine.device.limits;
    const maxBinding = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
    const V = this.config.vocabSize;
    return headChunks(totalRows, headChunkRows(this.logitsMemoryBytes, V, totalRows, maxBinding));
  }

  /**
   * The logits of head rows [chunk.start, chunk.start + chunk.rows) of `state` → a (k, V)
   * workspace buffer, the same one for every chunk (valid until the next chunk's are encoded).
   */
  chunkLogits(enc: GPUCommandEncoder, state: HeadState, chunk: RowChunk): GPUBuffer {
    return this.logitsFrom(enc, state, chunk, this.chunkInput(enc, state, chunk));
  }

  /** chunkLogits() from the chunk's head-input rows x (k, C). */
  private logitsFrom(enc: GPUCommandEncoder, state: HeadState, chunk: RowChunk, x: GPUBuffer) {
    const logits = this.ws.get('head.logits', chunk.rows * this.config.vocabSize * F32); // (k, V)
    this.head(enc, x, logits, chunk.rows);
    this.logitsHeld = { state, chunk };
    return logits;
  }

  /** Head-input rows of `chunk` (k, C): state.headInput itself when the chunk is every row. */
  private chunkInput(enc: GPUCommandEncoder, state: HeadState, chunk: RowChunk): GPUBuffer {
    const C = this.config.hiddenSize;
    const rows = state.batch.N * state.head.count;
    if (chunk.start === 0 && chunk.rows === rows) return state.headInput;
    const bytes = chunk.rows * C * F32;
    const x = this.ws.get('head.input.chunk', bytes); // (k, C)
    enc.copyBufferToBuffer(state.headInput, chunk.start * C * F32, x, 0, bytes);
    return x;
  }

  /**
   * Backward from the head rows' dLogits: a (N·count, V) buffer, or per row chunk (ChunkedDLogits,
   * training: no (N·count, V) tensor). Adds every trainable parameter's gradient into this.grads.
   */
  backward(enc: GPUCommandEncoder, state: HeadState, dLogits: GPUBuffer | ChunkedDLogits): void {
    const { hiddenSize: C, numLayers } = this.config;
    const { batch, head } = state;
    const { N, T } = batch;
    const R = N * T;
    const rows = N * head.count;
    const ws = this.ws;
    this.allocateGradients();

    // LM head: dHeadInput = dLogits·W, dW += dLogitsᵀ·headInput (tied: into the embedding's gradient).
    const dHead = ws.get('grad.head.input', rows * C * F32); // (N·count, C)
    if ('chunks' in dLogits) this.headBackwardChunked(enc, state, dLogits, dHead);
    else this.headBackward(enc, dLogits, state.headInput, dHead, rows);
    // Scatter the head rows back into a zeroed (R, C) gradient of the final-norm output.
    const dXn = ws.zeroed(enc, 'grad.final.xn', R * C * F32);
    for (let n = 0; n < N; n++) {
      const [from, to, count] = [n * head.count * C, (n * T + head.start) * C, head.count * C];
      enc.copyBufferToBuffer(dHead, from * F32, dXn, to * F32, count * F32);
    }
    const xLast = ws.get(`act.x${numLayers}`, R * C * F32);
    const rstdF = ws.get('act.final.rstd', R * F32);
    const dx = ws.get('grad.dx', R * C * F32); // (R, C) running gradient of the residual stream
    this.rmsNormBackward(enc, dXn, xLast, this.finalNorm, rstdF, dx, R, 'write');
    const d = this.gradScratch(R);
    const checkpointed = this.forwardCheckpointed;
    const ctx: AttentionInputs = { N, Tq: T, positions: batch.positions, keyStart: batch.keyStart };
    for (let l = numLayers - 1; l >= 0; l--) {
      const a = this.trainingActs(l, N, T, checkpointed);
      // Recompute layer l from its kept input: the same kernels on the same inputs give the
      // forward's bits. Its output goes to scratch (act.x{l+1} stays as the forward wrote it).
      // The last layer's intermediates are still in the shared set from the forward itself.
      if (checkpointed && l < numLayers - 1) {
        const recomputed = { ...a, out: this.ws.get('act.ckpt.out', R * C * F32) }; // (R, C)
        this.attentionBlock(enc, l, recomputed, ctx);
        this.mlpBlock(enc, l, recomputed, R);
      }
      this.mlpBackward(enc, l, a, d, dx, R);
      this.attentionBackward(enc, l, a, d, dx, batch);
    }
    // A frozen embedding needs no gradient (the residual's gradient ends here).
    if (!this.parameters.baseFrozen) this.embedBackward(enc, dx, buildTokenIndex(batch.tokensHost));
  }

  /**
   * The activations layer l keeps for backward, by name in the workspace: its own set, or with
   * checkpointing the one set every layer shares (act.ckpt.*), valid for one layer at a time.
   * Either way the layer's input and output are the residual stream act.x{l}, act.x{l+1}.
   */
  private trainingActs(l: number, N: number, T: number, checkpointed: boolean): LayerActs {
    const { hiddenSize: C } = this.config;
    const R = N * T;
    return {
      ...this.layerScratch(checkpointed ? 'act.ckpt' : `act.l${l}`, N, T),
      x: this.ws.get(`act.x${l}`, R * C * F32),
      out: this.ws.get(`act.x${l + 1}`, R * C * F32),
    };
  }

  /** Per-layer buffers under `prefix` for N·Tq rows (all but the layer input and output). */
  private layerScratch(prefix: string, N: number, Tq: number): Omit<LayerActs, 'x' | 'out'> {
    const {
      hiddenSize: C,
      intermediateSize: I,
      numHeads: H,
      numKvHeads: Hkv,
      headDim: D,
    } = this.config;
    const R = N * Tq;
    const b = (name: string, floats: number) => this.ws.get(`${prefix}.${name}`, floats * F32);
    return {
      xn1: b('xn1', R * C),
      rstd1: b('rstd1', R),
      qkNorm: hasQkNorm(this.config)
        ? {
            qProj: b('qProj', R * H * D),
            kProj: b('kProj', R * Hkv * D),
            rstdQ: b('rstdQ', R * H),
            rstdK: b('rstdK', R * Hkv),
          }
        : null,
      qRaw: b('qRaw', R * H * D),
      kRaw: b('kRaw', R * Hkv * D),
      q: b('q', R * H * D),
      k: b('k', R * Hkv * D),
      v: b('v', R * Hkv * D),
      o: b('o', R * H * D),
      lse: b('lse', N * H * Tq),
      x2: b('x2', R * C),
      xn2: b('xn2', R * C),
      rstd2: b('rstd2', R),
      gate: b('gate', R * I),
      up: b('up', R * I),
      h: b('h', R * I),
    };
  }

  /** Gradient scratch shared by every layer of a backward pass. */
  private gradScratch(R: number): GradScratch {
    const {
      hiddenSize: C,
      intermediateSize: I,
      numHeads: H,
      numKvHeads: Hkv,
      headDim: D,
    } = this.config;
    const g = (name: string, floats: number) => this.ws.get(`grad.${name}`, floats * F32);
    return {
      dxn: g('dxn', R * C),
      dh: g('dh', R * I),
      dgate: g('dgate', R * I),
      dup: g('dup', R * I),
      dO: g('do', R * H * D),
      dq: g('dq', R * H * D),
      dk: g('dk', R * Hkv * D),
      dv: g('dv', R * Hkv * D),
      dqRaw: g('dqRaw', R * H * D),
      dkRaw: g('dkRaw', R * Hkv * D),
      delta: g('delta', R * H),
    };
  }

  // ---- generation ------------------------------------------------------------------------

  /**
   * An empty KV cache for N sequences of up to `capacity` columns, kept in the workspace under
   * `name` (the sampler's shared prefill uses a second one, 'kvp').
   */
  createKvCache(N: number, capacity: number, keyStart: Uint32Array, name = 'kv'): KvCache {
    const { numKvHeads: Hkv, headDim: D, numLayers } = this.config;
    const bytes = N * capacity * Hkv * D * F32;
    const keys: GPUBuffer[] = [];
    const values: GPUBuffer[] = [];
    for (let l = 0; l < numLayers; l++) {
      keys.push(this.ws.get(`${name}.k${l}`, bytes));
      values.push(this.ws.get(`${name}.v${l}`, bytes));
    }
    const keyStartBuf = this.ws.get(`${name}.keyStart`, N * 4);
    writeBuffer(this.engine.device, keyStartBuf, keyStart);
    return { N, capacity, keys, values, keyStart: keyStartBuf };
  }

  /**
   * Runs `Tq` new columns per sequence (the prompt at t0 = 0, or one token while decoding) through
   * the model against the cache, writing their k/v at columns t0…t0+Tq−1, and returns the logits of
   * the last new column (N, V). tokens (N, Tq) u32, positions (N, Tq) u32.
   */
  extend(
    enc: GPUCommandEncoder,
    cache: KvCache,
    tokens: GPUBuffer,
    positions: GPUBuffer,
    Tq: number,
    t0: number,
  ): GPUBuffer {
    const { hiddenSize: C, vocabSize: V, numLayers } = this.config;
    const { N, capacity } = cache;
    if (t0 + Tq > capacity)
      throw new RangeError(`KV cache full: ${t0 + Tq} columns > capacity ${capacity}`);
    const R = N * Tq;
    const s = (name: string, floats: number) => this.ws.get(`gen.${name}`, floats * F32);
    // One set of buffers for every layer; each layer's output overwrites its input in x, and the
    // two norms share one output (each is dead before the next is written).
    const x = s('x', R * C); // (R, C)
    const xn = s('xn', R * C); // (R, C)
    const rstd = s('rstd', R); // (R)
    const a: LayerActs = {
      ...this.layerScratch('gen', N, Tq),
      ...{ x, out: x, xn1: xn, xn2: xn, rstd1: rstd, rstd2: rstd },
    };
    const ctx: AttentionInputs = {
      N,
      Tq,
      positions,
      keyStart: cache.keyStart,
      cache: { kv: cache, t0 },
    };
    this.embed(enc, tokens, x, R);
    for (let l = 0; l < numLayers; l++) {
      this.attentionBlock(enc, l, a, ctx);
      this.mlpBlock(enc, l, a, R);
    }
    this.rmsNorm(enc, x, this.finalNorm, xn, rstd, R);
    const last = s('last', N * C); // (N, C) the last new column of each sequence
    for (let n = 0; n < N; n++) {
      enc.copyBufferToBuffer(xn, (n * Tq + Tq - 1) * C * F32, last, n * C * F32, C * F32);
    }
    const logits = s('logits', N * V); // (N, V)
    this.head(enc, last, logits, N);
    return logits;
  }

  /**
   * Copies the first `columns` cached columns of sequence `from` of `src` into sequence `to` of
   * `dst` (every layer, keys and values): a prompt prefilled once serves all its copies.
   */
  copyKvColumns(
    enc: GPUCommandEncoder,
    src: KvCache,
    from: number,
    dst: KvCache,
    to: number,
    columns: number,
  ): void {
    const { numKvHeads: Hkv, headDim: D, numLayers } = this.config;
    const row = Hkv * D * F32; // bytes of one column
    for (let l = 0; l < numLayers; l++) {
      for (const [s, d] of [
        [src.keys[l], dst.keys[l]],
        [src.values[l], dst.values[l]],
      ]) {
        enc.copyBufferToBuffer(
          s,
          from * src.capacity * row,
          d,
          to * dst.capacity * row,
          columns * row,
        );
      }
    }
  }

  /** Bytes of scratch the workspace holds (activations, caches). */
  get workspaceBytes(): number {
    return this.ws.byteLength;
  }

  destroy(): void {
    this.parameters.destroy();
    this.ws.destroy();
    this.k.rope.destroy(); // its inv_freq table
  }
}

/** Gradient buffers of one layer's backward, reused by every layer. */
interface GradScratch {
  dxn: GPUBuffer; // (R, C) gradient of a norm's output
  dh: GPUBuffer; // (R, I)
  dgate: GPUBuffer; // (R, I)
  dup: GPUBuffer; // (R, I)
  dO: GPUBuffer; // (R, H·D) gradient of the attention output
  dq: GPUBuffer; // (R, H·D)
  dk: GPUBuffer; // (R, Hkv·D)
  dv: GPUBuffer; // (R, Hkv·D)
  dqRaw: GPUBuffer; // (R, H·D) before rotary
  dkRaw: GPUBuffer; // (R, Hkv·D)
  delta: GPUBuffer; // (N, H, T) attention backward's rowsum(dO∘O)
}

function createKernels(engine: Engine) {
  const { device, pipelines } = engine;
  return {
    matmul: new MatmulKernel(device, pipelines),
    embedding: new EmbeddingForwardKernel(device, pipelines),
    embeddingBackward: new EmbeddingBackwardKernel(device, pipelines),
    rmsForward: new RmsNormForwardKernel(device, pipelines),
    rmsBackward: new RmsNormBackwardKernel(device, pipelines),
    rmsBackwardWeight: new RmsNormBackwardWeightKernel(device, pipelines),
    rope: new RopeKernel(device, pipelines),
    attention: new AttentionForwardKernel(device, pipelines),
    attentionBackward: new AttentionBackwardKernel(device, pipelines),
    kvWrite: new KvCacheWriteKernel(device, pipelines),
    swigluForward: new SwigluForwardKernel(device, pipelines),
    swigluBackward: new SwigluBackwardKernel(device, pipelines),
    add: new AddKernel(device, pipelines),
    biasAdd: new BiasAddKernel(device, pipelines),
    biasGrad: new BiasGradKernel(device, pipelines),
  };
}
