// matmul_gpu_body.wgsl — the body shared by matmul_gpu.wgsl, matmul_gpu_vec4.wgsl and
// matmul_gpu_packed16.wgsl: the GPU-oriented register-blocked matmul (contract: matmul.wgsl's
// header, plus split-K below). The including kernel declares struct Params, the bindings a, b, c,
// params, and how one global load reads its operands:
//   const A_VEC / B_VEC: u32   elements per load along the operand's contiguous dimension (1, 2, 4)
//   fn fetch_a(e: u32) -> vec4<f32>, fn fetch_b(e: u32) -> vec4<f32>: elements e … e + VEC − 1
//   (e a multiple of VEC; the components past VEC are unused).
//
// What a real GPU gets (and the staged 64×64 kernel lacks):
// - Coalesced global loads for every layout: the threads of a workgroup walk each operand's tile
//   along its contiguous dimension (k for x·Wᵀ's A and B, m or n otherwise), so adjacent threads
//   read adjacent words; the tile is transposed on its way into workgroup memory.
// - Register blocks of TM×4 outputs per thread (TM = 8: 128×64 tiles with 16×16 threads).
// - Double-buffered workgroup tiles with a register prefetch: the next k-tile's global loads are
//   issued before the current tile's FMAs and stored into the other buffer after them, one barrier
//   per k-tile.
// - No bounds checks inside workgroups whose tile lies inside every matrix (a workgroup-uniform
//   branch picks the unguarded loads); edge tiles load zeros outside and guard their stores.
// - Split-K (params.splits > 1): workgroup z = batch·splits + s sums k in
//   [s·kChunk, min(K, (s + 1)·kChunk)) and writes its raw sums to c as dense (batch·splits, M, N)
//   partials; matmul_splitk_reduce.wgsl adds them in split order (deterministic) and applies alpha
//   and accumulate. With splits = 1 each output is one fma chain over k = 0…K−1 in order, as in
//   matmul.wgsl, so the bits equal the staged kernel's (accumulate 2 included).
// Workgroup memory: tiles stored [k][m] and [k][n] as vec4 of 4 consecutive rows / columns, each
// k-row padded by one vec4 so the transposing stores of k-contiguous loads spread over banks.

override WG_X: u32 = 16; // threads along N; each owns 4 consecutive columns
override WG_Y: u32 = 16; // threads along M; each owns TM consecutive rows
override TM: u32 = 8; // rows per thread: 4 or 8
override TILE_K: u32 = 16;
override TRANS_A: bool = false;
override TRANS_B: bool = false;

override BM: u32 = WG_Y * TM; // tile rows (derived; never set from TS)
override BN: u32 = WG_X * 4u; // tile columns (derived)
override THREADS: u32 = WG_X * WG_Y; // (derived)
override A_PITCH: u32 = BM / 4u + 1u; // vec4s per k-row of the A tile, one of padding (derived)
override B_PITCH: u32 = BN / 4u + 1u; // (derived)
// Loads per thread and k-tile (TS checks they divide evenly and are at most MAX_LOADS).
override A_LOADS: u32 = BM * TILE_K / (A_VEC * THREADS);
override B_LOADS: u32 = BN * TILE_K / (B_VEC * THREADS);

const MAX_TM: u32 = 8u;
const MAX_LOADS: u32 = 16u;

var<workgroup> a_tile: array<vec4<f32>, 2u * TILE_K * A_PITCH>;
var<workgroup> b_tile: array<vec4<f32>, 2u * TILE_K * B_PITCH>;

// The k-tile being fetched, held in registers between its global loads and its tile stores.
var<private> a_reg: array<vec4<f32>, MAX_LOADS>;
var<private> b_reg: array<vec4<f32>, MAX_LOADS>;

/** Tile coordinates (line, pos) of load unit u of A: pos runs along A's contiguous dimension. */
fn a_unit(u: u32) -> vec2<u32> {
  let per_line = select(TILE_K, BM, TRANS_A) / A_VEC;
  return vec2<u32>(u / per_line, (u % per_line) * A_VEC);
}

fn b_unit(u: u32) -> vec2<u32> {
  let per_line = select(BN, TILE_K, TRANS_B) / B_VEC;
  return vec2<u32>(u / per_line, (u % per_line) * B_VEC);
}

/**
 * Global loads of the k-tile starting at k0 into a_reg / b_reg. `interior`: the whole tile lies
 * inside M, N and [.., k_end), so no load is checked. A load's VEC elements are all inside or all
 * outside (the wrapper only picks VEC > 1 where the contiguous dimension is a multiple of it).
 */
fn fetch_tiles(a_base: u32, b_base: u32, tile_row: u32, tile_col: u32, k0: u32, k_end: u32,
               interior: bool, thread: u32) {
  if (interior) {
    for (var j = 0u; j < A_LOADS; j = j + 1u) {
      let t = a_unit(thread + j * THREADS);
      if (TRANS_A) {
        a_reg[j] = fetch_a(a_base + (k0 + t.x) * params.ldA + tile_row + t.y);
      } else {
        a_reg[j] = fetch_a(a_base + (tile_row + t.x) * params.ldA + k0 + t.y);
      }
    }
    for (var j = 0u; j < B_LOADS; j = j + 1u) {
      let t = b_unit(thread + j * THREADS);
      if (TRANS_B) {
        b_reg[j] = fetch_b(b_base + (tile_col + t.x) * params.K + k0 + t.y);
      } else {
        b_reg[j] = fetch_b(b_base + (k0 + t.x) * params.N + tile_col + t.y);
      }
    }
    return;
  }
  for (var j = 0u; j < A_LOADS; j = j + 1u) {
    let t = a_unit(thread + j * THREADS);
    var v = vec4<f32>(0.0);
    if (TRANS_A) {
      if (k0 + t.x < k_end && tile_row + t.y < params.M) {
        v = fetch_a(a_base + (k0 + t.x) * params.ldA + tile_row + t.y);
      }
    } else if (tile_row + t.x < params.M && k0 + t.y < k_end) {
      v = fetch_a(a_base + (tile_row + t.x) * params.ldA + k0 + t.y);
    }
    a_reg[j] = v;
  }
  for (var j = 0u; j < B_LOADS; j = j + 1u) {
    let t = b_unit(thread + j * THREADS);
    var v = vec4<f32>(0.0);
    if (TRANS_B) {
      if (tile_col + t.x < params.N && k0 + t.y < k_end) {
        v = fetch_b(b_base + (tile_col + t.x) * params.K + k0 + t.y);
      }
    } else if (k0 + t.x < k_end && tile_col + t.y < params.N) {
      v = fetch_b(b_base + (k0 + t.x) * params.N + tile_col + t.y);
    }
    b_reg[j] = v;
  }
}

/** Stores the fetched k-tile into workgroup buffer `buf`, transposed to [k][m] and [k][n]. */
fn store_tiles(buf: u32, thread: u32) {
  let a0 = buf * TILE_K * A_PITCH;
  for (var j = 0u; j < A_LOADS; j = j + 1u) {
    let t = a_unit(thread + j * THREADS);
    let v = a_reg[j];
    for (var e = 0u; e < A_VEC; e = e + 1u) {
      var k = t.y + e;
      var m = t.x;
      if (TRANS_A) {
        k = t.x;
        m = t.y + e;
      }
      a_tile[a0 + k * A_PITCH + m / 4u][m % 4u] = v[e];
    }
  }
  let b0 = buf * TILE_K * B_PITCH;
  for (var j = 0u; j < B_LOADS; j = j + 1u) {
    let t = b_unit(thread + j * THREADS);
    let v = b_reg[j];
    for (var e = 0u; e < B_VEC; e = e + 1u) {
      var k = t.x;
      var n = t.y + e;
      if (TRANS_B) {
        k = t.y + e;
        n = t.x;
      }
      b_tile[b0 + k * B_PITCH + n / 4u][n % 4u] = v[e];
    }
  }
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let splits = params.splits;
  let batch = wid.z / splits;
  let split = wid.z % splits;
  let tile_row = wid.y * BM;
  let tile_col = wid.x * BN;
  let a_base = params.offsetA + batch * params.strideA;
  let b_base = batch * params.strideB;
  let thread = lid.y * WG_X + lid.x;
  let row0 = tile_row + lid.y * TM;
  let col0 = tile_col + lid.x * 4u;
  let k_begin = split * params.kChunk;
  let k_end = min(params.K, k_begin + params.kChunk);
  let inside_mn = tile_row + BM <= params.M && tile_col + BN <= params.N;

  var acc: array<vec4<f32>, MAX_TM>;
  if (params.accumulate == 2u && splits == 1u) {
    let c_base = params.offsetC + batch * params.strideC;
    for (var i = 0u; i < TM; i = i + 1u) {
      for (var j = 0u; j < 4u; j = j + 1u) {
        if (row0 + i < params.M && col0 + j < params.N) {
          acc[i][j] = c[c_base + (row0 + i) * params.ldC + col0 + j];
        }
      }
    }
  }

  let tiles = (k_end - min(k_begin, k_end) + TILE_K - 1u) / TILE_K;
  if (tiles > 0u) {
    fetch_tiles(a_base, b_base, tile_row, tile_col, k_begin, k_end,
                inside_mn && k_begin + TILE_K <= k_end, thread);
    store_tiles(0u, thread);
  }
  workgroupBarrier();
  for (var t = 0u; t < tiles; t = t + 1u) {
    let cur = t & 1u;
    let next_k = k_begin + (t + 1u) * TILE_K;
    let has_next = t + 1u < tiles;
    // Issue the next tile's global loads now; their latency hides behind this tile's FMAs.
    if (has_next) {
      fetch_tiles(a_base, b_base, tile_row, tile_col, next_k, k_end,
                  inside_mn && next_k + TILE_K <= k_end, thread);
    }
    let a0 = cur * TILE_K * A_PITCH + lid.y * (TM / 4u);
    let b0 = cur * TILE_K * B_PITCH + lid.x;
    for (var k = 0u; k < TILE_K; k = k + 1u) {
      let bv = b_tile[b0 + k * B_PITCH];
      for (var q = 0u; q < TM / 4u; q = q + 1u) {
        let av = a_tile[a0 + k * A_PITCH + q];
        acc[4u * q] = fma(vec4<f32>(av.x), bv, acc[4u * q]);
        acc[4u * q + 1u] = fma(vec4<f32>(av.y), bv, acc[4u * q + 1u]);
        acc[4u * q + 2u] = fma(vec4<f32>(av.z), bv, acc[4u * q + 2u]);
        acc[4u * q + 3u] = fma(vec4<f32>(av.w), bv, acc[4u * q + 3u]);
      }
    }
    // The other buffer was last read in the previous iteration, before its closing barrier.
    if (has_next) {
      store_tiles(1u - cur, thread);
    }
    workgroupBarrier();
  }

  if (splits > 1u) {
    // Raw partial sums, dense (batch·splits, M, N): the reduce pass applies alpha and accumulate.
    let p_base = wid.z * params.M * params.N;
    for (var i = 0u; i < TM; i = i + 1u) {
      let row = row0 + i;
      if (row >= params.M) { break; }
      for (var j = 0u; j < 4u; j = j + 1u) {
        let col = col0 + j;
        if (col >= params.N) { break; }
        c[p_base + row * params.N + col] = acc[i][j];
      }
    }
    return;
  }
  let c_base = params.offsetC + batch * params.strideC;
  for (var i = 0u; i < TM; i = i + 1u) {
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
