// TS wrappers of shaders/logprob_gather.wgsl (forward: logp, entropy, lse per row) and
// shaders/logprob_gather_backward.wgsl (fused ∂logp/∂logits times the upstream gradient).
import { createUniformBuffer } from '../engine/buffers';
import { ceilDiv, splitGrid, reductionWorkgroupSize } from '../engine/dispatch';
import { bindBuffers, type KernelTuning, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';

/** Threads per row in the forward (a power of two: tree reduction). */
export const LOGPROB_GATHER_WG = 256;
/** Rows per workgroup of the forward's one-thread-per-row entry point (SwiftShader's SIMD width). */
export const LOGPROB_ROWS_PER_WG = 4;
/** The largest vocabulary whose forward runs one thread per row on CPU-emulated adapters: beyond
 * it one thread's loop over V costs more than the tree's barriers. */
export const LOGPROB_ROW_PER_THREAD_MAX_V = 4096;

/** Whether the forward over a V-token vocabulary runs one thread per row (no barriers). */
export function logprobRowPerThread(V: number, tuning: KernelTuning): boolean {
  return tuning.avoidBarriers && V <= LOGPROB_ROW_PER_THREAD_MAX_V;
}

/** Threads per workgroup of the elementwise backward. */
export const LOGPROB_BACKWARD_WG = 256;

export interface LogprobGatherArgs {
  logits: GPUBuffer; // (R, V)
  targets: GPUBuffer; // (R) u32
  logp: GPUBuffer; // (R) out
  entropy: GPUBuffer; // (R) out
  lse: GPUBuffer; // (R) out, consumed by the backward
  R: number;
  V: number;
  /** 1 / temperature; logits are scaled before the softmax (TRL). Default 1. */
  invTemperature?: number;
  /** Grid limit per dimension (tests lower it to exercise split grids cheaply). */
  maxWorkgroupsPerDim?: number;
}

export interface LogprobGatherBackwardArgs {
  logits: GPUBuffer; // (R, V)
  targets: GPUBuffer; // (R) u32
  lse: GPUBuffer; // (R) from the forward with the same invTemperature
  gradLogp: GPUBuffer; // (R) ∂loss/∂logp
  dLogits: GPUBuffer; // (R, V) out
  R: number;
  V: number;
  invTemperature?: number;
  /** Add into dLogits instead of overwriting it. */
  accumulate?: boolean;
  /** Grid limit per dimension (tests lower it to exercise split grids cheaply). */
  maxWorkgroupsPerDim?: number;
}

export class LogprobGatherKernel {
  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
  ) {}

  async encode(encoder: GPUCommandEncoder, args: LogprobGatherArgs): Promise<void> {
    const { R, V } = args;
    if (R > 0 && V === 0) throw new RangeError('logprob gather needs V ≥ 1');
    // The tree's size for this V; the one-thread-per-row entry point replays that tree.
    const tree = reductionWorkgroupSize(V, LOGPROB_GATHER_WG);
    const rowPerThread = logprobRowPerThread(V, this.pipelines.tuning);
    const pipeline = rowPerThread
      ? await this.pipelines.get(
          'logprob_gather',
          shaderSource('logprob_gather'),
          { WG: LOGPROB_ROWS_PER_WG, TREE: tree },
          'main_row_per_thread',
        )
      : await this.pipelines.get('logprob_gather', shaderSource('logprob_gather'), { WG: tree });
    const params = createUniformBuffer(
      this.device,
      [
        ['u32', R],
        ['u32', V],
        ['f32', args.invTemperature ?? 1],
      ],
      'logprob_gather.params',
    );
    const pass = encoder.beginComputePass({ label: 'logprob_gather' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [
        args.logits,
        args.targets,
        args.logp,
        args.entropy,
        args.lse,
        params,
      ]),
    );
    const workgroups = rowPerThread ? Math.ceil(R / LOGPROB_ROWS_PER_WG) : R;
    const [x, y, z] = splitGrid(workgroups, args.maxWorkgroupsPerDim);
    if (x > 0) pass.dispatchWorkgroups(x, y, z);
    pass.end();
  }
}

export class LogprobGatherBackwardKernel {
  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
  ) {}

  async encode(encoder: GPUCommandEncoder, args: LogprobGatherBackwardArgs): Promise<void> {
    const { R, V } = args;
    if (R * V > 0xffffffff) throw new RangeError(`R·V = ${R * V} exceeds u32 indexing`);
    const pipeline = await this.pipelines.get(
      'logprob_gather_backward',
      shaderSource('logprob_gather_backward'),
      { WG: LOGPROB_BACKWARD_WG },
    );
    const params = createUniformBuffer(
      this.device,
      [
        ['u32', R],
        ['u32', V],
        ['f32', args.invTemperature ?? 1],
        ['u32', args.accumulate ? 1 : 0],
      ],
      'logprob_gather_backward.params',
    );
    const pass = encoder.beginComputePass({ label: 'logprob_gather_backward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [
        args.logits,
        args.targets,
        args.lse,
        args.gradLogp,
        args.dLogits,
        params,
      ]),
    );
    const [x, y, z] = splitGrid(ceilDiv(R * V, LOGPROB_BACKWARD_WG), args.maxWorkgroupsPerDim);
    if (x > 0) pass.dispatchWorkgroups(x, y, z);
    pass.end();
  }
}
