// logprob_gather.wgsl — per-row log-prob of a target token, entropy and log-sum-exp of the
// temperature-scaled logits x = z · invTemperature, in one pass over the vocabulary.
//
//   logp[r]    = x[r, o_r] − lse[r]
//   entropy[r] = −Σ_v p log p = log s − (Σ_v e^{x−m}(x − m)) / s      (p = softmax(x))
//   lse[r]     = m + log s,  m = max_v x, s = Σ_v e^{x−m}               (saved for the backward)
//
// Shapes: logits (R, V) f32, targets (R) u32, logp / entropy / lse (R) f32.
// Bindings: 0 logits (read), 1 targets (read), 2 logp, 3 entropy, 4 lse (read_write), 5 params.
// Dispatch: one workgroup of WG threads per row, R workgroups laid out by splitGrid (flat row index
// wid.x + wid.y · nwg.x). Threads stride over V keeping an online (max, sum, centred sum) triple,
// then merge the triples in a fixed tree order, so results are bit-reproducible. Entropy is
// accumulated relative to the running max (never as lse − E[x]) so |z| ~ 1e4 loses no digits.
// A target ≥ V gives logp = NaN (loud), never an out-of-bounds read.

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

var<workgroup> sh_m: array<f32, WG>;
var<workgroup> sh_s: array<f32, WG>;
var<workgroup> sh_t: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  // Uniform per workgroup, so the early return keeps barriers in uniform control flow.
  if (row >= params.R) { return; }
  let V = params.V;
  let base = row * V;

  // Online: m = running max, s = Σ e^{x−m}, t = Σ e^{x−m}(x − m).
  var m = NEG_BIG;
  var s = 0.0;
  var t = 0.0;
  for (var v = lid; v < V; v = v + WG) {
    let x = logits[base + v] * params.invTemperature;
    if (x > m) {
      let c = exp(m - x);
      t = (t + (m - x) * s) * c;
      s = s * c + 1.0;
      m = x;
    } else {
      let e = exp(x - m);
      s = s + e;
      t = t + e * (x - m);
    }
  }
  sh_m[lid] = m;
  sh_s[lid] = s;
  sh_t[lid] = t;
  workgroupBarrier();

  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) {
      let m1 = sh_m[lid];
      let m2 = sh_m[lid + stride];
      let mm = max(m1, m2);
      let c1 = exp(m1 - mm);
      let c2 = exp(m2 - mm);
      let s1 = sh_s[lid];
      let s2 = sh_s[lid + stride];
      sh_t[lid] = (sh_t[lid] + (m1 - mm) * s1) * c1 + (sh_t[lid + stride] + (m2 - mm) * s2) * c2;
      sh_s[lid] = s1 * c1 + s2 * c2;
      sh_m[lid] = mm;
    }
    workgroupBarrier();
  }

  if (lid == 0u) {
    let mm = sh_m[0];
    let ss = sh_s[0];
    let log_s = log(ss);
    let l = mm + log_s;
    lse[row] = l;
    entropy[row] = log_s - sh_t[0] / ss;
    let o = targets[row];
    if (o < V) {
      // (x_o − m) − log s rather than x_o − lse: the first difference is exact when x_o ≈ m.
      logp[row] = (logits[base + o] * params.invTemperature - mm) - log_s;
    } else {
      // NaN built from a runtime value: a constant NaN is rejected by the WGSL compiler.
      logp[row] = bitcast<f32>(0x7fc00000u | (o & 0u));
    }
  }
}
