// CPU reference of shaders/matmul_nf4.wgsl and matmul_gpu_nf4.wgsl (issue #37): a matmul whose B
// is a frozen weight stored as NF4 (src/ref/nf4.ts) is matmulRef on the dequantised weight, so
// the kernels must dequantise the same f32 values and differ only by f32 summation order.
// Also the GPU storage of an NF4 weight the kernels read (one u32 buffer, docs/grpo.md issue #37):
// the code bytes as they are (byte i in bits 8·(i & 3) of word i >> 2), padded to a whole word,
// then the f32 absmax bits from word ceil(count / 8).
import { matmulRef, type MatmulShape } from './matmul';
import { dequantizeNf4, type Nf4Tensor } from './nf4';

/** The u32 words of an NF4 tensor as the matmul kernels read it (src/kernels/matmul.ts nf4Words). */
export function packNf4(t: Nf4Tensor): Uint32Array {
  const codeWords = Math.ceil(t.count / 8);
  const words = new Uint32Array(codeWords + t.absmax.length);
  for (let i = 0; i < t.codes.length; i++) words[i >> 2] |= t.codes[i] << (8 * (i & 3));
  words.set(new Uint32Array(t.absmax.buffer, t.absmax.byteOffset, t.absmax.length), codeWords);
  return words;
}

/** The Nf4Tensor of `count` elements in blocks of `blockSize` that packNf4 wrote to `words`. */
export function unpackNf4(words: Uint32Array, count: number, blockSize: number): Nf4Tensor {
  const codeWords = Math.ceil(count / 8);
  const codes = new Uint8Array(Math.ceil(count / 2));
  for (let i = 0; i < codes.length; i++) codes[i] = (words[i >> 2] >>> (8 * (i & 3))) & 0xff;
  const blocks = Math.ceil(count / blockSize);
  const absmax = new Float32Array(words.slice(codeWords, codeWords + blocks).buffer);
  return { format: 'nf4', count, blockSize, codes, absmax };
}

/**
 * C = alpha·op(A)·op(B) (+ cInit) with B the dequantised NF4 weight `b` (its first
 * batch·K·N elements; W stored (N, K) when shape.transB), accumulated in f64, rounded to f32.
 */
export function nf4MatmulRef(
  a: ArrayLike<number>,
  b: Nf4Tensor,
  shape: MatmulShape,
  cInit?: Float32Array,
): Float32Array {
  const count = (shape.batch ?? 1) * shape.K * shape.N;
  if (b.count < count) throw new RangeError(`nf4MatmulRef: B has ${b.count} < ${count} elements`);
  return matmulRef(a, dequantizeNf4(b).subarray(0, count), shape, cInit);
}
