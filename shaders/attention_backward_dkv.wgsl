// attention_backward_dkv.wgsl — causal grouped-query attention backward, part 2: dk and dv, f32.
// FlashAttention-2 formulation with P recomputed from the saved lse and Δ from
// attention_backward_dq.wgsl: for key j of kv head g,
//   dv_j = Σ_{h in g} Σ_i P_ij·dO_i,   dk_j = scale · Σ_{h in g} Σ_i dS_ij·q_i,
//   P_ij = exp(scale·q_i·k_j − lse_i),  dS_ij = P_ij·(dO_i·v_j − Δ_i).
//
// Shapes (training: T = S = S_cap, qOffset = 0; row-major):
//   dO, q (N, T, H, D); k, v (N, T, Hkv, D); lse, delta (N, H, T); keyStart (N) u32
//   dk, dv (N, T, Hkv, D)
// Key j is visible to query i iff keyStart[n] ≤ j ≤ i. Pad keys (j < keyStart[n]) get zeros.
// Bindings: 0 dO, 1 q, 2 k, 3 v, 4 lse, 5 delta, 6 keyStart (read); 7 dk, 8 dv (read_write);
//           9 params (uniform).
// Dispatch: splitGrid(N · Hkv · ceil(T / WG)) workgroups of WG threads.
//
// One thread per key row; a workgroup holds WG consecutive keys of one (n, kv head). It walks the
// query heads of the group in ascending order and, for each, the queries i ≥ its first key in
// ascending order, staging TILE query rows (q, dO, lse, Δ) at a time in workgroup memory; rows are
// held as zero-padded vec4. Each thread owns its dk/dv rows, so the GQA group sum needs no atomics
// and is deterministic.
//
// Entry point main_direct (barrier-free variant, KernelTuning.avoidBarriers): threads share
// nothing, the key rows of all (n, kv head) pairs pack densely, WG per workgroup, in
// ceil(N·Hkv·T / WG) workgroups, and each thread reads query rows straight from storage. It walks
// main's tiles (anchored where main's workgroup of this key starts), skipping those before its key,
// which add nothing; the per-tile arithmetic (dkv_tile) and its order are main's, so both give the
// same bits.

override WG: u32 = 32; // key rows (threads) per workgroup
override TILE: u32 = 8; // query rows staged per tile (≤ MAX_TILE)
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
@group(0) @binding(4) var<storage, read> lse: array<f32>;
@group(0) @binding(5) var<storage, read> delta: array<f32>;
@group(0) @binding(6) var<storage, read> keyStart: array<u32>;
@group(0) @binding(7) var<storage, read_write> dk: array<f32>;
@group(0) @binding(8) var<storage, read_write> dv: array<f32>;
@group(0) @binding(9) var<uniform> params: Params;

var<workgroup> q_tile: array<vec4<f32>, TILE * D4>; // (TILE, D4)
var<workgroup> do_tile: array<vec4<f32>, TILE * D4>; // (TILE, D4)
var<workgroup> lse_tile: array<f32, TILE>;
var<workgroup> delta_tile: array<f32, TILE>;

#include "attention_gather.wgsl"
#include "attention_gather_do.wgsl"
fn hsum(x: vec4<f32>) -> f32 {
  return (x.x + x.y) + (x.z + x.w);
}

// Per-invocation key state shared by both entry points: the scaled k row, the v row and the dk,
// dv accumulators.
var<private> k_row: array<vec4<f32>, MAX_D4>;
var<private> v_row: array<vec4<f32>, MAX_D4>;
var<private> dk_row: array<vec4<f32>, MAX_D4>;
var<private> dv_row: array<vec4<f32>, MAX_D4>;

fn begin_key(kv_base: u32, valid: bool) {
  for (var c = 0u; c < D4; c = c + 1u) {
    k_row[c] = select(vec4<f32>(), gather_k(kv_base, c) * params.scale, valid);
    v_row[c] = select(vec4<f32>(), gather_v(kv_base, c), valid);
    dk_row[c] = vec4<f32>();
    dv_row[c] = vec4<f32>();
  }
}

// Query t of the tile at i0 (`row` = its first element of head h; `stat` = its index in lse and
// Δ): from the staged tile, or straight from storage; queries past T are zero, as in the tile.
fn tile_q(staged: bool, row: u32, valid: bool, t: u32, c: u32) -> vec4<f32> {
  if (staged) { return q_tile[t * D4 + c]; }
  if (!valid) { return vec4<f32>(); }
  return gather_q(row, c);
}

fn tile_do(staged: bool, row: u32, valid: bool, t: u32, c: u32) -> vec4<f32> {
  if (staged) { return do_tile[t * D4 + c]; }
  if (!valid) { return vec4<f32>(); }
  return gather_do(row, c);
}

fn tile_lse(staged: bool, stat: u32, t: u32) -> f32 {
  if (staged) { return lse_tile[t]; }
  return lse[stat];
}

fn tile_delta(staged: bool, stat: u32, t: u32) -> f32 {
  if (staged) { return delta_tile[t]; }
  return delta[stat];
}

// dv_row += Σ_t P_tj·dO_t and dk_row += Σ_t dS_tj·q_t over queries i0 … i0 + TILE − 1 of head h
// (key j of a valid row sees queries i ≥ j).
fn dkv_tile(staged: bool, i0: u32, j: u32, valid: bool, n: u32, h: u32) {
  var p: array<f32, MAX_TILE>;
  var ds: array<f32, MAX_TILE>;
  var any_visible = false;
  for (var t = 0u; t < TILE; t = t + 1u) {
    p[t] = 0.0;
    ds[t] = 0.0;
    let i = i0 + t;
    if (valid && i >= j && i < params.T) {
      let row = ((n * params.T + i) * params.H + h) * HEAD_DIM;
      let stat = (n * params.H + h) * params.T + i;
      var score = vec4<f32>();
      var dp = vec4<f32>();
      for (var c = 0u; c < D4; c = c + 1u) {
        score = fma(tile_q(staged, row, true, t, c), k_row[c], score);
        dp = fma(tile_do(staged, row, true, t, c), v_row[c], dp);
      }
      p[t] = exp(hsum(score) - tile_lse(staged, stat, t));
      ds[t] = p[t] * (hsum(dp) - tile_delta(staged, stat, t));
      any_visible = true;
    }
  }
  if (any_visible) {
    for (var c = 0u; c < D4; c = c + 1u) {
      var a = dv_row[c];
      var b = dk_row[c];
      for (var t = 0u; t < TILE; t = t + 1u) {
        let i = i0 + t;
        let row = ((n * params.T + i) * params.H + h) * HEAD_DIM;
        a = fma(vec4<f32>(p[t]), tile_do(staged, row, i < params.T, t, c), a);
        b = fma(vec4<f32>(ds[t]), tile_q(staged, row, i < params.T, t, c), b);
      }
      dv_row[c] = a;
      dk_row[c] = b;
    }
  }
}

fn end_key(kv_base: u32) {
  for (var c = 0u; c < D4; c = c + 1u) {
    let xk = dk_row[c] * params.scale;
    let xv = dv_row[c];
    for (var e = 0u; e < 4u; e = e + 1u) {
      if (c * 4u + e < HEAD_DIM) {
        dk[kv_base + c * 4u + e] = xk[e];
        dv[kv_base + c * 4u + e] = xv[e];
      }
    }
  }
}

@compute @workgroup_size(WG, 1, 1)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let R = params.H / params.Hkv;
  let blocks = (params.T + WG - 1u) / WG;
  let flat = wid.x + wid.y * nwg.x;
  if (flat >= params.N * params.Hkv * blocks) { return; } // whole workgroup: uniform

  let n = flat / (params.Hkv * blocks);
  let g = (flat / blocks) % params.Hkv;
  let block = flat % blocks;
  let j = block * WG + lid.x;
  let key_first = keyStart[n];
  let in_range = j < params.T;
  let valid = in_range && j >= key_first;

  let kv_base = ((n * params.T + min(j, params.T - 1u)) * params.Hkv + g) * HEAD_DIM;
  begin_key(kv_base, valid);

  // Queries before the workgroup's first key, or before the first valid column, see none of its keys.
  let query_first = max(block * WG, key_first);
  for (var hr = 0u; hr < R; hr = hr + 1u) {
    let h = g * R + hr;
    for (var i0 = query_first; i0 < params.T; i0 = i0 + TILE) {
      for (var slot = lid.x; slot < TILE * D4; slot = slot + WG) {
        let i = i0 + slot / D4;
        var qx = vec4<f32>();
        var dox = vec4<f32>();
        if (i < params.T) {
          let base = ((n * params.T + i) * params.H + h) * HEAD_DIM;
          qx = gather_q(base, slot % D4);
          dox = gather_do(base, slot % D4);
        }
        q_tile[slot] = qx;
        do_tile[slot] = dox;
      }
      for (var t = lid.x; t < TILE; t = t + WG) {
        let i = i0 + t;
        var lse_x = 0.0;
        var delta_x = 0.0;
        if (i < params.T) {
          lse_x = lse[(n * params.H + h) * params.T + i];
          delta_x = delta[(n * params.H + h) * params.T + i];
        }
        lse_tile[t] = lse_x;
        delta_tile[t] = delta_x;
      }
      workgroupBarrier();
      dkv_tile(true, i0, j, valid, n, h);
      workgroupBarrier();
    }
  }

  if (!in_range) { return; }
  end_key(kv_base);
}

@compute @workgroup_size(WG, 1, 1)
fn main_direct(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let R = params.H / params.Hkv;
  let thread = (wid.x + wid.y * nwg.x) * WG + lid.x;
  if (thread >= params.N * params.Hkv * params.T) { return; }
  let n = thread / (params.Hkv * params.T);
  let g = (thread / params.T) % params.Hkv;
  let j = thread % params.T;
  let key_first = keyStart[n];
  let valid = j >= key_first;

  let kv_base = ((n * params.T + j) * params.Hkv + g) * HEAD_DIM;
  begin_key(kv_base, valid);
  if (valid) {
    // main's tiles start where its workgroup of key j starts; the first that reaches j is the
    // first this key sees.
    let query_first = max((j / WG) * WG, key_first);
    let first_tile = query_first + ((j - query_first) / TILE) * TILE;
    for (var hr = 0u; hr < R; hr = hr + 1u) {
      for (var i0 = first_tile; i0 < params.T; i0 = i0 + TILE) {
        dkv_tile(false, i0, j, true, n, g * R + hr);
      }
    }
  }
  end_key(kv_base);
}
