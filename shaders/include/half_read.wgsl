// half_read.wgsl — widening read of a 16-bit weight packed two per u32 (frozen base weights stored
// as bf16 or f16, src/model/parameters.ts). Element e of a packed tensor is half (e & 1) of word
// e >> 1: the low 16 bits hold the even element (little-endian, as a 16-bit array's bytes lie).
// HALF_BF16 picks the format: bf16 is the top half of an f32, so widening is a 16-bit shift;
// f16 goes through unpack2x16float, which every adapter has (no shader-f16 feature needed).

override HALF_BF16: bool = true;

/** The f32 value of half `odd` (0: low 16 bits, 1: high) of a packed word; exact for both formats. */
fn widen_half(word: u32, odd: bool) -> f32 {
  if (HALF_BF16) {
    return bitcast<f32>(select(word << 16u, word & 0xffff0000u, odd));
  }
  let pair = unpack2x16float(word);
  return select(pair.x, pair.y, odd);
}
