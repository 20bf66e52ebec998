// The optimizer step on the GPU: global gradient norm (sumsq + grad_clip kernels) → clip scale and
// finite flag in a small buffer → AdamW on every parameter reading that buffer. No readback inside:
// when the norm is not finite the AdamW kernel leaves weights and moments untouched (the NaN guard),
// and the caller reads the 4-float stats buffer once, at the end of the step, to learn what happened.
// It steps the model's trainable parameters only: every parameter, or with LoRA the adapters (the
// frozen base has neither gradients nor moments).
import { createStorageBuffer, readF32 } from '../engine/buffers';
import type { Engine, Readback } from '../engine/engine';
import { AdamWKernel } from '../kernels/adamw';
import { GRAD_CLIP_OUT, GradNormKernel, gradNormPartialsLength } from '../kernels/grad-norm';
import { numel } from '../core/model-config';
import type { GpuLlama } from '../model/llama';

export interface AdamWOptions {
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** Global gradient-norm clip; 0 = off (the norm is still measured for the metric and the guard). */
  maxGradNorm: number;
}

/** The clip kernel's outputs: the global gradient norm, the clip scale, whether it was finite. */
export interface GradStats {
  norm: number;
  scale: number;
  finite: boolean;
}

/** Checkpoint names of the moments, as PyTorch's optimizer state calls them. */
export const EXP_AVG_PREFIX = 'optimizer.exp_avg.';
export const EXP_AVG_SQ_PREFIX = 'optimizer.exp_avg_sq.';

export class GpuAdamW {
  /** Applied optimizer steps (PyTorch's state['step']); skipped updates do not count. */
  stepCount = 0;
  private readonly m = new Map<string, GPUBuffer>();
  private readonly v = new Map<string, GPUBuffer>();
  private readonly partials: GPUBuffer;
  private readonly stats: GPUBuffer; // (4) [norm, scale, finite, 0]
  private readonly norm: GradNormKernel;
  private readonly adamw: AdamWKernel;
  /** The optimizer's pipelines, compiled; await before the first encodeStep. */
  readonly ready: Promise<unknown>;

  constructor(
    private readonly engine: Engine,
    private readonly model: GpuLlama,
    private readonly options: AdamWOptions,
  ) {
    const { device, pipelines } = engine;
    model.allocateGradients();
    for (const spec of model.trainableSpecs) {
      const bytes = numel(spec.shape) * 4;
      this.m.set(spec.name, createStorageBuffer(device, bytes, `${EXP_AVG_PREFIX}${spec.name}`));
      this.v.set(spec.name, createStorageBuffer(device, bytes, `${EXP_AVG_SQ_PREFIX}${spec.name}`));
    }
    this.partials = createStorageBuffer(
      device,
      gradNormPartialsLength(model.trainableSpecs.length) * 4,
      'gradnorm.partials',
    );
    this.stats = createStorageBuffer(device, GRAD_CLIP_OUT.length * 4, 'gradnorm.out');
    this.norm = new GradNormKernel(device, pipelines);
    this.adamw = new AdamWKernel(device, pipelines);
    this.ready = Promise.all([
      this.norm.prepare(model.trainableSpecs.map((spec) => numel(spec.shape))),
      this.adamw.prepare(),
    ]);
    this.ready.catch(() => {}); // reported to whoever awaits `ready`
  }

  /** Encodes norm → clip → AdamW for the gradients currently in model.grads, at learning rate `lr`. */
  encodeStep(enc: GPUCommandEncoder, lr: number): void {
    const specs = this.model.trainableSpecs;
    this.norm.encode(enc, {
      grads: specs.map((s) => ({ buffer: this.model.grads.get(s.name)!, n: numel(s.shape) })),
      partials: this.partials,
      out: this.stats,
      maxNorm: this.options.maxGradNorm,
    });
    const hyper = {
      lr,
      beta1: this.options.beta1,
      beta2: this.options.beta2,
      eps: this.options.eps,
      weightDecay: this.options.weightDecay,
    };
    for (const spec of specs) {
      this.adamw.encode(enc, {
        param: this.model.params.get(spec.name)!,
        grad: this.model.grads.get(spec.name)!,
        m: this.m.get(spec.name)!,
        v: this.v.get(spec.name)!,
        n: numel(spec.shape),
        step: this.stepCount + 1,
        hyper,
        clip: this.stats,
      });
    }
  }

  /** The last encoded step's gradient norm, clip scale and whether the update was applied. */
  async readStats(): Promise<GradStats> {
    return this.decodeStats(await readF32(this.engine.device, this.stats, GRAD_CLIP_OUT.length));
  }

  /** Where readStats() reads from: to read the statistics with other results in one wait. */
  get statsRange(): Readback {
    return { buffer: this.stats, bytes: GRAD_CLIP_OUT.length * 4 };
  }

  /** The statistics from the bytes of statsRange. */
  decodeStats(bytes: ArrayBuffer | Float32Array): GradStats {
    const out = bytes instanceof Float32Array ? bytes : new Float32Array(bytes);
    return {
      norm: out[GRAD_CLIP_OUT.norm],
      scale: out[GRAD_CLIP_OUT.scale],
      finite: out[GRAD_CLIP_OUT.finite] > 0,
    };
  }

  /** Counts an applied update (call when readStats() says it was finite). */
  commitStep(): void {
    this.stepCount += 1;
  }

  /**
   * Moments by checkpoint name (optimizer.exp_avg.<param>, optimizer.exp_avg_sq.<param>), whole
   * tensors even when the model stores a table as row chunks, so a checkpoint restores on any device.
   */
  async readState(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const [prefix, buffers] of [
      [EXP_AVG_PREFIX, this.m],
      [EXP_AVG_SQ_PREFIX, this.v],
    ] as const) {
      for (const [name, data] of await this.model.readJoined(buffers)) out.set(prefix + name, data);
    }
    return out;
  }

  /** Restores moments and the step count (checkpoint resume). */
  writeState(state: ReadonlyMap<string, Float32Array>, stepCount: number): void {
    for (const [prefix, buffers] of [
      [EXP_AVG_PREFIX, this.m],
      [EXP_AVG_SQ_PREFIX, this.v],
    ] as const) {
      const tensors = new Map<string, Float32Array>();
      const specs = this.model.trainableTensorSpecs;
      for (const spec of specs) {
        const data = state.get(prefix + spec.name);
        if (data) tensors.set(spec.name, data);
      }
      this.model.writeSplit(buffers, tensors, `optimizer state ${prefix}*`, specs);
    }
    this.stepCount = stepCount;
  }

  destroy(): void {
    for (const b of [...this.m.values(), ...this.v.values(), this.partials, this.stats])
      b.destroy();
    this.adamw.destroy();
  }
}
