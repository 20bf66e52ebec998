// TS wrappers of shaders/bias_add.wgsl and shaders/bias_grad.wgsl: broadcast bias over rows
// (R, Cout) = (N·T, Cout) and its gradient (Qwen2's q/k/v projection biases).
import { ceilDiv, MAX_WORKGROUPS_PER_DIM, splitGrid } from '../engine/dispatch';
import { bindBuffers, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/bias_add.wgsl. */
export const BIAS_ADD_PARAMS = uniformLayout('bias_add', { rows: 'u32', channels: 'u32' });

/** The `struct Params` of shaders/bias_grad.wgsl. */
export const BIAS_GRAD_PARAMS = uniformLayout('bias_grad', {
  rows: 'u32',
  channels: 'u32',
  accumulate: 'u32',
});

/** Threads per workgroup of bias_add (one thread per element). */
export const BIAS_ADD_WG = 256;
/** Threads per workgroup of bias_grad (one thread per channel). */
export const BIAS_GRAD_WG = 64;

type GridOptions = {
  /** Grid split limit per dimension (tests lower it to exercise the split). */
  maxWorkgroupsPerDim?: number;
};

export interface BiasAddArgs {
  y: GPUBuffer; // (R, Cout) updated in place
  bias: GPUBuffer; // (Cout)
  rows: number; // R
  C: number; // Cout
}

export class BiasAddKernel {
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
    return this.pipelines.prepare('bias_add', shaderSource('bias_add'), { WG: BIAS_ADD_WG });
  }

  encode(encoder: GPUCommandEncoder, args: BiasAddArgs): void {
    const { rows, C } = args;
    const pipeline = this.pipelines.get('bias_add', shaderSource('bias_add'), {
      WG: BIAS_ADD_WG,
    });
    const params = BIAS_ADD_PARAMS.create(this.device, { rows, channels: C });
    const pass = encoder.beginComputePass({ label: 'bias_add' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, [args.bias, args.y, params]));
    const groups = ceilDiv(rows * C, BIAS_ADD_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}

export interface BiasGradArgs {
  dy: GPUBuffer; // (R, Cout)
  db: GPUBuffer; // (Cout) output
  rows: number; // R
  C: number; // Cout
  /** Add into db (gradient accumulation across micro-batches) instead of overwriting it. */
  accumulate?: boolean;
}

export class BiasGradKernel {
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
    return this.pipelines.prepare('bias_grad', shaderSource('bias_grad'), { WG: BIAS_GRAD_WG });
  }

  encode(encoder: GPUCommandEncoder, args: BiasGradArgs): void {
    const { rows, C } = args;
    const pipeline = this.pipelines.get('bias_grad', shaderSource('bias_grad'), {
      WG: BIAS_GRAD_WG,
    });
    const params = BIAS_GRAD_PARAMS.create(this.device, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
    });
    const pass = encoder.beginComputePass({ label: 'bias_grad' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, [args.dy, args.db, params]));
    const groups = ceilDiv(C, BIAS_GRAD_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}
