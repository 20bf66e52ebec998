// TS wrappers of shaders/rmsnorm_forward.wgsl, rmsnorm_backward.wgsl and
// rmsnorm_backward_weight.wgsl. Rows (R, C) = (N·T, C); weight (C); rstd (R).
import { ceilDiv, reductionWorkgroupSize } from '../engine/dispatch';
import type { OverrideConstants, PipelineCache } from '../engine/pipelines';
import { uniformLayout } from '../engine/uniforms';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/rmsnorm_forward.wgsl. */
export const RMSNORM_FORWARD_PARAMS = uniformLayout('rmsnorm_forward', {
  rows: 'u32',
  channels: 'u32',
  eps: 'f32',
});

/** The `struct Params` of shaders/rmsnorm_backward.wgsl. */
export const RMSNORM_BACKWARD_PARAMS = uniformLayout('rmsnorm_backward', {
  rows: 'u32',
  channels: 'u32',
  accumulate: 'u32',
});

/** The `struct Params` of shaders/rmsnorm_backward_weight.wgsl. */
export const RMSNORM_BACKWARD_WEIGHT_PARAMS = uniformLayout('rmsnorm_backward_weight', {
  rows: 'u32',
  channels: 'u32',
  accumulate: 'u32',
});

/** Most threads per row (a power of two); narrower rows get fewer (reductionWorkgroupSize). */
export const RMSNORM_WG = 256;
/** Threads per workgroup of the weight gradient (one thread per channel). */
export const RMSNORM_WEIGHT_WG = 64;
/** Rows per workgroup of the barrier-free (one invocation per row) variant. */
export const RMSNORM_ROWS_PER_WG = 64;

export interface RmsNormForwardArgs {
  x: GPUBuffer; // (R, C)
  w: GPUBuffer; // (C)
  y: GPUBuffer; // (R, C) output
  rstd: GPUBuffer; // (R) output, 1 / sqrt(mean(x²) + eps), for the backward pass
  rows: number; // R
  C: number;
  eps: number;
}

export class RmsNormForwardKernel extends Kernel {
  /** Compiles the pipeline encode() uses for rows of C channels. */
  prepare(C: number): Promise<void> {
    return this.compile('rmsnorm_forward', rowLayout(this.pipelines, 0, C).constants);
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormForwardArgs): void {
    const { rows, C } = args;
    const { constants, workgroups } = rowLayout(this.pipelines, rows, C);
    const params = RMSNORM_FORWARD_PARAMS.create(this.device, { rows, channels: C, eps: args.eps });
    this.encodePass(encoder, {
      shader: 'rmsnorm_forward',
      constants,
      buffers: [args.x, args.w, args.y, args.rstd, params],
      workgroups: C > 0 ? workgroups : 0,
    });
  }
}

/** Threads per row reduction and workgroup count: one workgroup per row, or (barrier-free, see
 * KernelTuning) one invocation per row with RMSNORM_ROWS_PER_WG rows per workgroup. */
function rowLayout(
  pipelines: PipelineCache,
  rows: number,
  C: number,
): { constants: OverrideConstants; workgroups: number } {
  if (pipelines.tuning.avoidBarriers) {
    return {
      constants: { WG: RMSNORM_ROWS_PER_WG, ROW_PER_THREAD: true },
      workgroups: ceilDiv(rows, RMSNORM_ROWS_PER_WG),
    };
  }
  return {
    constants: { WG: reductionWorkgroupSize(C, RMSNORM_WG), ROW_PER_THREAD: false },
    workgroups: rows,
  };
}

export interface RmsNormBackwardArgs {
  dy: GPUBuffer; // (R, C)
  x: GPUBuffer; // (R, C) forward input
  w: GPUBuffer; // (C)
  rstd: GPUBuffer; // (R) from the forward pass
  dx: GPUBuffer; // (R, C) output
  rows: number; // R
  C: number;
  /** Add into dx (e.g. the residual-stream gradient) instead of overwriting it. */
  accumulate?: boolean;
}

export class RmsNormBackwardKernel extends Kernel {
  /** Compiles the pipeline encode() uses for rows of C channels. */
  prepare(C: number): Promise<void> {
    return this.compile('rmsnorm_backward', rowLayout(this.pipelines, 0, C).constants);
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormBackwardArgs): void {
    const { rows, C } = args;
    const { constants, workgroups } = rowLayout(this.pipelines, rows, C);
    const params = RMSNORM_BACKWARD_PARAMS.create(this.device, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
    });
    this.encodePass(encoder, {
      shader: 'rmsnorm_backward',
      constants,
      buffers: [args.dy, args.x, args.w, args.rstd, args.dx, params],
      workgroups: C > 0 ? workgroups : 0,
    });
  }
}

export interface RmsNormBackwardWeightArgs {
  dy: GPUBuffer; // (R, C)
  x: GPUBuffer; // (R, C) forward input
  rstd: GPUBuffer; // (R) from the forward pass
  dw: GPUBuffer; // (C) output
  rows: number; // R
  C: number;
  /** Add into dw (gradient accumulation across micro-batches) instead of overwriting it. */
  accumulate?: boolean;
}

export class RmsNormBackwardWeightKernel extends Kernel {
  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('rmsnorm_backward_weight', { WG: RMSNORM_WEIGHT_WG });
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormBackwardWeightArgs): void {
    const { rows, C } = args;
    const params = RMSNORM_BACKWARD_WEIGHT_PARAMS.create(this.device, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
    });
    this.encodePass(encoder, {
      shader: 'rmsnorm_backward_weight',
      constants: { WG: RMSNORM_WEIGHT_WG },
      buffers: [args.dy, args.x, args.rstd, args.dw, params],
      workgroups: ceilDiv(C, RMSNORM_WEIGHT_WG),
    });
  }
}
