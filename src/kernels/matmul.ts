// TS wrapper of shaders/matmul.wgsl: pipeline specialisation, uniforms and dispatch geometry.
// A B operand stored as 16-bit values packed two per u32 (frozen bf16 / f16 weights, bDtype) takes
// shaders/matmul_packed16.wgsl, which widens it on load and otherwise computes matmul.wgsl's bits.
import { ceilDiv, MAX_WORKGROUPS_PER_DIM } from '../engine/dispatch';
import { bindBuffers, type PipelineCache, type PipelineKey } from '../engine/pipelines';
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
  /** How b stores its values: f32 (default), or bf16 / f16 packed two per u32 (frozen weights). */
  bDtype?: WeightDtype;
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

/** Storage of a weight operand: f32, or 16-bit values packed two per u32 (src/ref/half.ts). */
export type WeightDtype = 'f32' | 'bf16' | 'f16';

export class MatmulKernel {
  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
  ) {}

  /** Compiles the pipeline encode() takes for a product of this shape. */
  prepare(shape: MatmulShape): Promise<void> {
    return this.pipelines.prepare(...this.pipelineKey(shape));
  }

  /** The variant for this shape: vec4 loads when aligned and barrier-free, short tiles for M ≤ 16. */
  private pipelineKey(shape: MatmulShape): PipelineKey {
    const { M, transA = false, transB = false } = shape;
    const wgY = M <= 4 * MATMUL_WG_Y_SHORT ? MATMUL_WG_Y_SHORT : MATMUL_WG_Y;
    const { avoidBarriers, vectorLoads } = this.pipelines.tuning;
    const bDtype = shape.bDtype ?? 'f32';
    if (bDtype !== 'f32') {
      const constants = {
        WG_X: MATMUL_WG_X,
        WG_Y: wgY,
        TILE_K: MATMUL_TILE_K,
        TRANS_A: transA,
        TRANS_B: transB,
        STAGE_TILES: !avoidBarriers,
        HALF_BF16: bDtype === 'bf16',
      };
      return ['matmul_packed16', shaderSource('matmul_packed16'), constants];
    }
    if (avoidBarriers && vectorLoads && vec4Aligned(shape)) {
      const constants = { WG_X: MATMUL_WG_X, WG_Y: wgY, TRANS_A: transA, TRANS_B: transB };
      return ['matmul_vec4', shaderSource('matmul_vec4'), constants];
    }
    const constants = {
      WG_X: MATMUL_WG_X,
      WG_Y: wgY,
      TILE_K: MATMUL_TILE_K,
      TRANS_A: transA,
      TRANS_B: transB,
      STAGE_TILES: !avoidBarriers,
    };
    return ['matmul', shaderSource('matmul'), constants];
  }

  encode(encoder: GPUCommandEncoder, args: MatmulArgs): void {
    const { M, N, K, batch = 1, transA = false } = args;
    const wgY = M <= 4 * MATMUL_WG_Y_SHORT ? MATMUL_WG_Y_SHORT : MATMUL_WG_Y;
    const gridX = ceilDiv(N, MATMUL_TILE_N);
    const gridY = ceilDiv(M, 4 * wgY);
    if (
      gridX > MAX_WORKGROUPS_PER_DIM ||
      gridY > MAX_WORKGROUPS_PER_DIM ||
      batch > MAX_WORKGROUPS_PER_DIM
    ) {
      throw new RangeError(
        `matmul (${batch}×${M}×${N}×${K}) exceeds the dispatch grid; split the batch`,
      );
    }
    if (args.continueSum && (args.accumulate || (args.alpha ?? 1) !== 1)) {
      throw new RangeError('matmul: continueSum needs alpha 1 and no accumulate');
    }
    const pipeline = this.pipelines.get(...this.pipelineKey(args));
    const params = MATMUL_PARAMS.create(this.device, {
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
    });
    const pass = encoder.beginComputePass({ label: 'matmul' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindBuffers(this.device, pipeline, [args.a, args.b, args.c, params]));
    if (M > 0 && N > 0 && batch > 0) pass.dispatchWorkgroups(gridX, gridY, batch);
    pass.end();
  }
}
