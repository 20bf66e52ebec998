// attention_gather.wgsl — included by attention_forward.wgsl, attention_backward_dq.wgsl and
// attention_backward_dkv.wgsl (the shader loader's #include, src/engine/shaders.ts).
// Reads one vec4 of a q, k or v row. The including kernel declares the bindings q, k, v (f32
// arrays) and the override HEAD_DIM; WGSL has no pointers to storage in function parameters, so
// there is one gather per binding.
//
// Elements 4c … 4c+3 of the row starting at `base`, zero past HEAD_DIM. When HEAD_DIM is a multiple
// of 4 (every head size of the supported models) the guard is dropped: SwiftShader ran the guarded
// loop element by element, branches included (decode attention 1.8× faster without it).

fn gather_q(base: u32, c: u32) -> vec4<f32> {
  if (HEAD_DIM % 4u == 0u) {
    let i = base + c * 4u;
    return vec4<f32>(q[i], q[i + 1u], q[i + 2u], q[i + 3u]);
  }
  var x = vec4<f32>();
  for (var e = 0u; e < 4u; e = e + 1u) {
    if (c * 4u + e < HEAD_DIM) { x[e] = q[base + c * 4u + e]; }
  }
  return x;
}

fn gather_k(base: u32, c: u32) -> vec4<f32> {
  if (HEAD_DIM % 4u == 0u) {
    let i = base + c * 4u;
    return vec4<f32>(k[i], k[i + 1u], k[i + 2u], k[i + 3u]);
  }
  var x = vec4<f32>();
  for (var e = 0u; e < 4u; e = e + 1u) {
    if (c * 4u + e < HEAD_DIM) { x[e] = k[base + c * 4u + e]; }
  }
  return x;
}

fn gather_v(base: u32, c: u32) -> vec4<f32> {
  if (HEAD_DIM % 4u == 0u) {
    let i = base + c * 4u;
    return vec4<f32>(v[i], v[i + 1u], v[i + 2u], v[i + 3u]);
  }
  var x = vec4<f32>();
  for (var e = 0u; e < 4u; e = e + 1u) {
    if (c * 4u + e < HEAD_DIM) { x[e] = v[base + c * 4u + e]; }
  }
  return x;
}
