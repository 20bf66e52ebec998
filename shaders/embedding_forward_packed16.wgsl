// embedding_forward_packed16.wgsl — embedding_forward.wgsl for a table stored as 16-bit values
// (bf16 or f16, HALF_BF16) packed two per u32: x[r, c] = f32(weight[tokens[r], c]).
//
// Shapes (row-major): tokens u32 (R) with R = N·T; weight (V, C) as ceil(V·C / 2) words, element
// e = id·C + c in half (e & 1) of word e >> 1 (include/half_read.wgsl); x (R, C) f32.
// Bindings: 0 tokens (read), 1 weight (read, u32 words), 2 x (read_write), 3 params (uniform).
// Dispatch: one thread per element of x, ceil(R·C / WG) workgroups laid out by splitGrid; the
// flat workgroup index is wid.x + wid.y·nwg.x and the tail is guarded.
// Ids outside the buffer and split tables (row_start, zero_misses): as embedding_forward.wgsl.

#include "half_read.wgsl"

override WG: u32 = 256;

struct Params {
  rows: u32, // R
  channels: u32, // C
  vocab: u32, // V (rows of this weight buffer)
  row_start: u32, // first token id held by `weight` (0 when not split)
  zero_misses: u32, // 1: ids outside the buffer give 0; 0: their rows are not written
}

@group(0) @binding(0) var<storage, read> tokens: array<u32>; // (R)
@group(0) @binding(1) var<storage, read> weight: array<u32>; // (V, C) as packed 16-bit pairs
@group(0) @binding(2) var<storage, read_write> x: array<f32>; // (R, C)
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (i >= params.rows * params.channels) { return; }
  let row = i / params.channels;
  let c = i % params.channels;
  let local = tokens[row] - params.row_start; // wraps above vocab for ids below row_start
  if (local < params.vocab) {
    let e = local * params.channels + c;
    x[i] = widen_half(weight[e >> 1u], (e & 1u) == 1u);
  } else if (params.zero_misses != 0u) {
    x[i] = 0.0;
  }
}
