// embedding_forward.wgsl — token embedding lookup: x[r, c] = weight[tokens[r], c], f32.
//
// Shapes (row-major): tokens u32 (R) with R = N·T; weight (V, C); x (R, C).
// Bindings: 0 tokens (read), 1 weight (read), 2 x (read_write), 3 params (uniform).
// Dispatch: one thread per element of x, ceil(R·C / WG) workgroups laid out by splitGrid; the
// flat workgroup index is wid.x + wid.y·nwg.x and the tail is guarded.
// A token id ≥ V gives a zero row rather than reading past the weight buffer.
// Split tables (row chunks of a vocabulary too big for one binding): `weight` holds ids
// row_start … row_start + V − 1; rows of other ids are written 0 when zero_misses, else left alone,
// so the first chunk's pass writes every row and later chunks overwrite only their own ids.

override WG: u32 = 256;

struct Params {
  rows: u32, // R
  channels: u32, // C
  vocab: u32, // V (rows of this weight buffer)
  row_start: u32, // first token id held by `weight` (0 when not split)
  zero_misses: u32, // 1: ids outside the buffer give 0; 0: their rows are not written
}

@group(0) @binding(0) var<storage, read> tokens: array<u32>; // (R)
@group(0) @binding(1) var<storage, read> weight: array<f32>; // (V, C)
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
    x[i] = weight[local * params.channels + c];
  } else if (params.zero_misses != 0u) {
    x[i] = 0.0;
  }
}
