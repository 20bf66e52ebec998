// matmul_vec4.wgsl — the barrier-free variant of matmul.wgsl (KernelTuning.avoidBarriers) for
// aligned operands, reading A and B four floats at a time.
//
// Same contract, uniforms, bindings and dispatch as matmul.wgsl, restricted to what vec4 reads
// allow (src/kernels/matmul.ts vec4Aligned checks it): K, ldA, offsetA, strideA and strideB
// multiples of 4, and M too when A is transposed, N too when B is not. Each thread still owns a 4×4 block of C and adds the products in the same order, one k at a
// time with the same fma, so its results are bit-identical to matmul.wgsl's (tests check it).
// What changes is the loads: per 4 values of k, a thread reads 4 vec4 of A and 4 vec4 of B (4×4
// blocks, transposed in registers where the stored layout runs the other way) instead of 32
// scalars, each with its own bounds check and address arithmetic, and the 4×4 block of C lives in
// four named vec4 (matmul.wgsl's indexed array is kept in memory by SwiftShader's compiler). The
// loop has no bounds checks at all: rows and columns past C's edge re-read the last ones and are
// never stored (a_row_start); with a guard per vec4 the aha step's products took 1.4–1.6× longer.
// Why not in matmul.wgsl: a binding has one element type, and vec4 arrays would drop the last
// 1–3 floats of buffers whose length is not a multiple of 4 (primes are legal shapes there).

override WG_X: u32 = 16;
override WG_Y: u32 = 16;
override TRANS_A: bool = false;
override TRANS_B: bool = false;

struct Params {
  M: u32,
  N: u32,
  K: u32,
  accumulate: u32, // 1: C += alpha·op(A)·op(B); 2: the sums start from C (see matmul.wgsl)
  strideA: u32,
  strideB: u32,
  strideC: u32,
  alpha: f32,
  ldA: u32,
  ldC: u32,
  offsetA: u32,
  offsetC: u32,
}

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

/**
 * Where row `row` of A (not transposed), or row `col` of the stored (N, K) B (transposed), starts,
 * in vec4. Rows past M and columns past N are never stored (store_c_row), so they read the last
 * row / column again instead of zeros: the loop needs no guard, and every stored value gets the
 * same bits. (Per-load guards cost SwiftShader a masked branch per vec4.)
 */
fn a_row_start(base: u32, row: u32) -> u32 {
  return (base + min(row, params.M - 1u) * params.ldA) / 4u;
}

fn bt_row_start(base: u32, col: u32) -> u32 {
  return (base + min(col, params.N - 1u) * params.K) / 4u;
}

/** The dot products' starting values for row `row`, columns col..col+3 (accumulate 2). */
fn load_c_row(base: u32, row: u32, col: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  if (row >= params.M) { return v; }
  for (var j = 0u; j < 4u; j = j + 1u) {
    if (col + j < params.N) { v[j] = c[base + row * params.ldC + col + j]; }
  }
  return v;
}

/** Writes alpha·v (+ C when accumulating) to row `row`, columns col..col+3, inside C only. */
fn store_c_row(base: u32, row: u32, col: u32, v: vec4<f32>) {
  if (row >= params.M) { return; }
  for (var j = 0u; j < 4u; j = j + 1u) {
    if (col + j >= params.N) { return; }
    let index = base + row * params.ldC + col + j;
    var value = params.alpha * v[j];
    if (params.accumulate == 1u) { value = value + c[index]; }
    c[index] = value;
  }
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row0 = (wid.y * WG_Y + lid.y) * 4u;
  let col0 = (wid.x * WG_X + lid.x) * 4u;
  // No barriers below, so a thread with nothing to compute may leave at once.
  if (row0 >= params.M || col0 >= params.N) { return; }
  let a_base = params.offsetA + wid.z * params.strideA;
  let b_base = wid.z * params.strideB;
  let c_base = params.offsetC + wid.z * params.strideC;

  // Four named accumulators, not an array: indexed only by constants, they stay in registers.
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  if (params.accumulate == 2u) {
    acc0 = load_c_row(c_base, row0, col0);
    acc1 = load_c_row(c_base, row0 + 1u, col0);
    acc2 = load_c_row(c_base, row0 + 2u, col0);
    acc3 = load_c_row(c_base, row0 + 3u, col0);
  }
  let a_at0 = a_row_start(a_base, row0);
  let a_at1 = a_row_start(a_base, row0 + 1u);
  let a_at2 = a_row_start(a_base, row0 + 2u);
  let a_at3 = a_row_start(a_base, row0 + 3u);
  let b_at0 = bt_row_start(b_base, col0);
  let b_at1 = bt_row_start(b_base, col0 + 1u);
  let b_at2 = bt_row_start(b_base, col0 + 2u);
  let b_at3 = bt_row_start(b_base, col0 + 3u);
  for (var k = 0u; k < params.K; k = k + 4u) {
    // Rows row0..row0+3 of op(A) over k..k+3: a<i>[kk] = op(A)[row0 + i, k + kk].
    var a0: vec4<f32>;
    var a1: vec4<f32>;
    var a2: vec4<f32>;
    var a3: vec4<f32>;
    if (TRANS_A) {
      // M is a multiple of 4 and row0 < M: each vec4 (4 rows at one k) is inside A's row k.
      let at = (a_base + k * params.ldA + row0) / 4u;
      let pitch = params.ldA / 4u;
      let r0 = a[at];
      let r1 = a[at + pitch];
      let r2 = a[at + 2u * pitch];
      let r3 = a[at + 3u * pitch];
      a0 = vec4<f32>(r0.x, r1.x, r2.x, r3.x);
      a1 = vec4<f32>(r0.y, r1.y, r2.y, r3.y);
      a2 = vec4<f32>(r0.z, r1.z, r2.z, r3.z);
      a3 = vec4<f32>(r0.w, r1.w, r2.w, r3.w);
    } else {
      a0 = a[a_at0 + k / 4u];
      a1 = a[a_at1 + k / 4u];
      a2 = a[a_at2 + k / 4u];
      a3 = a[a_at3 + k / 4u];
    }
    // Rows k..k+3 of op(B) over columns col0..col0+3: b<kk>[j] = op(B)[k + kk, col0 + j].
    var b0: vec4<f32>;
    var b1: vec4<f32>;
    var b2: vec4<f32>;
    var b3: vec4<f32>;
    if (TRANS_B) {
      let c0 = b[b_at0 + k / 4u];
      let c1 = b[b_at1 + k / 4u];
      let c2 = b[b_at2 + k / 4u];
      let c3 = b[b_at3 + k / 4u];
      b0 = vec4<f32>(c0.x, c1.x, c2.x, c3.x);
      b1 = vec4<f32>(c0.y, c1.y, c2.y, c3.y);
      b2 = vec4<f32>(c0.z, c1.z, c2.z, c3.z);
      b3 = vec4<f32>(c0.w, c1.w, c2.w, c3.w);
    } else {
      // N is a multiple of 4 and col0 < N, so each vec4 is inside its row.
      let at = (b_base + k * params.N + col0) / 4u;
      let pitch = params.N / 4u;
      b0 = b[at];
      b1 = b[at + pitch];
      b2 = b[at + 2u * pitch];
      b3 = b[at + 3u * pitch];
    }
    // matmul.wgsl's order: for each k, every row's fma.
    acc0 = fma(vec4<f32>(a0.x), b0, acc0);
    acc1 = fma(vec4<f32>(a1.x), b0, acc1);
    acc2 = fma(vec4<f32>(a2.x), b0, acc2);
    acc3 = fma(vec4<f32>(a3.x), b0, acc3);
    acc0 = fma(vec4<f32>(a0.y), b1, acc0);
    acc1 = fma(vec4<f32>(a1.y), b1, acc1);
    acc2 = fma(vec4<f32>(a2.y), b1, acc2);
    acc3 = fma(vec4<f32>(a3.y), b1, acc3);
    acc0 = fma(vec4<f32>(a0.z), b2, acc0);
    acc1 = fma(vec4<f32>(a1.z), b2, acc1);
    acc2 = fma(vec4<f32>(a2.z), b2, acc2);
    acc3 = fma(vec4<f32>(a3.z), b2, acc3);
    acc0 = fma(vec4<f32>(a0.w), b3, acc0);
    acc1 = fma(vec4<f32>(a1.w), b3, acc1);
    acc2 = fma(vec4<f32>(a2.w), b3, acc2);
    acc3 = fma(vec4<f32>(a3.w), b3, acc3);
  }
  store_c_row(c_base, row0, col0, acc0);
  store_c_row(c_base, row0 + 1u, col0, acc1);
  store_c_row(c_base, row0 + 2u, col0, acc2);
  store_c_row(c_base, row0 + 3u, col0, acc3);
}
