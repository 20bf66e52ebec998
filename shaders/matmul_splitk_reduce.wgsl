// matmul_splitk_reduce.wgsl — the second pass of a split-K matmul (matmul_gpu*.wgsl with
// splits > 1): C[b, m, n] = alpha · Σ_s P[b·splits + s, m, n] (+ C when accumulate = 1), the
// partial sums added in split order s = 0, 1, … so the result is deterministic.
//
// Shapes: P dense (batch·splits, M, N); C as in matmul.wgsl: rows ldC apart from offsetC, batch
// b at b·strideC. Bindings: 0 p (read), 1 c (read_write), 2 params (uniform).
// Dispatch: (ceil(N / WG), M, batch), one invocation per output.

override WG: u32 = 64;

struct Params {
  M: u32,
  N: u32,
  splits: u32,
  accumulate: u32, // 1: add into C; 0: overwrite (2, continuing a sum, is never split)
  alpha: f32,
  ldC: u32,
  offsetC: u32,
  strideC: u32,
}

@group(0) @binding(0) var<storage, read> p: array<f32>;
@group(0) @binding(1) var<storage, read_write> c: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let col = wid.x * WG + lid.x;
  let row = wid.y;
  if (col >= params.N) { return; }
  let mn = params.M * params.N;
  var index = wid.z * params.splits * mn + row * params.N + col;
  var sum = 0.0;
  for (var s = 0u; s < params.splits; s = s + 1u) {
    sum = sum + p[index];
    index = index + mn;
  }
  let out = params.offsetC + wid.z * params.strideC + row * params.ldC + col;
  var value = params.alpha * sum;
  if (params.accumulate == 1u) { value = value + c[out]; }
  c[out] = value;
}
