// TS wrappers of shaders/bias_add.wgsl and shaders/bias_grad.wgsl: broadcast bias over rows
// (R, Cout) = (N·T, Cout) and its gradient (Qwen2's q/k/v projection biases).
import { ceilDiv } from '../engine/dispatch';
import { uniformLayout } from '../engine/uniforms';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/bias_add.wgsl. */
export const BIAS_ADD_PARAMS = uniformLayout('bias_add', { rows: 'u32', channels: 'u32' });

/** The `struct Params` of shaders/bias_grad.wgsl. */
export const BIAS_GRAD_PARAMS = uniformLayout('bias_grad', {
  rows: 'u32',
  channels: 'u32',
  accumulate: 'u32',
});

/** Threads per workgroup of bias_add (one thread per element). */
export const BIAS_ADD_WG = 256;
/** Threads per workgroup of bias_grad (one thread per channel). */
export const BIAS_GRAD_WG = 64;

export interface BiasAddArgs {
  y: GPUBuffer; // (R, Cout) updated in place
  bias: GPUBuffer; // (Cout)
  rows: number; // R
  C: number; // Cout
}

export class BiasAddKernel extends Kernel {
  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('bias_add', { WG: BIAS_ADD_WG });
  }

  encode(encoder: GPUCommandEncoder, args: BiasAddArgs): void {
    const { rows, C } = args;
    const params = BIAS_ADD_PARAMS.block(this.device, encoder, { rows, channels: C });
    this.encodePass(encoder, {
      shader: 'bias_add',
      constants: { WG: BIAS_ADD_WG },
      buffers: [args.bias, args.y, params],
      workgroups: ceilDiv(rows * C, BIAS_ADD_WG),
    });
  }
}

export interface BiasGradArgs {
  dy: GPUBuffer; // (R, Cout)
  db: GPUBuffer; // (Cout) output
  rows: number; // R
  C: number; // Cout
  /** Add into db (gradient accumulation across micro-batches) instead of overwriting it. */
  accumulate?: boolean;
}

export class BiasGradKernel extends Kernel {
  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('bias_grad', { WG: BIAS_GRAD_WG });
  }

  encode(encoder: GPUCommandEncoder, args: BiasGradArgs): void {
    const { rows, C } = args;
    const params = BIAS_GRAD_PARAMS.block(this.device, encoder, {
      rows,
      channels: C,
      accumulate: args.accumulate ? 1 : 0,
    });
    this.encodePass(encoder, {
      shader: 'bias_grad',
      constants: { WG: BIAS_GRAD_WG },
      buffers: [args.dy, args.db, params],
      workgroups: ceilDiv(C, BIAS_GRAD_WG),
    });
  }
}
