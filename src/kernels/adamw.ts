// TS wrapper of shaders/adamw.wgsl: one AdamW step per parameter tensor, gradient scaled by the
// clip buffer from GradNormKernel and skipped entirely when that buffer says the norm is not finite.
import { uploadStorageBuffer } from '../engine/buffers';
import { ceilDiv } from '../engine/dispatch';
import { uniformLayout } from '../engine/uniforms';
import type { AdamWHyper } from '../ref/adamw';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/adamw.wgsl. */
export const ADAMW_PARAMS = uniformLayout('adamw', {
  n: 'u32',
  beta1: 'f32',
  beta2: 'f32',
  oneMinusBeta1: 'f32',
  oneMinusBeta2: 'f32',
  eps: 'f32',
  decay: 'f32',
  stepSize: 'f32',
  biasCorrection2Sqrt: 'f32',
});

export type { AdamWHyper } from '../ref/adamw';

export const ADAMW_WG = 256;

export interface AdamWArgs {
  param: GPUBuffer; // (n) updated in place
  grad: GPUBuffer; // (n)
  m: GPUBuffer; // (n) first moment, zero-initialised before step 1
  v: GPUBuffer; // (n) second moment, zero-initialised before step 1
  n: number;
  /** 1-based step count after this update (PyTorch's state['step']). */
  step: number;
  hyper: AdamWHyper;
  /** (4) [norm, scale, finite, 0] from GradNormKernel; default: no clipping, always finite. */
  clip?: GPUBuffer;
  /** Grid limit per dimension (tests lower it to exercise split grids cheaply). */
  maxWorkgroupsPerDim?: number;
}

export class AdamWKernel extends Kernel {
  private noClip: GPUBuffer | null = null;

  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('adamw', { WG: ADAMW_WG });
  }

  encode(encoder: GPUCommandEncoder, args: AdamWArgs): void {
    const { n, step, hyper } = args;
    if (!Number.isInteger(step) || step < 1)
      throw new RangeError(`AdamW step must be ≥ 1, got ${step}`);
    this.noClip ??= uploadStorageBuffer(
      this.device,
      new Float32Array([0, 1, 1, 0]),
      'adamw.noClip',
    );
    // Derived scalars in f64 on the CPU (as PyTorch computes them in Python floats): in f32,
    // 1 − β2 for β2 = 0.999 would be off by 1.3e-5 relative, and β2^step loses digits.
    const params = ADAMW_PARAMS.block(this.device, encoder, {
      n,
      beta1: hyper.beta1,
      beta2: hyper.beta2,
      oneMinusBeta1: 1 - hyper.beta1,
      oneMinusBeta2: 1 - hyper.beta2,
      eps: hyper.eps,
      decay: 1 - hyper.lr * hyper.weightDecay,
      stepSize: hyper.lr / (1 - Math.pow(hyper.beta1, step)),
      biasCorrection2Sqrt: Math.sqrt(1 - Math.pow(hyper.beta2, step)),
    });
    this.encodePass(encoder, {
      shader: 'adamw',
      constants: { WG: ADAMW_WG },
      buffers: [args.grad, args.clip ?? this.noClip, args.param, args.m, args.v, params],
      workgroups: ceilDiv(n, ADAMW_WG),
      maxWorkgroupsPerDim: args.maxWorkgroupsPerDim,
    });
  }

  destroy(): void {
    this.noClip?.destroy();
    this.noClip = null;
  }
}
