// TS wrapper of the matmul kernels: variant choice, pipeline specialisation, uniforms and dispatch
// geometry. Variants (MATMUL_VARIANTS, picked per product by KernelTuning.matmulLarge / matmulSmall):
// - 'staged64': shaders/matmul.wgsl with staged 64×64 tiles (16×64 for M ≤ 16), the kernel real
//   GPUs ran before the GPU variants;
// - 'emulation': the barrier-free kernels for CPU-emulated WebGPU (matmul_vec4.wgsl when aligned,
//   else matmul.wgsl without staging), what avoidBarriers picks by default;
// - 'reg128x64', 'reg64x64', 'reg16x64', 'splitk16x64': shaders/matmul_gpu*.wgsl (coalesced loads,
//   TM×4 register blocks, double-buffered tiles; vec4 loads when aligned; split-K with a
//   deterministic second pass, matmul_splitk_reduce.wgsl, for few output tiles).
// A B operand stored as 16-bit values packed two per u32 (frozen bf16 / f16 weights, bDtype) takes
// shaders/matmul_packed16.wgsl (or matmul_gpu_packed16.wgsl), which widens it on load; an NF4 B
// (bDtype 'nf4': 4-bit codes and f32 block absmax in one u32 buffer, src/ref/nf4-matmul.ts
// packNf4) takes shaders/matmul_nf4.wgsl (or matmul_gpu_nf4.wgsl), which dequantises it on load.
// Fallbacks to matmul.wgsl / matmul_packed16.wgsl / matmul_nf4.wgsl (staged, same bits as the GPU
// variants without split): a packed B whose word pairs do not line up (odd K with transB, odd N
// without, odd strideB), an NF4 B whose 4-element groups do not (gpuNf4Aligned).
// Split-K is never used for continueSum (its bits must equal one call's), when the output tiles
// already fill the device (MATMUL_SPLIT_TARGET_WORKGROUPS), or when the partials would exceed
// MATMUL_SPLIT_MAX_BYTES.
import { ceilDiv, MAX_WORKGROUPS_PER_DIM } from '../engine/dispatch';
import { runScratch } from '../engine/memory';
import {
  bindBuffers,
  type KernelTuning,
  type PipelineCache,
  type PipelineKey,
} from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { uniformLayout } from '../engine/uniforms';

/** The `struct Params` of shaders/matmul.wgsl, matmul_vec4.wgsl and matmul_packed16.wgsl. */
export const MATMUL_PARAMS = uniformLayout(['matmul', 'matmul_vec4', 'matmul_packed16'], {
  M: 'u32',
  N: 'u32',
  K: 'u32',
  accumulate: 'u32',
  strideA: 'u32',
  strideB: 'u32',
  strideC: 'u32',
  alpha: 'f32',
  ldA: 'u32',
  ldC: 'u32',
  offsetA: 'u32',
  offsetC: 'u32',
});

/** The `struct Params` of shaders/matmul_gpu*.wgsl: matmul.wgsl's plus split-K. */
export const MATMUL_GPU_PARAMS = uniformLayout(
  ['matmul_gpu', 'matmul_gpu_vec4', 'matmul_gpu_packed16'],
  {
    M: 'u32',
    N: 'u32',
    K: 'u32',
    accumulate: 'u32',
    strideA: 'u32',
    strideB: 'u32',
    strideC: 'u32',
    alpha: 'f32',
    ldA: 'u32',
    ldC: 'u32',
    offsetA: 'u32',
    offsetC: 'u32',
    splits: 'u32',
    kChunk: 'u32',
  },
);

/** The `struct Params` of shaders/matmul_nf4.wgsl: matmul.wgsl's plus where B's absmax lies. */
export const MATMUL_NF4_PARAMS = uniformLayout('matmul_nf4', {
  ...MATMUL_PARAMS.fields,
  absmaxOffset: 'u32',
  blockShift: 'u32',
});

/** The `struct Params` of shaders/matmul_gpu_nf4.wgsl: matmul_gpu.wgsl's plus B's absmax. */
export const MATMUL_GPU_NF4_PARAMS = uniformLayout('matmul_gpu_nf4', {
  ...MATMUL_GPU_PARAMS.fields,
  absmaxOffset: 'u32',
  blockShift: 'u32',
});

/** The `struct Params` of shaders/matmul_splitk_reduce.wgsl. */
export const MATMUL_SPLITK_REDUCE_PARAMS = uniformLayout('matmul_splitk_reduce', {
  M: 'u32',
  N: 'u32',
  splits: 'u32',
  accumulate: 'u32',
  alpha: 'f32',
  ldC: 'u32',
  offsetC: 'u32',
  strideC: 'u32',
});
const SPLITK_REDUCE_WG = 64;

/** Threads per workgroup along x (columns) and y (rows); each thread computes 4×4 outputs. */
export const MATMUL_WG_X = 16;
export const MATMUL_WG_Y = 16;
export const MATMUL_TILE_K = 16;
export const MATMUL_TILE_M = MATMUL_WG_Y * 4;
/**
 * Threads along y for short products (M ≤ 16 rows: one-token decoding): a 16×64 tile instead of
 * 64×64, so most of each workgroup is not idle. bench/kernels/matmul-tiles.ts measured it 4.4–5.1×
 * faster on decode shapes on SwiftShader and within ±13% elsewhere; the summation order over K is
 * the same, so results are bit-identical either way.
 */
export const MATMUL_WG_Y_SHORT = 4;
export const MATMUL_TILE_N = MATMUL_WG_X * 4;

export interface MatmulArgs {
  /** op(A) is (M, K); stored (K, M) when transA. */
  a: GPUBuffer;
  /** op(B) is (K, N); stored (N, K) when transB. */
  b: GPUBuffer;
  /**
   * How b stores its values: f32 (default), bf16 / f16 packed two per u32, or nf4 (4-bit codes,
   * then f32 block absmax: src/ref/nf4-matmul.ts packNf4) — frozen weights.
   */
  bDtype?: WeightDtype;
  /**
   * NF4 B: elements of the whole stored tensor (its absmax words start at word ceil(bCount / 8));
   * default (batch − 1)·strideB + K·N, i.e. K·N for one weight.
   */
  bCount?: number;
  /** NF4 B: elements per absmax block, a power of two ≥ 4 (default NF4_BLOCK_SIZE, 64). */
  bBlockSize?: number;
  /** (batch, M, N) output. */
  c: GPUBuffer;
  M: number;
  N: number;
  K: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  /** Add into c instead of overwriting it (gradient accumulation). */
  accumulate?: boolean;
  /**
   * Start every dot product from c's value (alpha must be 1): a sum over K split into consecutive
   * calls, each K a multiple of MATMUL_TILE_K except the last, gives the bits of one call.
   */
  continueSum?: boolean;
  alpha?: number;
  /** Batch strides in elements; default contiguous. Stride 0 broadcasts an operand. */
  strideA?: number;
  strideB?: number;
  strideC?: number;
  /** Windows of larger matrices (elements): A's row pitch and first element; C's likewise. */
  ldA?: number;
  offsetA?: number;
  ldC?: number;
  offsetC?: number;
}

/** A product's shape and options without its buffers: what picks the pipeline. */
export type MatmulShape = Omit<MatmulArgs, 'a' | 'b' | 'c'>;

/**
 * Whether shaders/matmul_vec4.wgsl can run this product: every vec4 it reads must start at a
 * multiple of 4 floats (see its header). A Llama's products qualify when its sizes and the batch's
 * token count are multiples of 4; the rest take matmul.wgsl.
 */
export function vec4Aligned(
  args: Pick<
    MatmulArgs,
    'M' | 'N' | 'K' | 'transA' | 'transB' | 'ldA' | 'offsetA' | 'strideA' | 'strideB'
  >,
): boolean {
  const { M, N, K, transA = false, transB = false } = args;
  const aligned = (...xs: number[]) => xs.every((x) => x % 4 === 0);
  return (
    aligned(K, args.ldA ?? (transA ? M : K), args.offsetA ?? 0, args.strideA ?? M * K) &&
    aligned(args.strideB ?? K * N) &&
    (!transA || aligned(M)) &&
    (transB || aligned(N))
  );
}

/**
 * Storage of a weight operand: f32, 16-bit values packed two per u32 (src/ref/half.ts), or NF4
 * codes with f32 block absmax (src/ref/nf4.ts; GPU layout: src/ref/nf4-matmul.ts packNf4).
 */
export type WeightDtype = 'f32' | 'bf16' | 'f16' | 'nf4';

/** Configuration of a matmul_gpu*.wgsl variant: threads, rows per thread, k-tile, split-K. */
export interface GpuMatmulConfig {
  kind: 'gpu';
  /** Threads along N (4 columns each) and M (tm rows each): tiles of (tm·wgY) × (4·wgX). */
  wgX: number;
  wgY: number;
  tm: 4 | 8;
  tileK: number;
  /** Split K over workgroups when the output tiles alone would leave the device idle. */
  splitK: boolean;
}

/** Every matmul variant by name; KernelTuning.matmulLarge / matmulSmall hold one of these names. */
export const MATMUL_VARIANTS = {
  staged64: { kind: 'staged' },
  emulation: { kind: 'emulation' },
  reg128x64: { kind: 'gpu', wgX: 16, wgY: 16, tm: 8, tileK: 16, splitK: false },
  reg64x64: { kind: 'gpu', wgX: 16, wgY: 16, tm: 4, tileK: 16, splitK: false },
  reg16x64: { kind: 'gpu', wgX: 16, wgY: 4, tm: 4, tileK: 16, splitK: false },
  splitk16x64: { kind: 'gpu', wgX: 16, wgY: 4, tm: 4, tileK: 16, splitK: true },
} as const satisfies Record<string, { kind: 'staged' | 'emulation' } | GpuMatmulConfig>;

export type MatmulVariant = keyof typeof MATMUL_VARIANTS;

/** Products of at most this many rows (per batch) are "small" (decoding): matmulSmall picks them. */
export const MATMUL_SMALL_M = 16;
/**
 * The GPU path's variants when no sweep has chosen: what the load-time sweep picked on an H100 at
 * Qwen2.5-0.5B's shapes (bench/results/2026-11-27-nvidia-h100.json, timestamp queries: decode
 * splitk16x64 0.46 ms vs staged64 1.05 ms; prefill/training reg64x64 3.87 ms vs staged64 5.37 ms).
 */
export const DEFAULT_MATMUL_LARGE: MatmulVariant = 'reg64x64';
export const DEFAULT_MATMUL_SMALL: MatmulVariant = 'splitk16x64';
/**
 * Split-K aims at this many workgroups (an H100 has 132 SMs, an M-series Max 40 GPU cores: two
 * waves or more on either) and splits K at most MATMUL_MAX_SPLITS ways, each split at least
 * MATMUL_MIN_SPLIT_K deep, its partials at most MATMUL_SPLIT_MAX_BYTES.
 */
export const MATMUL_SPLIT_TARGET_WORKGROUPS = 256;
export const MATMUL_MAX_SPLITS = 16;
export const MATMUL_MIN_SPLIT_K = 64;
export const MATMUL_SPLIT_MAX_BYTES = 16 * 1024 * 1024;
/** The register stash of one operand's k-tile per thread (MAX_LOADS in matmul_gpu_body.wgsl). */
const GPU_MAX_LOADS = 16;

/** The variant a product of `M` rows takes under `tuning` (unknown names throw). */
export function matmulVariantFor(tuning: KernelTuning, M: number): MatmulVariant {
  const small = M <= MATMUL_SMALL_M;
  const named = small ? tuning.matmulSmall : tuning.matmulLarge;
  if (named !== undefined) {
    if (!(named in MATMUL_VARIANTS)) throw new RangeError(`unknown matmul variant '${named}'`);
    return named as MatmulVariant;
  }
  if (tuning.avoidBarriers) return 'emulation';
  return small ? DEFAULT_MATMUL_SMALL : DEFAULT_MATMUL_LARGE;
}

/** Whether matmul_gpu_packed16.wgsl can read this product's B: whole words along B's rows. */
export function gpuPackedAligned(
  args: Pick<MatmulArgs, 'N' | 'K' | 'transB' | 'strideB'>,
): boolean {
  const { N, K, transB = false } = args;
  return (transB ? K : N) % 2 === 0 && (args.strideB ?? K * N) % 2 === 0;
}

/** Whether matmul_gpu_nf4.wgsl can read this product's B: 4-element groups along B's rows. */
export function gpuNf4Aligned(args: Pick<MatmulArgs, 'N' | 'K' | 'transB' | 'strideB'>): boolean {
  const { N, K, transB = false } = args;
  return (transB ? K : N) % 4 === 0 && (args.strideB ?? K * N) % 4 === 0;
}

/** Whether the GPU variants read this product's B as stored (else the staged kernel runs it). */
function gpuReadsB(shape: MatmulShape): boolean {
  const bDtype = shape.bDtype ?? 'f32';
  return bDtype === 'f32' || (bDtype === 'nf4' ? gpuNf4Aligned(shape) : gpuPackedAligned(shape));
}

/**
 * Bytes of the split-K partials a product asks of its run scratch under `tuning` (0: not split):
 * what encode() allocates, for the memory plan (src/model/memory-plan.ts).
 */
export function matmulPartialsBytes(tuning: KernelTuning, shape: MatmulShape): number {
  const { M, N, batch = 1 } = shape;
  const config = MATMUL_VARIANTS[matmulVariantFor(tuning, M)];
  if (config.kind !== 'gpu' || !gpuReadsB(shape) || M === 0 || N === 0) return 0;
  const { splits } = matmulSplit(config, shape);
  return splits > 1 ? 4 * batch * splits * M * N : 0;
}

/** The default absmax block of an NF4 B (bitsandbytes' blocksize 64; src/ref/nf4.ts NF4_BLOCK_SIZE). */
export const MATMUL_NF4_BLOCK_SIZE = 64;

/** Words of an NF4 buffer of `count` elements: the codes (padded to a word), then one per block. */
export function nf4Words(count: number, blockSize = MATMUL_NF4_BLOCK_SIZE): number {
  return Math.ceil(count / 8) + Math.ceil(count / blockSize);
}

/** The uniform values locating an NF4 B's absmax: its first word and log2 of its block size. */
function nf4Uniforms(args: MatmulShape): { absmaxOffset: number; blockShift: number } {
  const { M, N, K, batch = 1 } = args;
  const blockSize = args.bBlockSize ?? MATMUL_NF4_BLOCK_SIZE;
  const blockShift = Math.log2(blockSize);
  if (!Number.isInteger(blockShift) || blockShift < 2) {
    throw new RangeError(`matmul: NF4 block size ${blockSize} is not a power of two ≥ 4`);
  }
  const count = args.bCount ?? (batch - 1) * (args.strideB ?? K * N) + K * N;
  if (M > 0 && N > 0 && K > 0 && count < (batch - 1) * (args.strideB ?? K * N) + K * N) {
    throw new RangeError(`matmul: NF4 B of ${count} elements is smaller than the product reads`);
  }
  return { absmaxOffset: Math.ceil(count / 8), blockShift };
}

/** How a product is computed: which pipeline, its grid, and the split of K (1: none). */
interface MatmulPlan {
  key: PipelineKey;
  grid: [number, number, number];
  /** Which uniform block: matmul.wgsl's or matmul_gpu*.wgsl's (with B's absmax for NF4). */
  gpu: boolean;
  nf4: boolean;
  splits: number;
  kChunk: number;
}

/** Split-K for a GPU variant: how many splits and how deep each is (a multiple of tileK). */
export function matmulSplit(
  config: GpuMatmulConfig,
  shape: Pick<MatmulShape, 'M' | 'N' | 'K' | 'batch' | 'continueSum'>,
): { splits: number; kChunk: number } {
  const { M, N, K, batch = 1 } = shape;
  const none = { splits: 1, kChunk: Math.max(K, 1) };
  if (!config.splitK || shape.continueSum) return none;
  const tiles = ceilDiv(N, 4 * config.wgX) * ceilDiv(M, config.tm * config.wgY) * batch;
  const byDevice = Math.floor(MATMUL_SPLIT_TARGET_WORKGROUPS / Math.max(tiles, 1));
  const byDepth = Math.floor(K / MATMUL_MIN_SPLIT_K);
  const byBytes = Math.floor(MATMUL_SPLIT_MAX_BYTES / (4 * M * N * batch || 1));
  const want = Math.min(MATMUL_MAX_SPLITS, byDevice, byDepth, byBytes);
  if (want < 2 || M > MAX_WORKGROUPS_PER_DIM || batch * want > MAX_WORKGROUPS_PER_DIM) return none;
  const kChunk = ceilDiv(ceilDiv(K, want), config.tileK) * config.tileK;
  const splits = ceilDiv(K, kChunk);
  return splits < 2 ? none : { splits, kChunk };
}

export class MatmulKernel {
  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
  ) {}

  /** Compiles the pipelines encode() takes for a product of this shape. */
  async prepare(shape: MatmulShape): Promise<void> {
    const plan = this.plan(shape);
    const jobs = [this.pipelines.prepare(...plan.key)];
    if (plan.splits > 1) jobs.push(this.pipelines.prepare(...splitReduceKey()));
    await Promise.all(jobs);
  }

  /** The variant this engine's tuning picks for a product of this shape. */
  variantFor(shape: Pick<MatmulShape, 'M'>): MatmulVariant {
    return matmulVariantFor(this.pipelines.tuning, shape.M);
  }

  /** What a product of this shape runs: the variant, the shader file and the K split. */
  describe(shape: MatmulShape): { variant: MatmulVariant; shader: string; splits: number } {
    const plan = this.plan(shape);
    return { variant: this.variantFor(shape), shader: plan.key[0], splits: plan.splits };
  }

  /** Pipeline, grid and split for this shape under the engine's tuning. */
  private plan(shape: MatmulShape): MatmulPlan {
    const variant = this.variantFor(shape);
    const config = MATMUL_VARIANTS[variant];
    if (config.kind === 'gpu' && gpuReadsB(shape)) return this.gpuPlan(config, shape);
    // staged64, emulation, or a packed / NF4 B the GPU kernel cannot read (staged: the same bits).
    return this.legacyPlan(shape, config.kind === 'emulation');
  }

  private gpuPlan(config: GpuMatmulConfig, shape: MatmulShape): MatmulPlan {
    const { M, N, batch = 1, transA = false, transB = false } = shape;
    const bDtype = shape.bDtype ?? 'f32';
    const nf4 = bDtype === 'nf4';
    const packed = bDtype === 'bf16' || bDtype === 'f16';
    const vec4 = bDtype === 'f32' && vec4Aligned(shape);
    const name = nf4
      ? 'matmul_gpu_nf4'
      : packed
        ? 'matmul_gpu_packed16'
        : vec4
          ? 'matmul_gpu_vec4'
          : 'matmul_gpu';
    const threads = config.wgX * config.wgY;
    const aVec = vec4 ? 4 : 1;
    const bVec = vec4 || nf4 ? 4 : packed ? 2 : 1;
    const aLoads = (config.tm * config.wgY * config.tileK) / (aVec * threads);
    const bLoads = (4 * config.wgX * config.tileK) / (bVec * threads);
    for (const loads of [aLoads, bLoads]) {
      if (!Number.isInteger(loads) || loads < 1 || loads > GPU_MAX_LOADS) {
        throw new RangeError(`matmul variant ${JSON.stringify(config)}: ${loads} loads per thread`);
      }
    }
    const constants: Record<string, number | boolean> = {
      WG_X: config.wgX,
      WG_Y: config.wgY,
      TM: config.tm,
      TILE_K: config.tileK,
      TRANS_A: transA,
      TRANS_B: transB,
    };
    if (packed) constants.HALF_BF16 = bDtype === 'bf16';
    const { splits, kChunk } = matmulSplit(config, shape);
    return {
      key: [name, shaderSource(name), constants],
      grid: [ceilDiv(N, 4 * config.wgX), ceilDiv(M, config.tm * config.wgY), batch * splits],
      gpu: true,
      nf4,
      splits,
      kChunk,
    };
  }

  /** matmul.wgsl / matmul_vec4.wgsl / matmul_packed16.wgsl / matmul_nf4.wgsl (no GPU variant). */
  private legacyPlan(shape: MatmulShape, barrierFree: boolean): MatmulPlan {
    const { M, N, K, batch = 1, transA = false, transB = false } = shape;
    const wgY = M <= 4 * MATMUL_WG_Y_SHORT ? MATMUL_WG_Y_SHORT : MATMUL_WG_Y;
    const grid: [number, number, number] = [ceilDiv(N, MATMUL_TILE_N), ceilDiv(M, 4 * wgY), batch];
    const plan = (key: PipelineKey): MatmulPlan => ({
      key,
      grid,
      gpu: false,
      nf4: false,
      splits: 1,
      kChunk: K,
    });
    // The tiled shaders' constants (matmul, matmul_nf4, and matmul_packed16 with HALF_BF16 added).
    const tiled = {
      WG_X: MATMUL_WG_X,
      WG_Y: wgY,
      TILE_K: MATMUL_TILE_K,
      TRANS_A: transA,
      TRANS_B: transB,
      STAGE_TILES: !barrierFree,
    };
    const bDtype = shape.bDtype ?? 'f32';
    if (bDtype === 'nf4') {
      return { ...plan(['matmul_nf4', shaderSource('matmul_nf4'), tiled]), nf4: true };
    }
    if (bDtype !== 'f32') {
      const constants = { ...tiled, HALF_BF16: bDtype === 'bf16' };
      return plan(['matmul_packed16', shaderSource('matmul_packed16'), constants]);
    }
    if (barrierFree && this.pipelines.tuning.vectorLoads && vec4Aligned(shape)) {
      const constants = { WG_X: MATMUL_WG_X, WG_Y: wgY, TRANS_A: transA, TRANS_B: transB };
      return plan(['matmul_vec4', shaderSource('matmul_vec4'), constants]);
    }
    return plan(['matmul', shaderSource('matmul'), tiled]);
  }

  encode(encoder: GPUCommandEncoder, args: MatmulArgs): void {
    const { M, N, K, batch = 1, transA = false } = args;
    const plan = this.plan(args);
    const [gridX, gridY, gridZ] = plan.grid;
    if (
      gridX > MAX_WORKGROUPS_PER_DIM ||
      gridY > MAX_WORKGROUPS_PER_DIM ||
      gridZ > MAX_WORKGROUPS_PER_DIM
    ) {
      throw new RangeError(
        `matmul (${batch}×${M}×${N}×${K}) exceeds the dispatch grid; split the batch`,
      );
    }
    if (args.continueSum && (args.accumulate || (args.alpha ?? 1) !== 1)) {
      throw new RangeError('matmul: continueSum needs alpha 1 and no accumulate');
    }
    const nf4 = plan.nf4 ? nf4Uniforms(args) : null; // checks bBlockSize before compiling
    const pipeline = this.pipelines.get(...plan.key);
    const values = {
      M,
      N,
      K,
      accumulate: args.continueSum ? 2 : args.accumulate ? 1 : 0,
      strideA: args.strideA ?? M * K,
      strideB: args.strideB ?? K * N,
      strideC: args.strideC ?? M * N,
      alpha: args.alpha ?? 1,
      ldA: args.ldA ?? (transA ? M : K),
      ldC: args.ldC ?? N,
      offsetA: args.offsetA ?? 0,
      offsetC: args.offsetC ?? 0,
    };
    const split = { splits: plan.splits, kChunk: plan.kChunk };
    const params = nf4
      ? plan.gpu
        ? MATMUL_GPU_NF4_PARAMS.block(this.device, encoder, { ...values, ...split, ...nf4 })
        : MATMUL_NF4_PARAMS.block(this.device, encoder, { ...values, ...nf4 })
      : plan.gpu
        ? MATMUL_GPU_PARAMS.block(this.device, encoder, { ...values, ...split })
        : MATMUL_PARAMS.block(this.device, encoder, values);
    const empty = M === 0 || N === 0 || batch === 0;
    // Split-K: the first pass writes raw partials (batch·splits, M, N) to scratch, the second
    // adds them in split order into C.
    const partials =
      plan.splits > 1 && !empty
        ? runScratch(this.device, 'matmul.partials', 4 * batch * plan.splits * M * N)
        : null;
    const pass = encoder.beginComputePass({ label: 'matmul' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.a, args.b, partials ?? args.c, params]),
    );
    if (!empty) pass.dispatchWorkgroups(gridX, gridY, gridZ);
    pass.end();
    if (!partials) return;
    const reduce = this.pipelines.get(...splitReduceKey());
    const reduceParams = MATMUL_SPLITK_REDUCE_PARAMS.block(this.device, encoder, {
      M,
      N,
      splits: plan.splits,
      accumulate: values.accumulate,
      alpha: values.alpha,
      ldC: values.ldC,
      offsetC: values.offsetC,
      strideC: values.strideC,
    });
    const second = encoder.beginComputePass({ label: 'matmul_splitk_reduce' });
    second.setPipeline(reduce);
    second.setBindGroup(0, bindBuffers(this.device, reduce, [partials, args.c, reduceParams]));
    second.dispatchWorkgroups(ceilDiv(N, SPLITK_REDUCE_WG), M, batch);
    second.end();
  }
}

function splitReduceKey(): PipelineKey {
  return ['matmul_splitk_reduce', shaderSource('matmul_splitk_reduce'), { WG: SPLITK_REDUCE_WG }];
}
