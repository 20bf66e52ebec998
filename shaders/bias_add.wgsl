// bias_add.wgsl — broadcast bias add in place, f32: y[r, c] += bias[c] (Qwen2's q/k/v biases,
// after the projection matmul).
//
// Shapes (row-major): bias (Cout); y (R, Cout).
// Bindings: 0 bias (read), 1 y (read_write), 2 params (uniform).
// Dispatch: one thread per element of y, ceil(R·Cout / WG) workgroups laid out by splitGrid (flat
// workgroup index wid.x + wid.y·nwg.x, tail guarded).

override WG: u32 = 256;

struct Params {
  rows: u32, // R
  channels: u32, // Cout
}

@group(0) @binding(0) var<storage, read> bias: array<f32>; // (Cout)
@group(0) @binding(1) var<storage, read_write> y: array<f32>; // (R, Cout)
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (i >= params.rows * params.channels) { return; }
  y[i] = y[i] + bias[i % params.channels];
}
