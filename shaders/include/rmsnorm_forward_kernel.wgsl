// rmsnorm_forward_kernel.wgsl — the body of rmsnorm_forward.wgsl (what it computes, bindings,
// dispatch: that file's header). Included by rmsnorm_forward.wgsl after workgroup_sum.wgsl
// (tree) and by rmsnorm_forward_subgroups.wgsl after subgroup_sum.wgsl (subgroup operations):
// either defines workgroup_sum(thread, value).

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
