// grpo_loss.wgsl — per-token GRPO loss gradient and per-sequence partial sums (docs/grpo.md §3–5).
//
//   ρ = exp(logp − old),  surrogate = min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)
//   kl = exp(ref − logp) − (ref − logp) − 1,   ℓ = −surrogate + β·kl
//   dLogp[i, t] = m·w_i · ( (clipped ? 0 : −A_i·ρ) + β·(1 − exp(ref − logp)) )
//   w_i: grpo 1/(N·max(Σ_t m_i,t, 1)); bnpo 1/max(Σ m, 1); dr_grpo 1/denominator (= N·maxLen);
//        dapo 1/max(denominator, 1), denominator 0 meaning Σ m over this batch.
//   clipped = (ρ < 1 − ε_low and A < 0) or (ρ > 1 + ε_high and A > 0)   (TRL's clip-ratio tests)
//
// Shapes: logp, oldLogp, refLogp, mask, dLogp (N, L) f32; advantages (N) f32; partials (N, 8) f32
// holding per sequence [Σ m·w·ℓ, Σ m·low, Σ m·high, Σ m·region, Σ m·kl, Σ m, 0, 0].
// Bindings: 0 logp, 1 oldLogp, 2 refLogp (any (N, L) buffer when useKl = 0), 3 advantages,
// 4 mask (read); 5 dLogp, 6 partials (read_write); 7 params (uniform).
// Dispatch: one workgroup of WG threads per sequence, N workgroups laid out by splitGrid (flat
// index wid.x + wid.y · nwg.x). Masked tokens are skipped (never multiplied), so NaN or garbage
// log-probs at pad positions cannot leak into the loss. All sums are fixed-order tree reductions.
// grpo_loss_reduce.wgsl then sums the partials into the loss and the statistics.

override WG: u32 = 256; // a power of two (tree reduction)

struct Params {
  N: u32,
  L: u32,
  lossType: u32, // 0 grpo, 1 bnpo, 2 dr_grpo, 3 dapo
  useKl: u32, // β ≠ 0 and a reference was given
  epsilonLow: f32,
  epsilonHigh: f32,
  beta: f32,
  denominator: f32, // dr_grpo: N·maxCompletionLength; dapo: active tokens of the accumulated batch (0: this batch)
}

@group(0) @binding(0) var<storage, read> logp: array<f32>;
@group(0) @binding(1) var<storage, read> old_logp: array<f32>;
@group(0) @binding(2) var<storage, read> ref_logp: array<f32>;
@group(0) @binding(3) var<storage, read> advantages: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<f32>;
@group(0) @binding(5) var<storage, read_write> d_logp: array<f32>;
@group(0) @binding(6) var<storage, read_write> partials: array<f32>;
@group(0) @binding(7) var<uniform> params: Params;

var<workgroup> sh_a: array<vec4<f32>, WG>;
var<workgroup> sh_b: array<vec2<f32>, WG>;

fn reduce_scalar(lid: u32, value: f32) -> f32 {
  sh_b[lid] = vec2<f32>(value, 0.0);
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) { sh_b[lid] = sh_b[lid] + sh_b[lid + stride]; }
    workgroupBarrier();
  }
  let total = sh_b[0].x;
  workgroupBarrier(); // everyone has read sh_b[0] before it is reused
  return total;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = wid.x + wid.y * nwg.x;
  if (i >= params.N) { return; } // uniform per workgroup
  let L = params.L;
  let base = i * L;

  var w: f32;
  switch params.lossType {
    case 0u: {
      var c = 0.0;
      for (var t = lid; t < L; t = t + WG) { c = c + mask[base + t]; }
      w = 1.0 / (f32(params.N) * max(reduce_scalar(lid, c), 1.0));
    }
    case 2u: {
      w = 1.0 / params.denominator;
    }
    default: {
      var total = params.denominator;
      if (params.lossType == 1u || total == 0.0) {
        // Every workgroup sums the whole mask in the same order, so all see the same value.
        var c = 0.0;
        for (var j = lid; j < params.N * L; j = j + WG) { c = c + mask[j]; }
        total = reduce_scalar(lid, c);
      }
      w = 1.0 / max(total, 1.0);
    }
  }

  let a = advantages[i];
  var acc_a = vec4<f32>(0.0); // Σ m·w·ℓ, Σ m·low, Σ m·high, Σ m·region
  var acc_b = vec2<f32>(0.0); // Σ m·kl, Σ m
  for (var t = lid; t < L; t = t + WG) {
    let j = base + t;
    let m = mask[j];
    var grad = 0.0;
    if (m != 0.0) {
      let lp = logp[j];
      let rho = exp(lp - old_logp[j]);
      let clipped_rho = clamp(rho, 1.0 - params.epsilonLow, 1.0 + params.epsilonHigh);
      let surrogate = min(rho * a, clipped_rho * a);
      let is_low = rho < 1.0 - params.epsilonLow && a < 0.0;
      let is_high = rho > 1.0 + params.epsilonHigh && a > 0.0;
      var per_token = -surrogate;
      if (!(is_low || is_high)) { grad = -a * rho; }
      var kl = 0.0;
      if (params.useKl != 0u) {
        let diff = ref_logp[j] - lp;
        let e = exp(diff);
        kl = e - diff - 1.0;
        per_token = per_token + params.beta * kl;
        grad = grad + params.beta * (1.0 - e);
      }
      let mw = m * w;
      grad = mw * grad;
      acc_a = acc_a + vec4<f32>(mw * per_token, select(0.0, m, is_low), select(0.0, m, is_high),
                                select(0.0, m, is_low || is_high));
      acc_b = acc_b + vec2<f32>(m * kl, m);
    }
    d_logp[j] = grad;
  }

  sh_a[lid] = acc_a;
  sh_b[lid] = acc_b;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) {
      sh_a[lid] = sh_a[lid] + sh_a[lid + stride];
      sh_b[lid] = sh_b[lid] + sh_b[lid + stride];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let p = i * 8u;
    partials[p + 0u] = sh_a[0].x;
    partials[p + 1u] = sh_a[0].y;
    partials[p + 2u] = sh_a[0].z;
    partials[p + 3u] = sh_a[0].w;
    partials[p + 4u] = sh_b[0].x;
    partials[p + 5u] = sh_b[0].y;
    partials[p + 6u] = 0.0;
    partials[p + 7u] = 0.0;
  }
}
