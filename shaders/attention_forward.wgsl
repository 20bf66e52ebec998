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
// private arrays (so HEAD_DIM ≤ 4·MAX_D4) and rescales them once per tile, not once per key.
// Rows are held as vec4 (D4 = ceil(D / 4) of them, zero-padded past D) so that every inner step
// is a vec4 dot or FMA; any D works, the padding lanes stay 0.
//
// Entry point main_direct (barrier-free variant, KernelTuning.avoidBarriers): threads share
// nothing, so the rows of all (n, kv head) pairs pack densely, WG per workgroup, in
// ceil(N·H·Tq / WG) workgroups (a decode step's N·H rows fill a few workgroups instead of N·Hkv
// mostly idle ones), and each thread reads keys and values straight from storage. The per-tile
// arithmetic (attend_tile) and its order are the same as main's, so both give the same bits.

override WG: u32 = 32; // query rows (threads) per workgroup
override TILE: u32 = 8; // keys staged per tile (≤ MAX_TILE; 2·TILE·D4 vec4 of workgroup memory)
override HEAD_DIM: u32 = 64; // D (≤ 4·MAX_D4)
override D4: u32 = (HEAD_DIM + 3u) / 4u; // vec4 per row (derived; never set from TS)

const MAX_D4: u32 = 32u;
const MAX_TILE: u32 = 16u;
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

var<workgroup> k_tile: array<vec4<f32>, TILE * D4>; // (TILE, D4)
var<workgroup> v_tile: array<vec4<f32>, TILE * D4>; // (TILE, D4)

#include "attention_gather.wgsl"
#include "attention_stage_kv.wgsl"
#include "attention_rows.wgsl"
// Per-invocation row state shared by both entry points: the scaled q row, the output
// accumulator, the running max m and the running Σ exp(score − m) l.
var<private> q_row: array<vec4<f32>, MAX_D4>;
var<private> acc: array<vec4<f32>, MAX_D4>;
var<private> m: f32;
var<private> l: f32;

fn begin_row(q_base: u32, in_range: bool) {
  for (var c = 0u; c < D4; c = c + 1u) {
    q_row[c] = select(vec4<f32>(), gather_q(q_base, c) * params.scale, in_range);
    acc[c] = vec4<f32>();
  }
  m = NEG_BIG;
  l = 0.0;
}

// The online-softmax update with keys j0 … j0 + TILE − 1 (this row sees those before row_end).
fn attend_tile(staged: bool, j0: u32, row_end: u32, key_end: u32, kv_base: u32, kv_row_stride: u32) {
  var s: array<f32, MAX_TILE>;
  var tile_max = NEG_BIG;
  for (var t = 0u; t < TILE; t = t + 1u) {
    s[t] = NEG_BIG;
    if (j0 + t < row_end) {
      let row = kv_base + (j0 + t) * kv_row_stride;
      var qk = vec4<f32>();
      for (var c = 0u; c < D4; c = c + 1u) {
        qk = fma(q_row[c], tile_key(staged, row, true, t, c), qk);
      }
      s[t] = (qk.x + qk.y) + (qk.z + qk.w);
      tile_max = max(tile_max, s[t]);
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
    for (var c = 0u; c < D4; c = c + 1u) {
      var a = acc[c] * correction;
      for (var t = 0u; t < TILE; t = t + 1u) {
        let row = kv_base + (j0 + t) * kv_row_stride;
        a = fma(vec4<f32>(s[t]), tile_value(staged, row, j0 + t < key_end, t, c), a);
      }
      acc[c] = a;
    }
    m = m_new;
  }
}

fn end_row(q_base: u32, lse_index: u32) {
  let has_keys = l > 0.0;
  let inv_l = select(0.0, 1.0 / l, has_keys);
  for (var c = 0u; c < D4; c = c + 1u) {
    let x = acc[c] * inv_l;
    for (var e = 0u; e < 4u; e = e + 1u) {
      if (c * 4u + e < HEAD_DIM) { o[q_base + c * 4u + e] = x[e]; }
    }
  }
  lse[lse_index] = select(0.0, m + log(l), has_keys);
}

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

  let b = row_block(flat, params.Hkv, blocks);
  let in_range = b.first + lid.x < rows;
  let row = query_row(b.n, b.g, min(b.first + lid.x, rows - 1u), R);
  // Keys any row of this workgroup can see end before key_end; this row's before row_end.
  let i_last = (min(b.first + WG, rows) - 1u) / R;
  let key_end = min(params.qOffset + i_last + 1u, params.S);
  let row_end = select(0u, min(params.qOffset + row.i + 1u, params.S), in_range);

  let q_base = ((row.n * params.Tq + row.i) * params.H + row.h) * HEAD_DIM;
  begin_row(q_base, in_range);
  let kv_row_stride = params.Hkv * HEAD_DIM;
  let kv_base = b.n * params.S_cap * kv_row_stride + b.g * HEAD_DIM;
  for (var j0 = keyStart[b.n]; j0 < key_end; j0 = j0 + TILE) {
    stage_kv_tile(lid.x, j0, key_end, kv_base, kv_row_stride);
    workgroupBarrier();
    attend_tile(true, j0, row_end, key_end, kv_base, kv_row_stride);
    workgroupBarrier();
  }
  if (!in_range) { return; }
  end_row(q_base, (row.n * params.H + row.h) * params.Tq + row.i);
}

@compute @workgroup_size(WG, 1, 1)
fn main_direct(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let R = params.H / params.Hkv;
  let rows = R * params.Tq;
  let thread = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (thread >= params.N * params.Hkv * rows) { return; }
  let row = packed_row(thread, params.Hkv, R, rows);

  let row_end = min(params.qOffset + row.i + 1u, params.S);
  let q_base = ((row.n * params.Tq + row.i) * params.H + row.h) * HEAD_DIM;
  begin_row(q_base, true);
  let kv_row_stride = params.Hkv * HEAD_DIM;
  let kv_base = row.n * params.S_cap * kv_row_stride + row.g * HEAD_DIM;
  // The same tiles as main (from keyStart, TILE keys each), so the same summation order.
  for (var j0 = keyStart[row.n]; j0 < row_end; j0 = j0 + TILE) {
    attend_tile(false, j0, row_end, row_end, kv_base, kv_row_stride);
  }
  end_row(q_base, (row.n * params.H + row.h) * params.Tq + row.i);
}
