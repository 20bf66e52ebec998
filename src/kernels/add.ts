// TS wrapper of shaders/add.wgsl: a += alpha · b over n elements (residual adds, gradient sums).
import { ceilDiv } from '../engine/dispatch';
import { uniformLayout } from '../engine/uniforms';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/add.wgsl. */
export const ADD_PARAMS = uniformLayout('add', { count: 'u32', alpha: 'f32' });

/** Threads per workgroup (one thread per element). */
export const ADD_WG = 256;

export interface AddArgs {
  a: GPUBuffer; // (n) updated in place
  b: GPUBuffer; // (n); must not be a
  count: number; // n
  alpha?: number; // default 1
}

export class AddKernel extends Kernel {
  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('add', { WG: ADD_WG });
  }

  encode(encoder: GPUCommandEncoder, args: AddArgs): void {
    if (args.a === args.b) throw new Error('add: a and b must be different buffers');
    const params = ADD_PARAMS.block(this.device, encoder, {
      count: args.count,
      alpha: args.alpha ?? 1,
    });
    this.encodePass(encoder, {
      shader: 'add',
      constants: { WG: ADD_WG },
      buffers: [args.b, args.a, params],
      workgroups: ceilDiv(args.count, ADD_WG),
    });
  }
}
