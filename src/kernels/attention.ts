// TS wrappers of the attention kernels: causal grouped-query attention forward
// (shaders/attention_forward.wgsl), its backward (shaders/attention_backward_dq.wgsl then
// shaders/attention_backward_dkv.wgsl) and the KV-cache write used by decoding
// (shaders/kv_cache_write.wgsl). Pipeline specialisation, uniforms, limits and dispatch geometry.
//
// Legend: N sequences, Tq query rows, T time (training: Tq = S = T), S_cap cache capacity,
// S filled cache length, H heads, Hkv kv-heads, D head dim.
import { createStorageBuffer } from '../engine/buffers';
import { ceilDiv } from '../engine/dispatch';
import type { OverrideConstants, PipelineCache } from '../engine/pipelines';
import { uniformLayout } from '../engine/uniforms';
import type { AttentionRefShape } from '../ref/attention';
import { Kernel } from './kernel';

/** The `struct Params` of shaders/attention_forward.wgsl. */
export const ATTENTION_FORWARD_PARAMS = uniformLayout('attention_forward', {
  N: 'u32',
  Tq: 'u32',
  H: 'u32',
  Hkv: 'u32',
  S_cap: 'u32',
  S: 'u32',
  qOffset: 'u32',
  scale: 'f32',
});

/** The `struct Params` of shaders/attention_backward_dq.wgsl and shaders/attention_backward_dkv.wgsl. */
export const ATTENTION_BACKWARD_PARAMS = uniformLayout(
  ['attention_backward_dq', 'attention_backward_dkv'],
  { N: 'u32', T: 'u32', H: 'u32', Hkv: 'u32', scale: 'f32' },
);

/** The `struct Params` of shaders/kv_cache_write.wgsl. */
export const KV_CACHE_WRITE_PARAMS = uniformLayout('kv_cache_write', {
  N: 'u32',
  Tsrc: 'u32',
  S_cap: 'u32',
  rowSize: 'u32',
  t0: 'u32',
});

// Each kernel has two entry points with the same per-tile arithmetic, hence the same bits: `main`
// stages K/V (or Q/dO) tiles in workgroup memory, `main_direct` (KernelTuning.avoidBarriers, i.e.
// SwiftShader) has every thread read straight from storage and packs rows densely. Barriers are
// what a CPU emulation pays for: on the aha preset's real steps (`node bench/run.mjs --profile
// --aha`, Node without Dawn's robustness) direct took the training forward 390 → 245 ms, dq 514 →
// 391 ms, dkv 699 → 554 ms per step, and a decode step's forward (N·H rows in a few workgroups
// instead of N·Hkv mostly idle ones) 69 → 11 ms; with robustness on (as in Chromium) the training
// kernels come out even.

/** Rows (threads) per workgroup of the forward, dq and dkv kernels: one thread per query/key row. */
export const ATTENTION_WG = 32;
/**
 * Largest head dim the kernels take: each thread keeps up to four D-long rows in private vec4
 * arrays sized by this constant (4·MAX_D4 in the shaders). Llama/Qwen/SmolLM heads are 64 or 128.
 * Any D up to it works (rows are zero-padded to a multiple of 4 inside the kernels).
 */
export const ATTENTION_MAX_HEAD_DIM = 128;
/**
 * Keys (forward, dq) or queries (dkv) staged per tile in workgroup memory (≤ MAX_TILE = 16 in the
 * shaders). At D = 128 a tile takes 2·8·128·4 = 8 KiB (+64 B in dkv), inside WebGPU's guaranteed
 * 16 KiB. Measured on SwiftShader (D = 64, T = 128): 8 ran ~1.5× faster than 16 and ~2–4× faster
 * than 32 (less work masked by the causal edge), and pipelines compile several times faster.
 * One fixed value keeps the summation order, hence the bits, the same on every device.
 */
export const ATTENTION_TILE = 8;
/** Threads per workgroup of kv_cache_write (one element each). */
export const KV_CACHE_WRITE_WG = 256;

/**
 * Workgroups for `rows` rows per (n, kv head): `main` gives each (n, kv head) its own workgroups,
 * `main_direct` packs the rows of all of them densely.
 */
function rowWorkgroups(direct: boolean, N: number, Hkv: number, rows: number): number {
  return direct ? ceilDiv(N * Hkv * rows, ATTENTION_WG) : N * Hkv * ceilDiv(rows, ATTENTION_WG);
}

/** The pipeline variant of the attention kernels for head dim D: `main_direct` when barrier-free. */
function attentionVariant(
  pipelines: PipelineCache,
  D: number,
): { constants: OverrideConstants; entryPoint: string } {
  return {
    constants: { WG: ATTENTION_WG, TILE: ATTENTION_TILE, HEAD_DIM: D },
    entryPoint: pipelines.tuning.avoidBarriers ? 'main_direct' : 'main',
  };
}

function checkHeads(kernel: string, H: number, Hkv: number, D: number): void {
  for (const [name, value] of [
    ['H', H],
    ['Hkv', Hkv],
    ['D', D],
  ] as const) {
    if (!Number.isInteger(value) || value < 1) {
      throw new RangeError(`${kernel}: ${name} must be a positive integer, got ${value}`);
    }
  }
  if (H % Hkv !== 0) {
    throw new RangeError(`${kernel}: H (${H}) must be a multiple of Hkv (${Hkv})`);
  }
  if (D > ATTENTION_MAX_HEAD_DIM) {
    throw new RangeError(
      `${kernel}: head dim D = ${D} exceeds ATTENTION_MAX_HEAD_DIM = ${ATTENTION_MAX_HEAD_DIM} ` +
        '(per-thread rows are held in fixed-size private arrays)',
    );
  }
}

/** The buffers of the forward; the shape (N, Tq, H, Hkv, D, qOffset, S, sCap, scale) is the
 * reference's (src/ref/attention.ts), so both take the same arguments. */
export interface AttentionForwardArgs extends AttentionRefShape {
  /** (N, Tq, H, D) queries (rotary already applied). */
  q: GPUBuffer;
  /** (N, S_cap, Hkv, D) keys; in training just the k projection (S_cap = T). */
  k: GPUBuffer;
  /** (N, S_cap, Hkv, D) values. */
  v: GPUBuffer;
  /** (N) u32: first valid column of each sequence (number of left-pad tokens). */
  keyStart: GPUBuffer;
  /** (N, Tq, H, D) output. */
  o: GPUBuffer;
  /** (N, H, Tq) log-sum-exp of the scaled scores, for the backward pass (0 for pad rows). */
  lse: GPUBuffer;
}

export class AttentionForwardKernel extends Kernel {
  /** Compiles the pipeline encode() uses for head dim D. */
  prepare(D: number): Promise<void> {
    const { constants, entryPoint } = attentionVariant(this.pipelines, D);
    return this.compile('attention_forward', constants, entryPoint);
  }

  encode(encoder: GPUCommandEncoder, args: AttentionForwardArgs): void {
    const { N, Tq, H, Hkv, D, qOffset = 0 } = args;
    checkHeads('attention_forward', H, Hkv, D);
    const S = args.S ?? qOffset + Tq;
    const sCap = args.sCap ?? S;
    if (S > sCap) throw new RangeError(`attention_forward: S (${S}) exceeds S_cap (${sCap})`);
    const direct = this.pipelines.tuning.avoidBarriers;
    const params = ATTENTION_FORWARD_PARAMS.block(this.device, encoder, {
      N,
      Tq,
      H,
      Hkv,
      S_cap: sCap,
      S,
      qOffset,
      scale: args.scale ?? 1 / Math.sqrt(D),
    });
    this.encodePass(encoder, {
      shader: 'attention_forward',
      ...attentionVariant(this.pipelines, D),
      buffers: [args.q, args.k, args.v, args.keyStart, args.o, args.lse, params],
      workgroups: rowWorkgroups(direct, N, Hkv, (H / Hkv) * Tq),
    });
  }
}

export interface AttentionBackwardArgs {
  /** (N, T, H, D) gradient of the attention output. */
  dO: GPUBuffer;
  /** (N, T, H, D) forward queries. */
  q: GPUBuffer;
  /** (N, T, Hkv, D) forward keys. */
  k: GPUBuffer;
  /** (N, T, Hkv, D) forward values. */
  v: GPUBuffer;
  /** (N, T, H, D) forward output. */
  o: GPUBuffer;
  /** (N, H, T) forward log-sum-exp. */
  lse: GPUBuffer;
  /** (N) u32 first valid column. */
  keyStart: GPUBuffer;
  /** (N, T, H, D) output: gradient of q (overwritten). */
  dq: GPUBuffer;
  /** (N, T, Hkv, D) output: gradient of k (overwritten). */
  dk: GPUBuffer;
  /** (N, T, Hkv, D) output: gradient of v (overwritten). */
  dv: GPUBuffer;
  /** (N, H, T) scratch for Δ = rowsum(dO∘O); when left out the kernel keeps its own. */
  delta?: GPUBuffer;
  N: number;
  T: number;
  H: number;
  Hkv: number;
  D: number;
  /** Score scale; default 1/√D (must match the forward). */
  scale?: number;
}

/**
 * Backward of the training-shape forward (Tq = S = S_cap = T, qOffset = 0). Encodes two passes:
 * dq (which also writes Δ) and then dk/dv, which reads Δ. No atomics: fixed summation order.
 */
export class AttentionBackwardKernel extends Kernel {
  private scratch: GPUBuffer | null = null;

  /** Compiles the two pipelines encode() uses for head dim D. */
  async prepare(D: number): Promise<void> {
    const { constants, entryPoint } = attentionVariant(this.pipelines, D);
    await Promise.all([
      this.compile('attention_backward_dq', constants, entryPoint),
      this.compile('attention_backward_dkv', constants, entryPoint),
    ]);
  }

  encode(encoder: GPUCommandEncoder, args: AttentionBackwardArgs): void {
    const { N, T, H, Hkv, D } = args;
    checkHeads('attention_backward', H, Hkv, D);
    const delta = args.delta ?? this.deltaScratch(N * H * T * 4);
    const direct = this.pipelines.tuning.avoidBarriers;
    const variant = attentionVariant(this.pipelines, D);
    const params = ATTENTION_BACKWARD_PARAMS.block(this.device, encoder, {
      N,
      T,
      H,
      Hkv,
      scale: args.scale ?? 1 / Math.sqrt(D),
    });

    this.encodePass(encoder, {
      shader: 'attention_backward_dq',
      ...variant,
      buffers: [
        args.dO,
        args.q,
        args.k,
        args.v,
        args.o,
        args.lse,
        args.keyStart,
        args.dq,
        delta,
        params,
      ],
      workgroups: rowWorkgroups(direct, N, Hkv, (H / Hkv) * T),
    });
    // Then dk/dv, which read the Δ the dq pass wrote.
    this.encodePass(encoder, {
      shader: 'attention_backward_dkv',
      ...variant,
      buffers: [
        args.dO,
        args.q,
        args.k,
        args.v,
        args.lse,
        delta,
        args.keyStart,
        args.dk,
        args.dv,
        params,
      ],
      workgroups: rowWorkgroups(direct, N, Hkv, T),
    });
  }

  /** Frees the internal Δ scratch buffer (if any). */
  destroy(): void {
    this.scratch?.destroy();
    this.scratch = null;
  }

  // Passes run in encoding order, so one scratch buffer serves every layer of a backward pass.
  private deltaScratch(byteLength: number): GPUBuffer {
    if (!this.scratch || this.scratch.size < byteLength) {
      this.scratch?.destroy();
      this.scratch = createStorageBuffer(this.device, byteLength, 'attention_backward.delta');
    }
    return this.scratch;
  }
}

export interface KvCacheWriteArgs {
  /** (N, Tsrc, Hkv, D) new key or value rows. */
  src: GPUBuffer;
  /** (N, S_cap, Hkv, D) cache; columns t0 … t0 + Tsrc − 1 are overwritten. */
  cache: GPUBuffer;
  N: number;
  Tsrc: number;
  sCap: number;
  Hkv: number;
  D: number;
  /** First cache column written. */
  t0: number;
}

export class KvCacheWriteKernel extends Kernel {
  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.compile('kv_cache_write', { WG: KV_CACHE_WRITE_WG });
  }

  encode(encoder: GPUCommandEncoder, args: KvCacheWriteArgs): void {
    const { N, Tsrc, sCap, Hkv, D, t0 } = args;
    if (t0 + Tsrc > sCap) {
      throw new RangeError(`kv_cache_write: columns ${t0}…${t0 + Tsrc - 1} exceed S_cap (${sCap})`);
    }
    const params = KV_CACHE_WRITE_PARAMS.block(this.device, encoder, {
      N,
      Tsrc,
      S_cap: sCap,
      rowSize: Hkv * D,
      t0,
    });
    this.encodePass(encoder, {
      shader: 'kv_cache_write',
      constants: { WG: KV_CACHE_WRITE_WG },
      buffers: [args.src, args.cache, params],
      workgroups: ceilDiv(N * Tsrc * Hkv * D, KV_CACHE_WRITE_WG),
    });
  }
}
