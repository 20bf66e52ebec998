// TS wrapper of shaders/sample.wgsl: one token per row of logits (repetition penalty,
// temperature, top-k, top-p, min-p, greedy) with a counter-based RNG keyed by (seed, sequence,
// step), plus the token's log-prob under the full tempered softmax of the raw logits. CPU mirror:
// src/ref/sampling.ts + src/ref/rng.ts. On the GPU path a long row without top-k / top-p / min-p
// is spread over many workgroups instead (sample_split.wgsl, then sample_combine.wgsl draws).
import { reductionWorkgroupSize, splitGrid } from '../engine/dispatch';
import { runScratch } from '../engine/memory';
import {
  bindBuffers,
  type BoundBuffer,
  type KernelTuning,
  type PipelineCache,
  type PipelineKey,
} from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { seedKey } from '../ref/rng';
import type { SamplingOptions } from '../ref/sampling';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/sample.wgsl (and of its split variant's two passes). */
export const SAMPLE_PARAMS = uniformLayout(['sample', 'sample_split', 'sample_combine'], {
  N: 'u32',
  V: 'u32',
  invTemperature: 'f32',
  topK: 'u32',
  topP: 'f32',
  greedy: 'u32',
  seedLo: 'u32',
  seedHi: 'u32',
  step: 'u32',
  sequenceOffset: 'u32',
  outStride: 'u32',
  outOffset: 'u32',
  minP: 'f32',
  repetitionPenalty: 'f32',
  invRepetitionPenalty: 'f32',
  seenWords: 'u32',
});

/** u32 words per row of the repetition penalty's seen-token bitmap for a vocabulary of V. */
export function seenWords(V: number): number {
  return Math.ceil(V / 32);
}

/**
 * The (N, seenWords(V)) bitmap with the bits of each row's tokens set (its prompt, for the first
 * step), bit v % 32 of word v / 32: the `seen` buffer's initial contents.
 */
export function seenBitmap(rows: readonly (readonly number[])[], V: number): Uint32Array {
  const W = seenWords(V);
  const bits = new Uint32Array(rows.length * W);
  rows.forEach((ids, n) => {
    for (const v of ids) {
      if (!(Number.isInteger(v) && v >= 0 && v < V))
        throw new RangeError(`token id ${v} not in [0, ${V})`);
      bits[n * W + (v >>> 5)] |= 1 << (v & 31);
    }
  });
  return bits;
}

export type { SamplingOptions } from '../ref/sampling';

/** Threads per row for large vocabularies. */
export const SAMPLE_WG = 256;

/** Rows per workgroup of the one-thread-per-row entry point (SwiftShader's SIMD width). */
export const SAMPLE_ROWS_PER_WG = 4;

/** The largest vocabulary sampled one thread per row on CPU-emulated adapters: beyond it one
 * thread's loops over V (three passes, 64 more with top-k and top-p) cost more than the tree's
 * barriers. */
export const SAMPLE_ROW_PER_THREAD_MAX_V = 4096;

/**
 * GPU path, no top-k / top-p / min-p: vocabulary entries per workgroup of sample_split.wgsl
 * (Qwen's 151,936 tokens: 38 workgroups a row instead of one), as the log-prob gather's chunk.
 */
export const SAMPLE_SPLIT_CHUNK = 4096;

/** f32 words per part in the split variant's partials: m, s, m', s', best_z, best_i. */
const SPLIT_PART_WORDS = 6;

/** The split variant's chunk for this tuning: its sampleChunk, or SAMPLE_SPLIT_CHUNK on the GPU
 * path; 0 (off) on the emulation path unless asked for. */
export function sampleSplitChunk(tuning: KernelTuning): number {
  return tuning.sampleChunk ?? (tuning.avoidBarriers ? 0 : SAMPLE_SPLIT_CHUNK);
}

/**
 * Whether a row of V logits is sampled by many workgroups (sample_split + sample_combine): a
 * vocabulary longer than the chunk, and no filter whose threshold needs the whole row.
 */
export function sampleSplit(V: number, options: SamplingOptions, tuning: KernelTuning): boolean {
  const chunk = sampleSplitChunk(tuning);
  if (!(chunk > 0 && V > chunk) || sampleRowPerThread(V, tuning)) return false;
  const greedy = options.greedy || !(options.temperature > 0);
  const filtered =
    (options.topK > 0 && options.topK < V) || options.topP < 1 || (options.minP ?? 0) > 0;
  return greedy || !filtered;
}

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
  /**
   * (N, seenWords(V)) u32 bitmap of the token ids each row has seen (seenBitmap): read and, for
   * the chosen token, written when options.repetitionPenalty ≠ 1; any 4-byte buffer otherwise.
   */
  seen: GPUBuffer;
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

  /** Compiles the pipelines encode() may use for a vocabulary of V (options are not known yet). */
  async prepare(V: number): Promise<void> {
    const chunk = sampleSplitChunk(this.pipelines.tuning);
    const split = chunk > 0 && V > chunk && !sampleRowPerThread(V, this.pipelines.tuning);
    await Promise.all([
      this.pipelines.prepare(...this.pipelineKey(V)),
      ...(split ? this.splitKeys(chunk).map((key) => this.pipelines.prepare(...key)) : []),
    ]);
  }

  /** The split variant's two passes. */
  private splitKeys(chunk: number): [PipelineKey, PipelineKey] {
    const constants = { WG: SAMPLE_WG, CHUNK: chunk };
    return [
      ['sample_split', shaderSource('sample_split'), constants],
      ['sample_combine', shaderSource('sample_combine'), constants],
    ];
  }

  /** One invocation per row (barrier-free, small V) or one workgroup per row. */
  private pipelineKey(V: number): PipelineKey {
    const wg = sampleWorkgroupSize(V);
    return sampleRowPerThread(V, this.pipelines.tuning)
      ? [
          'sample',
          shaderSource('sample'),
          { WG: SAMPLE_ROWS_PER_WG, CHUNKS: wg },
          'main_row_per_thread',
        ]
      : ['sample', shaderSource('sample'), { WG: wg }];
  }

  encode(encoder: GPUCommandEncoder, args: SampleArgs): void {
    const { N, V, options } = args;
    if (N > 0 && V === 0) throw new RangeError('sampling needs V ≥ 1');
    if (!(options.topP > 0)) throw new RangeError(`topP must be in (0, 1], got ${options.topP}`);
    if (!Number.isInteger(options.topK) || options.topK < 0) {
      throw new RangeError(`topK must be a non-negative integer, got ${options.topK}`);
    }
    const minP = options.minP ?? 0;
    if (!(minP >= 0 && minP <= 1)) throw new RangeError(`minP must be in [0, 1], got ${minP}`);
    const penalty = options.repetitionPenalty ?? 1;
    if (!(penalty > 0 && Number.isFinite(penalty))) {
      throw new RangeError(`repetitionPenalty must be > 0, got ${penalty}`);
    }
    // f32 equality in the shader: 1 exactly is off.
    const penaltyOn = Math.fround(penalty) !== 1;
    if (penaltyOn && args.seen.size < N * seenWords(V) * 4) {
      throw new RangeError(
        `seen holds ${args.seen.size} bytes, the repetition penalty needs (N, ceil(V/32)) u32 = ${N * seenWords(V) * 4}`,
      );
    }
    const greedy = options.greedy || !(options.temperature > 0);
    const [seedLo, seedHi] = seedKey(args.seed);
    const rowPerThread = sampleRowPerThread(V, this.pipelines.tuning);
    const split = sampleSplit(V, options, this.pipelines.tuning);
    const params = SAMPLE_PARAMS.block(this.device, encoder, {
      N,
      V,
      invTemperature: options.temperature > 0 ? 1 / options.temperature : 1,
      topK: options.topK,
      topP: Math.min(options.topP, 1),
      greedy: greedy ? 1 : 0,
      seedLo,
      seedHi,
      step: args.step,
      sequenceOffset: args.sequenceOffset ?? 0,
      outStride: args.outStride ?? 1,
      outOffset: args.outOffset ?? 0,
      minP,
      repetitionPenalty: penalty,
      invRepetitionPenalty: 1 / penalty,
      seenWords: seenWords(V),
    });
    if (split) {
      this.encodeSplit(encoder, args, params);
      return;
    }
    const pipeline = this.pipelines.get(...this.pipelineKey(V));
    const workgroups = rowPerThread ? Math.ceil(N / SAMPLE_ROWS_PER_WG) : N;
    const buffers = [args.logits, args.tokens, args.logps, args.seen, params];
    this.pass(encoder, 'sample', pipeline, buffers, workgroups, args.maxWorkgroupsPerDim);
  }

  /** Many workgroups per row: the parts' partials (run scratch shared by the calls of a run), then the draw per row. */
  private encodeSplit(
    encoder: GPUCommandEncoder,
    args: SampleArgs,
    params: GPUBufferBinding,
  ): void {
    const { N, V } = args;
    const chunk = sampleSplitChunk(this.pipelines.tuning);
    const parts = Math.ceil(V / chunk);
    const partials = runScratch(this.device, 'sample.partials', N * parts * SPLIT_PART_WORDS * 4); // (N, C, 6)
    const [splitKey, combineKey] = this.splitKeys(chunk);
    const limit = args.maxWorkgroupsPerDim;
    const first = this.pipelines.get(...splitKey);
    this.pass(
      encoder,
      'sample_split',
      first,
      [args.logits, args.seen, partials, params],
      N * parts,
      limit,
    );
    const second = this.pipelines.get(...combineKey);
    const buffers = [args.logits, partials, args.tokens, args.logps, args.seen, params];
    this.pass(encoder, 'sample_combine', second, buffers, N, limit);
  }

  private pass(
    encoder: GPUCommandEncoder,
    label: string,
    pipeline: GPUComputePipeline,
    buffers: BoundBuffer[],
    workgroups: number,
    maxWorkgroupsPerDim?: number,
  ): void {
    const pass = encoder.beginComputePass({ label });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, buffers));
    const [x, y, z] = splitGrid(workgroups, maxWorkgroupsPerDim);
    if (x > 0) pass.dispatchWorkgroups(x, y, z);
    pass.end();
  }
}
