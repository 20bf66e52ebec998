// logprob_gather_backward.wgsl — gradient of logp[r] = log_softmax(z[r] · invT)[o_r] into the
// logits, fused: no probability tensor is stored.
//
//   dz[r, v] (+)= g[r] · invT · (onehot(o_r)[v] − p[r, v])
//               + gH[r] · invT · (−p[r, v] · (z[r, v] · invT − lse[r] + H[r]))   (useEntropy = 1)
//   p[r, v] = exp(z[r, v] · invT − lse[r]); the second line is ∂loss/∂H times ∂H/∂z of the entropy
//   H = −Σ p log p (the entropy bonus, docs/grpo.md §5), ∂H/∂x_v = −p_v (log p_v + H).
//
// Shapes: logits (R, V) f32, targets (R) u32, lse (R) f32 and H (R) f32 (from logprob_gather),
// g (R) f32 the upstream ∂loss/∂logp, gH (R) f32 the upstream ∂loss/∂H, dz (R, V) f32.
// Bindings: 0 logits, 1 targets, 2 lse, 3 g, 4 entropy, 5 gH (read), 6 dz (read_write),
// 7 params (uniform). With useEntropy = 0, bindings 4 and 5 are never read.
// Dispatch: one thread per element of (R, V), WG threads per workgroup, ceil(R·V / WG) workgroups
// laid out by splitGrid (flat workgroup index wid.x + wid.y · nwg.x). accumulate = 1 adds into dz
// (gradient accumulation across micro-batches), 0 overwrites. Rows with g = 0 still write 0 (or
// leave dz unchanged when accumulating), so a masked token never leaves stale gradient behind.
// Elementwise (nothing to reduce, so no subgroup or split variant). No f16 variant: it reads and
// writes f32 logits and gradients, so f16 arithmetic would cost digits of p = exp(x − lse) (an
// 11-bit mantissa) without moving fewer bytes.

override WG: u32 = 256;

struct Params {
  R: u32,
  V: u32,
  invTemperature: f32,
  accumulate: u32,
  useEntropy: u32, // 1: add the entropy term (bindings 4, 5)
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> targets: array<u32>;
@group(0) @binding(2) var<storage, read> lse: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read> entropy: array<f32>;
@group(0) @binding(5) var<storage, read> g_entropy: array<f32>;
@group(0) @binding(6) var<storage, read_write> dz: array<f32>;
@group(0) @binding(7) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  let V = params.V;
  if (i >= params.R * V) { return; }
  let row = i / V;
  let v = i - row * V;
  let gr = g[row];
  var value = 0.0;
  // g = 0 skips the exp: masked rows (pad, prompt) cost one load, and a NaN lse cannot leak.
  if (gr != 0.0) {
    let p = exp(logits[i] * params.invTemperature - lse[row]);
    var onehot = 0.0;
    if (v == targets[row]) { onehot = 1.0; }
    value = gr * params.invTemperature * (onehot - p);
  }
  if (params.useEntropy != 0u) {
    let ge = g_entropy[row];
    if (ge != 0.0) {
      let log_p = logits[i] * params.invTemperature - lse[row];
      value = value + ge * params.invTemperature * (-exp(log_p) * (log_p + entropy[row]));
    }
  }
  if (params.accumulate != 0u) { value = value + dz[i]; }
  dz[i] = value;
}
