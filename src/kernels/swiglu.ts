// TS wrappers of shaders/swiglu_forward.wgsl and shaders/swiglu_backward.wgsl: the Llama MLP gate
// h = silu(gate) · up over (R, I) = (N·T, I), and its gradients.
import { ceilDiv } from '../engine/dispatch';
import { uniformLayout } from '../engine/uniforms';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/swiglu_forward.wgsl. */
export const SWIGLU_FORWARD_PARAMS = uniformLayout('swiglu_forward', { count: 'u32' });

/** The `struct Params` of shaders/swiglu_backward.wgsl. */
export const SWIGLU_BACKWARD_PARAMS = uniformLayout('swiglu_backward', { count: 'u32' });

/** Threads per workgroup of both SwiGLU kernels (one thread per element). */
export const SWIGLU_WG = 256;

export interface SwigluForwardArgs {
  gate: GPUBuffer; // (R, I) gate_proj output
  up: GPUBuffer; // (R, I) up_proj output
  h: GPUBuffer; // (R, I) output
  count: number; // R · I
}

export class SwigluForwardKernel extends Kernel {
  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('swiglu_forward', { WG: SWIGLU_WG });
  }

  encode(encoder: GPUCommandEncoder, args: SwigluForwardArgs): void {
    const params = SWIGLU_FORWARD_PARAMS.block(this.device, encoder, { count: args.count });
    this.encodePass(encoder, {
      shader: 'swiglu_forward',
      constants: { WG: SWIGLU_WG },
      buffers: [args.gate, args.up, args.h, params],
      workgroups: ceilDiv(args.count, SWIGLU_WG),
    });
  }
}

export interface SwigluBackwardArgs {
  dh: GPUBuffer; // (R, I)
  gate: GPUBuffer; // (R, I) forward input
  up: GPUBuffer; // (R, I) forward input
  dgate: GPUBuffer; // (R, I) output
  dup: GPUBuffer; // (R, I) output
  count: number; // R · I
}

export class SwigluBackwardKernel extends Kernel {
  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('swiglu_backward', { WG: SWIGLU_WG });
  }

  encode(encoder: GPUCommandEncoder, args: SwigluBackwardArgs): void {
    const params = SWIGLU_BACKWARD_PARAMS.block(this.device, encoder, { count: args.count });
    this.encodePass(encoder, {
      shader: 'swiglu_backward',
      constants: { WG: SWIGLU_WG },
      buffers: [args.dh, args.gate, args.up, args.dgate, args.dup, params],
      workgroups: ceilDiv(args.count, SWIGLU_WG),
    });
  }
}
