// logprob_gather_kernel.wgsl — the body of the log-prob gather (what it computes, bindings and
// dispatch: the header of logprob_gather.wgsl). Included by logprob_gather.wgsl after
// workgroup_triple.wgsl (tree reduction) and by logprob_gather_subgroups.wgsl after
// subgroup_triple.wgsl (subgroup reduction): either defines workgroup_triple(lid, own).

override WG: u32 = 256; // a power of two (tree reduction)

struct Params {
  R: u32,
  V: u32,
  invTemperature: f32,
  chunk: u32, // main_split: vocabulary entries per workgroup
  parts: u32, // main_split / main_combine: ceil(V / chunk) workgroups per row
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> targets: array<u32>;
@group(0) @binding(2) var<storage, read_write> logp: array<f32>;
@group(0) @binding(3) var<storage, read_write> entropy: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;
@group(0) @binding(6) var<storage, read_write> correct: array<f32>;
@group(0) @binding(7) var<storage, read_write> partials: array<Triple>; // (R, parts)

fn write_row(row: u32, base: u32, total: Triple) {
  let log_s = log(total.s);
  lse[row] = total.m + log_s;
  entropy[row] = log_s - total.t / total.s;
  let o = targets[row];
  if (o < params.V) {
    // (x_o − m) − log s rather than x_o − lse: the first difference is exact when x_o ≈ m.
    logp[row] = (logits[base + o] * params.invTemperature - total.m) - log_s;
  } else {
    // NaN built from a runtime value: a constant NaN is rejected by the WGSL compiler.
    logp[row] = bitcast<f32>(0x7fc00000u | (o & 0u));
  }
}

// correct[row]: whether the target is the argmax (only the *_correct entry points call this).
fn write_correct(row: u32, total: Triple) {
  correct[row] = select(0.0, 1.0, total.a == targets[row]);
}

// The row's triple: each thread's strided triple over the whole row, merged over the workgroup.
fn cooperative_total(base: u32, lid: u32) -> Triple {
  return workgroup_triple(lid, strided_triple(base, lid, params.V, WG));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  // Uniform per workgroup, so the early return keeps barriers in uniform control flow.
  if (row >= params.R) { return; }
  let base = row * params.V;
  let total = cooperative_total(base, lid);
  if (lid == 0u) { write_row(row, base, total); }
}

@compute @workgroup_size(WG)
fn main_correct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.R) { return; }
  let base = row * params.V;
  let total = cooperative_total(base, lid);
  if (lid == 0u) {
    write_row(row, base, total);
    write_correct(row, total);
  }
}

// ---- many workgroups per row: main_split, then main_combine ----
// Workgroup g = row · parts + p reduces entries [p · chunk, min((p + 1) · chunk, V)) of its row
// and stores the merged triple in partials[g].
@compute @workgroup_size(WG)
fn main_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let g = wid.x + wid.y * nwg.x;
  let row = g / params.parts;
  if (row >= params.R) { return; } // workgroup-uniform
  let start = (g - row * params.parts) * params.chunk;
  let end = min(start + params.chunk, params.V);
  let total = workgroup_triple(lid, strided_triple(row * params.V, start + lid, end, WG));
  if (lid == 0u) { partials[g] = total; }
}

// One thread per row (WG rows a workgroup): the row's `parts` triples combined against their
// common max in ascending part order (each rescaled once, deterministic), then the outputs.
fn combined_total(row: u32) -> Triple {
  let first = row * params.parts;
  var m = NEG_BIG;
  for (var p = 0u; p < params.parts; p = p + 1u) { m = max(m, partials[first + p].m); }
  var s = 0.0;
  var t = 0.0;
  var a = NO_ID;
  for (var p = 0u; p < params.parts; p = p + 1u) {
    let q = partials[first + p];
    let c = exp(q.m - m);
    s = s + q.s * c;
    t = t + (q.t + (q.m - m) * q.s) * c;
    if (q.m == m) { a = min(a, q.a); }
  }
  return Triple(m, s, t, a);
}

@compute @workgroup_size(WG)
fn main_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * nwg.x) * WG + lid;
  if (row >= params.R) { return; }
  write_row(row, row * params.V, combined_total(row));
}

@compute @workgroup_size(WG)
fn main_combine_correct(@builtin(workgroup_id) wid: vec3<u32>,
                        @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * nwg.x) * WG + lid;
  if (row >= params.R) { return; }
  let total = combined_total(row);
  write_row(row, row * params.V, total);
  write_correct(row, total);
}

// ---- one thread per row (no barriers) ----
// main's workgroup size for this V (a power of two ≤ TREE_MAX).
override TREE: u32 = 256;
const TREE_MAX: u32 = 256u;

fn per_thread_total(base: u32) -> Triple {
  var partial: array<Triple, TREE_MAX>;
  for (var k = 0u; k < TREE; k = k + 1u) { partial[k] = strided_triple(base, k, params.V, TREE); }
  for (var stride = TREE / 2u; stride > 0u; stride = stride / 2u) {
    for (var k = 0u; k < stride; k = k + 1u) { partial[k] = merge(partial[k], partial[k + stride]); }
  }
  return partial[0];
}

@compute @workgroup_size(WG)
fn main_row_per_thread(@builtin(workgroup_id) wid: vec3<u32>,
                       @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * nwg.x) * WG + lid;
  if (row >= params.R) { return; }
  let base = row * params.V;
  write_row(row, base, per_thread_total(base));
}

@compute @workgroup_size(WG)
fn main_row_per_thread_correct(@builtin(workgroup_id) wid: vec3<u32>,
                               @builtin(num_workgroups) nwg: vec3<u32>,
                               @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * nwg.x) * WG + lid;
  if (row >= params.R) { return; }
  let base = row * params.V;
  let total = per_thread_total(base);
  write_row(row, base, total);
  write_correct(row, total);
}
