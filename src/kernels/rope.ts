// TS wrapper of shaders/rope.wgsl: rotary embedding (HF rotate_half) on (R, Hx, D) = (N·T, Hx, D)
// q or k rows, forward or inverse (= backward). Out of place.
import { uploadStorageBuffer } from '../engine/buffers';
import { ceilDiv } from '../engine/dispatch';
import { uniformLayout } from '../engine/uniforms';
import { ropeInvFreq } from '../ref/rope';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/rope.wgsl. */
export const ROPE_PARAMS = uniformLayout('rope', { rows: 'u32', heads: 'u32', pairs: 'u32' });

/** Threads per workgroup (one thread per rotated pair). */
export const ROPE_WG = 256;

export interface RopeArgs {
  x: GPUBuffer; // (R, Hx, D)
  positions: GPUBuffer; // u32 (R): rotary position id per token (column − keyStart, 0 for pads)
  y: GPUBuffer; // (R, Hx, D) output; must not be x
  rows: number; // R = N·T
  heads: number; // Hx: H for q, Hkv for k
  D: number; // head dim (even)
  theta: number; // rope_theta
  /** Apply the transposed rotation: the backward pass (dx from dy). */
  inverse?: boolean;
}

export class RopeKernel extends Kernel {
  // inv_freq (D/2) per (D, theta): a handful of models, uploaded once each.
  private readonly invFreq = new Map<string, GPUBuffer>();

  private invFreqBuffer(D: number, theta: number): GPUBuffer {
    const key = `${D}:${theta}`;
    let buffer = this.invFreq.get(key);
    if (!buffer) {
      buffer = uploadStorageBuffer(this.device, ropeInvFreq(D, theta), `rope.invFreq(${key})`);
      this.invFreq.set(key, buffer);
    }
    return buffer;
  }

  /** Compiles the pipeline encode() uses (forward or inverse rotation). */
  prepare(inverse = false): Promise<void> {
    return this.compile('rope', { WG: ROPE_WG, INVERSE: inverse });
  }

  encode(encoder: GPUCommandEncoder, args: RopeArgs): void {
    const { rows, heads, D } = args;
    if (args.x === args.y)
      throw new Error('rope is out of place: x and y must be different buffers');
    const invFreq = this.invFreqBuffer(D, args.theta);
    const params = ROPE_PARAMS.block(this.device, encoder, { rows, heads, pairs: D / 2 });
    this.encodePass(encoder, {
      shader: 'rope',
      constants: { WG: ROPE_WG, INVERSE: args.inverse ?? false },
      buffers: [args.x, args.positions, invFreq, args.y, params],
      workgroups: ceilDiv((rows * heads * D) / 2, ROPE_WG),
      label: args.inverse ? 'rope_inverse' : 'rope',
    });
  }

  /** Frees the cached inv_freq buffers. */
  destroy(): void {
    for (const buffer of this.invFreq.values()) buffer.destroy();
    this.invFreq.clear();
  }
}
