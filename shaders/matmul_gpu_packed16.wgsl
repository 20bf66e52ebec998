// matmul_gpu_packed16.wgsl — matmul_gpu.wgsl with B read from 16-bit weights packed two per u32
// (bf16 or f16, HALF_BF16; include/half_read.wgsl's layout), each word loaded once and both of
// its halves used: a load covers two consecutive elements along B's contiguous dimension (k for
// y = x·Wᵀ, W stored (N, K); n for dX = dY·W, W stored (K, N)). Accumulation in f32.
//
// Same contract, uniforms, dispatch and bits (for B's widened values) as matmul_gpu.wgsl, for
// products whose word pairs line up: K even when B is transposed, N even when not, strideB even
// (src/kernels/matmul.ts gpuPackedAligned checks it; the rest take matmul_packed16.wgsl).
// Bindings: 0 a (read, f32), 1 b (read, u32 words), 2 c (read_write), 3 params (uniform).

#include "half_read.wgsl"

struct Params {
  M: u32,
  N: u32,
  K: u32,
  accumulate: u32, // 1: C += alpha·op(A)·op(B); 2: the sums start from C (see matmul.wgsl)
  strideA: u32,
  strideB: u32,
  strideC: u32,
  alpha: f32,
  ldA: u32,
  ldC: u32,
  offsetA: u32,
  offsetC: u32,
  splits: u32, // split-K: workgroups along K (1: none)
  kChunk: u32, // k per split, a multiple of TILE_K
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<u32>; // packed 16-bit pairs
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const A_VEC: u32 = 1u;
const B_VEC: u32 = 2u;

fn fetch_a(e: u32) -> vec4<f32> { return vec4<f32>(a[e], 0.0, 0.0, 0.0); }

/** Elements e (even) and e + 1 of B: both halves of one word. */
fn fetch_b(e: u32) -> vec4<f32> {
  let word = b[e >> 1u];
  return vec4<f32>(widen_half(word, false), widen_half(word, true), 0.0, 0.0);
}

#include "matmul_gpu_body.wgsl"
