// src/ref/nf4.ts against the independent numpy implementation of bitsandbytes' NF4 formula
// (tests/fixtures/nf4/make_nf4.py, goldens nf4_goldens.*): codes, absmax, dequantised values and
// the nested (double-quantised) statistics equal bit for bit (f32 compared as u32 bits).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  DYNAMIC_CODE,
  NF4_BLOCK_SIZE,
  NF4_CODE,
  dequantizeAbsmaxNested,
  dequantizeNf4,
  quantizeAbsmaxNested,
  quantizeNf4,
} from '../../src/ref/nf4';

const DIR = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/nf4');
type Range = [number, number];
interface Golden {
  nf4_code_bits: number[];
  dynamic_code: Range;
  cases: Array<{
    name: string;
    count: number;
    values: Range;
    codes: Range;
    absmax: Range;
    dequantized: Range;
  }>;
  nested: Array<{
    name: string;
    count: number;
    absmax: Range;
    codes: Range;
    absmax2: Range;
    offset_bits: number;
    dequantized: Range;
  }>;
}
const header = JSON.parse(readFileSync(join(DIR, 'nf4_goldens.json'), 'utf8')) as Golden;
const blob = readFileSync(join(DIR, 'nf4_goldens.bin'));
const bytes = ([off, len]: Range) =>
  new Uint8Array(blob.buffer, blob.byteOffset + off, len).slice();
const f32 = (r: Range) => new Float32Array(bytes(r).buffer);
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];

describe('NF4 reference vs numpy (bitsandbytes formula)', () => {
  it('code book and dynamic map are the same f32 values', () => {
    expect(bits(NF4_CODE)).toEqual(header.nf4_code_bits);
    expect(NF4_BLOCK_SIZE).toBe(64);
    expect(bits(DYNAMIC_CODE)).toEqual(bits(f32(header.dynamic_code)));
  });

  for (const c of header.cases) {
    it(`quantise + dequantise bit for bit: ${c.name} (${c.count} elements)`, () => {
      const values = f32(c.values);
      const t = quantizeNf4(values);
      expect(t.count).toBe(c.count);
      expect(Array.from(t.codes)).toEqual(Array.from(bytes(c.codes)));
      expect(bits(t.absmax)).toEqual(bits(f32(c.absmax)));
      expect(bits(dequantizeNf4(t))).toEqual(bits(f32(c.dequantized)));
    });
  }

  for (const c of header.nested) {
    it(`nested absmax statistics bit for bit: ${c.name} (${c.count} values)`, () => {
      const n = quantizeAbsmaxNested(f32(c.absmax));
      expect(bitsOf(n.offset)).toBe(c.offset_bits);
      expect(Array.from(n.codes)).toEqual(Array.from(bytes(c.codes)));
      expect(bits(n.absmax2)).toEqual(bits(f32(c.absmax2)));
      expect(bits(dequantizeAbsmaxNested(n))).toEqual(bits(f32(c.dequantized)));
    });
  }
});

describe('NF4 semantics', () => {
  it('packs element 2i in the high nibble; a value on a threshold takes the lower code', () => {
    // absmax 1: the scaled values are the values. 0.5626170039… is code 13, 1 is 15, 0 is 7,
    // -1 is 0; the decision threshold between codes 7 and 8 (f32 of 0.0397901…) maps to 7.
    const t = quantizeNf4(
      Float32Array.of(1, 0.5626170039176941, 0, -1, Math.fround(0.03979014977812767)),
    );
    expect(Array.from(t.codes)).toEqual([(15 << 4) | 13, (7 << 4) | 0, (7 << 4) | 7]);
    expect(Array.from(t.absmax)).toEqual([1]);
  });

  it('an all-zero block stores code 0 and dequantises to -0, as the CUDA kernel', () => {
    const t = quantizeNf4(new Float32Array(3));
    expect(Array.from(t.codes)).toEqual([0, 0]);
    expect(Object.is(dequantizeNf4(t)[0], -0)).toBe(true);
  });

  it('blocks are 64 consecutive elements with their own absmax', () => {
    const v = new Float32Array(130).fill(0.25);
    v[3] = 2;
    v[70] = -4;
    const t = quantizeNf4(v);
    expect(Array.from(t.absmax)).toEqual([2, 4, 0.25]);
    const d = dequantizeNf4(t);
    expect(d[3]).toBe(2);
    expect(d[70]).toBe(-4);
    expect(d[129]).toBe(0.25);
  });
});
