// TS wrapper of shaders/grpo_loss.wgsl + shaders/grpo_loss_reduce.wgsl: the GRPO loss, its
// gradient into the per-token log-probs, and the TRL statistics, entirely on the GPU (the caller
// reads the small `out` buffer when it wants the numbers; nothing is read back here).
import { createStorageBuffer } from '../engine/buffers';
import { splitGrid } from '../engine/dispatch';
import { bindBuffers, type PipelineCache } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import type { GrpoLossStats, LossType } from '../ref/grpo_loss';
import { transient } from '../engine/memory';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/grpo_loss.wgsl. */
export const GRPO_LOSS_PARAMS = uniformLayout('grpo_loss', {
  N: 'u32',
  L: 'u32',
  lossType: 'u32',
  useKl: 'u32',
  epsilonLow: 'f32',
  epsilonHigh: 'f32',
  beta: 'f32',
  denominator: 'f32',
});

/** The `struct Params` of shaders/grpo_loss_reduce.wgsl. */
export const GRPO_LOSS_REDUCE_PARAMS = uniformLayout('grpo_loss_reduce', {
  N: 'u32',
  useKl: 'u32',
});

export const GRPO_LOSS_WG = 256;
export const GRPO_LOSS_REDUCE_WG = 256;

/** Layout of the (8) f32 `out` buffer. */
export const GRPO_LOSS_OUT = {
  loss: 0,
  clipRatioLow: 1,
  clipRatioHigh: 2,
  clipRatioRegion: 3,
  meanKl: 4,
  activeTokens: 5,
  length: 8,
} as const;

const LOSS_TYPE_CODE: Record<LossType, number> = { grpo: 0, bnpo: 1, dr_grpo: 2, dapo: 3 };

export interface GrpoLossArgs {
  logp: GPUBuffer; // (N, L)
  oldLogp: GPUBuffer; // (N, L) sampling-policy log-probs (pass logp itself when μ = 1)
  refLogp: GPUBuffer | null; // (N, L) reference-policy log-probs; null when β = 0
  advantages: GPUBuffer; // (N)
  mask: GPUBuffer; // (N, L) f32 1/0
  dLogp: GPUBuffer; // (N, L) out: ∂loss/∂logp
  out: GPUBuffer; // (8) out: see GRPO_LOSS_OUT
  N: number;
  L: number;
  lossType: LossType;
  epsilonLow: number;
  epsilonHigh: number;
  beta: number;
  maxCompletionLength: number; // dr_grpo denominator N·maxCompletionLength
  /** dapo: Σ mask over the whole accumulated batch (default: Σ mask of this call, on the GPU). */
  activeTokensInBatch?: number;
  /** Grid limit per dimension (tests lower it to exercise split grids cheaply). */
  maxWorkgroupsPerDim?: number;
}

/** The loss and statistics from a read-back `out` buffer. */
export function decodeGrpoLossOut(out: ArrayLike<number>): {
  loss: number;
  stats: GrpoLossStats;
} {
  return {
    loss: out[GRPO_LOSS_OUT.loss],
    stats: {
      clipRatioLow: out[GRPO_LOSS_OUT.clipRatioLow],
      clipRatioHigh: out[GRPO_LOSS_OUT.clipRatioHigh],
      clipRatioRegion: out[GRPO_LOSS_OUT.clipRatioRegion],
      meanKl: out[GRPO_LOSS_OUT.meanKl],
      activeTokens: out[GRPO_LOSS_OUT.activeTokens],
    },
  };
}

export class GrpoLossKernel {
  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
  ) {}

  /** Compiles the two pipelines encode() uses. */
  async prepare(): Promise<void> {
    await Promise.all([
      this.pipelines.prepare('grpo_loss', shaderSource('grpo_loss'), { WG: GRPO_LOSS_WG }),
      this.pipelines.prepare('grpo_loss_reduce', shaderSource('grpo_loss_reduce'), {
        WG: GRPO_LOSS_REDUCE_WG,
      }),
    ]);
  }

  encode(encoder: GPUCommandEncoder, args: GrpoLossArgs): void {
    const { N, L, lossType } = args;
    if (!(lossType in LOSS_TYPE_CODE)) throw new RangeError(`unknown lossType '${lossType}'`);
    if (lossType === 'dr_grpo' && !(args.maxCompletionLength >= 1)) {
      throw new RangeError('dr_grpo needs maxCompletionLength ≥ 1');
    }
    const useKl = args.beta !== 0 && args.refLogp !== null;
    let denominator = 0;
    if (lossType === 'dr_grpo') denominator = N * args.maxCompletionLength;
    if (lossType === 'dapo') denominator = args.activeTokensInBatch ?? 0;
    const [loss, reduce] = [
      this.pipelines.get('grpo_loss', shaderSource('grpo_loss'), { WG: GRPO_LOSS_WG }),
      this.pipelines.get('grpo_loss_reduce', shaderSource('grpo_loss_reduce'), {
        WG: GRPO_LOSS_REDUCE_WG,
      }),
    ];
    const params = GRPO_LOSS_PARAMS.create(this.device, {
      N,
      L,
      lossType: LOSS_TYPE_CODE[lossType],
      useKl: useKl ? 1 : 0,
      epsilonLow: args.epsilonLow,
      epsilonHigh: args.epsilonHigh,
      beta: useKl ? args.beta : 0,
      denominator,
    });
    const reduceParams = GRPO_LOSS_REDUCE_PARAMS.create(this.device, { N, useKl: useKl ? 1 : 0 });
    const partials = transient(
      this.device,
      createStorageBuffer(this.device, N * 8 * 4, 'grpo_loss.partials'),
    ); // (N, 8)

    const pass = encoder.beginComputePass({ label: 'grpo_loss' });
    pass.setPipeline(loss);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, loss, [
        args.logp,
        args.oldLogp,
        // Bound but never read when useKl = 0; two read-only bindings of one buffer are allowed.
        args.refLogp ?? args.logp,
        args.advantages,
        args.mask,
        args.dLogp,
        partials,
        params,
      ]),
    );
    const [x, y, z] = splitGrid(N, args.maxWorkgroupsPerDim);
    if (x > 0) pass.dispatchWorkgroups(x, y, z);
    pass.setPipeline(reduce);
    pass.setBindGroup(0, bindBuffers(this.device, reduce, [partials, args.out, reduceParams]));
    pass.dispatchWorkgroups(1);
    pass.end();
  }
}
