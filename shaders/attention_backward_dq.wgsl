// attention_backward_dq.wgsl — causal grouped-query attention backward, part 1: dq and Δ, f32.
// FlashAttention-2 formulation: P_ij = exp(scale·q_i·k_j − lse_i) is recomputed from the saved lse,
// Δ_i = Σ_d dO_id·O_id, dP_ij = dO_i·v_j, dS_ij = P_ij·(dP_ij − Δ_i), dq_i = scale·Σ_j dS_ij·k_j.
//
// Shapes (training: Tq = S = S_cap = T, qOffset = 0; row-major):
//   dO, q, o (N, T, H, D); k, v (N, T, Hkv, D); lse (N, H, T); keyStart (N) u32
//   dq (N, T, H, D); delta (N, H, T) = Δ, written for attention_backward_dkv.wgsl
// Key j is visible to query i iff keyStart[n] ≤ j ≤ i; head h reads kv head h / (H / Hkv).
// Pad rows (no visible key) get dq = 0 (and Δ = 0, since their o is 0).
// Bindings: 0 dO, 1 q, 2 k, 3 v, 4 o, 5 lse, 6 keyStart (read); 7 dq, 8 delta (read_write);
//           9 params (uniform).
// Dispatch: splitGrid(N · Hkv · ceil((H / Hkv) · T / WG)) workgroups of WG threads.
//
// Same geometry as attention_forward.wgsl: one thread per query row, the rows of a workgroup share
// (n, kv head), K/V staged TILE keys at a time in workgroup memory, rows held as zero-padded vec4.
// Each thread sums its own dq row over keys in ascending order, so there are no atomics and the
// result is deterministic.
//
// Entry point main_direct (barrier-free variant, KernelTuning.avoidBarriers): threads share
// nothing, the rows of all (n, kv head) pairs pack densely, WG per workgroup, in
// ceil(N·H·T / WG) workgroups, and each thread reads keys and values straight from storage. The
// per-tile arithmetic (dq_tile) and its order are main's, so both give the same bits.

override WG: u32 = 32; // query rows (threads) per workgroup
override TILE: u32 = 8; // keys staged per tile (≤ MAX_TILE)
override HEAD_DIM: u32 = 64; // D (≤ 4·MAX_D4)
override D4: u32 = (HEAD_DIM + 3u) / 4u; // vec4 per row (derived; never set from TS)

const MAX_D4: u32 = 32u;
const MAX_TILE: u32 = 16u;

struct Params {
  N: u32,
  T: u32,
  H: u32,
  Hkv: u32,
  scale: f32,
}

@group(0) @binding(0) var<storage, read> dO: array<f32>;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> keyStart: array<u32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;
@group(0) @binding(9) var<uniform> params: Params;

var<workgroup> k_tile: array<vec4<f32>, TILE * D4>; // (TILE, D4)
var<workgroup> v_tile: array<vec4<f32>, TILE * D4>; // (TILE, D4)

#include "attention_gather.wgsl"
#include "attention_stage_kv.wgsl"
#include "attention_gather_do.wgsl"
#include "attention_rows.wgsl"

// The same gather for a row of o, the forward output (only this kernel reads it).
fn gather_o(base: u32, c: u32) -> vec4<f32> {
  if (HEAD_DIM % 4u == 0u) {
    let i = base + c * 4u;
    return vec4<f32>(o[i], o[i + 1u], o[i + 2u], o[i + 3u]);
  }
  var x = vec4<f32>();
  for (var e = 0u; e < 4u; e = e + 1u) {
    if (c * 4u + e < HEAD_DIM) { x[e] = o[base + c * 4u + e]; }
  }
  return x;
}

fn hsum(x: vec4<f32>) -> f32 {
  return (x.x + x.y) + (x.z + x.w);
}

// Per-invocation row state shared by both entry points: the scaled q row, the dO row, the dq
// accumulator, Δ_i and lse_i.
var<private> q_row: array<vec4<f32>, MAX_D4>;
var<private> do_row: array<vec4<f32>, MAX_D4>;
var<private> dq_row: array<vec4<f32>, MAX_D4>;
var<private> delta_i: f32;
var<private> lse_i: f32;

fn begin_row(row_base: u32, lse_index: u32, in_range: bool) {
  var delta4 = vec4<f32>();
  for (var c = 0u; c < D4; c = c + 1u) {
    q_row[c] = select(vec4<f32>(), gather_q(row_base, c) * params.scale, in_range);
    do_row[c] = select(vec4<f32>(), gather_do(row_base, c), in_range);
    delta4 = fma(do_row[c], select(vec4<f32>(), gather_o(row_base, c), in_range), delta4);
    dq_row[c] = vec4<f32>();
  }
  delta_i = hsum(delta4);
  lse_i = select(0.0, lse[lse_index], in_range);
}

// dq_row += Σ_t dS_it·k_t over keys j0 … j0 + TILE − 1 (this row sees those before row_end).
fn dq_tile(staged: bool, j0: u32, row_end: u32, key_end: u32, kv_base: u32, kv_row_stride: u32) {
  var ds: array<f32, MAX_TILE>;
  var any_visible = false;
  for (var t = 0u; t < TILE; t = t + 1u) {
    ds[t] = 0.0;
    if (j0 + t < row_end) {
      let row = kv_base + (j0 + t) * kv_row_stride;
      var score = vec4<f32>();
      var dp = vec4<f32>();
      for (var c = 0u; c < D4; c = c + 1u) {
        score = fma(q_row[c], tile_key(staged, row, true, t, c), score);
        dp = fma(do_row[c], tile_value(staged, row, true, t, c), dp);
      }
      ds[t] = exp(hsum(score) - lse_i) * (hsum(dp) - delta_i);
      any_visible = true;
    }
  }
  if (any_visible) {
    for (var c = 0u; c < D4; c = c + 1u) {
      var a = dq_row[c];
      for (var t = 0u; t < TILE; t = t + 1u) {
        let row = kv_base + (j0 + t) * kv_row_stride;
        a = fma(vec4<f32>(ds[t]), tile_key(staged, row, j0 + t < key_end, t, c), a);
      }
      dq_row[c] = a;
    }
  }
}

fn end_row(row_base: u32, lse_index: u32) {
  for (var c = 0u; c < D4; c = c + 1u) {
    let x = dq_row[c] * params.scale;
    for (var e = 0u; e < 4u; e = e + 1u) {
      if (c * 4u + e < HEAD_DIM) { dq[row_base + c * 4u + e] = x[e]; }
    }
  }
  delta[lse_index] = delta_i;
}

@compute @workgroup_size(WG, 1, 1)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let R = params.H / params.Hkv;
  let rows = R * params.T;
  let blocks = (rows + WG - 1u) / WG;
  let flat = wid.x + wid.y * nwg.x;
  if (flat >= params.N * params.Hkv * blocks) { return; } // whole workgroup: uniform

  let b = row_block(flat, params.Hkv, blocks);
  let in_range = b.first + lid.x < rows;
  let row = query_row(b.n, b.g, min(b.first + lid.x, rows - 1u), R);
  let i_last = (min(b.first + WG, rows) - 1u) / R;
  let key_end = i_last + 1u;
  let row_end = select(0u, row.i + 1u, in_range);

  let row_base = ((row.n * params.T + row.i) * params.H + row.h) * HEAD_DIM;
  let lse_index = (row.n * params.H + row.h) * params.T + row.i;
  begin_row(row_base, lse_index, in_range);

  let kv_row_stride = params.Hkv * HEAD_DIM;
  let kv_base = b.n * params.T * kv_row_stride + b.g * HEAD_DIM;
  for (var j0 = keyStart[b.n]; j0 < key_end; j0 = j0 + TILE) {
    stage_kv_tile(lid.x, j0, key_end, kv_base, kv_row_stride);
    workgroupBarrier();
    dq_tile(true, j0, row_end, key_end, kv_base, kv_row_stride);
    workgroupBarrier();
  }

  if (!in_range) { return; }
  end_row(row_base, lse_index);
}

@compute @workgroup_size(WG, 1, 1)
fn main_direct(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let R = params.H / params.Hkv;
  let rows = R * params.T;
  let thread = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (thread >= params.N * params.Hkv * rows) { return; }
  let row = packed_row(thread, params.Hkv, R, rows);

  let row_base = ((row.n * params.T + row.i) * params.H + row.h) * HEAD_DIM;
  let lse_index = (row.n * params.H + row.h) * params.T + row.i;
  begin_row(row_base, lse_index, true);
  let kv_row_stride = params.Hkv * HEAD_DIM;
  let kv_base = row.n * params.T * kv_row_stride + row.g * HEAD_DIM;
  // The same tiles as main (from keyStart, TILE keys each), so the same summation order; main's
  // tiles past this row's last key add nothing to it.
  for (var j0 = keyStart[row.n]; j0 <= row.i; j0 = j0 + TILE) {
    dq_tile(false, j0, row.i + 1u, row.i + 1u, kv_base, kv_row_stride);
  }
  end_row(row_base, lse_index);
}
