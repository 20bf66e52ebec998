// src/ref/half.ts: bf16 / f16 rounding (round to nearest even, as torch's .to(dtype)), exact
// widening, and the two-per-u32 packing the kernels read.
import { describe, expect, it } from 'vitest';
import {
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  packHalfBits,
  roundToHalf,
  unpackHalfBits,
} from '../../src/ref/half';

const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];
const fromBits = (b: number) => new Float32Array(Uint32Array.of(b).buffer)[0];

describe('bf16', () => {
  it('known values', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(f32ToBf16Bits(-2)).toBe(0xc000);
    expect(f32ToBf16Bits(0)).toBe(0);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN)))).toBe(true);
    expect(bf16BitsToF32(0x3fc0)).toBe(1.5);
  });

  it('rounds to nearest, ties to even', () => {
    // 1 + 2^-8 is halfway between bf16 1 (even) and 1 + 2^-7: ties go to the even mantissa.
    expect(f32ToBf16Bits(fromBits(0x3f808000))).toBe(0x3f80);
    // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: rounds up to even.
    expect(f32ToBf16Bits(fromBits(0x3f818000))).toBe(0x3f82);
    expect(f32ToBf16Bits(fromBits(0x3f808001))).toBe(0x3f81); // just above halfway
    expect(f32ToBf16Bits(fromBits(0x3f807fff))).toBe(0x3f80); // just below
    // The largest finite f32 rounds up to Inf.
    expect(f32ToBf16Bits(fromBits(0x7f7fffff))).toBe(0x7f80);
  });

  it('widening is exact and re-rounding is the identity', () => {
    for (let h = 0; h < 0x10000; h += 7) {
      if ((h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0) continue; // NaNs
      expect(f32ToBf16Bits(bf16BitsToF32(h))).toBe(h);
      expect(bitsOf(bf16BitsToF32(h))).toBe((h << 16) >>> 0);
    }
  });
});

describe('f16', () => {
  it('known values', () => {
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(-2)).toBe(0xc000);
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // halfway past the largest: overflows to Inf
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f32ToF16Bits(2 ** -25)).toBe(0); // its half: tie to even 0
    expect(f32ToF16Bits(1.5 * 2 ** -25)).toBe(1); // above half
    expect(f32ToF16Bits(2 ** -14)).toBe(0x0400); // smallest normal
    expect(f16BitsToF32(0x3555)).toBeCloseTo(0.33325195, 8);
  });

  it('rounds to nearest, ties to even (normals and subnormals)', () => {
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie → even
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie → even (up)
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01);
    expect(f32ToF16Bits(2.5 * 2 ** -24)).toBe(2); // subnormal tie → even
    expect(f32ToF16Bits(3.5 * 2 ** -24)).toBe(4);
  });

  it('widening is exact and re-rounding is the identity', () => {
    for (let h = 0; h < 0x10000; h++) {
      if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) continue; // NaNs
      expect(f32ToF16Bits(f16BitsToF32(h))).toBe(h);
    }
  });

  it('matches the nearest of the two neighbours on random values', () => {
    let seed = 1;
    for (let i = 0; i < 2000; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      const x = Math.fround((seed / 2 ** 31) * 2 ** ((i % 30) - 20)); // positive
      const h = f32ToF16Bits(x);
      const y = f16BitsToF32(h);
      const up = f16BitsToF32(h + 1);
      const down = f16BitsToF32(Math.max(0, h - 1));
      expect(Math.abs(y - x)).toBeLessThanOrEqual(Math.abs(up - x));
      expect(Math.abs(y - x)).toBeLessThanOrEqual(Math.abs(down - x));
    }
  });
});

describe('packing', () => {
  it('element e is half e & 1 of word e >> 1, odd counts padded with 0', () => {
    const bits = Uint16Array.of(0x1111, 0x2222, 0x3333);
    const words = packHalfBits(bits);
    expect(Array.from(words)).toEqual([0x22221111, 0x00003333]);
    expect(Array.from(unpackHalfBits(words, 3))).toEqual([0x1111, 0x2222, 0x3333]);
  });

  it('roundToHalf is the nearest representable value', () => {
    expect(Array.from(roundToHalf([0.1, 1 / 3], 'bf16'))).toEqual([
      bf16BitsToF32(0x3dcd),
      bf16BitsToF32(0x3eab),
    ]);
  });
});
