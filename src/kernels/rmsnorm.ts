// TS wrappers of shaders/rmsnorm_forward.wgsl, rmsnorm_backward.wgsl and
// rmsnorm_backward_weight.wgsl. Rows (R, C) = (N·T, C); weight (C); rstd (R).
import {
  ceilDiv,
  MAX_WORKGROUPS_PER_DIM,
  splitGrid,
  reductionWorkgroupSize,
} from '../engine/dispatch';
import { bindBuffers, type OverrideConstants, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';

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

type GridOptions = {
  /** Grid split limit per dimension (tests lower it to exercise the split). */
  maxWorkgroupsPerDim?: number;
};

export interface RmsNormForwardArgs {
  x: GPUBuffer; // (R, C)
  w: GPUBuffer; // (C)
  y: GPUBuffer; // (R, C) output
  rstd: GPUBuffer; // (R) output, 1 / sqrt(mean(x²) + eps), for the backward pass
  rows: number; // R
  C: number;
  eps: number;
}

export class RmsNormForwardKernel {
  private readonly maxPerDim: number;

  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
    options: GridOptions = {},
  ) {
    this.maxPerDim = options.maxWorkgroupsPerDim ?? MAX_WORKGROUPS_PER_DIM;
  }

  /** Compiles the pipeline encode() uses for rows of C channels. */
  prepare(C: number): Promise<void> {
    const { constants } = rowLayout(this.pipelines, 0, C);
    return this.pipelines.prepare('rmsnorm_forward', shaderSource('rmsnorm_forward'), constants);
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormForwardArgs): void {
    const { rows, C } = args;
    const layout = rowLayout(this.pipelines, rows, C);
    const pipeline = this.pipelines.get(
      'rmsnorm_forward',
      shaderSource('rmsnorm_forward'),
      layout.constants,
    );
    const params = RMSNORM_FORWARD_PARAMS.create(this.device, { rows, channels: C, eps: args.eps });
    const pass = encoder.beginComputePass({ label: 'rmsnorm_forward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.x, args.w, args.y, args.rstd, params]),
    );
    if (rows > 0 && C > 0) pass.dispatchWorkgroups(...splitGrid(layout.workgroups, this.maxPerDim));
    pass.end();
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

export class RmsNormBackwardKernel {
  private readonly maxPerDim: number;

  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
    options: GridOptions = {},
  ) {
    this.maxPerDim = options.maxWorkgroupsPerDim ?? MAX_WORKGROUPS_PER_DIM;
  }

  /** Compiles the pipeline encode() uses for rows of C channels. */
  prepare(C: number): Promise<void> {
    const { constants } = rowLayout(this.pipelines, 0, C);
    return this.pipelines.prepare('rmsnorm_backward', shaderSource('rmsnorm_backward'), constants);
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormBackwardArgs): void {
    const { rows, C } = args;
    const layout = rowLayout(this.pipelines, rows, C);
    const pipeline = this.pipelines.get(
      'rmsnorm_backward',
      shaderSource('rmsnorm_backward'),
      layout.constants,
    );
    const params = RMSNORM_BACKWARD_PARAMS.create(this.device, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
    });
    const pass = encoder.beginComputePass({ label: 'rmsnorm_backward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.dy, args.x, args.w, args.rstd, args.dx, params]),
    );
    if (rows > 0 && C > 0) pass.dispatchWorkgroups(...splitGrid(layout.workgroups, this.maxPerDim));
    pass.end();
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

export class RmsNormBackwardWeightKernel {
  private readonly maxPerDim: number;

  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
    options: GridOptions = {},
  ) {
    this.maxPerDim = options.maxWorkgroupsPerDim ?? MAX_WORKGROUPS_PER_DIM;
  }

  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.pipelines.prepare(
      'rmsnorm_backward_weight',
      shaderSource('rmsnorm_backward_weight'),
      { WG: RMSNORM_WEIGHT_WG },
    );
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormBackwardWeightArgs): void {
    const { rows, C } = args;
    const pipeline = this.pipelines.get(
      'rmsnorm_backward_weight',
      shaderSource('rmsnorm_backward_weight'),
      { WG: RMSNORM_WEIGHT_WG },
    );
    const params = RMSNORM_BACKWARD_WEIGHT_PARAMS.create(this.device, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
    });
    const pass = encoder.beginComputePass({ label: 'rmsnorm_backward_weight' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.dy, args.x, args.rstd, args.dw, params]),
    );
    const groups = ceilDiv(C, RMSNORM_WEIGHT_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}
