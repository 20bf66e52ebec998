// CPU reference of NF4 weight storage (issue #37; docs/guide/models.md, "4-bit (NF4) bases"):
// bitsandbytes' 4-bit NormalFloat quantisation, bit for bit. A frozen linear weight is cut into
// blocks of 64 consecutive elements (row-major, flat; the last block may be short); each block
// keeps its absmax = max |x| as an f32 scale and each element a 4-bit index into the 16-value
// NF4 code book. Quantising follows bitsandbytes' CUDA kernel (the one that wrote the
// checkpoints people download): one f32 reciprocal 1/absmax per block, the f32 product
// x · (1/absmax) per element, then its decision tree of strict '>' comparisons against f32
// thresholds (a value exactly on a threshold takes the lower code). Dequantising is
// NF4_CODE[q] · absmax[block] as one f32 product. Two codes share a byte: element 2i in the high
// nibble, 2i+1 in the low one. Double quantisation of the absmax (bitsandbytes'
// compress_statistics) is here too: offset = mean, 8-bit blockwise dynamic code in blocks of 256.
// tests/fixtures/nf4/make_nf4.py is the independent numpy implementation these functions match
// bit for bit (tests/unit/nf4.test.ts); its header lists what of bitsandbytes each step follows.

/** bitsandbytes' NF4 code book (its 16 decimals made f32), ordered by code. */
export const NF4_CODE = Float32Array.from([
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
  -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
  0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
  0.7229568362236023, 1.0,
]);

/** Elements per absmax block (bitsandbytes' default and the only size the engine uses). */
export const NF4_BLOCK_SIZE = 64;

/** Absmax values per block of the nested (double) quantisation, as bitsandbytes. */
export const NESTED_BLOCK_SIZE = 256;

/** A tensor stored as NF4. */
export interface Nf4Tensor {
  format: 'nf4';
  /** Elements of the tensor (row-major). */
  count: number;
  /** Elements per absmax block. */
  blockSize: number;
  /** ceil(count / 2) bytes: element 2i in the high nibble of byte i, 2i+1 in the low nibble. */
  codes: Uint8Array;
  /** ceil(count / blockSize) f32 block scales (already dequantised when they were nested). */
  absmax: Float32Array;
}

/** The nested statistics of an absmax vector (bitsandbytes' compress_statistics). */
export interface NestedAbsmax {
  /** One 8-bit code per absmax value (an index into `code2`). */
  codes: Uint8Array;
  /** ceil(count / 256) f32 scales, one per block of 256 centred absmax values. */
  absmax2: Float32Array;
  /** The 256-entry 8-bit code (bitsandbytes' signed dynamic map when quantised here). */
  code2: Float32Array;
  /** The mean subtracted before quantising (an f32 value). */
  offset: number;
  /** Absmax values per nested block (256). */
  blockSize: number;
}

const fround = Math.fround;

// dQuantizeNF4's thresholds as the C compiler makes its float literals: each decimal rounded to
// f32 once. Four of them (111, 110, 100, 000 below) lie within 1e-17 of the midpoint of two f32
// values, where rounding through f64 first (Math.fround of the literal) would pick the other
// neighbour; so they are written here as the exact f32 values (make_nf4.py derives them with
// exact rational arithmetic). Source decimals in the comments.
const T0 = fround(0.03979014977812767);
const T1 = fround(0.3893125355243683);
const T11 = fround(0.6427869200706482);
const T111 = fround(0.8614783883094788); // 0.8614784181118011
const T110 = fround(0.5016633868217468); // 0.5016634166240692
const T10 = fround(0.2035212516784668);
const T101 = fround(0.2920137718319893);
const T100 = fround(0.1202552542090416); // 0.1202552504837513
const TN0 = fround(-0.33967943489551544);
const TN01 = fround(-0.13791173323988914);
const TN011 = fround(-0.045525018125772476);
const TN010 = fround(-0.23460740596055984);
const TN00 = fround(-0.6106329262256622);
const TN001 = fround(-0.4599952697753906);
const TN000 = fround(-0.8480964303016663); // -0.8480964004993439

/** The NF4 code of an already scaled f32 value (NaN falls through every '>' to code 0). */
export function nf4Code(x: number): number {
  if (x > T0) {
    if (x > T1) {
      if (x > T11) return x > T111 ? 15 : 14;
      return x > T110 ? 13 : 12;
    }
    if (x > T10) return x > T101 ? 11 : 10;
    return x > T100 ? 9 : 8;
  }
  if (x > TN0) {
    if (x > TN01) return x > TN011 ? 7 : 6;
    return x > TN010 ? 5 : 4;
  }
  if (x > TN00) return x > TN001 ? 3 : 2;
  return x > TN000 ? 1 : 0;
}

/**
 * Quantises `values` (finite f32) to NF4 as bitsandbytes' quantize_4bit(quant_type='nf4') does.
 * An all-zero block gets absmax 0 and code 0 everywhere (1/0 = inf, 0 · inf = NaN), as the CUDA
 * kernel stores it; it dequantises to -0. An odd count pads the last low nibble with the code of
 * 0 (the kernel quantises a 0 loaded past the end).
 */
export function quantizeNf4(values: Float32Array, blockSize = NF4_BLOCK_SIZE): Nf4Tensor {
  if (!Number.isInteger(blockSize) || blockSize < 2 || blockSize % 2 !== 0) {
    throw new Error(`NF4 block size must be an even integer ≥ 2, got ${blockSize}`);
  }
  const count = values.length;
  const blocks = Math.ceil(count / blockSize);
  const codes = new Uint8Array(Math.ceil(count / 2));
  const absmax = new Float32Array(blocks);
  for (let b = 0; b < blocks; b++) {
    const begin = b * blockSize;
    const end = Math.min(begin + blockSize, count);
    let m = 0;
    for (let e = begin; e < end; e++) {
      const a = Math.abs(values[e]);
      if (a > m) m = a;
    }
    absmax[b] = m;
    const scale = fround(1 / m); // f32 reciprocal (Infinity for a zero block)
    // begin is even (blockSize is), so pairs never straddle blocks.
    for (let e = begin; e < end; e += 2) {
      const hi = nf4Code(fround(values[e] * scale));
      const lo = nf4Code(fround((e + 1 < end ? values[e + 1] : 0) * scale));
      codes[e >> 1] = (hi << 4) | lo;
    }
  }
  return { format: 'nf4', count, blockSize, codes, absmax };
}

/** The f32 values of an NF4 tensor: NF4_CODE[q] · absmax[⌊e / blockSize⌋], one f32 product. */
export function dequantizeNf4(t: Nf4Tensor): Float32Array {
  const out = new Float32Array(t.count);
  const { codes, absmax, blockSize, count } = t;
  for (let b = 0, begin = 0; begin < count; b++, begin += blockSize) {
    const scale = absmax[b];
    const end = Math.min(begin + blockSize, count);
    // f64 products of two f32 values are exact; the Float32Array store rounds once, as f32 does.
    for (let e = begin; e < end; e++) {
      const byte = codes[e >> 1];
      out[e] = NF4_CODE[(e & 1) === 0 ? byte >> 4 : byte & 15] * scale;
    }
  }
  return out;
}

/** a · b + c rounded once to f32 (a, b, c f32; the product is exact in f64), a contracted FMA. */
const fmaF32 = (a: number, b: number, c: number) => fround(a * b + c);

/**
 * torch.linspace(start, end, steps, dtype=float32) on an x86 CPU with AVX2, as create_dynamic_map
 * gets it (chunks of 2 × 8 vector lanes, the rest scalar); make_nf4.py explains and checks it.
 */
function linspaceF32(startIn: number, endIn: number, steps: number): Float32Array {
  const start = fround(startIn);
  const end = fround(endIn);
  const step = fround(fround(end - start) / (steps - 1));
  const half = Math.floor(steps / 2);
  const out = new Float32Array(steps);
  const lanes = 8;
  const full = Math.floor(steps / (2 * lanes)) * 2 * lanes;
  const at = (idx: number) =>
    idx < half ? fmaF32(step, idx, start) : fmaF32(-step, steps - idx - 1, end);
  let idx = 0;
  for (; idx < full; idx += lanes) {
    const base = at(idx);
    out[idx] = base;
    for (let j = 1; j < lanes; j++) out[idx + j] = fround(fround(j * step) + base);
  }
  for (; idx < steps; idx++) out[idx] = at(idx);
  return out;
}

/** bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): 256 f32. */
export function createDynamicMap(): Float32Array {
  const data: number[] = [];
  // 10 ** (i - 6) as decimal literals: correctly rounded, as Python's power gives them.
  const powers = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1];
  for (let i = 0; i < 7; i++) {
    const boundaries = linspaceF32(0.1, 1, 2 ** i + 1);
    const scale = fround(powers[i]);
    const pos: number[] = [];
    for (let k = 0; k + 1 < boundaries.length; k++) {
      const mean = fround(fround(boundaries[k] + boundaries[k + 1]) / 2);
      pos.push(fround(scale * mean));
    }
    data.push(...pos, ...pos.map((v) => -v));
  }
  data.push(0, 1);
  return Float32Array.from(data).sort();
}

/** The signed 8-bit dynamic map nested statistics are quantised with here. */
export const DYNAMIC_CODE = createDynamicMap();

/**
 * The 8-bit code of an already scaled f32 value: bitsandbytes' CUDA dQuantize<0>, a binary search
 * over the 256 sorted entries of `code`, then the nearer neighbour by f32 midpoint.
 */
export function dynamicCode(code: Float32Array, x: number): number {
  let pivot = 127;
  let upperPivot = 255;
  let lowerPivot = 0;
  let lower = -1;
  let upper = 1;
  let val = code[pivot];
  for (let i = 64; i > 0; i >>= 1) {
    if (x > val) {
      lowerPivot = pivot;
      lower = val;
      pivot += i;
    } else {
      upperPivot = pivot;
      upper = val;
      pivot -= i;
    }
    val = code[pivot];
  }
  if (upperPivot === 255) upper = code[upperPivot];
  if (lowerPivot === 0) lower = code[lowerPivot];
  if (x > val) {
    const midpoint = fround(fround(upper + val) * 0.5);
    return x > midpoint ? upperPivot : pivot;
  }
  const midpoint = fround(fround(lower + val) * 0.5);
  return x < midpoint ? lowerPivot : pivot;
}

/**
 * Double quantisation of block scales as bitsandbytes' quantize_4bit(compress_statistics=True):
 * offset = mean (here the f64 sum of the f32 values left to right, divided by the count and
 * rounded to f32 once: torch's GPU mean sums in an unspecified order), then the centred values
 * quantised blockwise (256) with the dynamic map.
 */
export function quantizeAbsmaxNested(absmax: Float32Array): NestedAbsmax {
  const n = absmax.length;
  if (n === 0) throw new Error('quantizeAbsmaxNested: no absmax values');
  let sum = 0;
  for (let i = 0; i < n; i++) sum += absmax[i];
  const offset = fround(sum / n);
  const blockSize = NESTED_BLOCK_SIZE;
  const blocks = Math.ceil(n / blockSize);
  const codes = new Uint8Array(n);
  const absmax2 = new Float32Array(blocks);
  const centred = new Float32Array(n);
  for (let i = 0; i < n; i++) centred[i] = absmax[i] - offset; // f32 difference (store rounds)
  for (let b = 0; b < blocks; b++) {
    const begin = b * blockSize;
    const end = Math.min(begin + blockSize, n);
    let m = 0;
    for (let i = begin; i < end; i++) {
      const a = Math.abs(centred[i]);
      if (a > m) m = a;
    }
    absmax2[b] = m;
    const scale = fround(1 / m);
    for (let i = begin; i < end; i++)
      codes[i] = dynamicCode(DYNAMIC_CODE, fround(centred[i] * scale));
  }
  return { codes, absmax2, code2: DYNAMIC_CODE.slice(), offset, blockSize };
}

/**
 * The f32 block scales of nested statistics, as bitsandbytes' dequantize_4bit computes them:
 * dequantize_blockwise (code2[q] · absmax2[⌊i / 256⌋], f32) then `absmax += offset` (f32).
 */
export function dequantizeAbsmaxNested(nested: NestedAbsmax): Float32Array {
  const { codes, absmax2, code2, offset, blockSize } = nested;
  const out = new Float32Array(codes.length);
  for (let i = 0; i < codes.length; i++) {
    out[i] = fround(code2[codes[i]] * absmax2[Math.floor(i / blockSize)]) + offset;
  }
  return out;
}
