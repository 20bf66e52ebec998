// What the kernel wrappers of this folder share, so that each keeps only what is its own (its
// uniforms, bindings and dispatch geometry): the device and pipeline cache they encode with, the
// grid split limit (tests lower it to exercise split grids cheaply), compiling a shader's pipeline
// ahead (prepare) and one compute pass of it: the pipeline, the buffers bound in binding order
// (inputs, outputs, then the uniform, as every shader declares them), and a 1-D workgroup count
// laid out by splitGrid, nothing dispatched for an empty grid.
import { MAX_WORKGROUPS_PER_DIM, splitGrid } from '../engine/dispatch';
import {
  bindBuffers,
  type BoundBuffer,
  type OverrideConstants,
  type PipelineCache,
} from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';

export type GridOptions = {
  /** Grid split limit per dimension (tests lower it to exercise the split). */
  maxWorkgroupsPerDim?: number;
};

/** One compute pass of a shader (shaders/<shader>.wgsl). */
export interface PassSpec {
  shader: string;
  /** Its override constants (WG and variants): part of the pipeline's identity. */
  constants: OverrideConstants;
  /** Binding 0, 1, … in order (the uniform block last). */
  buffers: BoundBuffer[];
  /** Workgroups in all; laid out as a 2-D grid when one dimension cannot hold them. */
  workgroups: number;
  /** The pass's label (default: the shader's name). */
  label?: string;
  entryPoint?: string;
  /** A split limit for this pass only (kernels whose tests pass it per call). */
  maxWorkgroupsPerDim?: number;
}

export abstract class Kernel {
  protected readonly maxPerDim: number;

  constructor(
    protected readonly device: GPUDevice,
    protected readonly pipelines: PipelineCache,
    options: GridOptions = {},
  ) {
    this.maxPerDim = options.maxWorkgroupsPerDim ?? MAX_WORKGROUPS_PER_DIM;
  }

  /** Compiles the pipeline encodePass() will use for this shader, constants and entry point. */
  protected compile(shader: string, constants: OverrideConstants, entryPoint?: string) {
    return this.pipelines.prepare(shader, shaderSource(shader), constants, entryPoint);
  }

  /** Records one compute pass (see PassSpec). */
  protected encodePass(encoder: GPUCommandEncoder, spec: PassSpec): void {
    const { shader, constants, entryPoint } = spec;
    const pipeline = this.pipelines.get(shader, shaderSource(shader), constants, entryPoint);
    const pass = encoder.beginComputePass({ label: spec.label ?? shader });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, spec.buffers));
    const maxPerDim = spec.maxWorkgroupsPerDim ?? this.maxPerDim;
    if (spec.workgroups > 0) pass.dispatchWorkgroups(...splitGrid(spec.workgroups, maxPerDim));
    pass.end();
  }
}
