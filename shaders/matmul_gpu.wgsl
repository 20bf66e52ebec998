// matmul_gpu.wgsl — batched C = alpha · op(A) · op(B) (+ C), f32, the GPU-oriented variant of
// matmul.wgsl: coalesced loads, TM×4 register blocks, double-buffered tiles, split-K.
//
// Same contract as matmul.wgsl (see its header: shapes, TRANS_A / TRANS_B, strides, ldA / ldC /
// offsetA / offsetC windows, batch, alpha, accumulate 1 and 2), for any shape (primes included):
// this file reads one f32 per load. Two more uniforms: splits and kChunk (split-K, see
// include/matmul_gpu_body.wgsl); splits = 1 writes C as matmul.wgsl does (same bits: each output
// is one fma chain over k in order), splits > 1 writes dense raw partials (batch·splits, M, N) to c
// for matmul_splitk_reduce.wgsl (accumulate 2 is then not allowed; the wrapper never splits it).
// Bindings: 0 a (read), 1 b (read), 2 c (read_write: C, or the partials), 3 params (uniform).
// Dispatch: (ceil(N / BN), ceil(M / BM), batch · splits), BM = TM·WG_Y, BN = 4·WG_X.
// src/kernels/matmul.ts picks the variant (KernelTuning.matmulLarge / matmulSmall).

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
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const A_VEC: u32 = 1u;
const B_VEC: u32 = 1u;

fn fetch_a(e: u32) -> vec4<f32> { return vec4<f32>(a[e], 0.0, 0.0, 0.0); }
fn fetch_b(e: u32) -> vec4<f32> { return vec4<f32>(b[e], 0.0, 0.0, 0.0); }

#include "matmul_gpu_body.wgsl"
