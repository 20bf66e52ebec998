// matmul_tiles.wgsl — the body shared by matmul.wgsl and matmul_packed16.wgsl: workgroup tiles,
// op(A) reads, guarded loads, and both entry points' register-tiled loops (see matmul.wgsl's
// header for the contract). The including kernel declares the overrides, struct Params, the
// bindings a, b, c, params and fn b_at(base, k, col) -> f32 (B's element type is the only
// difference: f32, or 16-bit pairs widened on load), so both give the same bits for the same values.

// a_tile[k * TILE_M_VEC + i] holds rows 4i..4i+3 of column k of the A tile; b_tile likewise holds
// columns 4j..4j+3 of row k of the B tile.
var<workgroup> a_tile: array<vec4<f32>, TILE_K * TILE_M_VEC>;
var<workgroup> b_tile: array<vec4<f32>, TILE_K * TILE_N_VEC>;

// Unguarded op(A)[row, k] and op(B)[k, col], for indices known to be inside.
fn a_at(base: u32, row: u32, k: u32) -> f32 {
  if (TRANS_A) { return a[base + k * params.ldA + row]; }
  return a[base + row * params.ldA + k];
}

// op(A)[row, k] and op(B)[k, col], zero outside the matrices (the staged tiles' padding).
fn load_a(base: u32, row: u32, k: u32) -> f32 {
  if (row >= params.M || k >= params.K) { return 0.0; }
  return a_at(base, row, k);
}

fn load_b(base: u32, k: u32, col: u32) -> f32 {
  if (k >= params.K || col >= params.N) { return 0.0; }
  return b_at(base, k, col);
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let tile_row = wid.y * TILE_M_VEC * 4u;
  let tile_col = wid.x * TILE_N_VEC * 4u;
  let a_base = params.offsetA + wid.z * params.strideA;
  let b_base = wid.z * params.strideB;
  let c_base = params.offsetC + wid.z * params.strideC;
  let thread = lid.y * WG_X + lid.x;
  let threads = WG_X * WG_Y;
  let row0 = tile_row + lid.y * 4u;
  let col0 = tile_col + lid.x * 4u;

  var acc: array<vec4<f32>, 4>;
  if (params.accumulate == 2u) {
    for (var i = 0u; i < 4u; i = i + 1u) {
      for (var j = 0u; j < 4u; j = j + 1u) {
        if (row0 + i < params.M && col0 + j < params.N) {
          acc[i][j] = c[c_base + (row0 + i) * params.ldC + col0 + j];
        }
      }
    }
  }
  if (STAGE_TILES) {
    for (var k0 = 0u; k0 < params.K; k0 = k0 + TILE_K) {
      // Stage the tiles: each vec4 slot gets 4 gathered scalars.
      for (var slot = thread; slot < TILE_K * TILE_M_VEC; slot = slot + threads) {
        let k = slot / TILE_M_VEC;
        let r = tile_row + (slot % TILE_M_VEC) * 4u;
        a_tile[slot] = vec4<f32>(load_a(a_base, r, k0 + k), load_a(a_base, r + 1u, k0 + k),
                                 load_a(a_base, r + 2u, k0 + k), load_a(a_base, r + 3u, k0 + k));
      }
      for (var slot = thread; slot < TILE_K * TILE_N_VEC; slot = slot + threads) {
        let k = slot / TILE_N_VEC;
        let col = tile_col + (slot % TILE_N_VEC) * 4u;
        b_tile[slot] = vec4<f32>(load_b(b_base, k0 + k, col), load_b(b_base, k0 + k, col + 1u),
                                 load_b(b_base, k0 + k, col + 2u), load_b(b_base, k0 + k, col + 3u));
      }
      workgroupBarrier();
      for (var k = 0u; k < TILE_K; k = k + 1u) {
        let av = a_tile[k * TILE_M_VEC + lid.y];
        let bv = b_tile[k * TILE_N_VEC + lid.x];
        acc[0] = fma(vec4<f32>(av.x), bv, acc[0]);
        acc[1] = fma(vec4<f32>(av.y), bv, acc[1]);
        acc[2] = fma(vec4<f32>(av.z), bv, acc[2]);
        acc[3] = fma(vec4<f32>(av.w), bv, acc[3]);
      }
      workgroupBarrier();
    }
  } else if (row0 < params.M && col0 < params.N) {
    // A thread whose whole 4×4 block lies outside C skips the loop: with no barrier to meet it may
    // leave early, and on SwiftShader (where invocations are CPU SIMD lanes) the loads and FMAs of
    // such threads are real work: a 32-row product in a 64-row tile spent half its time there.
    // No bounds checks in the loop (SwiftShader runs each as a masked branch): k < K by the loop,
    // and rows / columns past C's edge re-read the last one; their sums are never stored.
    let r0 = row0;
    let r1 = min(row0 + 1u, params.M - 1u);
    let r2 = min(row0 + 2u, params.M - 1u);
    let r3 = min(row0 + 3u, params.M - 1u);
    let c0 = col0;
    let c1 = min(col0 + 1u, params.N - 1u);
    let c2 = min(col0 + 2u, params.N - 1u);
    let c3 = min(col0 + 3u, params.N - 1u);
    for (var k = 0u; k < params.K; k = k + 1u) {
      let av = vec4<f32>(a_at(a_base, r0, k), a_at(a_base, r1, k), a_at(a_base, r2, k),
                         a_at(a_base, r3, k));
      let bv = vec4<f32>(b_at(b_base, k, c0), b_at(b_base, k, c1), b_at(b_base, k, c2),
                         b_at(b_base, k, c3));
      acc[0] = fma(vec4<f32>(av.x), bv, acc[0]);
      acc[1] = fma(vec4<f32>(av.y), bv, acc[1]);
      acc[2] = fma(vec4<f32>(av.z), bv, acc[2]);
      acc[3] = fma(vec4<f32>(av.w), bv, acc[3]);
    }
  }

  for (var i = 0u; i < 4u; i = i + 1u) {
    let row = row0 + i;
    if (row >= params.M) { break; }
    for (var j = 0u; j < 4u; j = j + 1u) {
      let col = col0 + j;
      if (col >= params.N) { break; }
      let index = c_base + row * params.ldC + col;
      var value = params.alpha * acc[i][j];
      if (params.accumulate == 1u) { value = value + c[index]; }
      c[index] = value;
    }
  }
}
