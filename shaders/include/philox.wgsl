// philox.wgsl — included by sample.wgsl and sample_combine.wgsl (the shader loader's #include,
// src/engine/shaders.ts): Philox-4x32-10, the counter-based RNG of the sampling kernels (mirrors
// src/ref/rng.ts), and the uniform in [0, 1) from 24 of its bits.

fn mulhi32(a: u32, b: u32) -> u32 {
  let a_lo = a & 0xffffu;
  let a_hi = a >> 16u;
  let b_lo = b & 0xffffu;
  let b_hi = b >> 16u;
  let lo_lo = a_lo * b_lo;
  let lo_hi = a_lo * b_hi;
  let hi_lo = a_hi * b_lo;
  let hi_hi = a_hi * b_hi;
  let cross = (lo_lo >> 16u) + (lo_hi & 0xffffu) + (hi_lo & 0xffffu);
  return hi_hi + (lo_hi >> 16u) + (hi_lo >> 16u) + (cross >> 16u);
}

fn philox4x32(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
  var c = counter;
  var k = key;
  for (var round = 0u; round < 10u; round = round + 1u) {
    let hi0 = mulhi32(0xd2511f53u, c.x);
    let lo0 = 0xd2511f53u * c.x;
    let hi1 = mulhi32(0xcd9e8d57u, c.z);
    let lo1 = 0xcd9e8d57u * c.z;
    c = vec4<u32>(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k = k + vec2<u32>(0x9e3779b9u, 0xbb67ae85u);
  }
  return c;
}

fn uniform_from_bits(bits: u32) -> f32 {
  return f32(bits >> 8u) * (1.0 / 16777216.0);
}
