// CPU reference of 16-bit weight storage (bf16 / f16, two values per u32) and of the kernels that
// widen it: shaders/include/half_read.wgsl, matmul_packed16.wgsl, embedding_forward_packed16.wgsl.
// Rounding is round-to-nearest-even, as torch's .to(torch.bfloat16 / torch.float16) does, so a
// checkpoint converted here holds the values PyTorch would give; widening back to f32 is exact.
import { embeddingForwardRef } from './embedding';
import { matmulRef, type MatmulShape } from './matmul';

/** The 16-bit storage formats of frozen weights. */
export type HalfFormat = 'bf16' | 'f16';

/** A tensor's 16-bit values as a checkpoint ships them (row-major, one value per element). */
export interface HalfTensor {
  format: HalfFormat;
  bits: Uint16Array;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** bf16 bits of `x` (round to nearest even; NaN stays a quiet NaN, ±Inf and overflow give ±Inf). */
export function f32ToBf16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0];
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return (bits >>> 16) | 0x40;
  const rounded = bits + 0x7fff + ((bits >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

/** The f32 value of bf16 bits `h` (exact: bf16 is the top half of an f32). */
export function bf16BitsToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0];
}

/** f16 bits of `x` (round to nearest even, subnormals included; overflow gives ±Inf). */
export function f32ToF16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0];
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  // Unbiased exponent; f16 normals cover [−14, 15].
  const e = exp - 127;
  if (e > 15) return sign | 0x7c00;
  if (e >= -14) {
    // Keep 10 of 23 mantissa bits, rounding the 13 dropped ones to nearest even.
    let h = ((e + 15) << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h += 1; // may carry into Inf
    return sign | h;
  }
  if (e < -25) return sign; // below half the smallest subnormal: ±0
  // Subnormal: value = m · 2^−24 with m = (1.mant) · 2^(e + 24), rounded to nearest even.
  const full = mant | 0x800000; // 24-bit significand
  const shift = -e - 1; // drops 14 + (−14 − e) bits: 13 for the f16 mantissa, the rest scale
  let m = full >>> shift;
  const rest = full & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rest > half || (rest === half && (m & 1) === 1)) m += 1;
  return sign | m;
}

/** The f32 value of f16 bits `h` (exact). */
export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** 16-bit values of `data` in `format` (round to nearest even). */
export function toHalfBits(data: ArrayLike<number>, format: HalfFormat): Uint16Array {
  const round = format === 'bf16' ? f32ToBf16Bits : f32ToF16Bits;
  const out = new Uint16Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = round(data[i]);
  return out;
}

/** The f32 values of 16-bit `bits` in `format`. */
export function widenHalfBits(bits: ArrayLike<number>, format: HalfFormat): Float32Array {
  const widen = format === 'bf16' ? bf16BitsToF32 : f16BitsToF32;
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = widen(bits[i]);
  return out;
}

/** `data` rounded to `format` and widened back: the values a packed tensor holds. */
export function roundToHalf(data: ArrayLike<number>, format: HalfFormat): Float32Array {
  return widenHalfBits(toHalfBits(data, format), format);
}

/**
 * 16-bit values packed two per u32 as the kernels read them: element e in the low (e even) or high
 * (e odd) half of word e >> 1; an odd count leaves the last word's high half 0.
 */
export function packHalfBits(bits: Uint16Array): Uint32Array {
  const words = new Uint32Array(Math.ceil(bits.length / 2));
  for (let e = 0; e < bits.length; e++) words[e >> 1] |= bits[e] << (e & 1 ? 16 : 0);
  return words;
}

/** The `count` 16-bit values of packed `words` (packHalfBits' inverse). */
export function unpackHalfBits(words: Uint32Array, count: number): Uint16Array {
  const bits = new Uint16Array(count);
  for (let e = 0; e < count; e++) bits[e] = (words[e >> 1] >>> (e & 1 ? 16 : 0)) & 0xffff;
  return bits;
}

/** matmul_packed16.wgsl: C = alpha·op(A)·op(B) with B the widened values of packed `bWords`. */
export function matmulPacked16Ref(
  a: ArrayLike<number>,
  bWords: Uint32Array,
  format: HalfFormat,
  shape: MatmulShape,
  cInit?: Float32Array,
): Float32Array {
  const count = (shape.batch ?? 1) * shape.K * shape.N;
  const b = widenHalfBits(unpackHalfBits(bWords, count), format);
  return matmulRef(a, b, shape, cInit);
}

/** embedding_forward_packed16.wgsl: rows of the widened (V, C) table packed in `weightWords`. */
export function embeddingForwardPacked16Ref(
  tokens: ArrayLike<number>,
  weightWords: Uint32Array,
  format: HalfFormat,
  V: number,
  C: number,
): Float64Array {
  const weight = widenHalfBits(unpackHalfBits(weightWords, V * C), format);
  return embeddingForwardRef(tokens, weight, V, C);
}
