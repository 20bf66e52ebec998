// Safetensors read/write: round trips in F32/F16/BF16, a file built byte by byte from the format
// spec (independent of our writer), exact half-precision conversions, and one test per bad input.
import { describe, expect, it } from 'vitest';
import {
  f32ToBf16Bits,
  f32ToF16Bits,
  parseSafetensors,
  writeSafetensors,
} from '../../src/formats/safetensors';
import { modelFileErrorOf as errorOf } from '../support/model-file-error';

/** A safetensors file from a header object and raw data bytes, exactly as the spec lays it out. */
function rawFile(header: unknown, data: Uint8Array, pad = true): Uint8Array {
  let json = JSON.stringify(header);
  if (pad) while ((json.length + 8) % 8 !== 0) json += ' ';
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  out.set(data, 8 + headerBytes.length);
  return out;
}

function u16Bytes(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setUint16(i * 2, v, true));
  return out;
}

function f32Bytes(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setFloat32(i * 4, v, true));
  return out;
}

describe('parseSafetensors on files built from the spec', () => {
  it('reads F32, F16 and BF16 tensors with exact values and metadata', () => {
    const f32 = [1.5, -2.25, 3e-8, 65504, -0];
    // f16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), 2^-14 (smallest normal), Inf
    const f16 = [0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x7c00];
    // bf16: 1, -3.5 (0xc060), 1/3 truncated (0x3eab), smallest bf16 normal 2^-126
    const bf16 = [0x3f80, 0xc060, 0x3eab, 0x0080];
    const data = new Uint8Array(20 + 12 + 8);
    data.set(f32Bytes(f32), 0);
    data.set(u16Bytes(f16), 20);
    data.set(u16Bytes(bf16), 32);
    const file = rawFile(
      {
        __metadata__: { format: 'pt' },
        a: { dtype: 'F32', shape: [5], data_offsets: [0, 20] },
        b: { dtype: 'F16', shape: [2, 3], data_offsets: [20, 32] },
        c: { dtype: 'BF16', shape: [2, 1, 2], data_offsets: [32, 40] },
      },
      data,
    );
    const { metadata, tensors } = parseSafetensors(file, 'x.safetensors');
    expect(metadata).toEqual({ format: 'pt' });
    expect([...tensors.keys()]).toEqual(['a', 'b', 'c']);
    expect(tensors.get('a')!.dtype).toBe('F32');
    expect([...tensors.get('a')!.data]).toEqual(f32.map((v) => Math.fround(v)));
    expect(tensors.get('b')!.shape).toEqual([2, 3]);
    expect([...tensors.get('b')!.data]).toEqual([1, -2, 65504, 2 ** -24, 2 ** -14, Infinity]);
    expect(tensors.get('c')!.shape).toEqual([2, 1, 2]);
    expect([...tensors.get('c')!.data]).toEqual([1, -3.5, 0.333984375, 2 ** -126]);
  });

  it('reads a file whose bytes start at an odd offset (unaligned views are copied)', () => {
    const file = rawFile(
      { w: { dtype: 'F32', shape: [3], data_offsets: [0, 12] } },
      f32Bytes([1, 2, 3]),
      false,
    );
    const shifted = new Uint8Array(file.length + 1);
    shifted.set(file, 1);
    const { tensors } = parseSafetensors(shifted.subarray(1), 'odd.safetensors');
    expect([...tensors.get('w')!.data]).toEqual([1, 2, 3]);
  });
});

describe('writeSafetensors', () => {
  const tensors = [
    {
      name: 'model.embed_tokens.weight',
      shape: [3, 4],
      data: Float32Array.from({ length: 12 }, (_, i) => (i - 5) / 7),
    },
    { name: 'model.norm.weight', shape: [4], data: Float32Array.from([1, 0.5, -0.25, 1e-3]) },
    { name: 'scalar', shape: [], data: Float32Array.from([42]) },
  ];

  it('F32 round trip is bit-identical, keeps order and metadata, pads the header to 8 bytes', () => {
    const bytes = writeSafetensors(tensors, { format: 'pt', note: 'grpo' });
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect(headerLength % 8).toBe(0);
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
    expect(header['model.norm.weight']).toEqual({
      dtype: 'F32',
      shape: [4],
      data_offsets: [48, 64],
    });
    const parsed = parseSafetensors(bytes, 'out.safetensors');
    expect(parsed.metadata).toEqual({ format: 'pt', note: 'grpo' });
    expect([...parsed.tensors.keys()]).toEqual(tensors.map((t) => t.name));
    for (const t of tensors) {
      const got = parsed.tensors.get(t.name)!;
      expect(got.shape).toEqual(t.shape);
      expect(new Uint32Array(got.data.slice().buffer)).toEqual(
        new Uint32Array(t.data.slice().buffer),
      );
    }
  });

  it('F16 and BF16 writing round-trips within half an ulp of the storage type', () => {
    for (const [dtype, relUlp] of [
      ['F16', 2 ** -11],
      ['BF16', 2 ** -8],
    ] as const) {
      const parsed = parseSafetensors(writeSafetensors(tensors, undefined, { dtype }), 'h');
      for (const t of tensors) {
        const got = parsed.tensors.get(t.name)!;
        expect(got.dtype).toBe(dtype);
        t.data.forEach((v, i) => {
          expect(Math.abs(got.data[i] - v)).toBeLessThanOrEqual(Math.abs(v) * relUlp + 2 ** -25);
        });
      }
    }
  });

  it('refuses data whose length disagrees with the shape', () => {
    const err = errorOf(() =>
      writeSafetensors([{ name: 'w', shape: [2, 2], data: new Float32Array(3) }]),
    );
    expect(err.message).toContain("'w'");
    expect(err.message).toContain('4 elements but the data has 3');
  });
});

describe('half-precision conversion', () => {
  it('f32 → f16 → f32 is the identity on every finite f16 value and rounds to nearest even', () => {
    const parsed = parseSafetensors(
      rawFile(
        { all: { dtype: 'F16', shape: [65536], data_offsets: [0, 131072] } },
        u16Bytes(Array.from({ length: 65536 }, (_, i) => i)),
      ),
      'all.safetensors',
    ).tensors.get('all')!.data;
    for (let h = 0; h < 65536; h++) {
      if (Number.isNaN(parsed[h])) {
        expect(f32ToF16Bits(parsed[h]) & 0x7c00).toBe(0x7c00);
        continue;
      }
      expect(f32ToF16Bits(parsed[h])).toBe(h);
    }
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie → even (down)
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie → even (up)
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // rounds past max → Inf
    expect(f32ToF16Bits(2 ** -25)).toBe(0); // tie between 0 and smallest subnormal → 0
    expect(f32ToF16Bits(1.5 * 2 ** -25)).toBe(1);
    expect(f32ToF16Bits(-1e-10)).toBe(0x8000);
  });

  it('f32 → bf16 rounds to nearest even and keeps NaN', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(f32ToBf16Bits(1 + 2 ** -8)).toBe(0x3f80); // tie → even
    expect(f32ToBf16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82);
    expect(f32ToBf16Bits(1 / 3)).toBe(0x3eab);
    expect(f32ToBf16Bits(NaN) & 0x7fc0).toBe(0x7fc0);
    expect(f32ToBf16Bits(-Infinity)).toBe(0xff80);
  });
});

describe('bad safetensors files give a ModelFileError naming file and tensor', () => {
  const good = writeSafetensors([
    { name: 'a', shape: [2], data: Float32Array.from([1, 2]) },
    { name: 'b', shape: [3], data: Float32Array.from([3, 4, 5]) },
  ]);

  it('truncated file (cut inside the tensor data)', () => {
    const err = errorOf(() =>
      parseSafetensors(good.subarray(0, good.length - 4), 'cut.safetensors'),
    );
    expect(err.file).toBe('cut.safetensors');
    expect(err.tensor).toBe('b');
    expect(err.message).toMatch(/^cut\.safetensors \(tensor 'b'\): file is truncated/);
  });

  it('file shorter than the 8-byte header length', () => {
    const err = errorOf(() => parseSafetensors(good.subarray(0, 5), 'tiny.safetensors'));
    expect(err.message).toContain('tiny.safetensors: file is truncated: 5 bytes');
  });

  it('header length past the end of the file', () => {
    const bytes = good.slice();
    new DataView(bytes.buffer).setBigUint64(0, BigInt(bytes.length), true);
    const err = errorOf(() => parseSafetensors(bytes, 'long.safetensors'));
    expect(err.message).toContain(
      `long.safetensors: header length ${bytes.length} runs past the end`,
    );
  });

  it('invalid header JSON', () => {
    const bytes = good.slice();
    bytes[8] = 0x5b; // '{' → '[' breaks the object
    bytes[9] = 0x3a;
    const err = errorOf(() => parseSafetensors(bytes, 'json.safetensors'));
    expect(err.message).toContain('json.safetensors: header is not valid JSON');
  });

  it('unknown dtype', () => {
    const file = rawFile(
      { w: { dtype: 'Q4', shape: [2], data_offsets: [0, 2] } },
      new Uint8Array(2),
    );
    const err = errorOf(() => parseSafetensors(file, 'q.safetensors'));
    expect(err.message).toBe(
      `q.safetensors (tensor 'w'): unknown dtype "Q4"; model weights must be F32, F16 or BF16`,
    );
  });

  it('known but unsupported dtype', () => {
    const file = rawFile(
      { ids: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } },
      new Uint8Array(8),
    );
    expect(errorOf(() => parseSafetensors(file, 'i.safetensors')).message).toContain(
      `(tensor 'ids'): unsupported dtype "I64"`,
    );
  });

  it('data offsets that disagree with shape and dtype', () => {
    const file = rawFile(
      { w: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 12] } },
      new Uint8Array(16),
    );
    expect(errorOf(() => parseSafetensors(file, 'o.safetensors')).message).toBe(
      `o.safetensors (tensor 'w'): data_offsets [0, 12] span 12 bytes, but shape [2, 2] in F32 needs 16`,
    );
  });

  it('data offsets with begin after end', () => {
    const file = rawFile(
      { w: { dtype: 'F32', shape: [0], data_offsets: [8, 4] } },
      new Uint8Array(8),
    );
    expect(errorOf(() => parseSafetensors(file, 'r.safetensors')).message).toContain(
      `(tensor 'w'): data_offsets [8,4] must be [begin, end] with 0 ≤ begin ≤ end`,
    );
  });
});

describe('byte ranges must tile the data section exactly (contiguous, non-overlapping, complete)', () => {
  const f32 = (begin: number, end: number, n = (end - begin) / 4) => ({
    dtype: 'F32',
    shape: [n],
    data_offsets: [begin, end],
  });

  it('accepts ranges listed out of order in the header when they tile the data', () => {
    const file = rawFile({ b: f32(8, 12), a: f32(0, 8) }, f32Bytes([1, 2, 3]));
    const { tensors } = parseSafetensors(file, 'ok.safetensors');
    expect([...tensors.get('a')!.data]).toEqual([1, 2]);
    expect([...tensors.get('b')!.data]).toEqual([3]);
  });

  it('overlapping ranges (two tensors aliasing the same bytes)', () => {
    const file = rawFile({ a: f32(0, 8), b: f32(4, 12) }, new Uint8Array(12));
    const err = errorOf(() => parseSafetensors(file, 'overlap.safetensors'));
    expect(err.tensor).toBe('b');
    expect(err.message).toBe(
      "overlap.safetensors (tensor 'b'): data_offsets [4, 12] overlap tensor 'a', which ends at 8; " +
        'each tensor must have its own bytes',
    );
  });

  it('the same range twice', () => {
    const file = rawFile({ a: f32(0, 8), b: f32(0, 8) }, new Uint8Array(8));
    expect(errorOf(() => parseSafetensors(file, 'alias.safetensors')).message).toBe(
      "alias.safetensors (tensor 'b'): data_offsets [0, 8] overlap tensor 'a', which ends at 8; " +
        'each tensor must have its own bytes',
    );
  });

  it('a gap between tensors', () => {
    const file = rawFile({ a: f32(0, 4), b: f32(8, 12) }, new Uint8Array(12));
    expect(errorOf(() => parseSafetensors(file, 'gap.safetensors')).message).toBe(
      "gap.safetensors (tensor 'b'): data_offsets [8, 12] leave bytes 4…8 of the data section " +
        "unused (after tensor 'a'); the tensors must be contiguous",
    );
  });

  it('data that does not start at 0', () => {
    const file = rawFile({ a: f32(4, 8) }, new Uint8Array(8));
    expect(errorOf(() => parseSafetensors(file, 'start.safetensors')).message).toBe(
      "start.safetensors (tensor 'a'): data_offsets [4, 8] leave bytes 0…4 of the data section " +
        'unused (after the header); the tensors must be contiguous',
    );
  });

  it('bytes after the last tensor', () => {
    const file = rawFile({ a: f32(0, 8) }, new Uint8Array(20));
    const err = errorOf(() => parseSafetensors(file, 'tail.safetensors'));
    expect(err.tensor).toBeUndefined();
    expect(err.message).toBe(
      "tail.safetensors: 12 bytes follow the last tensor's data (the data section is 20 bytes, the " +
        'tensors cover 8); the file is damaged or has data appended',
    );
  });
});
