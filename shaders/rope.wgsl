// rope.wgsl — rotary position embedding, Hugging Face `rotate_half` convention, out of place, f32.
// For each token row t, head h and pair index i < D/2 (x1 = x[t, h, i], x2 = x[t, h, i + D/2]):
//   angle = f32(positions[t]) · inv_freq[i]            (one f32 product, as HF's f32 freqs)
//   forward:  y[i] = x1·cos − x2·sin,   y[i + D/2] = x2·cos + x1·sin
//   INVERSE:  y[i] = x1·cos + x2·sin,   y[i + D/2] = x2·cos − x1·sin
// The inverse is the transposed rotation, i.e. exactly the backward pass (dx = Rᵀ·dy).
// inv_freq[i] = theta^(−2i/D) is computed on the CPU in f32 as HF does (src/ref/rope.ts).
//
// sin/cos: WGSL only bounds builtin sin/cos error on [−π, π] (and loosely), while angles here
// reach the position count (inv_freq[0] = 1). So the angle is reduced by π/4 octants with the
// Cody-Waite constants of Cephes sinf (π/4 = DP1 + DP2 + DP3, DP1 and DP2 short enough that the
// products with the split octant count are exact) and evaluated with Cephes' minimax polynomials:
// about 1e-7 absolute error for angles up to ~1e5, on every GPU alike.
//
// Shapes (row-major): x (R, Hx, D) with R = N·T and Hx = H for q, Hkv for k; positions u32 (R);
// inv_freq (D/2); y (R, Hx, D).
// Bindings: 0 x, 1 positions, 2 inv_freq (read), 3 y (read_write), 4 params (uniform).
// Dispatch: one thread per rotated pair, ceil(R·Hx·D/2 / WG) workgroups laid out by splitGrid
// (flat workgroup index wid.x + wid.y·nwg.x, tail guarded).

override WG: u32 = 256;
override INVERSE: bool = false;

struct Params {
  rows: u32, // R
  heads: u32, // Hx
  pairs: u32, // D / 2
}

@group(0) @binding(0) var<storage, read> x: array<f32>; // (R, Hx, D)
@group(0) @binding(1) var<storage, read> positions: array<u32>; // (R)
@group(0) @binding(2) var<storage, read> inv_freq: array<f32>; // (D/2)
@group(0) @binding(3) var<storage, read_write> y: array<f32>; // (R, Hx, D)
@group(0) @binding(4) var<uniform> params: Params;

const FOUR_OVER_PI: f32 = 1.27323954473516;
const DP1: f32 = 0.78515625; // 8 significant bits
const DP2: f32 = 2.4187564849853515625e-4; // 11 significant bits
const DP3: f32 = 3.77489497744594108e-8;

// (sin a, cos a) for a ≥ 0.
fn sin_cos(a: f32) -> vec2<f32> {
  var j = u32(a * FOUR_OVER_PI);
  j = j + (j & 1u); // even octant count: the reduced argument lies in [−π/4, π/4]
  // Split j so that every product with DP1 / DP2 fits in 24 bits (exact) up to j < 2^20.
  let jh = f32(j & ~255u);
  let jl = f32(j & 255u);
  var r = a - jh * DP1;
  r = r - jl * DP1;
  r = r - jh * DP2;
  r = r - jl * DP2;
  r = r - f32(j) * DP3;
  let z = r * r;
  let s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
  let c = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z
    - 0.5 * z + 1.0;
  switch ((j >> 1u) & 3u) {
    case 0u: { return vec2<f32>(s, c); }
    case 1u: { return vec2<f32>(c, -s); }
    case 2u: { return vec2<f32>(-s, -c); }
    default: { return vec2<f32>(-c, s); }
  }
}

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
  let pairs = params.pairs;
  if (i >= params.rows * params.heads * pairs) { return; }
  let pair = i % pairs;
  let row_head = i / pairs; // t · Hx + h
  let row = row_head / params.heads;
  let base = row_head * 2u * pairs + pair;

  let angle = f32(positions[row]) * inv_freq[pair];
  let sc = sin_cos(angle);
  let x1 = x[base];
  let x2 = x[base + pairs];
  if (INVERSE) {
    y[base] = x1 * sc.y + x2 * sc.x;
    y[base + pairs] = x2 * sc.y - x1 * sc.x;
  } else {
    y[base] = x1 * sc.y - x2 * sc.x;
    y[base + pairs] = x2 * sc.y + x1 * sc.x;
  }
}
