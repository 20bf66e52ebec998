// TS wrapper of shaders/sample.wgsl: one token per row of logits (temperature, top-k, top-p,
// greedy) with a counter-based RNG keyed by (seed, sequence, step), plus the token's log-prob
// under the full tempered softmax. CPU mirror: src/ref/sampling.ts + src/ref/rng.ts.
import { createUniformBuffer } from '../engine/buffers';
import { reductionWorkgroupSize, splitGrid } from '../engine/dispatch';
import { bindBuffers, type KernelTuning, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { seedKey } from '../ref/rng';
import type { SamplingOptions } from '../ref/sampling';

export type { SamplingOptions } from '../ref/sampling';

/** Threads per row for large vocabularies. */
export const SAMPLE_WG = 256;

/** Rows per workgroup of the one-thread-per-row entry point (SwiftShader's SIMD width). */
export const SAMPLE_ROWS_PER_WG = 4;

/** The largest vocabulary sampled one thread per row on CPU-emulated adapters: beyond it one
 * thread's loops over V (three passes, 64 more with top-k and top-p) cost more than the tree's
 * barriers. */
export const SAMPLE_ROW_PER_THREAD_MAX_V = 4096;

/** Whether rows of a V-token vocabulary are sampled one per thread (no barriers). */
export function sampleRowPerThread(V: number, tuning: KernelTuning): boolean {
  return tuning.avoidBarriers && V <= SAMPLE_ROW_PER_THREAD_MAX_V;
}

/** Threads per row for a vocabulary of V (tiny vocabularies do not pay for idle threads). */
export function sampleWorkgroupSize(V: number): number {
  return reductionWorkgroupSize(V, SAMPLE_WG);
}

export interface SampleArgs {
  logits: GPUBuffer; // (N, V)
  tokens: GPUBuffer; // u32, written at [n · outStride + outOffset]
  logps: GPUBuffer; // f32, same layout as tokens
  N: number;
  V: number;
  options: SamplingOptions;
  /** Run seed (a non-negative integer below 2^53). */
  seed: number;
  /** Decode step (the Philox counter's first word). */
  step: number;
  /** Sequence id of row 0 (row n uses sequenceOffset + n). Default 0. */
  sequenceOffset?: number;
  /** Output layout, e.g. stride S and offset t to write column t of an (N, S) buffer. Default 1, 0. */
  outStride?: number;
  outOffset?: number;
  /** Grid limit per dimension (tests lower it to exercise split grids cheaply). */
  maxWorkgroupsPerDim?: number;
}

export class SampleKernel {
  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
  ) {}

  async encode(encoder: GPUCommandEncoder, args: SampleArgs): Promise<void> {
    const { N, V, options } = args;
    if (N > 0 && V === 0) throw new RangeError('sampling needs V ≥ 1');
    if (!(options.topP > 0)) throw new RangeError(`topP must be in (0, 1], got ${options.topP}`);
    if (!Number.isInteger(options.topK) || options.topK < 0) {
      throw new RangeError(`topK must be a non-negative integer, got ${options.topK}`);
    }
    const greedy = options.greedy || !(options.temperature > 0);
    const [seedLo, seedHi] = seedKey(args.seed);
    const rowPerThread = sampleRowPerThread(V, this.pipelines.tuning);
    const pipeline = rowPerThread
      ? await this.pipelines.get(
          'sample',
          shaderSource('sample'),
          { WG: SAMPLE_ROWS_PER_WG, CHUNKS: sampleWorkgroupSize(V) },
          'main_row_per_thread',
        )
      : await this.pipelines.get('sample', shaderSource('sample'), { WG: sampleWorkgroupSize(V) });
    const params = createUniformBuffer(
      this.device,
      [
        ['u32', N],
        ['u32', V],
        ['f32', options.temperature > 0 ? 1 / options.temperature : 1],
        ['u32', options.topK],
        ['f32', Math.min(options.topP, 1)],
        ['u32', greedy ? 1 : 0],
        ['u32', seedLo],
        ['u32', seedHi],
        ['u32', args.step],
        ['u32', args.sequenceOffset ?? 0],
        ['u32', args.outStride ?? 1],
        ['u32', args.outOffset ?? 0],
      ],
      'sample.params',
    );
    const pass = encoder.beginComputePass({ label: 'sample' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.logits, args.tokens, args.logps, params]),
    );
    const workgroups = rowPerThread ? Math.ceil(N / SAMPLE_ROWS_PER_WG) : N;
    const [x, y, z] = splitGrid(workgroups, args.maxWorkgroupsPerDim);
    if (x > 0) pass.dispatchWorkgroups(x, y, z);
    pass.end();
  }
}
