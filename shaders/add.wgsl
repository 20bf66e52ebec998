// add.wgsl — in-place scaled add a += alpha · b, f32 (residual adds, gradient sums).
//
// Shapes: a (n), b (n), any layout as long as both match element for element.
// Bindings: 0 b (read), 1 a (read_write), 2 params (uniform).
// Dispatch: one thread per element, ceil(n / WG) workgroups laid out by splitGrid (flat workgroup
// index wid.x + wid.y·nwg.x, tail guarded).

override WG: u32 = 256;

struct Params {
  count: u32, // n
  alpha: f32,
}

@group(0) @binding(0) var<storage, read> b: array<f32>; // (n)
@group(0) @binding(1) var<storage, read_write> a: array<f32>; // (n)
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (i >= params.count) { return; }
  a[i] = a[i] + params.alpha * b[i];
}
