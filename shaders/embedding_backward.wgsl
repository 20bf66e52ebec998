// embedding_backward.wgsl — embedding weight gradient without atomics:
// dW[id, c] (+)= Σ_{r : tokens[r] = id} dX[r, c], summed in ascending r for every id.
//
// The CPU knows the tokens, so src/kernels/embedding.ts builds a token index (buildTokenIndex):
// the U distinct ids, CSR offsets into `order`, and `order` = the row indices grouped by id,
// ascending within each id. One thread per (distinct id, channel) then owns one element of dW,
// so no two threads write the same address and the summation order is fixed (same bits every run).
// Rows of dW whose id does not occur are not touched: without accumulate the wrapper clears dW first.
// Tied embeddings: the LM-head gradient goes into the same dW through matmul with accumulate;
// nothing here depends on that.
//
// Shapes (row-major): dx (R, C); unique_ids u32 (U); offsets u32 (U + 1); order u32 (R); dw (V, C).
// Bindings: 0 dx, 1 unique_ids, 2 offsets, 3 order (read), 4 dw (read_write), 5 params (uniform).
// Dispatch: one thread per (u, c), ceil(U·C / WG) workgroups laid out by splitGrid (flat workgroup
// index wid.x + wid.y·nwg.x, tail guarded).

override WG: u32 = 256;

struct Params {
  unique: u32, // U
  channels: u32, // C
  accumulate: u32, // 1: dw += Σ, 0: dw = Σ
}

@group(0) @binding(0) var<storage, read> dx: array<f32>; // (R, C)
@group(0) @binding(1) var<storage, read> unique_ids: array<u32>; // (U)
@group(0) @binding(2) var<storage, read> offsets: array<u32>; // (U + 1)
@group(0) @binding(3) var<storage, read> order: array<u32>; // (R)
@group(0) @binding(4) var<storage, read_write> dw: array<f32>; // (V, C)
@group(0) @binding(5) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (i >= params.unique * params.channels) { return; }
  let u = i / params.channels;
  let c = i % params.channels;
  var sum = 0.0;
  for (var p = offsets[u]; p < offsets[u + 1u]; p = p + 1u) {
    sum = sum + dx[order[p] * params.channels + c];
  }
  let index = unique_ids[u] * params.channels + c;
  if (params.accumulate != 0u) { sum = dw[index] + sum; }
  dw[index] = sum;
}
