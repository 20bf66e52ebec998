// swiglu_forward.wgsl — SwiGLU gate of the Llama MLP, f32:  h = silu(gate) · up,
// silu(g) = g · sigmoid(g)  (HF: down_proj(act_fn(gate_proj(x)) * up_proj(x))).
//
// Shapes (row-major): gate (R, I); up (R, I); h (R, I).
// Bindings: 0 gate, 1 up (read), 2 h (read_write), 3 params (uniform).
// Dispatch: one thread per element, ceil(R·I / WG) workgroups laid out by splitGrid (flat
// workgroup index wid.x + wid.y·nwg.x, tail guarded).

override WG: u32 = 256;

struct Params {
  count: u32, // R · I
}

@group(0) @binding(0) var<storage, read> gate: array<f32>; // (R, I)
@group(0) @binding(1) var<storage, read> up: array<f32>; // (R, I)
@group(0) @binding(2) var<storage, read_write> h: array<f32>; // (R, I)
@group(0) @binding(3) var<uniform> params: Params;

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
  h[i] = g * sigmoid(g) * up[i];
}
