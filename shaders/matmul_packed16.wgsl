// matmul_packed16.wgsl — matmul.wgsl with B read from 16-bit weights packed two per u32 (bf16 or
// f16, HALF_BF16), widened to f32 on load; accumulation in f32.
//
// What it is for: frozen base weights stored at half the bytes (config dtype, src/model/parameters.ts).
// B is always such a weight: y = x·Wᵀ (TRANS_B, W stored (N, K)), dX = dY·W (W stored (K, N)), the
// LM head and its input gradient. Element e of B is half (e & 1) of word e >> 1 (include/half_read).
// Same contract, uniforms (struct Params), dispatch, tiles and k order as matmul.wgsl (see its
// header), so with B's widened values it gives matmul.wgsl's bits (tests/kernels/matmul-packed16 checks).
// Bindings: 0 a (read, f32), 1 b (read, u32 words), 2 c (read_write, f32), 3 params (uniform).
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) with TILE_M = 4·WG_Y, TILE_N = 4·WG_X.
// Why its own file: a binding has one element type, and matmul_vec4.wgsl's vec4 reads do not
// apply to 16-bit pairs. strideB counts elements.

#include "half_read.wgsl"

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
@group(0) @binding(1) var<storage, read> b: array<u32>; // packed 16-bit pairs
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

fn b_at(base: u32, k: u32, col: u32) -> f32 {
  var e = base + k * params.N + col;
  if (TRANS_B) { e = base + col * params.K + k; }
  return widen_half(b[e >> 1u], (e & 1u) == 1u);
}

#include "matmul_tiles.wgsl"
