// TS wrapper of shaders/rope.wgsl: rotary embedding (HF rotate_half) on (R, Hx, D) = (N·T, Hx, D)
// q or k rows, forward or inverse (= backward). Out of place.
import { uploadStorageBuffer } from '../engine/buffers';
import { ceilDiv, MAX_WORKGROUPS_PER_DIM, splitGrid } from '../engine/dispatch';
import { bindBuffers, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { ropeInvFreq } from '../ref/rope';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/rope.wgsl. */
export const ROPE_PARAMS = uniformLayout('rope', { rows: 'u32', heads: 'u32', pairs: 'u32' });

/** Threads per workgroup (one thread per rotated pair). */
export const ROPE_WG = 256;

type GridOptions = {
  /** Grid split limit per dimension (tests lower it to exercise the split). */
  maxWorkgroupsPerDim?: number;
};

export interface RopeArgs {
  x: GPUBuffer; // (R, Hx, D)
  positions: GPUBuffer; // u32 (R): rotary position id per token (column − keyStart, 0 for pads)
  y: GPUBuffer; // (R, Hx, D) output; must not be x
  rows: number; // R = N·T
  heads: number; // Hx: H for q, Hkv for k
  D: number; // head dim (even)
  theta: number; // rope_theta
  /** Apply the transposed rotation: the backward pass (dx from dy). */
  inverse?: boolean;
}

export class RopeKernel {
  private readonly maxPerDim: number;
  // inv_freq (D/2) per (D, theta): a handful of models, uploaded once each.
  private readonly invFreq = new Map<string, GPUBuffer>();

  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
    options: GridOptions = {},
  ) {
    this.maxPerDim = options.maxWorkgroupsPerDim ?? MAX_WORKGROUPS_PER_DIM;
  }

  private invFreqBuffer(D: number, theta: number): GPUBuffer {
    const key = `${D}:${theta}`;
    let buffer = this.invFreq.get(key);
    if (!buffer) {
      buffer = uploadStorageBuffer(this.device, ropeInvFreq(D, theta), `rope.invFreq(${key})`);
      this.invFreq.set(key, buffer);
    }
    return buffer;
  }

  /** Compiles the pipeline encode() uses (forward or inverse rotation). */
  prepare(inverse = false): Promise<void> {
    return this.pipelines.prepare('rope', shaderSource('rope'), { WG: ROPE_WG, INVERSE: inverse });
  }

  encode(encoder: GPUCommandEncoder, args: RopeArgs): void {
    const { rows, heads, D } = args;
    if (args.x === args.y)
      throw new Error('rope is out of place: x and y must be different buffers');
    const invFreq = this.invFreqBuffer(D, args.theta);
    const pipeline = this.pipelines.get('rope', shaderSource('rope'), {
      WG: ROPE_WG,
      INVERSE: args.inverse ?? false,
    });
    const params = ROPE_PARAMS.create(this.device, { rows, heads, pairs: D / 2 });
    const pass = encoder.beginComputePass({ label: args.inverse ? 'rope_inverse' : 'rope' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.x, args.positions, invFreq, args.y, params]),
    );
    const groups = ceilDiv((rows * heads * D) / 2, ROPE_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }

  /** Frees the cached inv_freq buffers. */
  destroy(): void {
    for (const buffer of this.invFreq.values()) buffer.destroy();
    this.invFreq.clear();
  }
}
