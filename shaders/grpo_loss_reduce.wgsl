// grpo_loss_reduce.wgsl — sums grpo_loss.wgsl's per-sequence partials into the loss and the TRL
// statistics (clip ratios and KL are masked token means over the batch).
//
//   out = [loss, clip_ratio/low_mean, clip_ratio/high_mean, clip_ratio/region_mean, kl (0 unless
//          useKl), active tokens, 0, 0],   means divided by max(active tokens, 1)
//
// Shapes: partials (N, 8) f32, out (8) f32.
// Bindings: 0 partials (read), 1 out (read_write), 2 params (uniform).
// Dispatch: a single workgroup of WG threads; thread k sums sequences k, k + WG, … in order, then a
// fixed tree, so the result does not depend on scheduling.

override WG: u32 = 256; // a power of two (tree reduction)

struct Params {
  N: u32,
  useKl: u32,
}

@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> sh_a: array<vec4<f32>, WG>;
var<workgroup> sh_b: array<vec2<f32>, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
  var acc_a = vec4<f32>(0.0);
  var acc_b = vec2<f32>(0.0);
  for (var i = lid; i < params.N; i = i + WG) {
    let p = i * 8u;
    acc_a = acc_a + vec4<f32>(partials[p], partials[p + 1u], partials[p + 2u], partials[p + 3u]);
    acc_b = acc_b + vec2<f32>(partials[p + 4u], partials[p + 5u]);
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
    let active_tokens = sh_b[0].y;
    let denom = max(active_tokens, 1.0);
    out[0] = sh_a[0].x;
    out[1] = sh_a[0].y / denom;
    out[2] = sh_a[0].z / denom;
    out[3] = sh_a[0].w / denom;
    out[4] = select(0.0, sh_b[0].x / denom, params.useKl != 0u);
    out[5] = active_tokens;
    out[6] = 0.0;
    out[7] = 0.0;
  }
}
