// logprob_gather.wgsl — per-row log-prob of a target token, entropy and log-sum-exp of the
// temperature-scaled logits x = z · invTemperature, in one pass over the vocabulary.
//
//   logp[r]    = x[r, o_r] − lse[r]
//   entropy[r] = −Σ_v p log p = log s − (Σ_v e^{x−m}(x − m)) / s      (p = softmax(x))
//   lse[r]     = m + log s,  m = max_v x, s = Σ_v e^{x−m}               (saved for the backward)
//
//   correct[r] = 1 if argmax_v x[r, v] = o_r else 0  (ties: the lowest id, as torch.argmax)
//
// Shapes: logits (R, V) f32, targets (R) u32, logp / entropy / lse / correct (R) f32.
// Bindings: 0 logits (read), 1 targets (read), 2 logp, 3 entropy, 4 lse (read_write), 5 params,
// 6 correct (read_write; SFT's mean_token_accuracy), used only by the entry points main_correct
// and main_row_per_thread_correct: the others do not reference it, so their ('auto') layouts have
// no binding 6 and a caller that does not want `correct` binds nothing for it.
// Dispatch: one workgroup of WG threads per row, R workgroups laid out by splitGrid (flat row index
// wid.x + wid.y · nwg.x). Threads stride over V keeping an online (max, sum, centred sum) triple,
// then merge the triples in a fixed tree order, so results are bit-reproducible. Entropy is
// accumulated relative to the running max (never as lse − E[x]) so |z| ~ 1e4 loses no digits.
// A target ≥ V gives logp = NaN (loud), never an out-of-bounds read.
// Entry point main_row_per_thread (CPU-emulated adapters, small V): one thread per row, WG rows a
// workgroup, no barrier (SwiftShader runs a barrier as a switch between the workgroup's threads:
// one call over 512 rows of a 69-token vocabulary took ~90 ms). It replays main's arithmetic with
// TREE = main's workgroup size for this V: TREE strided partial triples, merged in the same tree
// order, so its results are bit-identical to main's.

override WG: u32 = 256; // a power of two (tree reduction)

struct Params {
  R: u32,
  V: u32,
  invTemperature: f32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> targets: array<u32>;
@group(0) @binding(2) var<storage, read_write> logp: array<f32>;
@group(0) @binding(3) var<storage, read_write> entropy: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

const NEG_BIG: f32 = -3.0e38; // "−∞" that stays finite, so (m1 − m2) never makes NaN

@group(0) @binding(6) var<storage, read_write> correct: array<f32>;

// Online: m = running max, s = Σ e^{x−m}, t = Σ e^{x−m}(x − m), over v = first, first + step, …;
// a = the lowest v where x = m (the argmax; NO_ID while no x exceeded NEG_BIG, e.g. all NaN).
struct Triple {
  m: f32,
  s: f32,
  t: f32,
  a: u32,
}

const NO_ID: u32 = 0xffffffffu;

fn strided_triple(base: u32, first: u32, step: u32) -> Triple {
  var m = NEG_BIG;
  var s = 0.0;
  var t = 0.0;
  var a = NO_ID;
  for (var v = first; v < params.V; v = v + step) {
    let x = logits[base + v] * params.invTemperature;
    if (x > m) {
      let c = exp(m - x);
      t = (t + (m - x) * s) * c;
      s = s * c + 1.0;
      m = x;
      a = v; // strictly greater: an equal later v keeps the earlier (lower) id
    } else {
      let e = exp(x - m);
      s = s + e;
      t = t + e * (x - m);
    }
  }
  return Triple(m, s, t, a);
}

fn merge(a: Triple, b: Triple) -> Triple {
  let mm = max(a.m, b.m);
  let c1 = exp(a.m - mm);
  let c2 = exp(b.m - mm);
  // The argmax: the side with the larger max, the lower id on a tie (NO_ID loses every min).
  var arg = min(a.a, b.a);
  if (a.m > b.m) { arg = a.a; } else if (b.m > a.m) { arg = b.a; }
  return Triple(mm, a.s * c1 + b.s * c2, (a.t + (a.m - mm) * a.s) * c1 + (b.t + (b.m - mm) * b.s) * c2,
                arg);
}

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

var<workgroup> sh_m: array<f32, WG>;
var<workgroup> sh_s: array<f32, WG>;
var<workgroup> sh_t: array<f32, WG>;
var<workgroup> sh_a: array<u32, WG>;

// The row's triple: each thread's strided triple, then the triples merged in a fixed tree order
// (every thread returns the merged one).
fn cooperative_total(base: u32, lid: u32) -> Triple {
  let own = strided_triple(base, lid, WG);
  sh_m[lid] = own.m;
  sh_s[lid] = own.s;
  sh_t[lid] = own.t;
  sh_a[lid] = own.a;
  workgroupBarrier();

  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) {
      let merged = merge(Triple(sh_m[lid], sh_s[lid], sh_t[lid], sh_a[lid]),
                         Triple(sh_m[lid + stride], sh_s[lid + stride], sh_t[lid + stride],
                                sh_a[lid + stride]));
      sh_m[lid] = merged.m;
      sh_s[lid] = merged.s;
      sh_t[lid] = merged.t;
      sh_a[lid] = merged.a;
    }
    workgroupBarrier();
  }
  return Triple(sh_m[0], sh_s[0], sh_t[0], sh_a[0]);
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

// ---- one thread per row (no barriers) ----
// main's workgroup size for this V (a power of two ≤ TREE_MAX).
override TREE: u32 = 256;
const TREE_MAX: u32 = 256u;

fn per_thread_total(base: u32) -> Triple {
  var partial: array<Triple, TREE_MAX>;
  for (var k = 0u; k < TREE; k = k + 1u) { partial[k] = strided_triple(base, k, TREE); }
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
