// swiglu_backward.wgsl — gradients of h = silu(gate) · up (swiglu_forward), f32:
//   dup   = dh · silu(g)
//   dgate = dh · up · sigmoid(g) · (1 + g · (1 − sigmoid(g)))      (d silu / dg)
//
// Shapes (row-major): dh (R, I); gate (R, I); up (R, I); dgate (R, I); dup (R, I).
// Bindings: 0 dh, 1 gate, 2 up (read), 3 dgate, 4 dup (read_write), 5 params (uniform).
// Dispatch: one thread per element, ceil(R·I / WG) workgroups laid out by splitGrid (flat
// workgroup index wid.x + wid.y·nwg.x, tail guarded).

override WG: u32 = 256;

struct Params {
  count: u32, // R · I
}

@group(0) @binding(0) var<storage, read> dh: array<f32>; // (R, I)
@group(0) @binding(1) var<storage, read> gate: array<f32>; // (R, I)
@group(0) @binding(2) var<storage, read> up: array<f32>; // (R, I)
@group(0) @binding(3) var<storage, read_write> dgate: array<f32>; // (R, I)
@group(0) @binding(4) var<storage, read_write> dup: array<f32>; // (R, I)
@group(0) @binding(5) var<uniform> params: Params;

// exp of a non-positive argument only: no overflow for any finite g.
fn sigmoid(g: f32) -> f32 {
  if (g >= 0.0) { return 1.0 / (1.0 + exp(-g)); }
  let e = exp(g);
  return e / (1.0 + e);
}

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (i >= params.count) { return; }
  let g = gate[i];
  let s = sigmoid(g);
  let d = dh[i];
  dup[i] = d * (g * s);
  dgate[i] = d * up[i] * s * (1.0 + g * (1.0 - s));
}
