// matmul.wgsl — batched C = alpha · op(A) · op(B) (+ C when accumulating), f32.
//
// Shapes (row-major, per batch b):
//   op(A) is (M, K): A stored (M, K), or (K, M) when TRANS_A.
//   op(B) is (K, N): B stored (K, N), or (N, K) when TRANS_B   (y = x·Wᵀ with HF weights: TRANS_B).
//   C is (M, N). Batch b reads A + b·strideA, B + b·strideB, writes C + b·strideC (in elements).
//   Windows of larger matrices: A's rows are ldA elements apart (ldA = K, or M when TRANS_A, for a
//   dense A) and start at offsetA; C's rows are ldC apart (N when dense) and start at offsetC. The
//   split LM head uses them to read / write a block of vocabulary columns of (rows, V) logits.
//   accumulate 2 ("continue"): the dot products start from C's value instead of 0, so a sum over
//   K split into consecutive calls (each K a multiple of TILE_K) gives the bits of one call; alpha 1.
// Bindings: 0 a (read), 1 b (read), 2 c (read_write), 3 params (uniform).
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) with TILE_M = 4·WG_Y, TILE_N = 4·WG_X.
//
// Register tiling: each thread owns a 4×4 block of C held as four vec4 rows; the A and B tiles
// are staged in workgroup memory as vec4 (4 consecutive rows of A / columns of B), so the inner
// loop is two vec4 reads and four vec4 FMAs per k. Global loads are gathered element by element
// because shapes are arbitrary (primes included) and either operand may be transposed; every
// load and store is bounds-guarded.
// STAGE_TILES = false (barrier-free variant, KernelTuning.avoidBarriers): same threads, same 4×4
// blocks, same k order (so the same bits), but each thread loads its A column and B row slices
// straight from storage instead of staging shared tiles between barriers. On SwiftShader this ran
// 1.1–2× faster at the bundled model's shapes; real GPUs keep the staged tiles.

override WG_X: u32 = 16;
override WG_Y: u32 = 16;
override TILE_K: u32 = 16;
override TRANS_A: bool = false;
override TRANS_B: bool = false;
override STAGE_TILES: bool = true;

override TILE_M_VEC: u32 = WG_Y; // tile rows / 4 (derived; never set from TS)
override TILE_N_VEC: u32 = WG_X; // tile cols / 4 (derived; never set from TS)

struct Params {
  M: u32,
  N: u32,
  K: u32,
  accumulate: u32, // 1: C += alpha·op(A)·op(B); 2: the sums start from C (see above)
  strideA: u32,
  strideB: u32,
  strideC: u32,
  alpha: f32,
  ldA: u32,
  ldC: u32,
  offsetA: u32,
  offsetC: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

fn b_at(base: u32, k: u32, col: u32) -> f32 {
  if (TRANS_B) { return b[base + col * params.K + k]; }
  return b[base + k * params.N + col];
}

#include "matmul_tiles.wgsl"
