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
// (n, kv head), K/V staged TILE keys at a time in workgroup memory. Each thread sums its own dq row
// over keys in ascending order, so there are no atomics and the result is deterministic.

override WG: u32 = 32; // query rows (threads) per workgroup
override TILE: u32 = 16; // keys staged per tile (≤ MAX_TILE)
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
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> keyStart: array<u32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;
@group(0) @binding(9) var<uniform> params: Params;

var<workgroup> k_tile: array<f32, TILE * HEAD_DIM>; // (TILE, D)
var<workgroup> v_tile: array<f32, TILE * HEAD_DIM>; // (TILE, D)

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

  let n = flat / (params.Hkv * blocks);
  let g = (flat / blocks) % params.Hkv;
  let block = flat % blocks;
  let r = block * WG + lid.x;
  let in_range = r < rows;
  let i = min(r, rows - 1u) / R;
  let h = g * R + min(r, rows - 1u) % R;

  let key_first = keyStart[n];
  let i_last = (min(block * WG + WG, rows) - 1u) / R;
  let key_end = i_last + 1u;
  let row_end = select(0u, i + 1u, in_range);

  let row_base = ((n * params.T + i) * params.H + h) * HEAD_DIM;
  let lse_index = (n * params.H + h) * params.T + i;
  var q_row: array<f32, MAX_D>;
  var do_row: array<f32, MAX_D>;
  var dq_row: array<f32, MAX_D>;
  var delta_i = 0.0;
  for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
    q_row[d] = select(0.0, q[row_base + d] * params.scale, in_range);
    do_row[d] = select(0.0, dO[row_base + d], in_range);
    delta_i = fma(do_row[d], select(0.0, o[row_base + d], in_range), delta_i);
    dq_row[d] = 0.0;
  }
  let lse_i = select(0.0, lse[lse_index], in_range);

  let kv_row_stride = params.Hkv * HEAD_DIM;
  let kv_base = n * params.T * kv_row_stride + g * HEAD_DIM;
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

    var ds: array<f32, MAX_TILE>;
    var any_visible = false;
    for (var t = 0u; t < TILE; t = t + 1u) {
      ds[t] = 0.0;
      if (j0 + t < row_end) {
        var score = 0.0;
        var dp = 0.0;
        for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
          score = fma(q_row[d], k_tile[t * HEAD_DIM + d], score);
          dp = fma(do_row[d], v_tile[t * HEAD_DIM + d], dp);
        }
        ds[t] = exp(score - lse_i) * (dp - delta_i);
        any_visible = true;
      }
    }
    if (any_visible) {
      for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
        var a = dq_row[d];
        for (var t = 0u; t < TILE; t = t + 1u) {
          a = fma(ds[t], k_tile[t * HEAD_DIM + d], a);
        }
        dq_row[d] = a;
      }
    }
    workgroupBarrier();
  }

  if (!in_range) { return; }
  for (var d = 0u; d < HEAD_DIM; d = d + 1u) {
    dq[row_base + d] = dq_row[d] * params.scale;
  }
  delta[lse_index] = delta_i;
}
