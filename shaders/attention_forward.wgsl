// attention_forward.wgsl — causal grouped-query attention, fused, one pass with online softmax
// (FlashAttention style: no (T × S) score matrix is ever written), f32.
//
// Shapes (row-major):
//   q        (N, Tq, H, D)      query row i of sequence n sits at absolute column qOffset + i
//   k, v     (N, S_cap, Hkv, D) key/value caches; columns [0, S) are filled (training: S = S_cap = T)
//   keyStart (N) u32            first valid (non-pad) column of each sequence (left padding)
//   o        (N, Tq, H, D)      softmax(q·kᵀ·scale)·v over the visible keys
//   lse      (N, H, Tq)         log Σ_j exp(scale·q·k_j) over the visible keys (saved for backward)
// Key j is visible to query i iff keyStart[n] ≤ j ≤ qOffset + i and j < S. Head h reads kv head
// h / (H / Hkv). A query with no visible key (a pad row) gets o = 0 and lse = 0.
// Bindings: 0 q, 1 k, 2 v, 3 keyStart (read); 4 o, 5 lse (read_write); 6 params (uniform).
// Dispatch: splitGrid(N · Hkv · ceil((H / Hkv) · Tq / WG)) workgroups of WG threads.
//
// One thread per query row. The rows of a workgroup share (n, kv head g): row r of the group
// (r < R·Tq, R = H / Hkv) is query i = r / R of head h = g·R + r % R, so in decoding (Tq = 1) the
// R query heads that read the same kv head still share one K/V tile. Keys are staged TILE at a
// time in workgroup memory; each thread keeps its scaled q row and its output accumulator in
// private arrays (so HEAD_DIM ≤ MAX_D) and rescales them once per tile, not once per key.

override WG: u32 = 32; // query rows (threads) per workgroup
override TILE: u32 = 16; // keys staged per tile (≤ MAX_TILE; 2·TILE·HEAD_DIM floats of workgroup memory)
override HEAD_DIM: u32 = 64; // D (≤ MAX_D)

const MAX_D: u32 = 128u;
const MAX_TILE: u32 = 32u;
// Finite "minus infinity": exp(NEG_BIG − x) is exactly 0 and NEG_BIG − x never overflows.
const NEG_BIG: f32 = -3.0e38;

struct Params {
  N: u32,
  Tq: u32,
  H: u32,
  Hkv: u32,
  S_cap: u32,
  S: u32,
  qOffset: u32,
  scale: f32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> keyStart: array<u32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;

var<workgroup> k_tile: array<f32, TILE * HEAD_DIM>; // (TILE, D)
var<workgroup> v_tile: array<f32, TILE * HEAD_DIM>; // (TILE, D)

@compute @workgroup_size(WG, 1, 1)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let R = params.H / params.Hkv;
  let rows = R * params.Tq;
  let blocks = (rows + WG - 1u) / WG;
  let flat = wid.x + wid.y * nwg.x;
  if (flat >= params.N * params.Hkv * blocks) { return; } // whole workgroup: uniform

  let n = flat / (params.Hkv * blocks);
  let g = (flat / blocks) % params.Hkv;
  let block = flat % blocks;
  let r = block * WG + lid.x;
  let in_range = r < rows;
  let i = min(r, rows - 1u) / R;
  let h = g * R + min(r, rows - 1u) % R;

  let key_first = keyStart[n];
  // Keys any row of this workgroup can see end before key_end; this row's before row_end.
  let i_last = (min(block * WG + WG, rows) - 1u) / R;
  let key_end = min(params.qOffset + i_last + 1u, params.S);
  let row_end = select(0u, min(params.qOffset + i + 1u, params.S), in_range);

  let q_base = ((n * params.Tq + i) * params.H + h) * HEAD_DIM;
  var q_row: array<f32, MAX_D>;
  var acc: array<f32, MAX_D>;
  for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
    q_row[d] = select(0.0, q[q_base + d] * params.scale, in_range);
    acc[d] = 0.0;
  }
  var m = NEG_BIG; // running max of the scores seen
  var l = 0.0; // running Σ exp(score − m)

  let kv_row_stride = params.Hkv * HEAD_DIM;
  let kv_base = n * params.S_cap * kv_row_stride + g * HEAD_DIM;
  for (var j0 = key_first; j0 < key_end; j0 = j0 + TILE) {
    for (var slot = lid.x; slot < TILE * HEAD_DIM; slot = slot + WG) {
      let j = j0 + slot / HEAD_DIM;
      var kx = 0.0;
      var vx = 0.0;
      if (j < key_end) {
        let index = kv_base + j * kv_row_stride + slot % HEAD_DIM;
        kx = k[index];
        vx = v[index];
      }
      k_tile[slot] = kx;
      v_tile[slot] = vx;
    }
    workgroupBarrier();

    var s: array<f32, MAX_TILE>;
    var tile_max = NEG_BIG;
    for (var t = 0u; t < TILE; t = t + 1u) {
      s[t] = NEG_BIG;
      if (j0 + t < row_end) {
        var qk = 0.0;
        for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
          qk = fma(q_row[d], k_tile[t * HEAD_DIM + d], qk);
        }
        s[t] = qk;
        tile_max = max(tile_max, qk);
      }
    }
    if (tile_max > NEG_BIG) {
      let m_new = max(m, tile_max);
      let correction = exp(m - m_new);
      l = l * correction;
      for (var t = 0u; t < TILE; t = t + 1u) {
        // Masked keys hold NEG_BIG, so their weight is exactly 0.
        s[t] = exp(s[t] - m_new);
        l = l + s[t];
      }
      for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
        var a = acc[d] * correction;
        for (var t = 0u; t < TILE; t = t + 1u) {
          a = fma(s[t], v_tile[t * HEAD_DIM + d], a);
        }
        acc[d] = a;
      }
      m = m_new;
    }
    workgroupBarrier();
  }

  if (!in_range) { return; }
  let has_keys = l > 0.0;
  let inv_l = select(0.0, 1.0 / l, has_keys);
  for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
    o[q_base + d] = acc[d] * inv_l;
  }
  lse[(n * params.H + h) * params.Tq + i] = select(0.0, m + log(l), has_keys);
}
