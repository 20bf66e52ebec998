// grad_clip.wgsl — global gradient norm, clip scale and finite flag from sumsq.wgsl's partials,
// with no CPU readback (adamw.wgsl reads the result directly).
//
//   norm = sqrt(Σ partials),  scale = min(1, maxNorm / (norm + 1e-6))  (1 when maxNorm ≤ 0),
//   finite = 1 when norm is finite else 0 (scale 0 then; adamw skips the step)
//
// Shapes: partials (count) f32, out (4) f32 = [norm, scale, finite, 0].
// Bindings: 0 partials (read), 1 out (read_write), 2 params (uniform).
// Dispatch: a single workgroup of WG threads; thread k sums partials k, k + WG, … in order, then a
// fixed tree, so the norm is bit-reproducible.

override WG: u32 = 256; // a power of two (tree reduction)

struct Params {
  count: u32,
  maxNorm: f32,
}

@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

#include "workgroup_sum.wgsl"

// Tested on the bits: compilers may assume floats are finite and fold `x != x` away.
fn is_finite(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
  var acc = 0.0;
  for (var i = lid; i < params.count; i = i + WG) { acc = acc + partials[i]; }
  let total = workgroup_sum(lid, acc);
  if (lid == 0u) {
    let norm = sqrt(total);
    let finite = is_finite(norm);
    var scale = 1.0;
    if (params.maxNorm > 0.0) { scale = min(1.0, params.maxNorm / (norm + 1e-6)); }
    out[0] = norm;
    out[1] = select(0.0, scale, finite);
    out[2] = select(0.0, 1.0, finite);
    out[3] = 0.0;
  }
}
