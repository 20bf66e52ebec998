// TS wrapper of shaders/sumsq.wgsl + shaders/grad_clip.wgsl: global L2 norm of all gradients,
// the clip scale and a finite flag, computed on the GPU and consumed there by AdamWKernel.
import { reductionWorkgroupSize } from '../engine/dispatch';
import { uniformLayout } from '../engine/uniforms';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/sumsq.wgsl. */
export const SUMSQ_PARAMS = uniformLayout('sumsq', { n: 'u32', slot: 'u32', chunk: 'u32' });

/** The `struct Params` of shaders/grad_clip.wgsl. */
export const GRAD_CLIP_PARAMS = uniformLayout('grad_clip', { count: 'u32', maxNorm: 'f32' });

export const SUMSQ_WG = 256;
/** Workgroups (and partial sums) per gradient tensor; each sums a contiguous chunk. */
export const SUMSQ_PARTIALS_PER_TENSOR = 64;
/** Fewest elements a sumsq workgroup handles: tiny tensors use one workgroup, not 64 idle ones. */
export const SUMSQ_MIN_CHUNK = 4096;
export const GRAD_CLIP_WG = 256;

/** Layout of the (4) f32 clip buffer: [norm, scale, finite, 0]. */
export const GRAD_CLIP_OUT = { norm: 0, scale: 1, finite: 2, length: 4 } as const;

/** Elements of the partials buffer for `numTensors` gradient tensors. */
export const gradNormPartialsLength = (numTensors: number) =>
  numTensors * SUMSQ_PARTIALS_PER_TENSOR;

export interface GradTensor {
  buffer: GPUBuffer; // (n) f32 gradient
  n: number;
}

export interface GradNormArgs {
  grads: GradTensor[];
  partials: GPUBuffer; // (gradNormPartialsLength(grads.length)) f32 scratch
  out: GPUBuffer; // (4) f32: see GRAD_CLIP_OUT
  /** Clip to this global norm (torch clip_grad_norm_); ≤ 0 disables clipping (scale 1). */
  maxNorm: number;
}

/** Workgroups, elements per workgroup and threads per workgroup of sumsq for n elements. */
function sumSquaresLayout(n: number): { groups: number; chunk: number; wg: number } {
  const groups = Math.max(1, Math.min(SUMSQ_PARTIALS_PER_TENSOR, Math.ceil(n / SUMSQ_MIN_CHUNK)));
  const chunk = Math.ceil(n / groups);
  return { groups, chunk, wg: reductionWorkgroupSize(chunk, SUMSQ_WG) };
}

export class GradNormKernel extends Kernel {
  /** Compiles the pipelines encode() uses for tensors of these element counts. */
  async prepare(sizes: readonly number[]): Promise<void> {
    const wgs = new Set(sizes.map((n) => sumSquaresLayout(n).wg));
    await Promise.all([
      ...[...wgs].map((wg) =>
        this.compile('sumsq', { WG: wg, PARTIALS: SUMSQ_PARTIALS_PER_TENSOR }),
      ),
      this.compile('grad_clip', { WG: GRAD_CLIP_WG }),
    ]);
  }

  /**
   * Sum of squares of one tensor into block `slot` of `partials` (one dispatch). Small tensors use
   * fewer than SUMSQ_PARTIALS_PER_TENSOR workgroups (each gets at least SUMSQ_MIN_CHUNK elements):
   * the rest of the block is cleared, so the block sums to the same total either way.
   */
  encodeSumSquares(
    encoder: GPUCommandEncoder,
    args: { grad: GPUBuffer; n: number; slot: number; partials: GPUBuffer },
  ): void {
    const { groups, chunk, wg } = sumSquaresLayout(args.n);
    const params = SUMSQ_PARAMS.block(this.device, encoder, { n: args.n, slot: args.slot, chunk });
    const blockBytes = SUMSQ_PARTIALS_PER_TENSOR * 4;
    if (groups < SUMSQ_PARTIALS_PER_TENSOR)
      encoder.clearBuffer(args.partials, args.slot * blockBytes, blockBytes);
    this.encodePass(encoder, {
      shader: 'sumsq',
      constants: { WG: wg, PARTIALS: SUMSQ_PARTIALS_PER_TENSOR },
      buffers: [args.grad, args.partials, params],
      workgroups: groups, // ≤ SUMSQ_PARTIALS_PER_TENSOR: one row of workgroups
    });
  }

  /** Norm, scale and finite flag from the first `numTensors` blocks of partials. */
  encodeClip(
    encoder: GPUCommandEncoder,
    args: { partials: GPUBuffer; numTensors: number; out: GPUBuffer; maxNorm: number },
  ): void {
    const params = GRAD_CLIP_PARAMS.block(this.device, encoder, {
      count: gradNormPartialsLength(args.numTensors),
      maxNorm: args.maxNorm,
    });
    this.encodePass(encoder, {
      shader: 'grad_clip',
      constants: { WG: GRAD_CLIP_WG },
      buffers: [args.partials, args.out, params],
      workgroups: 1,
    });
  }

  /** Every tensor's sum of squares, then the clip buffer. */
  encode(encoder: GPUCommandEncoder, args: GradNormArgs): void {
    for (let slot = 0; slot < args.grads.length; slot++) {
      const { buffer, n } = args.grads[slot];
      this.encodeSumSquares(encoder, { grad: buffer, n, slot, partials: args.partials });
    }
    this.encodeClip(encoder, {
      partials: args.partials,
      numTensors: args.grads.length,
      out: args.out,
      maxNorm: args.maxNorm,
    });
  }
}
