// TS wrapper of shaders/add.wgsl: a += alpha · b over n elements (residual adds, gradient sums).
import { createUniformBuffer } from '../engine/buffers';
import { ceilDiv, MAX_WORKGROUPS_PER_DIM, splitGrid } from '../engine/dispatch';
import { bindBuffers, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';

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

  async encode(encoder: GPUCommandEncoder, args: AddArgs): Promise<void> {
    if (args.a === args.b) throw new Error('add: a and b must be different buffers');
    const pipeline = await this.pipelines.get('add', shaderSource('add'), { WG: ADD_WG });
    const params = createUniformBuffer(
      this.device,
      [
        ['u32', args.count],
        ['f32', args.alpha ?? 1],
      ],
      'add.params',
    );
    const pass = encoder.beginComputePass({ label: 'add' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, [args.b, args.a, params]));
    const groups = ceilDiv(args.count, ADD_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}
