// matmul_nf4.wgsl — matmul.wgsl with B read from an NF4 weight (include/nf4_read.wgsl: 4-bit
// codes and an f32 absmax per block, one u32 buffer), dequantised in registers on load;
// accumulation in f32.
//
// What it is for: frozen base weights of a QLoRA-style run (config dtype 'nf4', issue #37). B is
// always such a weight: y = x·Wᵀ (TRANS_B, W stored (N, K)) and dX = dY·W (W stored (K, N)); the
// blocks run along the flat row-major index of the stored W (b_base + its element index).
// Same contract, dispatch, tiles and k order as matmul.wgsl (see its header), so with B's
// dequantised values it gives matmul.wgsl's bits (tests/kernels/nf4-kernels checks), for any shape.
// This is the emulation path (STAGE_TILES false, KernelTuning.avoidBarriers) and the staged
// fallback of matmul_gpu_nf4.wgsl for products its 4-element loads cannot read.
// Uniforms: matmul.wgsl's plus absmaxOffset (the word where the absmax values start,
// ceil(count / 8)) and blockShift (log2 of the block size, 6 for bitsandbytes' 64). strideB
// counts elements.
// Bindings: 0 a (read, f32), 1 b (read, u32 words: codes then absmax), 2 c (read_write, f32),
// 3 params (uniform).
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch) with TILE_M = 4·WG_Y, TILE_N = 4·WG_X.
// Why its own file: a binding has one element type, and B's read (with its absmax) differs.

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
  accumulate: u32, // 1: C += alpha·op(A)·op(B); 2: the sums start from C (see matmul.wgsl)
  strideA: u32,
  strideB: u32,
  strideC: u32,
  alpha: f32,
  ldA: u32,
  ldC: u32,
  offsetA: u32,
  offsetC: u32,
  absmaxOffset: u32, // word of b where the f32 absmax values start: ceil(count / 8)
  blockShift: u32, // log2(elements per absmax block)
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<u32>; // NF4 codes, then absmax f32 bits
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

#include "nf4_read.wgsl"

fn b_at(base: u32, k: u32, col: u32) -> f32 {
  var e = base + k * params.N + col;
  if (TRANS_B) { e = base + col * params.K + k; }
  return nf4_at(e);
}

#include "matmul_tiles.wgsl"
