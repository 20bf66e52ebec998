// attention_gather_do.wgsl — included by attention_backward_dq.wgsl and attention_backward_dkv.wgsl
// (the shader loader's #include, src/engine/shaders.ts). One vec4 of a row of dO, the gradient of
// the attention output, read as attention_gather.wgsl reads q, k and v (zero past HEAD_DIM; the
// including kernel declares the binding dO and the override HEAD_DIM).

fn gather_do(base: u32, c: u32) -> vec4<f32> {
  if (HEAD_DIM % 4u == 0u) {
    let i = base + c * 4u;
    return vec4<f32>(dO[i], dO[i + 1u], dO[i + 2u], dO[i + 3u]);
  }
  var x = vec4<f32>();
  for (var e = 0u; e < 4u; e = e + 1u) {
    if (c * 4u + e < HEAD_DIM) { x[e] = dO[base + c * 4u + e]; }
  }
  return x;
}
