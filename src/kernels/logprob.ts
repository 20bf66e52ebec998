// TS wrappers of shaders/logprob_gather.wgsl (forward: logp, entropy, lse and, on request,
// whether the target is the argmax, per row) and
// shaders/logprob_gather_backward.wgsl (fused ∂logp/∂logits times the upstream gradient).
import { ceilDiv, splitGrid, reductionWorkgroupSize } from '../engine/dispatch';
import {
  bindBuffers,
  type KernelTuning,
  type PipelineCache,
  type PipelineKey,
} from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/logprob_gather.wgsl. */
export const LOGPROB_GATHER_PARAMS = uniformLayout('logprob_gather', {
  R: 'u32',
  V: 'u32',
  invTemperature: 'f32',
});

/** The `struct Params` of shaders/logprob_gather_backward.wgsl. */
export const LOGPROB_GATHER_BACKWARD_PARAMS = uniformLayout('logprob_gather_backward', {
  R: 'u32',
  V: 'u32',
  invTemperature: 'f32',
  accumulate: 'u32',
  useEntropy: 'u32',
});

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
  /**
   * (R) out: 1 where the target is the row's argmax (lowest id on ties, as torch.argmax), else 0;
   * SFT's mean_token_accuracy. Left out: not computed (the entry point without it runs, binding
   * nothing more).
   */
  correct?: GPUBuffer;
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
  /**
   * The entropy bonus (docs/grpo.md §5): the forward's per-row entropy (R) and ∂loss/∂entropy (R);
   * absent = no entropy term.
   */
  entropyGrad?: { entropy: GPUBuffer; gradEntropy: GPUBuffer };
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

  /** Compiles the pipeline encode() uses for a vocabulary of V (with the `correct` output). */
  prepare(V: number, correct = false): Promise<void> {
    return this.pipelines.prepare(...this.pipelineKey(V, correct));
  }

  private pipelineKey(V: number, correct: boolean): PipelineKey {
    // The tree's size for this V; the one-thread-per-row entry point replays that tree.
    const tree = reductionWorkgroupSize(V, LOGPROB_GATHER_WG);
    const source = shaderSource('logprob_gather');
    const suffix = correct ? '_correct' : '';
    return logprobRowPerThread(V, this.pipelines.tuning)
      ? [
          'logprob_gather',
          source,
          { WG: LOGPROB_ROWS_PER_WG, TREE: tree },
          `main_row_per_thread${suffix}`,
        ]
      : ['logprob_gather', source, { WG: tree }, `main${suffix}`];
  }

  encode(encoder: GPUCommandEncoder, args: LogprobGatherArgs): void {
    const { R, V } = args;
    if (R > 0 && V === 0) throw new RangeError('logprob gather needs V ≥ 1');
    const rowPerThread = logprobRowPerThread(V, this.pipelines.tuning);
    const pipeline = this.pipelines.get(...this.pipelineKey(V, args.correct !== undefined));
    const params = LOGPROB_GATHER_PARAMS.create(this.device, {
      R,
      V,
      invTemperature: args.invTemperature ?? 1,
    });
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
        // Only the *_correct entry points have a binding 6.
        ...(args.correct ? [args.correct] : []),
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

  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.pipelines.prepare(
      'logprob_gather_backward',
      shaderSource('logprob_gather_backward'),
      { WG: LOGPROB_BACKWARD_WG },
    );
  }

  encode(encoder: GPUCommandEncoder, args: LogprobGatherBackwardArgs): void {
    const { R, V } = args;
    if (R * V > 0xffffffff) throw new RangeError(`R·V = ${R * V} exceeds u32 indexing`);
    const pipeline = this.pipelines.get(
      'logprob_gather_backward',
      shaderSource('logprob_gather_backward'),
      { WG: LOGPROB_BACKWARD_WG },
    );
    const params = LOGPROB_GATHER_BACKWARD_PARAMS.create(this.device, {
      R,
      V,
      invTemperature: args.invTemperature ?? 1,
      accumulate: args.accumulate ? 1 : 0,
      useEntropy: args.entropyGrad ? 1 : 0,
    });
    const pass = encoder.beginComputePass({ label: 'logprob_gather_backward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [
        args.logits,
        args.targets,
        args.lse,
        args.gradLogp,
        // Bound but never read without the entropy term (read-only bindings may alias).
        args.entropyGrad?.entropy ?? args.gradLogp,
        args.entropyGrad?.gradEntropy ?? args.gradLogp,
        args.dLogits,
        params,
      ]),
    );
    const [x, y, z] = splitGrid(ceilDiv(R * V, LOGPROB_BACKWARD_WG), args.maxWorkgroupsPerDim);
    if (x > 0) pass.dispatchWorkgroups(x, y, z);
    pass.end();
  }
}
