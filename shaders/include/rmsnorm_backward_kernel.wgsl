// rmsnorm_backward_kernel.wgsl — the body of rmsnorm_backward.wgsl (what it computes, bindings,
// dispatch: that file's header). Included by rmsnorm_backward.wgsl after workgroup_sum.wgsl
// (tree) and by rmsnorm_backward_subgroups.wgsl after subgroup_sum.wgsl (subgroup operations):
// either defines workgroup_sum(thread, value).

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
