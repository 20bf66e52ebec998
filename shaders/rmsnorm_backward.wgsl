// rmsnorm_backward.wgsl — input gradient of y = x · rstd · w (rmsnorm_forward), f32:
//   s[r] = Σ_c dy[r, c] · w[c] · x[r, c]
//   dx[r, c] (+)= rstd[r] · (w[c] · dy[r, c] − x[r, c] · rstd[r]² · s[r] / C)
// (d rstd / d x_c = −rstd³ · x_c / C). `accumulate` adds into dx, so the residual-stream gradient
// can take this term directly. The weight gradient is rmsnorm_backward_weight.wgsl.
//
// Shapes (row-major): dy (R, C); x (R, C); w (C); rstd (R) from the forward; dx (R, C).
// Bindings: 0 dy, 1 x, 2 w, 3 rstd (read), 4 dx (read_write), 5 params (uniform).
// Dispatch: one workgroup of WG threads per row, R workgroups laid out by splitGrid (row =
// wid.x + wid.y·nwg.x, workgroup-uniform tail guard). WG must be a power of two: s is a fixed-order
// tree reduction in workgroup memory (deterministic).

override WG: u32 = 256;
override ROW_PER_THREAD: bool = false; // barrier-free variant: one invocation per row (as rmsnorm_forward)

struct Params {
  rows: u32, // R
  channels: u32, // C
  accumulate: u32, // 1: dx += …, 0: dx = …
}

@group(0) @binding(0) var<storage, read> dy: array<f32>; // (R, C)
@group(0) @binding(1) var<storage, read> x: array<f32>; // (R, C)
@group(0) @binding(2) var<storage, read> w: array<f32>; // (C)
@group(0) @binding(3) var<storage, read> rstd: array<f32>; // (R)
@group(0) @binding(4) var<storage, read_write> dx: array<f32>; // (R, C)
@group(0) @binding(5) var<uniform> params: Params;

#include "workgroup_sum.wgsl"

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  if (ROW_PER_THREAD) {
    backward_row((wid.x + wid.y * nwg.x) * WG + lid.x);
    return;
  }
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.rows) { return; }
  let C = params.channels;
  let base = row * C;

  var sum = 0.0;
  for (var c = lid.x; c < C; c = c + WG) {
    sum = sum + dy[base + c] * w[c] * x[base + c];
  }
  let r = rstd[row];
  let k = r * r * workgroup_sum(lid.x, sum) / f32(C);

  for (var c = lid.x; c < C; c = c + WG) {
    let index = base + c;
    var value = r * (w[c] * dy[index] - x[index] * k);
    if (params.accumulate != 0u) { value = dx[index] + value; }
    dx[index] = value;
  }
}

fn backward_row(row: u32) {
  if (row >= params.rows) { return; }
  let C = params.channels;
  let base = row * C;
  var sum = 0.0;
  for (var c = 0u; c < C; c = c + 1u) {
    sum = sum + dy[base + c] * w[c] * x[base + c];
  }
  let r = rstd[row];
  let k = r * r * sum / f32(C);
  for (var c = 0u; c < C; c = c + 1u) {
    let index = base + c;
    var value = r * (w[c] * dy[index] - x[index] * k);
    if (params.accumulate != 0u) { value = dx[index] + value; }
    dx[index] = value;
  }
}
