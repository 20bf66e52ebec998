// nf4_read.wgsl — reading a frozen weight stored as NF4 (issue #37, QLoRA-style; docs/grpo.md):
// 4-bit codes into bitsandbytes' NF4 code book, one f32 absmax per block of 2^blockShift elements
// along the flat row-major index of the stored weight. One u32 buffer `b` holds both (the layout
// src/ref/nf4-matmul.ts packNf4 writes): the code bytes as they are (byte i in bits 8·(i & 3) of
// word i >> 2; element 2i in the HIGH nibble of byte i, 2i + 1 in the low one, bitsandbytes'
// packing), padded to a whole word, then the absmax values' f32 bits from word
// params.absmaxOffset = ceil(count / 8). Element e's value is NF4_CODE[code] · absmax[e >> shift]
// as one f32 product, as src/ref/nf4.ts dequantizeNf4 computes it, so the kernels multiply the
// same values a dequantised f32 weight would hold.
// The including kernel declares `b: array<u32>` and `params` with absmaxOffset and blockShift.

// bitsandbytes' NF4 code book (functional.py get_4bit_type('nf4')), f32 values; the kernel test
// checks them against src/ref/nf4.ts NF4_CODE.
const NF4_CODE = array<f32, 16>(
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
  -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
);

/** The f32 absmax of element e's block. */
fn nf4_scale(e: u32) -> f32 {
  return bitcast<f32>(b[params.absmaxOffset + (e >> params.blockShift)]);
}

/** The dequantised value of element e (one element: its word and its block's absmax). */
fn nf4_at(e: u32) -> f32 {
  let shift = 8u * ((e >> 1u) & 3u) + select(0u, 4u, (e & 1u) == 0u);
  return NF4_CODE[(b[e >> 3u] >> shift) & 15u] * nf4_scale(e);
}

/**
 * NF4_CODE[q] for four codes at once as a tree of 15 selects on the codes' bits: no indexed read
 * of a constant array, which some backends copy into per-thread memory first. Same values.
 */
fn nf4_values4(q: vec4<u32>) -> vec4<f32> {
  let b0 = (q & vec4<u32>(1u)) != vec4<u32>(0u);
  let b1 = (q & vec4<u32>(2u)) != vec4<u32>(0u);
  let b2 = (q & vec4<u32>(4u)) != vec4<u32>(0u);
  let b3 = (q & vec4<u32>(8u)) != vec4<u32>(0u);
  let v0 = select(vec4<f32>(NF4_CODE[0]), vec4<f32>(NF4_CODE[1]), b0);
  let v1 = select(vec4<f32>(NF4_CODE[2]), vec4<f32>(NF4_CODE[3]), b0);
  let v2 = select(vec4<f32>(NF4_CODE[4]), vec4<f32>(NF4_CODE[5]), b0);
  let v3 = select(vec4<f32>(NF4_CODE[6]), vec4<f32>(NF4_CODE[7]), b0);
  let v4 = select(vec4<f32>(NF4_CODE[8]), vec4<f32>(NF4_CODE[9]), b0);
  let v5 = select(vec4<f32>(NF4_CODE[10]), vec4<f32>(NF4_CODE[11]), b0);
  let v6 = select(vec4<f32>(NF4_CODE[12]), vec4<f32>(NF4_CODE[13]), b0);
  let v7 = select(vec4<f32>(NF4_CODE[14]), vec4<f32>(NF4_CODE[15]), b0);
  let w0 = select(v0, v1, b1);
  let w1 = select(v2, v3, b1);
  let w2 = select(v4, v5, b1);
  let w3 = select(v6, v7, b1);
  return select(select(w0, w1, b2), select(w2, w3, b2), b3);
}

/**
 * Elements e … e + 3 (e a multiple of 4): half a word, all four in one absmax block (blocks are
 * at least 4 long). Byte order within the half: e and e + 1 in the low byte (high, low nibble).
 */
fn nf4_at4(e: u32) -> vec4<f32> {
  let half = b[e >> 3u] >> (16u * ((e >> 2u) & 1u));
  let q = vec4<u32>(half >> 4u, half, half >> 12u, half >> 8u) & vec4<u32>(15u);
  return nf4_values4(q) * nf4_scale(e);
}
