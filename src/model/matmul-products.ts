// The matrix products of the model's layers as MatmulShapes: a projection's forward and gradient
// products, its LoRA adapter's, and the LM head's per row chunk. GpuLlama encodes and prepares
// with them (src/model/llama.ts); the memory plan sizes the GPU path's split-K partials from them
// (src/model/memory-plan.ts), so both describe the same products.
import type { MatmulShape } from '../kernels/matmul';
import type { ParameterChunk } from './parameters';

/** A projection's sizes: y (rows, out) = x (rows, in) · Wᵀ. */
export interface Projection {
  inDim: number;
  outDim: number;
}

/** The three products of a Linear over `rows` rows (one source for encoding, prepare and the memory plan). */
export function linearShapes(lin: Projection, rows: number) {
  return {
    forward: { M: rows, N: lin.outDim, K: lin.inDim, transB: true }, // y = x·Wᵀ
    inputGrad: { M: rows, N: lin.inDim, K: lin.outDim }, // dX = dY·W
    weightGrad: { M: lin.outDim, N: lin.inDim, K: rows, transA: true }, // dW += dYᵀ·X
  } satisfies Record<string, MatmulShape>;
}

/** The products of a Linear's adapter over `rows` rows (GpuLlama.linear / linearBackward). */
export function loraShapes(lin: Projection, r: number, rows: number) {
  return {
    down: { M: rows, N: r, K: lin.inDim, transB: true }, // u = x·Aᵀ (rows, r)
    up: { M: rows, N: lin.outDim, K: r, transB: true, accumulate: true }, // y += s·u·Bᵀ
    dU: { M: rows, N: r, K: lin.outDim }, // du = s·dY·B (rows, r)
    dB: { M: lin.outDim, N: r, K: rows, transA: true, accumulate: true }, // dB += s·dYᵀ·u
    dA: { M: r, N: lin.inDim, K: rows, transA: true, accumulate: true }, // dA += duᵀ·x
    dX: { M: rows, N: lin.inDim, K: r, accumulate: true }, // dX += du·A
  } satisfies Record<string, MatmulShape>;
}

/** The products of one head chunk (rows of the (V, C) table) over `rows` rows of (rows, V) logits. */
export function headShapes(
  chunk: Pick<ParameterChunk, 'rows' | 'rowStart'>,
  C: number,
  V: number,
  rows: number,
) {
  const { rows: Vc, rowStart } = chunk;
  return {
    forward: { M: rows, N: Vc, K: C, transB: true, ldC: V, offsetC: rowStart },
    inputGrad: { M: rows, N: C, K: Vc, ldA: V, offsetA: rowStart },
    weightGrad: { M: Vc, N: C, K: rows, transA: true, ldA: V, offsetA: rowStart },
  } satisfies Record<string, MatmulShape>;
}
