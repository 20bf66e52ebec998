// sample_split.wgsl — first pass of the sampling kernel's many-workgroups-per-row variant (the GPU
// path for large vocabularies; sample_combine.wgsl is the second pass, src/kernels/sampling.ts
// chooses it): each workgroup reduces one CHUNK-token part of one row of logits to six numbers,
// so a row of Qwen's 151,936 tokens spreads over 38 workgroups instead of one. Used only without
// top-k, top-p and min-p (their thresholds need the whole row bit by bit: sample.wgsl keeps them);
// greedy, temperature and the repetition penalty are supported.
//
//   x = z · invTemperature (raw), x' = z' · invTemperature (penalised, as sample.wgsl's z_sel)
//   part (row, c) over v ∈ [c·CHUNK, min((c+1)·CHUNK, V)):
//     m = max x, s = Σ exp(x − m)      (the log-prob's softmax)
//     m' = max x', s' = Σ exp(x' − m') (the draw's weights, against the part's own max)
//     best_z, best_i = the largest penalised z and its first index (greedy)
//
// Shapes: logits (N, V) f32; seen (N, seenWords) u32 (read only when the penalty is on; a 4-byte
// placeholder otherwise); partials (N, C, 6) f32 with C = ceil(V / CHUNK), best_i as its bits.
// Bindings: 0 logits, 1 seen (read), 2 partials (read_write), 3 params (uniform: sample.wgsl's).
// Dispatch: N·C workgroups of WG threads laid out by splitGrid (flat index wid.x + wid.y · nwg.x,
// row = flat / C, part = flat % C). Each thread strides its part by WG, then a fixed-order tree;
// no atomics, so the partials are deterministic.

override WG: u32 = 256; // a power of two (tree reduction)
override CHUNK: u32 = 4096; // tokens per part

struct Params {
  N: u32,
  V: u32,
  invTemperature: f32,
  topK: u32,
  topP: f32,
  greedy: u32,
  seedLo: u32,
  seedHi: u32,
  step: u32,
  sequenceOffset: u32,
  outStride: u32,
  outOffset: u32,
  minP: f32,
  repetitionPenalty: f32,
  invRepetitionPenalty: f32,
  seenWords: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> seen: array<u32>;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const NEG_BIG: f32 = -3.0e38;
const NONE: u32 = 0xffffffffu;

var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_s: array<f32, WG>;
var<workgroup> red_ms: array<f32, WG>;
var<workgroup> red_ss: array<f32, WG>;
var<workgroup> red_z: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;

var<private> seen_base: u32;

#include "sample_logits.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let V = params.V;
  let parts = (V + CHUNK - 1u) / CHUNK;
  let flat = wid.x + wid.y * nwg.x;
  if (flat >= params.N * parts) { return; } // uniform per workgroup
  let row = flat / parts;
  let part = flat % parts;
  let base = row * V;
  seen_base = row * params.seenWords;
  let end = min(part * CHUNK + CHUNK, V);

  var m = NEG_BIG;
  var s = 0.0;
  var ms = NEG_BIG;
  var ss = 0.0;
  var best_z = NEG_BIG;
  var best_i = NONE;
  for (var v = part * CHUNK + lid; v < end; v = v + WG) {
    let x = x_at(base, v);
    if (x > m) { s = s * exp(m - x) + 1.0; m = x; } else { s = s + exp(x - m); }
    let z = z_sel(base, v);
    let xs = z * params.invTemperature;
    if (xs > ms) { ss = ss * exp(ms - xs) + 1.0; ms = xs; } else { ss = ss + exp(xs - ms); }
    if (z > best_z || best_i == NONE) { best_z = z; best_i = v; } // ascending v: first max
  }
  red_m[lid] = m;
  red_s[lid] = s;
  red_ms[lid] = ms;
  red_ss[lid] = ss;
  red_z[lid] = best_z;
  red_i[lid] = best_i;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) {
      let m1 = red_m[lid];
      let m2 = red_m[lid + stride];
      let mm = max(m1, m2);
      red_s[lid] = red_s[lid] * exp(m1 - mm) + red_s[lid + stride] * exp(m2 - mm);
      red_m[lid] = mm;
      let n1 = red_ms[lid];
      let n2 = red_ms[lid + stride];
      let nn = max(n1, n2);
      red_ss[lid] = red_ss[lid] * exp(n1 - nn) + red_ss[lid + stride] * exp(n2 - nn);
      red_ms[lid] = nn;
      let z2 = red_z[lid + stride];
      let i2 = red_i[lid + stride];
      let z1 = red_z[lid];
      let i1 = red_i[lid];
      // Threads with no element carry index NONE and lose every comparison.
      if (i2 != NONE && (i1 == NONE || z2 > z1 || (z2 == z1 && i2 < i1))) {
        red_z[lid] = z2;
        red_i[lid] = i2;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let out = flat * 6u;
    partials[out] = red_m[0];
    partials[out + 1u] = red_s[0];
    partials[out + 2u] = red_ms[0];
    partials[out + 3u] = red_ss[0];
    partials[out + 4u] = red_z[0];
    partials[out + 5u] = bitcast<f32>(red_i[0]);
  }
}
