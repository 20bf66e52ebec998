// TS wrapper of shaders/grpo_loss.wgsl + shaders/grpo_loss_reduce.wgsl: the GRPO loss, its
// gradient into the per-token log-probs, and the TRL statistics, entirely on the GPU (the caller
// reads the small `out` buffer when it wants the numbers; nothing is read back here).
import { createStorageBuffer } from '../engine/buffers';
import type { GrpoLossInputs, GrpoLossStats } from '../ref/grpo_loss';
import type { LossType } from '../core/loss-definitions';
import { transient } from '../engine/memory';
import { uniformLayout } from '../engine/uniforms';
import { Kernel } from './kernel';

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
  seqLevel: 'u32',
  useDelta: 'u32',
  delta: 'f32',
  useEntropyMask: 'u32',
  sapoTemperaturePos: 'f32',
  sapoTemperatureNeg: 'f32',
});

/** The `struct Params` of shaders/entropy_mask.wgsl. */
export const ENTROPY_MASK_PARAMS = uniformLayout('entropy_mask', {
  M: 'u32',
  q: 'f32',
  phase: 'u32',
});

export const ENTROPY_MASK_WG = 256;

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

const LOSS_TYPE_CODE: Record<LossType, number> = {
  grpo: 0,
  bnpo: 1,
  dr_grpo: 2,
  dapo: 3,
  cispo: 4,
  sapo: 5,
};

/** The loss's shape and options: the reference's (src/ref/grpo_loss.ts), one list for both. */
type GrpoLossOptions = Pick<
  GrpoLossInputs,
  | 'N'
  | 'L'
  | 'lossType'
  | 'epsilonLow'
  | 'epsilonHigh'
  | 'beta'
  | 'maxCompletionLength'
  | 'activeTokensInBatch' // default here: Σ mask of this call, on the GPU
  | 'importanceSamplingLevel'
  | 'delta'
  | 'sapoTemperaturePos'
  | 'sapoTemperatureNeg'
>;

export interface GrpoLossArgs extends GrpoLossOptions {
  logp: GPUBuffer; // (N, L)
  oldLogp: GPUBuffer; // (N, L) sampling-policy log-probs (pass logp itself when μ = 1)
  refLogp: GPUBuffer | null; // (N, L) reference-policy log-probs; null when β = 0
  advantages: GPUBuffer; // (N)
  mask: GPUBuffer; // (N, L) f32 1/0
  dLogp: GPUBuffer; // (N, L) out: ∂loss/∂logp
  out: GPUBuffer; // (8) out: see GRPO_LOSS_OUT
  /**
   * (N, L) 0/1: the policy term counts only where it is 1 (topEntropyQuantile, docs/grpo.md §3;
   * EntropyMaskKernel writes it); absent = every counted token.
   */
  entropyMask?: GPUBuffer | null;
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

export class GrpoLossKernel extends Kernel {
  /** Compiles the two pipelines encode() uses. */
  async prepare(): Promise<void> {
    await Promise.all([
      this.compile('grpo_loss', { WG: GRPO_LOSS_WG }),
      this.compile('grpo_loss_reduce', { WG: GRPO_LOSS_REDUCE_WG }),
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
    if (lossType === 'dapo' || lossType === 'cispo') denominator = args.activeTokensInBatch ?? 0;
    const params = GRPO_LOSS_PARAMS.block(this.device, encoder, {
      N,
      L,
      lossType: LOSS_TYPE_CODE[lossType],
      useKl: useKl ? 1 : 0,
      epsilonLow: args.epsilonLow,
      epsilonHigh: args.epsilonHigh,
      beta: useKl ? args.beta : 0,
      denominator,
      seqLevel: args.importanceSamplingLevel === 'sequence' ? 1 : 0,
      useDelta: args.delta === null || args.delta === undefined ? 0 : 1,
      delta: args.delta ?? 0,
      useEntropyMask: args.entropyMask ? 1 : 0,
      sapoTemperaturePos: args.sapoTemperaturePos ?? 1,
      sapoTemperatureNeg: args.sapoTemperatureNeg ?? 1.05,
    });
    const reduceParams = GRPO_LOSS_REDUCE_PARAMS.block(this.device, encoder, {
      N,
      useKl: useKl ? 1 : 0,
    });
    const partials = transient(
      this.device,
      createStorageBuffer(this.device, N * 8 * 4, 'grpo_loss.partials'),
    ); // (N, 8)

    this.encodePass(encoder, {
      shader: 'grpo_loss',
      constants: { WG: GRPO_LOSS_WG },
      buffers: [
        args.logp,
        args.oldLogp,
        // Bound but never read when useKl = 0; two read-only bindings of one buffer are allowed.
        args.refLogp ?? args.logp,
        args.advantages,
        args.mask,
        // Bound but never read without an entropy mask.
        args.entropyMask ?? args.mask,
        args.dLogp,
        partials,
        params,
      ],
      workgroups: N, // one per completion
      maxWorkgroupsPerDim: args.maxWorkgroupsPerDim,
    });
    // Then one workgroup sums the per-completion partials.
    this.encodePass(encoder, {
      shader: 'grpo_loss_reduce',
      constants: { WG: GRPO_LOSS_REDUCE_WG },
      buffers: [partials, args.out, reduceParams],
      workgroups: 1,
    });
  }
}

export interface EntropyMaskArgs {
  entropy: GPUBuffer; // (M) per-position entropies of this forward
  mask: GPUBuffer; // (M) 0/1 counted positions
  out: GPUBuffer; // (M) out: 1 where the policy term counts
  M: number;
  /** TRL's top_entropy_quantile ρ in [0, 1]: the top ρ of the counted tokens by entropy. */
  topEntropyQuantile: number;
  maxWorkgroupsPerDim?: number;
}

/** shaders/entropy_mask.wgsl: TRL's get_high_entropy_mask over one micro-batch (docs/grpo.md §3). */
export class EntropyMaskKernel extends Kernel {
  prepare(): Promise<unknown> {
    return this.compile('entropy_mask', { WG: ENTROPY_MASK_WG });
  }

  encode(encoder: GPUCommandEncoder, args: EntropyMaskArgs): void {
    const rho = args.topEntropyQuantile;
    if (!(rho >= 0 && rho <= 1)) throw new RangeError(`topEntropyQuantile ${rho} not in [0, 1]`);
    const sel = transient(this.device, createStorageBuffer(this.device, 4 * 4, 'entropy_mask.sel'));
    // Phase 0 ranks (sel = [s[lo], s[hi], w, n]), phase 1 writes the mask; two passes order them.
    for (const phase of [0, 1]) {
      const params = ENTROPY_MASK_PARAMS.block(this.device, encoder, {
        M: args.M,
        q: 1 - rho,
        phase,
      });
      this.encodePass(encoder, {
        shader: 'entropy_mask',
        constants: { WG: ENTROPY_MASK_WG },
        buffers: [args.entropy, args.mask, sel, args.out, params],
        workgroups: Math.ceil(args.M / ENTROPY_MASK_WG),
        label: `entropy_mask.${phase}`,
        maxWorkgroupsPerDim: args.maxWorkgroupsPerDim,
      });
    }
  }
}
