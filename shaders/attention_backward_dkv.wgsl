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
// ascending order, staging TILE query rows (q, dO, lse, Δ) at a time in workgroup memory. Each
// thread owns its dk/dv rows, so the GQA group sum needs no atomics and is deterministic.

override WG: u32 = 32; // key rows (threads) per workgroup
override TILE: u32 = 16; // query rows staged per tile (≤ MAX_TILE)
override HEAD_DIM: u32 = 64; // D (≤ MAX_D)

const MAX_D: u32 = 128u;
const MAX_TILE: u32 = 32u;

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

var<workgroup> q_tile: array<f32, TILE * HEAD_DIM>; // (TILE, D)
var<workgroup> do_tile: array<f32, TILE * HEAD_DIM>; // (TILE, D)
var<workgroup> lse_tile: array<f32, TILE>;
var<workgroup> delta_tile: array<f32, TILE>;

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
  var k_row: array<f32, MAX_D>;
  var v_row: array<f32, MAX_D>;
  var dk_row: array<f32, MAX_D>;
  var dv_row: array<f32, MAX_D>;
  for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
    k_row[d] = select(0.0, k[kv_base + d] * params.scale, valid);
    v_row[d] = select(0.0, v[kv_base + d], valid);
    dk_row[d] = 0.0;
    dv_row[d] = 0.0;
  }

  // Queries before the workgroup's first key, or before the first valid column, see none of its keys.
  let query_first = max(block * WG, key_first);
  for (var hr = 0u; hr < R; hr = hr + 1u) {
    let h = g * R + hr;
    for (var i0 = query_first; i0 < params.T; i0 = i0 + TILE) {
      for (var slot = lid.x; slot < TILE * HEAD_DIM; slot = slot + WG) {
        let i = i0 + slot / HEAD_DIM;
        var qx = 0.0;
        var dox = 0.0;
        if (i < params.T) {
          let index = ((n * params.T + i) * params.H + h) * HEAD_DIM + slot % HEAD_DIM;
          qx = q[index];
          dox = dO[index];
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

      var p: array<f32, MAX_TILE>;
      var ds: array<f32, MAX_TILE>;
      var any_visible = false;
      for (var t = 0u; t < TILE; t = t + 1u) {
        p[t] = 0.0;
        ds[t] = 0.0;
        let i = i0 + t;
        if (valid && i >= j && i < params.T) {
          var score = 0.0;
          var dp = 0.0;
          for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
            score = fma(q_tile[t * HEAD_DIM + d], k_row[d], score);
            dp = fma(do_tile[t * HEAD_DIM + d], v_row[d], dp);
          }
          p[t] = exp(score - lse_tile[t]);
          ds[t] = p[t] * (dp - delta_tile[t]);
          any_visible = true;
        }
      }
      if (any_visible) {
        for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
          var a = dv_row[d];
          var b = dk_row[d];
          for (var t = 0u; t < TILE; t = t + 1u) {
            a = fma(p[t], do_tile[t * HEAD_DIM + d], a);
            b = fma(ds[t], q_tile[t * HEAD_DIM + d], b);
          }
          dv_row[d] = a;
          dk_row[d] = b;
        }
      }
      workgroupBarrier();
    }
  }

  if (!in_range) { return; }
  for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
    dk[kv_base + d] = dk_row[d] * params.scale;
    dv[kv_base + d] = dv_row[d];
  }
}
