// TS wrapper of shaders/add.wgsl: a += alpha · b over n elements (residual adds, gradient sums).
import { ceilDiv, MAX_WORKGROUPS_PER_DIM, splitGrid } from '../engine/dispatch';
import { bindBuffers, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/add.wgsl. */
export const ADD_PARAMS = uniformLayout('add', { count: 'u32', alpha: 'f32' });

/** Threads per workgroup (one thread per element). */
export const ADD_WG = 256;

type GridOptions = {
  /** Grid split limit per dimension (tests lower it to exercise the split). */
  maxWorkgroupsPerDim?: number;
};

export interface AddArgs {
  a: GPUBuffer; // (n) updated in place
  b: GPUBuffer; // (n); must not be a
  count: number; // n
  alpha?: number; // default 1
}

export class AddKernel {
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
    return this.pipelines.prepare('add', shaderSource('add'), { WG: ADD_WG });
  }

  encode(encoder: GPUCommandEncoder, args: AddArgs): void {
    if (args.a === args.b) throw new Error('add: a and b must be different buffers');
    const pipeline = this.pipelines.get('add', shaderSource('add'), { WG: ADD_WG });
    const params = ADD_PARAMS.create(this.device, { count: args.count, alpha: args.alpha ?? 1 });
    const pass = encoder.beginComputePass({ label: 'add' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, [args.b, args.a, params]));
    const groups = ceilDiv(args.count, ADD_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}
