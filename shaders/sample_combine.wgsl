// sample_combine.wgsl — second pass of the sampling kernel's many-workgroups-per-row variant (after
// sample_split.wgsl, which reduced each CHUNK-token part of a row to (m, s, m', s', best_z, best_i)):
// one workgroup per row merges its C parts and draws the token as sample.wgsl does without
// filters, then writes its log-prob under the full tempered softmax of the raw logits.
//
//   max x, log Σ exp(x − max)   from the parts' (m, s), merged in a fixed-order tree
//   greedy: tok = the parts' best (largest penalised z, lowest index on ties)
//   else:   weights w_v = exp(x'_v − M'), M' = max x'; the part mass W_c = s'_c · exp(m'_c − M');
//           u ∈ [0, 1) from Philox-4x32-10(counter (step, sequence, 0, 0), key seed) as
//           sample.wgsl; the part where Σ W first exceeds u · Σ W (residual form), then in it the
//           WG contiguous sub-ranges' sums of w and the first token whose running sum exceeds
//           what is left (the last weighted token if rounding never gets there).
// The part masses are each part's own sum rescaled, so the draw agrees with sample.wgsl's (one
// workgroup walking WG chunks) to rounding: the same token unless u · Σ w falls within rounding
// of a boundary between two tokens; the log-prob likewise.
//
// Shapes: logits (N, V) f32; partials (N, C, 6) f32 (sample_split.wgsl); tokens, logps written at
// [row · outStride + outOffset] (u32, f32); seen (N, seenWords) u32, the chosen token's bit set
// when the penalty is on.
// Bindings: 0 logits, 1 partials (read), 2 tokens, 3 logps, 4 seen (read_write), 5 params (uniform:
// sample.wgsl's). Dispatch: one workgroup of WG threads per row, N workgroups by splitGrid.

override WG: u32 = 256; // a power of two (tree reduction)
override CHUNK: u32 = 4096; // tokens per part (sample_split.wgsl's)

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
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> tokens: array<u32>;
@group(0) @binding(3) var<storage, read_write> logps: array<f32>;
@group(0) @binding(4) var<storage, read_write> seen: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

const NEG_BIG: f32 = -3.0e38;
const NONE: u32 = 0xffffffffu;

var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_s: array<f32, WG>;
var<workgroup> red_ms: array<f32, WG>;
var<workgroup> red_z: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;
var<workgroup> pick: vec2<u32>; // (part or sub-range, found) handed from thread 0
var<workgroup> rest_shared: f32;

var<private> seen_base: u32;

#include "philox.wgsl"
#include "sample_logits.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.N) { return; } // uniform per workgroup
  let V = params.V;
  let parts = (V + CHUNK - 1u) / CHUNK;
  let base = row * V;
  let first = row * parts * 6u;
  seen_base = row * params.seenWords;

  // Merge the parts: thread t takes parts t, t + WG, … in order, then a fixed-order tree.
  var m = NEG_BIG;
  var s = 0.0;
  var ms = NEG_BIG;
  var best_z = NEG_BIG;
  var best_i = NONE;
  for (var c = lid; c < parts; c = c + WG) {
    let p = first + c * 6u;
    let pm = partials[p];
    let mm = max(m, pm);
    s = s * exp(m - mm) + partials[p + 1u] * exp(pm - mm);
    m = mm;
    ms = max(ms, partials[p + 2u]);
    let z = partials[p + 4u];
    let i = bitcast<u32>(partials[p + 5u]);
    if (i != NONE && (best_i == NONE || z > best_z)) { best_z = z; best_i = i; } // ascending parts
  }
  red_m[lid] = m;
  red_s[lid] = s;
  red_ms[lid] = ms;
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
      red_ms[lid] = max(red_ms[lid], red_ms[lid + stride]);
      let z2 = red_z[lid + stride];
      let i2 = red_i[lid + stride];
      let z1 = red_z[lid];
      let i1 = red_i[lid];
      if (i2 != NONE && (i1 == NONE || z2 > z1 || (z2 == z1 && i2 < i1))) {
        red_z[lid] = z2;
        red_i[lid] = i2;
      }
    }
    workgroupBarrier();
  }
  let max_x = red_m[0];
  let log_s = log(red_s[0]);
  let max_sel = red_ms[0];
  var chosen = red_i[0];
  workgroupBarrier();

  if (params.greedy == 0u) {
    // The part holding u · Σ W (thread 0, parts in order).
    if (lid == 0u) {
      var total = 0.0;
      for (var c = 0u; c < parts; c = c + 1u) {
        let p = first + c * 6u;
        total = total + partials[p + 3u] * exp(partials[p + 2u] - max_sel);
      }
      let r = philox4x32(vec4<u32>(params.step, params.sequenceOffset + row, 0u, 0u),
                         vec2<u32>(params.seedLo, params.seedHi));
      var rest = uniform_from_bits(r.x) * total;
      var found = parts;
      var last = parts;
      for (var c = 0u; c < parts; c = c + 1u) {
        let p = first + c * 6u;
        let mass = partials[p + 3u] * exp(partials[p + 2u] - max_sel);
        if (mass > 0.0) { last = c; }
        if (mass > rest) { found = c; break; }
        rest = rest - mass;
      }
      if (found == parts) { found = last; rest = 3.0e38; } // rounding put the target past the end
      pick = vec2<u32>(found, 0u);
      rest_shared = rest;
    }
    workgroupBarrier();
    let part = pick.x;
    // Its WG contiguous sub-ranges' sums of w, then thread 0 finds the sub-range and walks it.
    let start = part * CHUNK;
    let len = min(start + CHUNK, V) - start;
    let sub = (len + WG - 1u) / WG;
    let lo = start + min(lid * sub, len);
    let hi = start + min(lid * sub + sub, len);
    var acc = 0.0;
    for (var v = lo; v < hi; v = v + 1u) { acc = acc + exp(x_sel(base, v) - max_sel); }
    red_s[lid] = acc;
    workgroupBarrier();
    if (lid == 0u) {
      var rest = rest_shared;
      var t_found = WG;
      var t_last = WG;
      for (var t = 0u; t < WG; t = t + 1u) {
        let mass = red_s[t];
        if (mass > 0.0) { t_last = t; }
        if (mass > rest) { t_found = t; break; }
        rest = rest - mass;
      }
      if (t_found == WG) { t_found = t_last; rest = 3.0e38; }
      var token = NONE;
      var last_kept = NONE;
      let a = start + min(t_found * sub, len);
      let b = start + min(t_found * sub + sub, len);
      var run = 0.0;
      for (var v = a; v < b; v = v + 1u) {
        let w = exp(x_sel(base, v) - max_sel);
        if (w > 0.0) { last_kept = v; }
        run = run + w;
        if (run > rest) { token = v; break; }
      }
      pick = vec2<u32>(select(token, last_kept, token == NONE), 1u);
    }
    workgroupBarrier();
    chosen = pick.x;
  }

  if (lid == 0u) {
    let out = row * params.outStride + params.outOffset;
    tokens[out] = chosen;
    logps[out] = (x_at(base, chosen) - max_x) - log_s;
    if (params.repetitionPenalty != 1.0) { // every thread's reads of `seen` ended at a barrier
      seen[seen_base + chosen / 32u] = seen[seen_base + chosen / 32u] | (1u << (chosen % 32u));
    }
  }
}
