// entropy_mask.wgsl — TRL's high-entropy token mask (`get_high_entropy_mask`, docs/grpo.md §3):
// 1 for the counted tokens whose entropy is at least the q-quantile of the counted tokens'
// entropies (q = 1 − topEntropyQuantile), else 0. The quantile is torch.quantile's in f32:
//   n = Σ m, rank = q·(n − 1), lo = floor(rank), hi = min(ceil(rank), n − 1), w = rank − lo,
//   quantile = lerp(s[lo], s[hi], w) (torch.lerp: a + w·(b − a) for w < 0.5, else b − (b − a)·(1 − w))
// with s the counted entropies sorted ascending. n = 0 keeps nothing (TRL's all-false mask).
//
// Two dispatches of this kernel (`phase`): 0 finds s[lo], s[hi] and w by ranking (each counted
// position counts the counted entropies below and equal to its own: the position whose rank range
// holds lo writes s[lo], and so for hi; tied positions write the same bits), 1 writes the mask.
//
// Shapes: entropy, mask, out (M) f32, M = the micro-batch's Nm·L positions; sel (4) f32
// [s[lo], s[hi], w, n].
// Bindings: 0 entropy, 1 mask (read); 2 sel, 3 out (read_write); 4 params (uniform).
// Dispatch: one thread per position, ceil(M / WG) workgroups laid out by splitGrid (flat index
// wid.x + wid.y · nwg.x). Phase 0 scans all M positions per thread: O(M²) work, no sort, no atomics.

override WG: u32 = 256;

struct Params {
  M: u32,
  q: f32, // the quantile, 1 − topEntropyQuantile
  phase: u32, // 0: select the order statistics into sel; 1: write the mask
}

@group(0) @binding(0) var<storage, read> entropy: array<f32>;
@group(0) @binding(1) var<storage, read> mask: array<f32>;
@group(0) @binding(2) var<storage, read_write> sel: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let j = (wid.x + wid.y * nwg.x) * WG + lid;
  if (j >= params.M) { return; }
  if (params.phase == 1u) {
    let lo = sel[0];
    let hi = sel[1];
    let w = sel[2];
    var quantile = hi - (hi - lo) * (1.0 - w);
    if (w < 0.5) { quantile = lo + w * (hi - lo); }
    out[j] = select(0.0, 1.0, sel[3] > 0.0 && mask[j] != 0.0 && entropy[j] >= quantile);
    return;
  }
  let h = entropy[j];
  let counted = mask[j] != 0.0;
  var n = 0u;
  var below = 0u; // counted entropies < h
  var equal = 0u; // counted entropies = h (h's own included when counted)
  for (var k = 0u; k < params.M; k = k + 1u) {
    if (mask[k] != 0.0) {
      n = n + 1u;
      let e = entropy[k];
      if (e < h) { below = below + 1u; } else if (e == h) { equal = equal + 1u; }
    }
  }
  if (n == 0u) {
    if (j == 0u) { sel[3] = 0.0; }
    return;
  }
  let rank = params.q * f32(n - 1u);
  let lo = u32(floor(rank));
  let hi = min(u32(ceil(rank)), n - 1u);
  if (j == 0u) {
    sel[2] = rank - floor(rank);
    sel[3] = f32(n);
  }
  if (counted && lo >= below && lo < below + equal) { sel[0] = h; }
  if (counted && hi >= below && hi < below + equal) { sel[1] = h; }
}
