// rmsnorm_forward.wgsl — RMSNorm over rows as Llama/Qwen2 (HF LlamaRMSNorm), f32:
//   rstd[r] = 1 / sqrt(mean_c(x[r, c]²) + eps);   y[r, c] = (x[r, c] · rstd[r]) · w[c].
// rstd is kept for the backward pass (rmsnorm_backward, rmsnorm_backward_weight).
//
// Shapes (row-major): x (R, C); w (C); y (R, C); rstd (R).
// Bindings: 0 x, 1 w (read), 2 y, 3 rstd (read_write), 4 params (uniform).
// Dispatch: one workgroup of WG threads per row (any C: threads stride over the row), R workgroups
// laid out by splitGrid (row = wid.x + wid.y·nwg.x, tail rows return before any barrier; the row
// index is workgroup-uniform). WG must be a power of two: the sum of squares is a fixed-order tree
// reduction in workgroup memory, so the result is deterministic.
// ROW_PER_THREAD (barrier-free variant, KernelTuning.avoidBarriers): one invocation per row, WG rows
// per workgroup, ceil(R / WG) workgroups laid out by splitGrid; the sum runs in column order.

override WG: u32 = 256;
override ROW_PER_THREAD: bool = false;

struct Params {
  rows: u32, // R
  channels: u32, // C
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>; // (R, C)
@group(0) @binding(1) var<storage, read> w: array<f32>; // (C)
@group(0) @binding(2) var<storage, read_write> y: array<f32>; // (R, C)
@group(0) @binding(3) var<storage, read_write> rstd: array<f32>; // (R)
@group(0) @binding(4) var<uniform> params: Params;

#include "workgroup_sum.wgsl"

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  if (ROW_PER_THREAD) {
    normalize_row((wid.x + wid.y * nwg.x) * WG + lid.x);
    return;
  }
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.rows) { return; }
  let C = params.channels;
  let base = row * C;

  var sum = 0.0;
  for (var c = lid.x; c < C; c = c + WG) {
    let v = x[base + c];
    sum = sum + v * v;
  }
  let r = 1.0 / sqrt(workgroup_sum(lid.x, sum) / f32(C) + params.eps);

  for (var c = lid.x; c < C; c = c + WG) {
    y[base + c] = (x[base + c] * r) * w[c];
  }
  if (lid.x == 0u) { rstd[row] = r; }
}

fn normalize_row(row: u32) {
  if (row >= params.rows) { return; }
  let C = params.channels;
  let base = row * C;
  var sum = 0.0;
  for (var c = 0u; c < C; c = c + 1u) {
    let v = x[base + c];
    sum = sum + v * v;
  }
  let r = 1.0 / sqrt(sum / f32(C) + params.eps);
  for (var c = 0u; c < C; c = c + 1u) {
    y[base + c] = (x[base + c] * r) * w[c];
  }
  rstd[row] = r;
}
