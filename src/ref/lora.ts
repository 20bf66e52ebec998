// LoRA adapters with PEFT semantics (peft/tuners/lora/layer.py): on a chosen projection
// y = x·Wᵀ (+ b) becomes y = x·Wᵀ (+ b) + s·(x·Aᵀ)·Bᵀ, A (r, in), B (out, r), s = α / r (or α / √r
// with rslora). A starts as torch's kaiming_uniform_(a = √5), i.e. U(−1/√in, 1/√in); B starts at 0,
// so a fresh adapter leaves the model's outputs unchanged. Only A and B train; the base is frozen.
//
// This file is the f64 reference of one adapted projection, forward and backward; the adapters'
// layout (options, names, shapes, initialisation) is src/core/lora.ts.
//
// Legend: M rows, K in features, Nout out features, r rank, s scaling.

import { matmulF64 } from './matmul';

/** y (M, Nout) + s·(x·Aᵀ)·Bᵀ: x (M, K), A (r, K), B (Nout, r). Returns a new array. */
export function loraForwardRef(
  y: ArrayLike<number>,
  x: ArrayLike<number>,
  A: ArrayLike<number>,
  B: ArrayLike<number>,
  scaling: number,
  M: number,
  K: number,
  r: number,
  Nout: number,
): Float64Array {
  const u = matmulF64(x, A, { M, N: r, K, transB: true }); // (M, r)
  return matmulF64(u, B, { M, N: Nout, K: r, transB: true, alpha: scaling }, y);
}

/**
 * Adds the adapter's gradients of y = … + s·(x·Aᵀ)·Bᵀ: with u = x·Aᵀ and du = s·dY·B (M, r),
 * dB += s·dYᵀ·u, dA += duᵀ·x, dX += du·A. dY (M, Nout), x (M, K).
 */
export function loraBackwardRef(
  dy: ArrayLike<number>,
  x: ArrayLike<number>,
  A: ArrayLike<number>,
  B: ArrayLike<number>,
  scaling: number,
  M: number,
  K: number,
  r: number,
  Nout: number,
  dx: Float64Array,
  dA: Float64Array,
  dB: Float64Array,
): void {
  const u = matmulF64(x, A, { M, N: r, K, transB: true }); // (M, r)
  const du = matmulF64(dy, B, { M, N: r, K: Nout, alpha: scaling }); // (M, r)
  dB.set(matmulF64(dy, u, { M: Nout, N: r, K: M, transA: true, alpha: scaling }, dB));
  dA.set(matmulF64(du, x, { M: r, N: K, K: M, transA: true }, dA));
  dx.set(matmulF64(du, A, { M, N: K, K: r }, dx));
}
