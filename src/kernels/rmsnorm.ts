// TS wrappers of shaders/rmsnorm_forward.wgsl, rmsnorm_backward.wgsl and
// rmsnorm_backward_weight.wgsl. Rows (R, C) = (N·T, C); weight (C); rstd (R).
//
// Variants (rowLayout, weightGradientLayout): forward and input gradient run one invocation per
// row on CPU-emulated adapters (avoidBarriers) and one workgroup per row on GPUs, whose row sum is
// a tree in workgroup memory or, where the device has `subgroups`, subgroup operations
// (rmsnorm_*_subgroups.wgsl; a row of C ≤ a few thousand channels fits one workgroup, so no row is
// split over workgroups). The weight gradient, a sum over all R rows per channel, is split over
// row chunks on GPUs (main_partial + main_combine). RMSNORM_VARIANTS and runRmsNorm let a
// benchmark time them. No f16 variants (the shader headers say why per kernel).
import { createStorageBuffer, uploadStorageBuffer } from '../engine/buffers';
import { ceilDiv, reductionWorkgroupSize, splitGrid } from '../engine/dispatch';
import type { Engine } from '../engine/engine';
import { runScratch } from '../engine/memory';
import {
  bindAt,
  PipelineCache,
  type BoundBuffer,
  type KernelTuning,
  type OverrideConstants,
} from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/rmsnorm_forward.wgsl. */
export const RMSNORM_FORWARD_PARAMS = uniformLayout(
  ['rmsnorm_forward', 'rmsnorm_forward_subgroups'],
  {
    rows: 'u32',
    channels: 'u32',
    eps: 'f32',
  },
);

/** The `struct Params` of shaders/rmsnorm_backward.wgsl. */
export const RMSNORM_BACKWARD_PARAMS = uniformLayout(
  ['rmsnorm_backward', 'rmsnorm_backward_subgroups'],
  {
    rows: 'u32',
    channels: 'u32',
    accumulate: 'u32',
  },
);

/** The `struct Params` of shaders/rmsnorm_backward_weight.wgsl. */
export const RMSNORM_BACKWARD_WEIGHT_PARAMS = uniformLayout('rmsnorm_backward_weight', {
  rows: 'u32',
  channels: 'u32',
  accumulate: 'u32',
  chunk: 'u32',
  parts: 'u32',
});

/** Most threads per row (a power of two); narrower rows get fewer (reductionWorkgroupSize). */
export const RMSNORM_WG = 256;
/** Threads per workgroup of the weight gradient (one thread per channel). */
export const RMSNORM_WEIGHT_WG = 64;
/** Rows per workgroup of the barrier-free (one invocation per row) variant. */
export const RMSNORM_ROWS_PER_WG = 64;
/** Default rows per thread of the weight gradient on the GPU path (KernelTuning
 * .rmsnormWeightRowChunk): a batch of 2048 rows over 896 channels runs 28,672 threads, not 896. */
export const RMSNORM_WEIGHT_ROW_CHUNK = 64;

export interface RmsNormForwardArgs {
  x: GPUBuffer; // (R, C)
  w: GPUBuffer; // (C)
  y: GPUBuffer; // (R, C) output
  rstd: GPUBuffer; // (R) output, 1 / sqrt(mean(x²) + eps), for the backward pass
  rows: number; // R
  C: number;
  eps: number;
}

export class RmsNormForwardKernel extends Kernel {
  /** Compiles the pipeline encode() uses for rows of C channels. */
  prepare(C: number): Promise<void> {
    const { shader, constants } = rowLayout(this.device, this.pipelines, 'rmsnorm_forward', 0, C);
    return this.compile(shader, constants);
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormForwardArgs): void {
    const { rows, C } = args;
    const { shader, constants, workgroups } = rowLayout(
      this.device,
      this.pipelines,
      'rmsnorm_forward',
      rows,
      C,
    );
    const params = RMSNORM_FORWARD_PARAMS.block(this.device, encoder, {
      rows,
      channels: C,
      eps: args.eps,
    });
    this.encodePass(encoder, {
      shader,
      constants,
      buffers: [args.x, args.w, args.y, args.rstd, params],
      workgroups: C > 0 ? workgroups : 0,
    });
  }
}

/** Whether the GPU path's row sums use subgroup operations on this device and tuning. */
export function rmsnormSubgroups(tuning: KernelTuning, hasSubgroups: boolean): boolean {
  return !tuning.avoidBarriers && hasSubgroups && (tuning.subgroups ?? true);
}

/** Shader, threads per row reduction and workgroup count: one workgroup per row (its sum a tree
 * or, with subgroups, the *_subgroups shader), or (barrier-free, see KernelTuning) one invocation
 * per row with RMSNORM_ROWS_PER_WG rows per workgroup. */
export function rowLayout(
  device: GPUDevice,
  pipelines: PipelineCache,
  kernel: 'rmsnorm_forward' | 'rmsnorm_backward',
  rows: number,
  C: number,
): { shader: string; constants: OverrideConstants; workgroups: number } {
  if (pipelines.tuning.avoidBarriers) {
    return {
      shader: kernel,
      constants: { WG: RMSNORM_ROWS_PER_WG, ROW_PER_THREAD: true },
      workgroups: ceilDiv(rows, RMSNORM_ROWS_PER_WG),
    };
  }
  const subgroups = rmsnormSubgroups(pipelines.tuning, device.features.has('subgroups'));
  return {
    shader: subgroups ? `${kernel}_subgroups` : kernel,
    constants: { WG: reductionWorkgroupSize(C, RMSNORM_WG), ROW_PER_THREAD: false },
    workgroups: rows,
  };
}

export interface RmsNormBackwardArgs {
  dy: GPUBuffer; // (R, C)
  x: GPUBuffer; // (R, C) forward input
  w: GPUBuffer; // (C)
  rstd: GPUBuffer; // (R) from the forward pass
  dx: GPUBuffer; // (R, C) output
  rows: number; // R
  C: number;
  /** Add into dx (e.g. the residual-stream gradient) instead of overwriting it. */
  accumulate?: boolean;
}

export class RmsNormBackwardKernel extends Kernel {
  /** Compiles the pipeline encode() uses for rows of C channels. */
  prepare(C: number): Promise<void> {
    const { shader, constants } = rowLayout(this.device, this.pipelines, 'rmsnorm_backward', 0, C);
    return this.compile(shader, constants);
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormBackwardArgs): void {
    const { rows, C } = args;
    const { shader, constants, workgroups } = rowLayout(
      this.device,
      this.pipelines,
      'rmsnorm_backward',
      rows,
      C,
    );
    const params = RMSNORM_BACKWARD_PARAMS.block(this.device, encoder, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
    });
    this.encodePass(encoder, {
      shader,
      constants,
      buffers: [args.dy, args.x, args.w, args.rstd, args.dx, params],
      workgroups: C > 0 ? workgroups : 0,
    });
  }
}

export interface RmsNormBackwardWeightArgs {
  dy: GPUBuffer; // (R, C)
  x: GPUBuffer; // (R, C) forward input
  rstd: GPUBuffer; // (R) from the forward pass
  dw: GPUBuffer; // (C) output
  rows: number; // R
  C: number;
  /** Add into dw (gradient accumulation across micro-batches) instead of overwriting it. */
  accumulate?: boolean;
}

/** How many row chunks (parts) the weight gradient over R rows takes: 1 = the one-pass kernel. */
export function weightGradientParts(rows: number, tuning: KernelTuning): number {
  const chunk = tuning.rmsnormWeightRowChunk ?? RMSNORM_WEIGHT_ROW_CHUNK;
  return tuning.avoidBarriers || chunk <= 0 || rows <= chunk ? 1 : ceilDiv(rows, chunk);
}

export class RmsNormBackwardWeightKernel extends Kernel {
  /** Compiles the pipelines encode() uses (the one-pass kernel and the split's two passes). */
  async prepare(): Promise<void> {
    const constants = { WG: RMSNORM_WEIGHT_WG };
    await Promise.all(
      (this.pipelines.tuning.avoidBarriers
        ? ['main']
        : ['main', 'main_partial', 'main_combine']
      ).map((entry) => this.compile('rmsnorm_backward_weight', constants, entry)),
    );
  }

  encode(encoder: GPUCommandEncoder, args: RmsNormBackwardWeightArgs): void {
    const { rows, C } = args;
    const parts = weightGradientParts(rows, this.pipelines.tuning);
    const chunk = parts > 1 ? ceilDiv(rows, parts) : rows;
    const params = RMSNORM_BACKWARD_WEIGHT_PARAMS.block(this.device, encoder, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
      chunk,
      parts,
    });
    const constants = { WG: RMSNORM_WEIGHT_WG };
    if (parts === 1) {
      this.encodePass(encoder, {
        shader: 'rmsnorm_backward_weight',
        constants,
        buffers: [args.dy, args.x, args.rstd, args.dw, params],
        workgroups: ceilDiv(C, RMSNORM_WEIGHT_WG),
      });
      return;
    }
    if (C === 0) return;
    const partials = runScratch(this.device, 'rmsnorm_backward_weight.partials', parts * C * 4);
    const source = shaderSource('rmsnorm_backward_weight');
    const pass = encoder.beginComputePass({ label: 'rmsnorm_backward_weight' });
    const run = (entry: string, buffers: Record<number, BoundBuffer>, workgroups: number) => {
      const pipeline = this.pipelines.get('rmsnorm_backward_weight', source, constants, entry);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindAt(this.device, pipeline, buffers));
      pass.dispatchWorkgroups(...splitGrid(workgroups, this.maxPerDim));
    };
    run(
      'main_partial',
      { 0: args.dy, 1: args.x, 2: args.rstd, 4: params, 5: partials },
      ceilDiv(parts * C, RMSNORM_WEIGHT_WG),
    );
    run('main_combine', { 3: args.dw, 4: params, 5: partials }, ceilDiv(C, RMSNORM_WEIGHT_WG));
    pass.end();
  }
}

/** Variants a benchmark can compare (tunings to merge over the engine's; 'subgroups' falls back to
 * the tree where the device lacks the feature). */
export const RMSNORM_VARIANTS: ReadonlyArray<{ name: string; tuning: Partial<KernelTuning> }> = [
  { name: 'tree', tuning: { avoidBarriers: false, subgroups: false, rmsnormWeightRowChunk: 0 } },
  {
    name: 'subgroups',
    tuning: { avoidBarriers: false, subgroups: true, rmsnormWeightRowChunk: 0 },
  },
  {
    name: 'subgroups-split-weight-32',
    tuning: { avoidBarriers: false, subgroups: true, rmsnormWeightRowChunk: 32 },
  },
  {
    name: 'subgroups-split-weight-64',
    tuning: { avoidBarriers: false, subgroups: true, rmsnormWeightRowChunk: 64 },
  },
  {
    name: 'subgroups-split-weight-256',
    tuning: { avoidBarriers: false, subgroups: true, rmsnormWeightRowChunk: 256 },
  },
  { name: 'emulation', tuning: { avoidBarriers: true } },
];

/**
 * Times RMSNorm at (rows, C) with `tuning` merged over the engine's (RMSNORM_VARIANTS): seeded
 * inputs, pipelines compiled before the clock starts, then `iterations` submits of `repeats`
 * (forward, input gradient, weight gradient) each, timed from encoding to onSubmittedWorkDone.
 * Returns milliseconds per (forward + backward) of each submit. For GPU benchmarks; on a
 * CPU-emulated adapter the times only compare variants on that emulation.
 */
export async function runRmsNorm(
  engine: Engine,
  shape: { rows: number; C: number },
  tuning: Partial<KernelTuning>,
  options: { iterations?: number; repeats?: number } = {},
): Promise<{ subgroups: boolean; weightParts: number; msPerStep: number[] }> {
  const { rows, C } = shape;
  const { iterations = 5, repeats = 1 } = options;
  const { device } = engine;
  const pipelines = new PipelineCache(device, { ...engine.pipelines.tuning, ...tuning });
  const forward = new RmsNormForwardKernel(device, pipelines);
  const backward = new RmsNormBackwardKernel(device, pipelines);
  const weight = new RmsNormBackwardWeightKernel(device, pipelines);
  await Promise.all([forward.prepare(C), backward.prepare(C), weight.prepare()]);
  const seeded = (n: number, seed: number) => {
    const out = new Float32Array(n);
    let state = seed >>> 0;
    for (let i = 0; i < n; i++) {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      out[i] = (state / 0x100000000) * 2 - 1;
    }
    return out;
  };
  const b = {
    x: uploadStorageBuffer(device, seeded(rows * C, 1)),
    w: uploadStorageBuffer(device, seeded(C, 2)),
    dy: uploadStorageBuffer(device, seeded(rows * C, 3)),
    y: createStorageBuffer(device, rows * C * 4),
    rstd: createStorageBuffer(device, rows * 4),
    dx: createStorageBuffer(device, rows * C * 4),
    dw: createStorageBuffer(device, C * 4),
  };
  const msPerStep: number[] = [];
  try {
    for (let i = 0; i < iterations; i++) {
      const start = performance.now();
      await engine.run((encoder) => {
        for (let k = 0; k < repeats; k++) {
          forward.encode(encoder, { x: b.x, w: b.w, y: b.y, rstd: b.rstd, rows, C, eps: 1e-6 });
          backward.encode(encoder, { dy: b.dy, x: b.x, w: b.w, rstd: b.rstd, dx: b.dx, rows, C });
          weight.encode(encoder, { dy: b.dy, x: b.x, rstd: b.rstd, dw: b.dw, rows, C });
        }
      }, 'bench.rmsnorm');
      msPerStep.push((performance.now() - start) / repeats);
    }
  } finally {
    for (const buffer of Object.values(b)) buffer.destroy();
  }
  return {
    subgroups: rmsnormSubgroups(pipelines.tuning, device.features.has('subgroups')),
    weightParts: weightGradientParts(rows, pipelines.tuning),
    msPerStep,
  };
}
