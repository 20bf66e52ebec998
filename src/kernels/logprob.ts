// TS wrappers of shaders/logprob_gather.wgsl (forward: logp, entropy, lse and, on request,
// whether the target is the argmax, per row) and
// shaders/logprob_gather_backward.wgsl (fused ∂logp/∂logits times the upstream gradient).
//
// Forward variants (logprobGatherPlan): one thread per row (CPU-emulated adapters, small V), one
// workgroup per row, or, on the GPU path for rows longer than the tuning's chunk (Qwen's 151,936
// tokens), many workgroups per row and a combine pass; the workgroup's merge is a tree in
// workgroup memory or, where the device has `subgroups`, subgroup operations
// (shaders/logprob_gather_subgroups.wgsl). LOGPROB_GATHER_VARIANTS and runLogprobGather let a
// benchmark time them at the model's shape. The backward is elementwise (no reduction: nothing to
// split) and has no f16 variant: it reads and writes f32 logits and gradients, so f16 arithmetic
// would lose digits of p = exp(x − lse) without moving fewer bytes.
import { createStorageBuffer, uploadStorageBuffer } from '../engine/buffers';
import { ceilDiv, splitGrid, reductionWorkgroupSize } from '../engine/dispatch';
import type { Engine } from '../engine/engine';
import { runScratch } from '../engine/memory';
import {
  bindBuffers,
  bindAt,
  PipelineCache,
  type BoundBuffer,
  type KernelTuning,
  type PipelineKey,
} from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/logprob_gather.wgsl (and its subgroup variant). */
export const LOGPROB_GATHER_PARAMS = uniformLayout(['logprob_gather', 'logprob_gather_subgroups'], {
  R: 'u32',
  V: 'u32',
  invTemperature: 'f32',
  chunk: 'u32',
  parts: 'u32',
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

/** Default vocabulary entries per workgroup of the split forward (KernelTuning.logprobChunk): 16
 * per thread of a 256-wide workgroup, so Qwen's 151,936 tokens spread over 38 workgroups a row. */
export const LOGPROB_SPLIT_CHUNK = 4096;
/** Rows per workgroup of the split forward's combine pass (one thread per row). */
export const LOGPROB_COMBINE_ROWS = 64;

/** How the forward runs for a vocabulary of V on a device with or without `subgroups`. */
export type LogprobGatherPlan =
  | { kind: 'row-per-thread'; tree: number }
  | { kind: 'workgroup'; wg: number; subgroups: boolean }
  | { kind: 'split'; wg: number; subgroups: boolean; chunk: number; parts: number };

export function logprobGatherPlan(
  V: number,
  tuning: KernelTuning,
  hasSubgroups: boolean,
): LogprobGatherPlan {
  if (logprobRowPerThread(V, tuning)) {
    return { kind: 'row-per-thread', tree: reductionWorkgroupSize(V, LOGPROB_GATHER_WG) };
  }
  // Only the GPU path takes the subgroup and split variants: on CPU-emulated adapters the
  // workgroup per row stays as it was (its bits are what the emulation path has always given).
  const gpuPath = !tuning.avoidBarriers;
  const subgroups = gpuPath && hasSubgroups && (tuning.subgroups ?? true);
  const chunk = tuning.logprobChunk ?? LOGPROB_SPLIT_CHUNK;
  if (gpuPath && chunk > 0 && V > chunk) {
    const wg = reductionWorkgroupSize(chunk, LOGPROB_GATHER_WG);
    return { kind: 'split', wg, subgroups, chunk, parts: ceilDiv(V, chunk) };
  }
  return { kind: 'workgroup', wg: reductionWorkgroupSize(V, LOGPROB_GATHER_WG), subgroups };
}

/** The forward's variants a benchmark or the load-time sweep can compare (each a tuning to merge
 * over the engine's; avoidBarriers false: the GPU path). 'subgroups' variants fall back to the
 * tree where the device lacks the feature. */
export const LOGPROB_GATHER_VARIANTS: ReadonlyArray<{
  name: string;
  tuning: Partial<KernelTuning>;
}> = [
  { name: 'workgroup-tree', tuning: { avoidBarriers: false, subgroups: false, logprobChunk: 0 } },
  {
    name: 'workgroup-subgroups',
    tuning: { avoidBarriers: false, subgroups: true, logprobChunk: 0 },
  },
  {
    name: 'split-2048-tree',
    tuning: { avoidBarriers: false, subgroups: false, logprobChunk: 2048 },
  },
  {
    name: 'split-2048-subgroups',
    tuning: { avoidBarriers: false, subgroups: true, logprobChunk: 2048 },
  },
  {
    name: 'split-4096-tree',
    tuning: { avoidBarriers: false, subgroups: false, logprobChunk: 4096 },
  },
  {
    name: 'split-4096-subgroups',
    tuning: { avoidBarriers: false, subgroups: true, logprobChunk: 4096 },
  },
  {
    name: 'split-16384-subgroups',
    tuning: { avoidBarriers: false, subgroups: true, logprobChunk: 16384 },
  },
  { name: 'emulation', tuning: { avoidBarriers: true } },
];

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

  /** The variant encode() runs for a vocabulary of V on this device and tuning. */
  plan(V: number): LogprobGatherPlan {
    return logprobGatherPlan(V, this.pipelines.tuning, this.device.features.has('subgroups'));
  }

  /** Compiles the pipelines encode() uses for a vocabulary of V (with the `correct` output). */
  async prepare(V: number, correct = false): Promise<void> {
    await Promise.all(this.pipelineKeys(V, correct).map((key) => this.pipelines.prepare(...key)));
  }

  /** The pass(es) of the forward: one, or the split pass and its combine. */
  private pipelineKeys(V: number, correct: boolean): PipelineKey[] {
    const plan = this.plan(V);
    const suffix = correct ? '_correct' : '';
    if (plan.kind === 'row-per-thread') {
      // The one-thread-per-row entry point replays the tree of main at this V.
      return [
        [
          'logprob_gather',
          shaderSource('logprob_gather'),
          { WG: LOGPROB_ROWS_PER_WG, TREE: plan.tree },
          `main_row_per_thread${suffix}`,
        ],
      ];
    }
    const name = plan.subgroups ? 'logprob_gather_subgroups' : 'logprob_gather';
    const source = shaderSource(name);
    if (plan.kind === 'workgroup') return [[name, source, { WG: plan.wg }, `main${suffix}`]];
    return [
      [name, source, { WG: plan.wg }, 'main_split'],
      [name, source, { WG: LOGPROB_COMBINE_ROWS }, `main_combine${suffix}`],
    ];
  }

  encode(encoder: GPUCommandEncoder, args: LogprobGatherArgs): void {
    const { R, V } = args;
    if (R > 0 && V === 0) throw new RangeError('logprob gather needs V ≥ 1');
    const plan = this.plan(V);
    const [first, combine] = this.pipelineKeys(V, args.correct !== undefined).map((key) =>
      this.pipelines.get(...key),
    );
    const params = LOGPROB_GATHER_PARAMS.block(this.device, encoder, {
      R,
      V,
      invTemperature: args.invTemperature ?? 1,
      chunk: plan.kind === 'split' ? plan.chunk : 0,
      parts: plan.kind === 'split' ? plan.parts : 1,
    });
    const outputs = [args.logits, args.targets, args.logp, args.entropy, args.lse, params];
    const pass = encoder.beginComputePass({ label: 'logprob_gather' });
    const dispatch = (workgroups: number) => {
      const [x, y, z] = splitGrid(workgroups, args.maxWorkgroupsPerDim);
      if (x > 0) pass.dispatchWorkgroups(x, y, z);
    };
    if (plan.kind !== 'split') {
      pass.setPipeline(first);
      // Only the *_correct entry points have a binding 6.
      const buffers = [...outputs, ...(args.correct ? [args.correct] : [])];
      pass.setBindGroup(0, bindBuffers(this.device, first, buffers));
      dispatch(plan.kind === 'row-per-thread' ? ceilDiv(R, LOGPROB_ROWS_PER_WG) : R);
    } else if (R > 0) {
      const partials = runScratch(this.device, 'logprob_gather.partials', R * plan.parts * 16);
      // main_split reads bindings 0, 5 and 7 only; the combine all but 6 (7 with `correct`).
      pass.setPipeline(first);
      pass.setBindGroup(0, bindAt(this.device, first, { 0: args.logits, 5: params, 7: partials }));
      dispatch(R * plan.parts);
      pass.setPipeline(combine);
      const entries: Record<number, BoundBuffer> = { ...outputs, 7: partials };
      if (args.correct) entries[6] = args.correct;
      pass.setBindGroup(0, bindAt(this.device, combine, entries));
      dispatch(ceilDiv(R, LOGPROB_COMBINE_ROWS));
    }
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
    const params = LOGPROB_GATHER_BACKWARD_PARAMS.block(this.device, encoder, {
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

/**
 * Times the forward at (R, V) with `tuning` merged over the engine's (LOGPROB_GATHER_VARIANTS):
 * seeded logits in [−8, 8), pipelines compiled before the clock starts, then `iterations` calls of
 * `repeats` forwards each in one submit, each timed from encoding to onSubmittedWorkDone. Returns
 * the milliseconds per forward of each call, and the plan that ran. For GPU benchmarks; on a
 * CPU-emulated adapter the times only compare variants on that emulation.
 */
export async function runLogprobGather(
  engine: Engine,
  shape: { R: number; V: number },
  tuning: Partial<KernelTuning>,
  options: { iterations?: number; repeats?: number } = {},
): Promise<{ plan: LogprobGatherPlan; msPerForward: number[] }> {
  const { R, V } = shape;
  const { iterations = 5, repeats = 1 } = options;
  const { device } = engine;
  const pipelines = new PipelineCache(device, { ...engine.pipelines.tuning, ...tuning });
  const kernel = new LogprobGatherKernel(device, pipelines);
  await kernel.prepare(V);
  const logits = new Float32Array(R * V);
  let state = 0x9e3779b9;
  for (let i = 0; i < logits.length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    logits[i] = (state / 0x100000000) * 16 - 8;
  }
  const buffers = {
    logits: uploadStorageBuffer(device, logits, 'bench.logits'),
    targets: uploadStorageBuffer(
      device,
      Uint32Array.from({ length: R }, (_, r) => (r * 7919) % V),
    ),
    logp: createStorageBuffer(device, R * 4),
    entropy: createStorageBuffer(device, R * 4),
    lse: createStorageBuffer(device, R * 4),
  };
  const msPerForward: number[] = [];
  try {
    for (let i = 0; i < iterations; i++) {
      const start = performance.now();
      await engine.run((encoder) => {
        for (let k = 0; k < repeats; k++) kernel.encode(encoder, { ...buffers, R, V });
      }, 'bench.logprob_gather');
      msPerForward.push((performance.now() - start) / repeats);
    }
  } finally {
    for (const buffer of Object.values(buffers)) buffer.destroy();
  }
  return { plan: kernel.plan(V), msPerForward };
}
