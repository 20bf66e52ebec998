// grpo_loss.wgsl — per-token GRPO loss gradient and per-sequence partial sums (docs/grpo.md §3–5).
//
//   ρ = exp(logp − old),  surrogate = min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)
//   kl = exp(ref − logp) − (ref − logp) − 1,   ℓ = −surrogate + β·kl
//   dLogp[i, t] = m·w_i · ( (clipped ? 0 : −A_i·ρ) + β·(1 − exp(ref − logp)) )
//   w_i: grpo 1/(N·max(Σ_t m_i,t, 1)); bnpo 1/max(Σ m, 1); dr_grpo 1/denominator (= N·maxLen);
//        dapo 1/max(denominator, 1), denominator 0 meaning Σ m over this batch.
//   clipped = (ρ < 1 − ε_low and A < 0) or (ρ > 1 + ε_high and A > 0)   (TRL's clip-ratio tests)
// seqLevel (GSPO, TRL importance_sampling_level='sequence'): ρ is one ratio per sequence,
//   exp(Σ_t m·(logp − old) / max(Σ_t m, 1)), shared by its tokens; with a 0/1 mask each token's
//   gradient is again m·w·(−A·ρ) (docs/grpo.md §3, §5). The clip counts stay token-weighted.
// useDelta (two-sided clipping, TRL delta): c1 = min(ρ, δ) in the min, c2 from the uncapped ρ; the
//   gradient follows the branch the min picks (half each on a tie), 0 past δ (docs/grpo.md §3).
// useEntropyMask (TRL top_entropy_quantile): the policy term −surrogate (not the KL term) of each
//   token is multiplied by em (0/1, entropy_mask.wgsl); with seqLevel the sequence's shared
//   surrogate then counts Σ_t m·em times, so its gradient per token is scaled by
//   Σ_t m·em / max(Σ_t m, 1) (docs/grpo.md §3).
// lossType 4 cispo (TRL): ℓ = −min(ρ, ε_high)·A·logp with the capped ratio detached, gradient
//   −min(ρ, ε_high)·A, weights as dapo; its clip flag (ρ > ε_high, A > 0) is counted as "high".
//   With seqLevel the ratio is the sequence's but each token keeps its own term (no shared term).
// lossType 5 sapo (TRL): ℓ = −A·(4/τ)·σ(τ(ρ − 1)), τ = sapoTemperaturePos if A > 0 else
//   sapoTemperatureNeg, gradient −A·4σ(1 − σ)·ρ, weights as grpo; no clip flags.
//
// Shapes: logp, oldLogp, refLogp, mask, dLogp (N, L) f32; advantages (N) f32; partials (N, 8) f32
// holding per sequence [Σ m·w·ℓ, Σ m·low, Σ m·high, Σ m·region, Σ m·kl, Σ m, 0, 0].
// Bindings: 0 logp, 1 oldLogp, 2 refLogp (any (N, L) buffer when useKl = 0), 3 advantages,
// 4 mask, 5 entropyMask ((N, L) 0/1; any (N, L) buffer when useEntropyMask = 0) (read);
// 6 dLogp, 7 partials (read_write); 8 params (uniform).
// Dispatch: one workgroup of WG threads per sequence, N workgroups laid out by splitGrid (flat
// index wid.x + wid.y · nwg.x). Masked tokens are skipped (never multiplied), so NaN or garbage
// log-probs at pad positions cannot leak into the loss. All sums are fixed-order tree reductions.
// grpo_loss_reduce.wgsl then sums the partials into the loss and the statistics.

override WG: u32 = 256; // a power of two (tree reduction)

struct Params {
  N: u32,
  L: u32,
  lossType: u32, // 0 grpo, 1 bnpo, 2 dr_grpo, 3 dapo, 4 cispo, 5 sapo
  useKl: u32, // β ≠ 0 and a reference was given
  epsilonLow: f32,
  epsilonHigh: f32,
  beta: f32,
  denominator: f32, // dr_grpo: N·maxCompletionLength; dapo: active tokens of the accumulated batch (0: this batch)
  seqLevel: u32, // 1: one importance ratio per sequence (GSPO)
  useDelta: u32, // 1: two-sided clipping at delta
  delta: f32,
  useEntropyMask: u32, // 1: the policy term counts only where entropy_mask is 1
  sapoTemperaturePos: f32,
  sapoTemperatureNeg: f32,
}

@group(0) @binding(0) var<storage, read> logp: array<f32>;
@group(0) @binding(1) var<storage, read> old_logp: array<f32>;
@group(0) @binding(2) var<storage, read> ref_logp: array<f32>;
@group(0) @binding(3) var<storage, read> advantages: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<f32>;
@group(0) @binding(5) var<storage, read> entropy_mask: array<f32>;
@group(0) @binding(6) var<storage, read_write> d_logp: array<f32>;
@group(0) @binding(7) var<storage, read_write> partials: array<f32>;
@group(0) @binding(8) var<uniform> params: Params;

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
    case 0u, 5u: {
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

  // GSPO: the sequence's mean log-ratio over its counted tokens (masked ones skipped, not multiplied).
  var seq_rho = 1.0;
  var seq_scale = 1.0; // GSPO with an entropy mask: Σ_t m·em / max(Σ_t m, 1)
  if (params.seqLevel != 0u) {
    var s = 0.0;
    var c = 0.0;
    for (var t = lid; t < L; t = t + WG) {
      let m = mask[base + t];
      if (m != 0.0) {
        s = s + m * (logp[base + t] - old_logp[base + t]);
        c = c + m;
      }
    }
    let total_s = reduce_scalar(lid, s);
    let total_c = reduce_scalar(lid, c);
    seq_rho = exp(total_s / max(total_c, 1.0));
    if (params.useEntropyMask != 0u) {
      var ce = 0.0;
      for (var t = lid; t < L; t = t + WG) {
        let m = mask[base + t];
        if (m != 0.0) { ce = ce + m * entropy_mask[base + t]; }
      }
      seq_scale = reduce_scalar(lid, ce) / max(total_c, 1.0);
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
      var rho = seq_rho;
      if (params.seqLevel == 0u) { rho = exp(lp - old_logp[j]); }
      let clipped_rho = clamp(rho, 1.0 - params.epsilonLow, 1.0 + params.epsilonHigh);
      var c1 = rho;
      if (params.useDelta != 0u) { c1 = min(rho, params.delta); }
      let l1 = c1 * a;
      let l2 = clipped_rho * a;
      let surrogate = min(l1, l2);
      let is_low = c1 < 1.0 - params.epsilonLow && a < 0.0;
      let is_high = c1 > 1.0 + params.epsilonHigh && a > 0.0;
      var per_token = -surrogate;
      var flag_low = is_low;
      var flag_high = is_high;
      if (params.lossType == 4u) {
        // CISPO: the capped ratio is a detached weight on the log-prob itself.
        let c = min(rho, params.epsilonHigh);
        per_token = -c * a * lp;
        grad = -c * a;
        flag_low = false;
        flag_high = rho > params.epsilonHigh && a > 0.0;
      } else if (params.lossType == 5u) {
        // SAPO: a smooth gate instead of the clip.
        let tau = select(params.sapoTemperatureNeg, params.sapoTemperaturePos, a > 0.0);
        let sg = 1.0 / (1.0 + exp(-tau * (rho - 1.0)));
        per_token = -sg * 4.0 / tau * a;
        grad = -a * 4.0 * sg * (1.0 - sg) * rho;
        flag_low = false;
        flag_high = false;
      } else if (params.useDelta == 0u) {
        if (!(is_low || is_high)) { grad = -a * rho; }
      } else {
        let g1 = select(-a * rho, 0.0, rho > params.delta);
        let g2 = select(-a * rho, 0.0, rho < 1.0 - params.epsilonLow || rho > 1.0 + params.epsilonHigh);
        grad = 0.5 * (g1 + g2);
        if (l1 < l2) { grad = g1; }
        if (l2 < l1) { grad = g2; }
      }
      if (params.useEntropyMask != 0u) {
        let em = entropy_mask[j];
        per_token = per_token * em;
        // Token level (and cispo): this token's own em; sequence level: the shared term's count.
        grad = grad * select(em, seq_scale, params.seqLevel != 0u && params.lossType != 4u);
      }
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
      acc_a = acc_a + vec4<f32>(mw * per_token, select(0.0, m, flag_low), select(0.0, m, flag_high),
                                select(0.0, m, flag_low || flag_high));
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
