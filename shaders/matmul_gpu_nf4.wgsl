// matmul_gpu_nf4.wgsl — matmul_gpu.wgsl with B read from an NF4 weight (include/nf4_read.wgsl:
// 4-bit codes and an f32 absmax per block, one u32 buffer), four elements per load along B's
// contiguous dimension (k for y = x·Wᵀ, W stored (N, K); n for dX = dY·W, W stored (K, N)): half
// a code word and one absmax read per load, dequantised in registers on their way into the
// workgroup tile. Accumulation in f32.
//
// Same contract, dispatch and bits (for B's dequantised values) as matmul_gpu.wgsl, for products
// whose 4-element groups line up: K a multiple of 4 when B is transposed, N when not, strideB too
// (src/kernels/matmul.ts gpuNf4Aligned checks it; the rest take matmul_nf4.wgsl, staged). A group
// never straddles an absmax block (blocks are powers of two ≥ 4 long, groups start at multiples
// of 4). Uniforms: matmul_gpu.wgsl's plus absmaxOffset and blockShift (see matmul_nf4.wgsl).
// Bindings: 0 a (read, f32), 1 b (read, u32 words: codes then absmax), 2 c (read_write),
// 3 params (uniform).
// Why its own file: a binding has one element type, and B's loads differ.

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
  absmaxOffset: u32, // word of b where the f32 absmax values start: ceil(count / 8)
  blockShift: u32, // log2(elements per absmax block)
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<u32>; // NF4 codes, then absmax f32 bits
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

#include "nf4_read.wgsl"

const A_VEC: u32 = 1u;
const B_VEC: u32 = 4u;

fn fetch_a(e: u32) -> vec4<f32> { return vec4<f32>(a[e], 0.0, 0.0, 0.0); }

/** Elements e … e + 3 of B (e a multiple of 4), dequantised. */
fn fetch_b(e: u32) -> vec4<f32> { return nf4_at4(e); }

#include "matmul_gpu_body.wgsl"
