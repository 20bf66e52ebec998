// rmsnorm_backward_weight.wgsl — RMSNorm weight gradient, f32:
//   dw[c] (+)= Σ_r dy[r, c] · (x[r, c] · rstd[r])      (rows summed in ascending r: deterministic)
//
// Shapes (row-major): dy (R, C); x (R, C); rstd (R) from rmsnorm_forward; dw (C).
// Bindings: 0 dy, 1 x, 2 rstd (read), 3 dw (read_write), 4 params (uniform).
// Dispatch: one thread per channel (adjacent threads read adjacent columns of each row),
// ceil(C / WG) workgroups laid out by splitGrid (flat workgroup index wid.x + wid.y·nwg.x, tail
// guarded). `accumulate` adds into dw for gradient accumulation across micro-batches.

override WG: u32 = 256;

struct Params {
  rows: u32, // R
  channels: u32, // C
  accumulate: u32, // 1: dw += Σ, 0: dw = Σ
}

@group(0) @binding(0) var<storage, read> dy: array<f32>; // (R, C)
@group(0) @binding(1) var<storage, read> x: array<f32>; // (R, C)
@group(0) @binding(2) var<storage, read> rstd: array<f32>; // (R)
@group(0) @binding(3) var<storage, read_write> dw: array<f32>; // (C)
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let c = (wid.x + wid.y * nwg.x) * WG + lid.x;
  let C = params.channels;
  if (c >= C) { return; }
  var sum = 0.0;
  for (var r = 0u; r < params.rows; r = r + 1u) {
    let index = r * C + c;
    sum = sum + dy[index] * (x[index] * rstd[r]);
  }
  if (params.accumulate != 0u) { sum = dw[c] + sum; }
  dw[c] = sum;
}
