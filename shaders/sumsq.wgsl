// sumsq.wgsl — sum of squares of one gradient tensor, written into its block of a partials buffer
// (the first half of global-norm gradient clipping; grad_clip.wgsl finishes it).
//
//   partials[slot · P + w] = Σ_{e in chunk w} x[e]²,  chunk w = [w·chunk, min((w+1)·chunk, n))
//
// Shapes: x (n) f32; partials (numTensors · P) f32, P = PARTIALS workgroups per tensor.
// Bindings: 0 x (read), 1 partials (read_write), 2 params (uniform).
// Dispatch: up to P workgroups of WG threads (one dispatch per parameter tensor, P ≤ 65535 so no
// grid split); workgroup w owns a contiguous chunk, its threads stride through it, then a fixed
// tree reduction. The wrapper dispatches fewer workgroups for small tensors and clears the rest of
// the block first; empty chunks write 0; so every slot is defined and the result bit-reproducible. NaN/Inf propagate into the sum on purpose (the finite flag catches them).

override WG: u32 = 256; // a power of two (tree reduction)
override PARTIALS: u32 = 64;

struct Params {
  n: u32,
  slot: u32,
  chunk: u32, // ceil(n / PARTIALS)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

#include "workgroup_sum.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = wid.x;
  if (w >= PARTIALS) { return; }
  let start = w * params.chunk;
  let end = min(start + params.chunk, params.n);
  var acc = 0.0;
  for (var e = start + lid; e < end; e = e + WG) {
    let value = x[e];
    acc = acc + value * value;
  }
  let total = workgroup_sum(lid, acc);
  if (lid == 0u) { partials[params.slot * PARTIALS + w] = total; }
}
