// TS wrappers of shaders/swiglu_forward.wgsl and shaders/swiglu_backward.wgsl: the Llama MLP gate
// h = silu(gate) · up over (R, I) = (N·T, I), and its gradients.
import { ceilDiv, MAX_WORKGROUPS_PER_DIM, splitGrid } from '../engine/dispatch';
import { bindBuffers, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/swiglu_forward.wgsl. */
export const SWIGLU_FORWARD_PARAMS = uniformLayout('swiglu_forward', { count: 'u32' });

/** The `struct Params` of shaders/swiglu_backward.wgsl. */
export const SWIGLU_BACKWARD_PARAMS = uniformLayout('swiglu_backward', { count: 'u32' });

/** Threads per workgroup of both SwiGLU kernels (one thread per element). */
export const SWIGLU_WG = 256;

type GridOptions = {
  /** Grid split limit per dimension (tests lower it to exercise the split). */
  maxWorkgroupsPerDim?: number;
};

export interface SwigluForwardArgs {
  gate: GPUBuffer; // (R, I) gate_proj output
  up: GPUBuffer; // (R, I) up_proj output
  h: GPUBuffer; // (R, I) output
  count: number; // R · I
}

export class SwigluForwardKernel {
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
    return this.pipelines.prepare('swiglu_forward', shaderSource('swiglu_forward'), {
      WG: SWIGLU_WG,
    });
  }

  encode(encoder: GPUCommandEncoder, args: SwigluForwardArgs): void {
    const pipeline = this.pipelines.get('swiglu_forward', shaderSource('swiglu_forward'), {
      WG: SWIGLU_WG,
    });
    const params = SWIGLU_FORWARD_PARAMS.create(this.device, { count: args.count });
    const pass = encoder.beginComputePass({ label: 'swiglu_forward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, [args.gate, args.up, args.h, params]));
    const groups = ceilDiv(args.count, SWIGLU_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}

export interface SwigluBackwardArgs {
  dh: GPUBuffer; // (R, I)
  gate: GPUBuffer; // (R, I) forward input
  up: GPUBuffer; // (R, I) forward input
  dgate: GPUBuffer; // (R, I) output
  dup: GPUBuffer; // (R, I) output
  count: number; // R · I
}

export class SwigluBackwardKernel {
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
    return this.pipelines.prepare('swiglu_backward', shaderSource('swiglu_backward'), {
      WG: SWIGLU_WG,
    });
  }

  encode(encoder: GPUCommandEncoder, args: SwigluBackwardArgs): void {
    const pipeline = this.pipelines.get('swiglu_backward', shaderSource('swiglu_backward'), {
      WG: SWIGLU_WG,
    });
    const params = SWIGLU_BACKWARD_PARAMS.create(this.device, { count: args.count });
    const pass = encoder.beginComputePass({ label: 'swiglu_backward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [
        args.dh,
        args.gate,
        args.up,
        args.dgate,
        args.dup,
        params,
      ]),
    );
    const groups = ceilDiv(args.count, SWIGLU_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}
