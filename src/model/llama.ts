// The Llama-family decoder on WebGPU: weights live once in GPU buffers and serve both training
// (forward keeping what backward needs, backward into per-parameter gradients) and generation
// (prefill + one-token decode steps against a KV cache). Every op is a kernel from src/kernels.
//
// Legend: N sequences, T columns, R = N·T token rows, C hidden, I intermediate, V vocab,
// H heads, Hkv kv-heads, D head dim, L completion width (rows that get logits).
// Layout: sequences are left-padded (src/model/batch.ts); keyStart (N) is each row's first valid
// column, positions (N·T) its rotary position ids.
// Split tensors: the embedding table and the LM head (V, C) of a real model can exceed what one
// storage binding (or one buffer) may hold, so they are stored as row chunks (blocks of vocabulary
// ids), each its own buffer, gradient and AdamW state. The lookup runs per chunk, the head's matmul
// writes each chunk's block of logit columns, and the head's input gradient continues its sum
// across chunks (MatmulKernel continueSum), so a split model computes the same bits as an unsplit
// one. Chunk sizes are multiples of MATMUL_TILE_K rows for that reason.
import { readF32, uploadStorageBuffer, writeBuffer } from '../engine/buffers';
import type { Engine } from '../engine/engine';
import { Workspace } from '../engine/workspace';
import { AddKernel } from '../kernels/add';
import {
  AttentionBackwardKernel,
  AttentionForwardKernel,
  KvCacheWriteKernel,
} from '../kernels/attention';
import { BiasAddKernel, BiasGradKernel } from '../kernels/bias';
import {
  buildTokenIndex,
  EmbeddingBackwardKernel,
  EmbeddingForwardKernel,
  type TokenIndex,
} from '../kernels/embedding';
import { MATMUL_TILE_K, MatmulKernel } from '../kernels/matmul';
import {
  RmsNormBackwardKernel,
  RmsNormBackwardWeightKernel,
  RmsNormForwardKernel,
} from '../kernels/rmsnorm';
import { RopeKernel } from '../kernels/rope';
import { SwigluBackwardKernel, SwigluForwardKernel } from '../kernels/swiglu';
import { numel, parameterSpecs, type LlamaConfig, type ParameterSpec } from '../core/model-config';

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

/** What the forward pass keeps for backward (buffers are workspace-owned, reused per step). */
export interface ForwardState {
  batch: GpuBatch;
  head: HeadRows;
  logits: GPUBuffer; // (N·count, V)
  headInput: GPUBuffer; // (N·count, C) final-norm output at the head rows
}

export interface KvCache {
  N: number;
  capacity: number; // S_cap
  keys: GPUBuffer[]; // per layer (N, S_cap, Hkv, D), rotary applied
  values: GPUBuffer[]; // per layer (N, S_cap, Hkv, D)
  keyStart: GPUBuffer; // u32 (N)
}

/** A block of rows [rowStart, rowStart + rows) of a parameter, stored as its own buffer. */
export interface ParameterChunk {
  /** Key in params / grads / specs: the parameter's name, or `name[start:end]` when split. */
  key: string;
  rowStart: number;
  rows: number;
}

export interface GpuLlamaOptions {
  /**
   * Largest buffer one parameter chunk may take, in bytes. Default: the device's
   * min(maxStorageBufferBindingSize, maxBufferSize). Tests lower it to force a split.
   */
  maxBindingBytes?: number;
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

export class GpuLlama {
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
  private readonly ws: Workspace;
  private readonly k: ReturnType<typeof createKernels>;

  private constructor(
    private readonly engine: Engine,
    readonly config: LlamaConfig,
    maxBindingBytes: number,
  ) {
    this.tensorSpecs = parameterSpecs(config);
    this.chunks = planParameterChunks(config, maxBindingBytes);
    this.specs = this.tensorSpecs.flatMap((spec) =>
      this.chunks.get(spec.name)!.map((chunk) => ({
        name: chunk.key,
        shape: [chunk.rows, ...spec.shape.slice(1)],
      })),
    );
    this.ws = new Workspace(engine.device);
    this.k = createKernels(engine);
  }

  /** Uploads `tensors` (HF names, shapes as parameterSpecs) into GPU buffers. */
  static load(
    engine: Engine,
    config: LlamaConfig,
    tensors: ReadonlyMap<string, Float32Array>,
    options: GpuLlamaOptions = {},
  ): GpuLlama {
    const limits = engine.device.limits;
    const model = new GpuLlama(
      engine,
      config,
      options.maxBindingBytes ?? Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize),
    );
    // Check every tensor before the first upload, so a bad model leaves nothing allocated.
    for (const spec of model.tensorSpecs) {
      const data = tensors.get(spec.name);
      if (!data) throw new Error(`missing parameter ${spec.name}`);
      if (data.length !== numel(spec.shape)) {
        throw new Error(
          `${spec.name}: ${data.length} values, expected ${numel(spec.shape)} for shape [${spec.shape}]`,
        );
      }
    }
    for (const spec of model.tensorSpecs) {
      const data = tensors.get(spec.name)!;
      const rowLength = numel(spec.shape) / spec.shape[0];
      for (const chunk of model.chunks.get(spec.name)!) {
        const part = data.subarray(
          chunk.rowStart * rowLength,
          (chunk.rowStart + chunk.rows) * rowLength,
        );
        model.params.set(chunk.key, uploadStorageBuffer(engine.device, part, chunk.key));
      }
    }
    return model;
  }

  get parameterCount(): number {
    return this.specs.reduce((sum, spec) => sum + numel(spec.shape), 0);
  }

  /** Whether any parameter is stored as more than one buffer. */
  get isSplit(): boolean {
    return this.specs.length !== this.tensorSpecs.length;
  }

  /** Zero-filled gradient buffers for every parameter (idempotent). */
  allocateGradients(): void {
    for (const spec of this.specs) {
      if (!this.grads.has(spec.name)) {
        this.grads.set(
          spec.name,
          this.engine.device.createBuffer({
            size: numel(spec.shape) * F32,
            usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
            label: `grad:${spec.name}`,
          }),
        );
      }
    }
  }

  zeroGradients(encoder: GPUCommandEncoder): void {
    for (const grad of this.grads.values()) encoder.clearBuffer(grad);
  }

  async readParameters(): Promise<Map<string, Float32Array>> {
    return this.readJoined(this.params);
  }

  async readGradients(): Promise<Map<string, Float32Array>> {
    return this.readJoined(this.grads);
  }

  /**
   * Whole tensors by parameter name from per-chunk buffers keyed like `specs` (parameters,
   * gradients, optimizer moments), row chunks joined.
   */
  async readJoined(buffers: ReadonlyMap<string, GPUBuffer>): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const spec of this.tensorSpecs) {
      const chunks = this.chunks.get(spec.name)!;
      if (!chunks.every((chunk) => buffers.has(chunk.key))) continue;
      const rowLength = numel(spec.shape) / spec.shape[0];
      const data = new Float32Array(numel(spec.shape));
      for (const chunk of chunks) {
        const part = await readF32(
          this.engine.device,
          buffers.get(chunk.key)!,
          chunk.rows * rowLength,
        );
        data.set(part, chunk.rowStart * rowLength);
      }
      out.set(spec.name, data);
    }
    return out;
  }

  /** Replaces every parameter's values (checkpoint restore); shapes must match. */
  writeParameters(tensors: ReadonlyMap<string, Float32Array>): void {
    this.writeSplit(this.params, tensors, 'writeParameters');
  }

  /** Writes whole tensors by parameter name into per-chunk buffers keyed like `specs`. */
  writeSplit(
    buffers: ReadonlyMap<string, GPUBuffer>,
    tensors: ReadonlyMap<string, Float32Array>,
    what: string,
  ): void {
    for (const spec of this.tensorSpecs) {
      const data = tensors.get(spec.name);
      if (!data || data.length !== numel(spec.shape))
        throw new Error(`${what}: bad or missing ${spec.name}`);
    }
    for (const spec of this.tensorSpecs) {
      const data = tensors.get(spec.name)!;
      const rowLength = numel(spec.shape) / spec.shape[0];
      for (const chunk of this.chunks.get(spec.name)!) {
        writeBuffer(
          this.engine.device,
          buffers.get(chunk.key)!,
          data.subarray(chunk.rowStart * rowLength, (chunk.rowStart + chunk.rows) * rowLength),
        );
      }
    }
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

  private p(name: string): GPUBuffer {
    const buffer = this.params.get(name);
    if (!buffer) throw new Error(`no parameter ${name}`);
    return buffer;
  }

  private g(name: string): GPUBuffer {
    const buffer = this.grads.get(name);
    if (!buffer) throw new Error(`no gradient for ${name}: call allocateGradients() first`);
    return buffer;
  }

  private headWeightName(): string {
    return this.config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  }

  /** x (R, C) = embedding rows of tokens (R), chunk by chunk (the first writes every row). */
  private async embed(
    enc: GPUCommandEncoder,
    tokens: GPUBuffer,
    x: GPUBuffer,
    rows: number,
  ): Promise<void> {
    const chunks = this.chunks.get('model.embed_tokens.weight')!;
    for (let i = 0; i < chunks.length; i++) {
      await this.k.embedding.encode(enc, {
        tokens,
        weight: this.p(chunks[i].key),
        x,
        rows,
        V: chunks[i].rows,
        C: this.config.hiddenSize,
        rowStart: chunks[i].rowStart,
        zeroMisses: i === 0,
      });
    }
  }

  /** Embedding gradient: each chunk gets the token index restricted to its ids. */
  private async embedBackward(enc: GPUCommandEncoder, dx: GPUBuffer, index: TokenIndex) {
    const ids = index.uniqueIds;
    let u0 = 0;
    for (const chunk of this.chunks.get('model.embed_tokens.weight')!) {
      let u1 = u0;
      while (u1 < ids.length && ids[u1] < chunk.rowStart + chunk.rows) u1++;
      await this.k.embeddingBackward.encode(enc, {
        dx,
        dw: this.g(chunk.key),
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
  private async head(enc: GPUCommandEncoder, x: GPUBuffer, logits: GPUBuffer, rows: number) {
    const { hiddenSize: C, vocabSize: V } = this.config;
    for (const chunk of this.chunks.get(this.headWeightName())!) {
      await this.k.matmul.encode(enc, {
        a: x,
        b: this.p(chunk.key),
        c: logits,
        M: rows,
        N: chunk.rows,
        K: C,
        transB: true,
        ldC: V,
        offsetC: chunk.rowStart,
      });
    }
  }

  /** Backward of head(): dX (rows, C) = dLogits·W over all chunks; dW_chunk += dLogits_chunkᵀ·x. */
  private async headBackward(
    enc: GPUCommandEncoder,
    dLogits: GPUBuffer,
    x: GPUBuffer,
    dx: GPUBuffer,
    rows: number,
  ): Promise<void> {
    const { hiddenSize: C, vocabSize: V } = this.config;
    const chunks = this.chunks.get(this.headWeightName())!;
    for (let i = 0; i < chunks.length; i++) {
      const chunk = chunks[i];
      await this.k.matmul.encode(enc, {
        a: dLogits,
        b: this.p(chunk.key),
        c: dx,
        M: rows,
        N: C,
        K: chunk.rows,
        ldA: V,
        offsetA: chunk.rowStart,
        continueSum: i > 0,
      });
      await this.k.matmul.encode(enc, {
        a: dLogits,
        b: x,
        c: this.g(chunk.key),
        M: chunk.rows,
        N: C,
        K: rows,
        transA: true,
        ldA: V,
        offsetA: chunk.rowStart,
        accumulate: true,
      });
    }
  }

  /** y (rows, out) = x (rows, in) · Wᵀ (+ b) with W stored (out, in). */
  private async linear(
    enc: GPUCommandEncoder,
    x: GPUBuffer,
    weight: string,
    y: GPUBuffer,
    rows: number,
    inDim: number,
    outDim: number,
    bias?: string,
  ): Promise<void> {
    await this.k.matmul.encode(enc, {
      a: x,
      b: this.p(weight),
      c: y,
      M: rows,
      N: outDim,
      K: inDim,
      transB: true,
    });
    if (bias) await this.k.biasAdd.encode(enc, { y, bias: this.p(bias), rows, C: outDim });
  }

  /**
   * Backward of linear(): dX (rows, in) = dY·W (added into dX when accumulateInput), and
   * dW += dYᵀ·X, db += Σ dY.
   */
  private async linearBackward(
    enc: GPUCommandEncoder,
    dy: GPUBuffer,
    x: GPUBuffer,
    weight: string,
    dx: GPUBuffer,
    rows: number,
    inDim: number,
    outDim: number,
    accumulateInput: boolean,
    bias?: string,
  ): Promise<void> {
    const m = this.k.matmul;
    await m.encode(enc, {
      a: dy,
      b: this.p(weight),
      c: dx,
      M: rows,
      N: inDim,
      K: outDim,
      accumulate: accumulateInput,
    });
    await m.encode(enc, {
      a: dy,
      b: x,
      c: this.g(weight),
      M: outDim,
      N: inDim,
      K: rows,
      transA: true,
      accumulate: true,
    });
    if (bias)
      await this.k.biasGrad.encode(enc, {
        dy,
        db: this.g(bias),
        rows,
        C: outDim,
        accumulate: true,
      });
  }

  /**
   * Training forward over (N, T), keeping every activation backward needs, and logits for the
   * head rows only (the columns that predict completion tokens) → state.logits (N·count, V).
   */
  async forward(enc: GPUCommandEncoder, batch: GpuBatch, head: HeadRows): Promise<ForwardState> {
    const cfg = this.config;
    const {
      hiddenSize: C,
      intermediateSize: I,
      numHeads: H,
      numKvHeads: Hkv,
      headDim: D,
      vocabSize: V,
    } = cfg;
    const { N, T } = batch;
    const R = N * T;
    if (head.start < 0 || head.count < 1 || head.start + head.count > T) {
      throw new RangeError(`head rows [${head.start}, ${head.start + head.count}) outside 0…${T}`);
    }
    const ws = this.ws;
    let x = ws.get('act.x0', R * C * F32); // (R, C)
    await this.embed(enc, batch.tokens, x, R);
    for (let l = 0; l < cfg.numLayers; l++) {
      const pre = `model.layers.${l}`;
      const a = layerActs(ws, l, R, cfg, batch.N, batch.T);
      await this.k.rmsForward.encode(enc, {
        x,
        w: this.p(`${pre}.input_layernorm.weight`),
        y: a.xn1,
        rstd: a.rstd1,
        rows: R,
        C,
        eps: cfg.rmsNormEps,
      });
      const bias = (name: string) =>
        cfg.attentionBias ? `${pre}.self_attn.${name}.bias` : undefined;
      await this.linear(
        enc,
        a.xn1,
        `${pre}.self_attn.q_proj.weight`,
        a.qRaw,
        R,
        C,
        H * D,
        bias('q_proj'),
      );
      await this.linear(
        enc,
        a.xn1,
        `${pre}.self_attn.k_proj.weight`,
        a.kRaw,
        R,
        C,
        Hkv * D,
        bias('k_proj'),
      );
      await this.linear(
        enc,
        a.xn1,
        `${pre}.self_attn.v_proj.weight`,
        a.v,
        R,
        C,
        Hkv * D,
        bias('v_proj'),
      );
      await this.k.rope.encode(enc, {
        x: a.qRaw,
        positions: batch.positions,
        y: a.q,
        rows: R,
        heads: H,
        D,
        theta: cfg.ropeTheta,
      });
      await this.k.rope.encode(enc, {
        x: a.kRaw,
        positions: batch.positions,
        y: a.k,
        rows: R,
        heads: Hkv,
        D,
        theta: cfg.ropeTheta,
      });
      await this.k.attention.encode(enc, {
        q: a.q,
        k: a.k,
        v: a.v,
        keyStart: batch.keyStart,
        o: a.o,
        lse: a.lse,
        N,
        Tq: T,
        H,
        Hkv,
        D,
      });
      // x2 = x + o·Woᵀ, built in place in x2.
      await this.linear(enc, a.o, `${pre}.self_attn.o_proj.weight`, a.x2, R, H * D, C);
      await this.k.add.encode(enc, { a: a.x2, b: x, count: R * C });
      await this.k.rmsForward.encode(enc, {
        x: a.x2,
        w: this.p(`${pre}.post_attention_layernorm.weight`),
        y: a.xn2,
        rstd: a.rstd2,
        rows: R,
        C,
        eps: cfg.rmsNormEps,
      });
      await this.linear(enc, a.xn2, `${pre}.mlp.gate_proj.weight`, a.gate, R, C, I);
      await this.linear(enc, a.xn2, `${pre}.mlp.up_proj.weight`, a.up, R, C, I);
      await this.k.swigluForward.encode(enc, { gate: a.gate, up: a.up, h: a.h, count: R * I });
      const next = ws.get(`act.x${l + 1}`, R * C * F32);
      await this.linear(enc, a.h, `${pre}.mlp.down_proj.weight`, next, R, I, C);
      await this.k.add.encode(enc, { a: next, b: a.x2, count: R * C });
      x = next;
    }
    const xn = ws.get('act.final.xn', R * C * F32);
    const rstd = ws.get('act.final.rstd', R * F32);
    await this.k.rmsForward.encode(enc, {
      x,
      w: this.p('model.norm.weight'),
      y: xn,
      rstd,
      rows: R,
      C,
      eps: cfg.rmsNormEps,
    });
    const rows = N * head.count;
    const headInput = ws.get('act.head.input', rows * C * F32); // (N·count, C)
    for (let n = 0; n < N; n++) {
      enc.copyBufferToBuffer(
        xn,
        (n * T + head.start) * C * F32,
        headInput,
        n * head.count * C * F32,
        head.count * C * F32,
      );
    }
    const logits = ws.get('act.logits', rows * V * F32); // (N·count, V)
    await this.head(enc, headInput, logits, rows);
    return { batch, head, logits, headInput };
  }

  /** Backward from dLogits (N·count, V): adds every parameter's gradient into this.grads. */
  async backward(enc: GPUCommandEncoder, state: ForwardState, dLogits: GPUBuffer): Promise<void> {
    const cfg = this.config;
    const { hiddenSize: C, intermediateSize: I, numHeads: H, numKvHeads: Hkv, headDim: D } = cfg;
    const { batch, head } = state;
    const { N, T } = batch;
    const R = N * T;
    const rows = N * head.count;
    const ws = this.ws;
    this.allocateGradients();

    // LM head: dHeadInput = dLogits·W, dW += dLogitsᵀ·headInput (tied: into the embedding's gradient).
    const dHead = ws.get('grad.head.input', rows * C * F32); // (N·count, C)
    await this.headBackward(enc, dLogits, state.headInput, dHead, rows);
    // Scatter the head rows back into a zeroed (R, C) gradient of the final-norm output.
    const dXn = ws.zeroed(enc, 'grad.final.xn', R * C * F32);
    for (let n = 0; n < N; n++) {
      enc.copyBufferToBuffer(
        dHead,
        n * head.count * C * F32,
        dXn,
        (n * T + head.start) * C * F32,
        head.count * C * F32,
      );
    }
    const xLast = ws.get(`act.x${cfg.numLayers}`, R * C * F32);
    const rstdF = ws.get('act.final.rstd', R * F32);
    // dx: the running gradient of the residual stream, (R, C).
    const dx = ws.get('grad.dx', R * C * F32);
    await this.k.rmsBackward.encode(enc, {
      dy: dXn,
      x: xLast,
      w: this.p('model.norm.weight'),
      rstd: rstdF,
      dx,
      rows: R,
      C,
    });
    await this.k.rmsBackwardWeight.encode(enc, {
      dy: dXn,
      x: xLast,
      rstd: rstdF,
      dw: this.g('model.norm.weight'),
      rows: R,
      C,
      accumulate: true,
    });

    const dxn = ws.get('grad.dxn', R * C * F32); // (R, C)
    const dh = ws.get('grad.dh', R * I * F32); // (R, I)
    const dgate = ws.get('grad.dgate', R * I * F32);
    const dup = ws.get('grad.dup', R * I * F32);
    const dO = ws.get('grad.do', R * H * D * F32); // (R, H·D)
    const dq = ws.get('grad.dq', R * H * D * F32);
    const dk = ws.get('grad.dk', R * Hkv * D * F32);
    const dv = ws.get('grad.dv', R * Hkv * D * F32);
    const dqRaw = ws.get('grad.dqRaw', R * H * D * F32);
    const dkRaw = ws.get('grad.dkRaw', R * Hkv * D * F32);
    for (let l = cfg.numLayers - 1; l >= 0; l--) {
      const pre = `model.layers.${l}`;
      const a = layerActs(ws, l, R, cfg, N, T);
      const xIn = ws.get(`act.x${l}`, R * C * F32);
      // MLP: x_{l+1} = x2 + down(silu(gate)·up); dx is the gradient of x_{l+1}.
      await this.linearBackward(enc, dx, a.h, `${pre}.mlp.down_proj.weight`, dh, R, I, C, false);
      await this.k.swigluBackward.encode(enc, {
        dh,
        gate: a.gate,
        up: a.up,
        dgate,
        dup,
        count: R * I,
      });
      await this.linearBackward(
        enc,
        dgate,
        a.xn2,
        `${pre}.mlp.gate_proj.weight`,
        dxn,
        R,
        C,
        I,
        false,
      );
      await this.linearBackward(enc, dup, a.xn2, `${pre}.mlp.up_proj.weight`, dxn, R, C, I, true);
      // dx (through the residual) += RMSNorm backward: now the gradient of x2.
      await this.k.rmsBackward.encode(enc, {
        dy: dxn,
        x: a.x2,
        w: this.p(`${pre}.post_attention_layernorm.weight`),
        rstd: a.rstd2,
        dx,
        rows: R,
        C,
        accumulate: true,
      });
      await this.k.rmsBackwardWeight.encode(enc, {
        dy: dxn,
        x: a.x2,
        rstd: a.rstd2,
        dw: this.g(`${pre}.post_attention_layernorm.weight`),
        rows: R,
        C,
        accumulate: true,
      });
      // Attention: x2 = x + o_proj(attn(rope(q), rope(k), v)).
      await this.linearBackward(
        enc,
        dx,
        a.o,
        `${pre}.self_attn.o_proj.weight`,
        dO,
        R,
        H * D,
        C,
        false,
      );
      await this.k.attentionBackward.encode(enc, {
        dO,
        q: a.q,
        k: a.k,
        v: a.v,
        o: a.o,
        lse: a.lse,
        keyStart: batch.keyStart,
        dq,
        dk,
        dv,
        N,
        T,
        H,
        Hkv,
        D,
      });
      await this.k.rope.encode(enc, {
        x: dq,
        positions: batch.positions,
        y: dqRaw,
        rows: R,
        heads: H,
        D,
        theta: cfg.ropeTheta,
        inverse: true,
      });
      await this.k.rope.encode(enc, {
        x: dk,
        positions: batch.positions,
        y: dkRaw,
        rows: R,
        heads: Hkv,
        D,
        theta: cfg.ropeTheta,
        inverse: true,
      });
      const bias = (name: string) =>
        cfg.attentionBias ? `${pre}.self_attn.${name}.bias` : undefined;
      await this.linearBackward(
        enc,
        dqRaw,
        a.xn1,
        `${pre}.self_attn.q_proj.weight`,
        dxn,
        R,
        C,
        H * D,
        false,
        bias('q_proj'),
      );
      await this.linearBackward(
        enc,
        dkRaw,
        a.xn1,
        `${pre}.self_attn.k_proj.weight`,
        dxn,
        R,
        C,
        Hkv * D,
        true,
        bias('k_proj'),
      );
      await this.linearBackward(
        enc,
        dv,
        a.xn1,
        `${pre}.self_attn.v_proj.weight`,
        dxn,
        R,
        C,
        Hkv * D,
        true,
        bias('v_proj'),
      );
      await this.k.rmsBackward.encode(enc, {
        dy: dxn,
        x: xIn,
        w: this.p(`${pre}.input_layernorm.weight`),
        rstd: a.rstd1,
        dx,
        rows: R,
        C,
        accumulate: true,
      });
      await this.k.rmsBackwardWeight.encode(enc, {
        dy: dxn,
        x: xIn,
        rstd: a.rstd1,
        dw: this.g(`${pre}.input_layernorm.weight`),
        rows: R,
        C,
        accumulate: true,
      });
    }
    await this.embedBackward(enc, dx, buildTokenIndex(batch.tokensHost));
  }

  /** An empty KV cache for N sequences of up to `capacity` columns. */
  createKvCache(N: number, capacity: number, keyStart: Uint32Array): KvCache {
    const { numKvHeads: Hkv, headDim: D, numLayers } = this.config;
    const bytes = N * capacity * Hkv * D * F32;
    const keys: GPUBuffer[] = [];
    const values: GPUBuffer[] = [];
    for (let l = 0; l < numLayers; l++) {
      keys.push(this.ws.get(`kv.k${l}`, bytes));
      values.push(this.ws.get(`kv.v${l}`, bytes));
    }
    const keyStartBuf = this.ws.get('kv.keyStart', N * 4);
    writeBuffer(this.engine.device, keyStartBuf, keyStart);
    return { N, capacity, keys, values, keyStart: keyStartBuf };
  }

  /**
   * Runs `Tq` new columns per sequence (the prompt at t0 = 0, or one token while decoding) through
   * the model against the cache, writing their k/v at columns t0…t0+Tq−1, and returns the logits of
   * the last new column (N, V). tokens (N, Tq) u32, positions (N, Tq) u32.
   */
  async extend(
    enc: GPUCommandEncoder,
    cache: KvCache,
    tokens: GPUBuffer,
    positions: GPUBuffer,
    Tq: number,
    t0: number,
  ): Promise<GPUBuffer> {
    const cfg = this.config;
    const {
      hiddenSize: C,
      intermediateSize: I,
      numHeads: H,
      numKvHeads: Hkv,
      headDim: D,
      vocabSize: V,
    } = cfg;
    const { N, capacity } = cache;
    if (t0 + Tq > capacity)
      throw new RangeError(`KV cache full: ${t0 + Tq} columns > capacity ${capacity}`);
    const R = N * Tq;
    const ws = this.ws;
    const s = (name: string, floats: number) => ws.get(`gen.${name}`, floats * F32);
    const x = s('x', R * C);
    await this.embed(enc, tokens, x, R);
    const xn = s('xn', R * C);
    const rstd = s('rstd', R);
    const qRaw = s('qRaw', R * H * D);
    const q = s('q', R * H * D);
    const kRaw = s('kRaw', R * Hkv * D);
    const k = s('k', R * Hkv * D);
    const v = s('v', R * Hkv * D);
    const o = s('o', R * H * D);
    const lse = s('lse', N * H * Tq);
    const tmp = s('tmp', R * C);
    const gate = s('gate', R * I);
    const up = s('up', R * I);
    const h = s('h', R * I);
    for (let l = 0; l < cfg.numLayers; l++) {
      const pre = `model.layers.${l}`;
      const bias = (name: string) =>
        cfg.attentionBias ? `${pre}.self_attn.${name}.bias` : undefined;
      await this.k.rmsForward.encode(enc, {
        x,
        w: this.p(`${pre}.input_layernorm.weight`),
        y: xn,
        rstd,
        rows: R,
        C,
        eps: cfg.rmsNormEps,
      });
      await this.linear(
        enc,
        xn,
        `${pre}.self_attn.q_proj.weight`,
        qRaw,
        R,
        C,
        H * D,
        bias('q_proj'),
      );
      await this.linear(
        enc,
        xn,
        `${pre}.self_attn.k_proj.weight`,
        kRaw,
        R,
        C,
        Hkv * D,
        bias('k_proj'),
      );
      await this.linear(
        enc,
        xn,
        `${pre}.self_attn.v_proj.weight`,
        v,
        R,
        C,
        Hkv * D,
        bias('v_proj'),
      );
      await this.k.rope.encode(enc, {
        x: qRaw,
        positions,
        y: q,
        rows: R,
        heads: H,
        D,
        theta: cfg.ropeTheta,
      });
      await this.k.rope.encode(enc, {
        x: kRaw,
        positions,
        y: k,
        rows: R,
        heads: Hkv,
        D,
        theta: cfg.ropeTheta,
      });
      await this.k.kvWrite.encode(enc, {
        src: k,
        cache: cache.keys[l],
        N,
        Tsrc: Tq,
        sCap: capacity,
        Hkv,
        D,
        t0,
      });
      await this.k.kvWrite.encode(enc, {
        src: v,
        cache: cache.values[l],
        N,
        Tsrc: Tq,
        sCap: capacity,
        Hkv,
        D,
        t0,
      });
      await this.k.attention.encode(enc, {
        q,
        k: cache.keys[l],
        v: cache.values[l],
        keyStart: cache.keyStart,
        o,
        lse,
        N,
        Tq,
        H,
        Hkv,
        D,
        qOffset: t0,
        S: t0 + Tq,
        sCap: capacity,
      });
      await this.linear(enc, o, `${pre}.self_attn.o_proj.weight`, tmp, R, H * D, C);
      await this.k.add.encode(enc, { a: x, b: tmp, count: R * C });
      await this.k.rmsForward.encode(enc, {
        x,
        w: this.p(`${pre}.post_attention_layernorm.weight`),
        y: xn,
        rstd,
        rows: R,
        C,
        eps: cfg.rmsNormEps,
      });
      await this.linear(enc, xn, `${pre}.mlp.gate_proj.weight`, gate, R, C, I);
      await this.linear(enc, xn, `${pre}.mlp.up_proj.weight`, up, R, C, I);
      await this.k.swigluForward.encode(enc, { gate, up, h, count: R * I });
      await this.linear(enc, h, `${pre}.mlp.down_proj.weight`, tmp, R, I, C);
      await this.k.add.encode(enc, { a: x, b: tmp, count: R * C });
    }
    await this.k.rmsForward.encode(enc, {
      x,
      w: this.p('model.norm.weight'),
      y: xn,
      rstd,
      rows: R,
      C,
      eps: cfg.rmsNormEps,
    });
    const last = s('last', N * C); // (N, C) the last new column of each sequence
    for (let n = 0; n < N; n++) {
      enc.copyBufferToBuffer(xn, (n * Tq + Tq - 1) * C * F32, last, n * C * F32, C * F32);
    }
    const logits = s('logits', N * V); // (N, V)
    await this.head(enc, last, logits, N);
    return logits;
  }

  /** Bytes of scratch the workspace holds (activations, caches). */
  get workspaceBytes(): number {
    return this.ws.byteLength;
  }

  destroy(): void {
    for (const buffer of this.params.values()) buffer.destroy();
    for (const buffer of this.grads.values()) buffer.destroy();
    this.params.clear();
    this.grads.clear();
    this.ws.destroy();
  }
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

/** The activations one layer keeps for backward, by name in the workspace. */
function layerActs(ws: Workspace, l: number, R: number, cfg: LlamaConfig, N: number, T: number) {
  const { hiddenSize: C, intermediateSize: I, numHeads: H, numKvHeads: Hkv, headDim: D } = cfg;
  const b = (name: string, floats: number) => ws.get(`act.l${l}.${name}`, floats * F32);
  return {
    xn1: b('xn1', R * C), // (R, C) input_layernorm output
    rstd1: b('rstd1', R), // (R)
    qRaw: b('qRaw', R * H * D), // (N, T, H, D) before rotary
    kRaw: b('kRaw', R * Hkv * D), // (N, T, Hkv, D) before rotary
    q: b('q', R * H * D), // (N, T, H, D)
    k: b('k', R * Hkv * D), // (N, T, Hkv, D)
    v: b('v', R * Hkv * D), // (N, T, Hkv, D)
    o: b('o', R * H * D), // (N, T, H, D) attention output
    lse: b('lse', N * H * T), // (N, H, T)
    x2: b('x2', R * C), // (R, C) residual after attention
    xn2: b('xn2', R * C), // (R, C) post_attention_layernorm output
    rstd2: b('rstd2', R), // (R)
    gate: b('gate', R * I), // (R, I)
    up: b('up', R * I), // (R, I)
    h: b('h', R * I), // (R, I) silu(gate)·up
  };
}
