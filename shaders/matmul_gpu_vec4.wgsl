// matmul_gpu_vec4.wgsl — matmul_gpu.wgsl reading both operands four floats per load (vec4
// bindings) along their contiguous dimension: k for A (M, K) and B (N, K) of y = x·Wᵀ, m for a
// transposed A, n for an untransposed B.
//
// Same contract, uniforms, dispatch and bits as matmul_gpu.wgsl, restricted to what vec4 reads
// allow (src/kernels/matmul.ts gpuVec4Aligned checks it): K, ldA, offsetA, strideA and strideB
// multiples of 4, M too when A is transposed, N too when B is not. Then every vec4 a thread loads
// is wholly inside or wholly outside the matrix, so the edge tiles check one index per load.
// Why its own file: a binding has one element type, and vec4 arrays would drop the last 1–3
// floats of buffers whose length is not a multiple of 4.
// Bindings: 0 a (read, vec4), 1 b (read, vec4), 2 c (read_write), 3 params (uniform).

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

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const A_VEC: u32 = 4u;
const B_VEC: u32 = 4u;

fn fetch_a(e: u32) -> vec4<f32> { return a[e >> 2u]; }
fn fetch_b(e: u32) -> vec4<f32> { return b[e >> 2u]; }

#include "matmul_gpu_body.wgsl"
