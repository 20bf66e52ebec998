// rmsnorm_backward_weight.wgsl — RMSNorm weight gradient, f32:
//   dw[c] (+)= Σ_r dy[r, c] · (x[r, c] · rstd[r])      (rows summed in ascending r: deterministic)
//
// Shapes (row-major): dy (R, C); x (R, C); rstd (R) from rmsnorm_forward; dw (C);
// partials (parts, C) (main_partial / main_combine only).
// Bindings: 0 dy, 1 x, 2 rstd (read), 3 dw (read_write), 4 params (uniform), 5 partials
// (read_write; main reads 0–4, main_partial 0, 1, 2, 4, 5 and main_combine 3, 4, 5).
// Dispatch (main): one thread per channel (adjacent threads read adjacent columns of each row),
// ceil(C / WG) workgroups laid out by splitGrid (flat workgroup index wid.x + wid.y·nwg.x, tail
// guarded). `accumulate` adds into dw for gradient accumulation across micro-batches.
// Many rows (GPU path: a training batch's R = N·T rows over C = 896 channels is 896 threads, a few
// dozen workgroups, each looping over thousands of rows): main_partial runs one thread per
// (part, channel), ceil(parts · C / WG) workgroups, summing rows [p · chunk, (p + 1) · chunk) in
// ascending order into partials[p, c]; main_combine, one thread per channel, adds the parts in
// ascending p into dw. Deterministic; agrees with main to f32 rounding (other partial sums).
// No f16 variant: the sum runs over thousands of rows, which 11-bit partial sums cannot hold.

override WG: u32 = 256;

struct Params {
  rows: u32, // R
  channels: u32, // C
  accumulate: u32, // 1: dw += Σ, 0: dw = Σ
  chunk: u32, // rows per part (main_partial)
  parts: u32, // ceil(R / chunk)
}

@group(0) @binding(0) var<storage, read> dy: array<f32>; // (R, C)
@group(0) @binding(1) var<storage, read> x: array<f32>; // (R, C)
@group(0) @binding(2) var<storage, read> rstd: array<f32>; // (R)
@group(0) @binding(3) var<storage, read_write> dw: array<f32>; // (C)
@group(0) @binding(4) var<uniform> params: Params;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>; // (parts, C)

// Σ over rows [first, end) of channel c, ascending.
fn column_sum(c: u32, first: u32, end: u32) -> f32 {
  let C = params.channels;
  var sum = 0.0;
  for (var r = first; r < end; r = r + 1u) {
    let index = r * C + c;
    sum = sum + dy[index] * (x[index] * rstd[r]);
  }
  return sum;
}

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let c = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (c >= params.channels) { return; }
  var sum = column_sum(c, 0u, params.rows);
  if (params.accumulate != 0u) { sum = dw[c] + sum; }
  dw[c] = sum;
}

@compute @workgroup_size(WG)
fn main_partial(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
  let C = params.channels;
  if (i >= params.parts * C) { return; }
  let p = i / C;
  let c = i - p * C;
  let first = p * params.chunk;
  partials[i] = column_sum(c, first, min(first + params.chunk, params.rows));
}

@compute @workgroup_size(WG)
fn main_combine(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let c = (wid.x + wid.y * nwg.x) * WG + lid.x;
  let C = params.channels;
  if (c >= C) { return; }
  var sum = 0.0;
  for (var p = 0u; p < params.parts; p = p + 1u) { sum = sum + partials[p * C + c]; }
  if (params.accumulate != 0u) { sum = dw[c] + sum; }
  dw[c] = sum;
}
