// Safetensors read/write (https://github.com/huggingface/safetensors, format section): an 8-byte
// little-endian header length N, N bytes of JSON header {name: {dtype, shape, data_offsets}, and an
// optional "__metadata__": {string: string}}, then the raw tensor bytes. Everything the engine uses
// computes in f32, so F16/BF16 tensors are widened on load (exactly; a frozen base stored in 16 bits,
// config dtype, is narrowed back without loss); writing is F32 by default (F16/BF16 on request).
// Every error is a ModelFileError naming the file and, where one is involved, the tensor. The header
// is validated completely (dtypes, shapes, byte ranges tiling the data section exactly, as the
// format requires) before any tensor byte is touched.

import { f32ToBf16Bits, f32ToF16Bits, type HalfTensor } from '../ref/half';
import { ModelFileError } from './errors';

/**
 * Tensor dtypes read here: the float weights, and U8 for the packed 4-bit weights and statistics of
 * a bitsandbytes checkpoint (src/formats/bnb-4bit.ts; loaders take those as raw bytes).
 */
export type SafetensorsDtype = 'F32' | 'F16' | 'BF16' | 'U8';

export interface SafetensorsTensor {
  /** The dtype stored in the file; `data` is always f32. */
  dtype: SafetensorsDtype;
  shape: number[];
  /**
   * The values, row-major. For F32 tensors whose bytes are 4-aligned this is a view into the
   * input bytes (no copy: a 500 MB checkpoint should not need 1 GB); copy it before transferring
   * its buffer to a worker.
   */
  data: Float32Array;
}

export interface ParsedSafetensors {
  metadata: Record<string, string>;
  /** In header order (JSON object order), which is the order the writer used. */
  tensors: Map<string, SafetensorsTensor>;
}

export interface SafetensorsHeaderEntry {
  dtype: SafetensorsDtype;
  shape: number[];
  /** Byte range [begin, end) relative to the start of the data section. */
  dataOffsets: [number, number];
}

export interface SafetensorsHeader {
  metadata: Record<string, string>;
  entries: Map<string, SafetensorsHeaderEntry>;
  /** Byte offset of the data section in the file (8 + header length). */
  dataStart: number;
}

const DTYPE_BYTES: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2, U8: 1 };
/** dtypes the format defines that we recognise but cannot load as model weights. */
const OTHER_DTYPES = ['F64', 'F8_E4M3', 'F8_E5M2', 'I64', 'I32', 'I16', 'I8', 'BOOL'];

// The reference implementation refuses headers over 100 MB; a bigger "length" is a corrupt file.
export const MAX_HEADER_BYTES = 100_000_000;

const isNonNegInt = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * The header's length from a file's first 8 (or more) bytes, checked against the file's size:
 * a streaming reader reads 8 bytes, then this many, then one tensor's bytes at a time.
 */
export function safetensorsHeaderLength(
  first: Uint8Array,
  fileName: string,
  fileSize = first.byteLength,
): number {
  if (fileSize < 8 || first.byteLength < 8) {
    throw new ModelFileError(
      fileName,
      `file is truncated: ${fileSize} bytes, but a safetensors file starts with an 8-byte header length`,
    );
  }
  const view = new DataView(first.buffer, first.byteOffset, 8);
  const headerLength = Number(view.getBigUint64(0, true));
  if (8 + headerLength > fileSize) {
    throw new ModelFileError(
      fileName,
      `header length ${headerLength} runs past the end of the file (${fileSize} bytes): ` +
        `the file is truncated or not a safetensors file`,
    );
  }
  if (headerLength > MAX_HEADER_BYTES) {
    throw new ModelFileError(fileName, `header length ${headerLength} is implausibly large`);
  }
  return headerLength;
}

/**
 * Reads and validates the header only (dtype, shape, offsets against the file size) without
 * touching tensor bytes, so a loader can check shapes before converting anything. `bytes` may be
 * the whole file or only its first 8 + header-length bytes, with `fileSize` the file's size.
 */
export function parseSafetensorsHeader(
  bytes: Uint8Array,
  fileName: string,
  fileSize = bytes.byteLength,
): SafetensorsHeader {
  const headerLength = safetensorsHeaderLength(bytes, fileName, fileSize);
  if (bytes.byteLength < 8 + headerLength) {
    throw new RangeError(
      `${fileName}: the header needs the file's first ${8 + headerLength} bytes`,
    );
  }
  let header: unknown;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(
      bytes.subarray(8, 8 + headerLength),
    );
    header = JSON.parse(text);
  } catch (err) {
    throw new ModelFileError(
      fileName,
      `header is not valid JSON (${err instanceof Error ? err.message : String(err)})`,
    );
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new ModelFileError(fileName, 'header is not a JSON object');
  }

  const dataStart = 8 + headerLength;
  const dataLength = fileSize - dataStart;
  const metadata: Record<string, string> = {};
  const entries = new Map<string, SafetensorsHeaderEntry>();
  for (const [name, value] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new ModelFileError(fileName, '__metadata__ must be an object of strings');
      }
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        // The format says string → string; some writers put numbers here, which we keep as text.
        metadata[k] = typeof v === 'string' ? v : JSON.stringify(v);
      }
      continue;
    }
    if (typeof value !== 'object' || value === null) {
      throw new ModelFileError(fileName, 'header entry is not an object', name);
    }
    const { dtype, shape, data_offsets: offsets } = value as Record<string, unknown>;
    if (typeof dtype !== 'string' || !(dtype in DTYPE_BYTES)) {
      const known = typeof dtype === 'string' && OTHER_DTYPES.includes(dtype);
      throw new ModelFileError(
        fileName,
        `${known ? 'unsupported' : 'unknown'} dtype ${JSON.stringify(dtype)}; ` +
          `model weights must be F32, F16 or BF16`,
        name,
      );
    }
    if (!Array.isArray(shape) || !shape.every(isNonNegInt)) {
      throw new ModelFileError(
        fileName,
        `shape ${JSON.stringify(shape)} is not a list of non-negative integers`,
        name,
      );
    }
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every(isNonNegInt) ||
      offsets[0] > offsets[1]
    ) {
      throw new ModelFileError(
        fileName,
        `data_offsets ${JSON.stringify(offsets)} must be [begin, end] with 0 ≤ begin ≤ end`,
        name,
      );
    }
    const [begin, end] = offsets as [number, number];
    const expectedBytes =
      shape.reduce((a: number, b: number) => a * b, 1) * DTYPE_BYTES[dtype as SafetensorsDtype];
    if (end - begin !== expectedBytes) {
      throw new ModelFileError(
        fileName,
        `data_offsets [${begin}, ${end}] span ${end - begin} bytes, but shape [${shape.join(', ')}] ` +
          `in ${dtype} needs ${expectedBytes}`,
        name,
      );
    }
    entries.set(name, {
      dtype: dtype as SafetensorsDtype,
      shape: shape.slice(),
      dataOffsets: [begin, end],
    });
  }

  // Offsets are checked against the file size after every entry is known to be self-consistent, so a
  // short file reads as "truncated" rather than as a bad header.
  let maxEnd = 0;
  let lastTensor = '';
  for (const [name, entry] of entries) {
    if (entry.dataOffsets[1] > maxEnd) {
      maxEnd = entry.dataOffsets[1];
      lastTensor = name;
    }
  }
  if (maxEnd > dataLength) {
    const first = [...entries].find(([, e]) => e.dataOffsets[1] > dataLength)!;
    throw new ModelFileError(
      fileName,
      `file is truncated: the header describes ${maxEnd} bytes of tensor data (up to '${lastTensor}') ` +
        `but only ${dataLength} follow the header; data_offsets [${first[1].dataOffsets.join(', ')}] ` +
        `are out of range (was the download or copy interrupted?)`,
      first[0],
    );
  }
  // The format requires the byte ranges to tile the data section: in order of their offsets, each
  // begins where the previous ended (no gap, no overlap) and the last ends at the end of the file.
  // Overlapping ranges would alias two tensors; a gap or trailing bytes hide data no tensor owns.
  const sorted = [...entries].sort(
    ([, a], [, b]) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1],
  );
  let pos = 0;
  let previous = '';
  for (const [name, entry] of sorted) {
    const [begin, end] = entry.dataOffsets;
    if (begin < pos) {
      throw new ModelFileError(
        fileName,
        `data_offsets [${begin}, ${end}] overlap tensor '${previous}', which ends at ${pos}; ` +
          `each tensor must have its own bytes`,
        name,
      );
    }
    if (begin > pos) {
      throw new ModelFileError(
        fileName,
        `data_offsets [${begin}, ${end}] leave bytes ${pos}…${begin} of the data section unused ` +
          `(after ${previous ? `tensor '${previous}'` : 'the header'}); the tensors must be contiguous`,
        name,
      );
    }
    pos = end;
    previous = name;
  }
  if (pos !== dataLength) {
    throw new ModelFileError(
      fileName,
      `${dataLength - pos} bytes follow the last tensor's data (the data section is ${dataLength} ` +
        `bytes, the tensors cover ${pos}); the file is damaged or has data appended`,
    );
  }
  return { metadata, entries, dataStart };
}

let f16Table: Float32Array | null = null;

/** All 65536 half-precision values as f32 (256 KB, built once): a lookup beats bit fiddling in JS. */
function halfTable(): Float32Array {
  if (f16Table) return f16Table;
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    if (exp === 0) table[h] = sign * frac * 2 ** -24;
    else if (exp === 31) table[h] = frac === 0 ? sign * Infinity : NaN;
    else table[h] = sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  f16Table = table;
  return table;
}

function readU16(bytes: Uint8Array, start: number, count: number): Uint16Array {
  const byteStart = bytes.byteOffset + start;
  if (byteStart % 2 === 0) return new Uint16Array(bytes.buffer, byteStart, count);
  return new Uint16Array(bytes.slice(start, start + count * 2).buffer);
}

function decodeTensor(
  bytes: Uint8Array,
  start: number,
  dtype: SafetensorsDtype,
  count: number,
): Float32Array {
  if (dtype === 'U8') return Float32Array.from(bytes.subarray(start, start + count)); // exact
  if (dtype === 'F32') {
    const byteStart = bytes.byteOffset + start;
    if (byteStart % 4 === 0) return new Float32Array(bytes.buffer, byteStart, count);
    return new Float32Array(bytes.slice(start, start + count * 4).buffer);
  }
  const halves = readU16(bytes, start, count);
  const out = new Float32Array(count);
  if (dtype === 'F16') {
    const table = halfTable();
    for (let i = 0; i < count; i++) out[i] = table[halves[i]];
  } else {
    // bf16 is the top half of an f32.
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < count; i++) bits[i] = halves[i] << 16;
  }
  return out;
}

/**
 * One tensor's values from its own bytes (a ranged read of [dataStart + begin, dataStart + end)),
 * in the form it is stored: F32 as f32, F16 / BF16 as their 16-bit values (HalfTensor). A view of
 * `bytes` when aligned, else one copy. What a streaming loader hands to the GPU upload.
 */
export function decodeSafetensorsWeight(
  bytes: Uint8Array,
  entry: Pick<SafetensorsHeaderEntry, 'dtype' | 'shape'>,
): Float32Array | HalfTensor {
  const count = entry.shape.reduce((a, b) => a * b, 1);
  if (entry.dtype === 'F32' || entry.dtype === 'U8')
    return decodeTensor(bytes, 0, entry.dtype, count);
  return { format: entry.dtype === 'BF16' ? 'bf16' : 'f16', bits: readU16(bytes, 0, count) };
}

/** A tensor in its stored form widened to f32 (exact); F32 data is returned as it is. */
export function widenWeight(data: Float32Array | HalfTensor): Float32Array {
  if (data instanceof Float32Array) return data;
  const bytes = new Uint8Array(data.bits.buffer, data.bits.byteOffset, data.bits.byteLength);
  return decodeTensor(bytes, 0, data.format === 'bf16' ? 'BF16' : 'F16', data.bits.length);
}

/** Parses a whole safetensors file; F16/BF16 tensors are widened to f32. */
export function parseSafetensors(bytes: Uint8Array, fileName: string): ParsedSafetensors {
  const { metadata, entries, dataStart } = parseSafetensorsHeader(bytes, fileName);
  const tensors = new Map<string, SafetensorsTensor>();
  for (const [name, entry] of entries) {
    const count = entry.shape.reduce((a, b) => a * b, 1);
    tensors.set(name, {
      dtype: entry.dtype,
      shape: entry.shape,
      data: decodeTensor(bytes, dataStart + entry.dataOffsets[0], entry.dtype, count),
    });
  }
  return { metadata, tensors };
}

/**
 * The tensors of a safetensors file as a frozen base stored in 16 bits wants them: F32 as f32,
 * F16 / BF16 as their 16-bit values as shipped (a view of the input when 2-aligned: no widened
 * copy, half the memory of parseSafetensors). src/model/parameters.ts stores those packed as they
 * are (config dtype 'auto' or the same format) and widens the rest.
 */
export function parseSafetensorsWeights(
  bytes: Uint8Array,
  fileName: string,
): Map<string, { dtype: SafetensorsDtype; shape: number[]; data: Float32Array | HalfTensor }> {
  const { entries, dataStart } = parseSafetensorsHeader(bytes, fileName);
  const out = new Map<
    string,
    { dtype: SafetensorsDtype; shape: number[]; data: Float32Array | HalfTensor }
  >();
  for (const [name, entry] of entries) {
    const count = entry.shape.reduce((a, b) => a * b, 1);
    const start = dataStart + entry.dataOffsets[0];
    const data: Float32Array | HalfTensor =
      entry.dtype === 'F32' || entry.dtype === 'U8'
        ? decodeTensor(bytes, start, entry.dtype, count)
        : { format: entry.dtype === 'BF16' ? 'bf16' : 'f16', bits: readU16(bytes, start, count) };
    out.set(name, { dtype: entry.dtype, shape: entry.shape, data });
  }
  return out;
}

// f32 → bf16 / f16 bits with round to nearest even: one copy, in src/ref/half.ts (the frozen-weight
// storage converts with the same functions).
export { f32ToBf16Bits, f32ToF16Bits };

export interface WriteSafetensorsOptions {
  /** Storage dtype for every tensor (default F32: exact). */
  dtype?: SafetensorsDtype;
  /** Names the output in error messages (default 'model.safetensors'). */
  fileName?: string;
}

/**
 * Writes tensors in the given order. The header is padded with spaces to a multiple of 8 bytes, as
 * the reference implementation does, so every tensor's data starts 8-aligned in the file.
 */
export function writeSafetensors(
  tensors: Array<{ name: string; shape: number[]; data: Float32Array }>,
  metadata?: Record<string, string>,
  options: WriteSafetensorsOptions = {},
): Uint8Array {
  const dtype = options.dtype ?? 'F32';
  const fileName = options.fileName ?? 'model.safetensors';
  const elementBytes = DTYPE_BYTES[dtype];
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) header.__metadata__ = { ...metadata };
  let offset = 0;
  for (const t of tensors) {
    if (t.name === '__metadata__' || t.name in header) {
      throw new ModelFileError(fileName, 'duplicate or reserved tensor name', t.name);
    }
    if (!t.shape.every((d) => isNonNegInt(d))) {
      throw new ModelFileError(fileName, `invalid shape [${t.shape.join(', ')}]`, t.name);
    }
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) {
      throw new ModelFileError(
        fileName,
        `shape [${t.shape.join(', ')}] has ${count} elements but the data has ${t.data.length}`,
        t.name,
      );
    }
    if (dtype === 'U8' && !t.data.every((v) => Number.isInteger(v) && v >= 0 && v <= 255)) {
      throw new ModelFileError(fileName, 'U8 tensors hold integers 0…255', t.name);
    }
    const size = count * elementBytes;
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  const headerBytes = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(headerBytes.length / 8) * 8;
  const out = new Uint8Array(8 + padded + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(headerBytes, 8);
  out.fill(0x20, 8 + headerBytes.length, 8 + padded);
  let pos = 8 + padded;
  for (const t of tensors) {
    const count = t.data.length;
    if (dtype === 'F32') {
      out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, count * 4), pos);
    } else if (dtype === 'U8') {
      out.set(t.data, pos);
    } else {
      // pos is even (header padded to 8, every tensor a whole number of 2-byte elements).
      const halves = new Uint16Array(out.buffer, pos, count);
      const convert = dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
      for (let i = 0; i < count; i++) halves[i] = convert(t.data[i]);
    }
    pos += count * elementBytes;
  }
  return out;
}
