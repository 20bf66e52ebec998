// adamw.wgsl — one AdamW step on one parameter tensor, PyTorch torch.optim.AdamW semantics:
//
//   g = grad · scale                               (scale from grad_clip.wgsl)
//   p ← p · (1 − lr · weightDecay)                 (decoupled decay, applied first)
//   m ← β1·m + (1 − β1)·g,   v ← β2·v + (1 − β2)·g²
//   p ← p − (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps),   bc_k = 1 − β_k^step
//
// When clip[2] (the finite flag) is 0 the gradient norm was NaN/Inf: param, m and v are left
// untouched (the NaN guard), so one bad batch cannot poison the weights or the moments.
// Shapes: grad, param, m, v (n) f32; clip (4) f32 = [norm, scale, finite, 0].
// Bindings: 0 grad, 1 clip (read); 2 param, 3 m, 4 v (read_write); 5 params (uniform).
// Dispatch: one thread per element, WG per workgroup, ceil(n / WG) workgroups laid out by
// splitGrid (flat workgroup index wid.x + wid.y · nwg.x).

override WG: u32 = 256;

// lr, weight decay and bias corrections arrive pre-combined, computed in f64 on the CPU as PyTorch
// does in Python floats: 1 − β2 from an f32 β2 = 0.999 would be off by 1.3e-5 relative.
struct Params {
  n: u32,
  beta1: f32,
  beta2: f32,
  oneMinusBeta1: f32,
  oneMinusBeta2: f32,
  eps: f32,
  decay: f32, // 1 − lr · weightDecay
  stepSize: f32, // lr / (1 − β1^step)
  biasCorrection2Sqrt: f32, // sqrt(1 − β2^step)
}

@group(0) @binding(0) var<storage, read> grad: array<f32>;
@group(0) @binding(1) var<storage, read> clip: array<f32>;
@group(0) @binding(2) var<storage, read_write> param: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= params.n || clip[2] == 0.0) { return; }
  let g = grad[i] * clip[1];
  let p = param[i] * params.decay;
  let mi = params.beta1 * m[i] + params.oneMinusBeta1 * g;
  let vi = params.beta2 * v[i] + params.oneMinusBeta2 * g * g;
  let denom = sqrt(vi) / params.biasCorrection2Sqrt + params.eps;
  param[i] = p - params.stepSize * mi / denom;
  m[i] = mi;
  v[i] = vi;
}
