// CPU references of the optimizer step (shaders/adamw.wgsl) and of global gradient-norm clipping
// (shaders/sumsq.wgsl + shaders/grad_clip.wgsl). AdamW follows PyTorch's torch.optim.AdamW
// (decoupled weight decay applied first, bias-corrected moments, eps added after the sqrt).

export interface AdamWHyper {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
}

/**
 * One AdamW step in place. `step` is 1-based (the count after this update, as PyTorch's state).
 * `gradScale` multiplies the gradient first (the clip scale from grad-norm clipping).
 */
export function adamwStepRef(
  param: Float64Array | Float32Array,
  grad: ArrayLike<number>,
  m: Float64Array | Float32Array,
  v: Float64Array | Float32Array,
  step: number,
  hyper: AdamWHyper,
  gradScale = 1,
): void {
  const { lr, beta1, beta2, eps, weightDecay } = hyper;
  const bc1 = 1 - Math.pow(beta1, step);
  const bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, step));
  const stepSize = lr / bc1;
  for (let i = 0; i < param.length; i++) {
    const g = grad[i] * gradScale;
    let p = param[i] * (1 - lr * weightDecay);
    const mi = beta1 * m[i] + (1 - beta1) * g;
    const vi = beta2 * v[i] + (1 - beta2) * g * g;
    p -= (stepSize * mi) / (Math.sqrt(vi) / bc2Sqrt + eps);
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
  }
}

export interface GradClipResult {
  /** Global L2 norm over every gradient tensor (before clipping). */
  norm: number;
  /**
   * Factor applied to every gradient: min(1, maxNorm / (norm + 1e-6)), as torch's clip_grad_norm_;
   * 1 when maxNorm ≤ 0 (clipping off).
   */
  scale: number;
  /** False when the norm is NaN or ±Inf: the optimizer step must be skipped. */
  finite: boolean;
}

/** Sum of squares of one tensor in f64 (what sumsq.wgsl writes into its partials slot). */
export function sumSquaresRef(values: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i] * values[i];
  return s;
}

/** Global-norm clipping of several gradient tensors; maxNorm ≤ 0 disables the clip (scale 1). */
export function gradClipRef(grads: ArrayLike<number>[], maxNorm: number): GradClipResult {
  let total = 0;
  for (const g of grads) total += sumSquaresRef(g);
  const norm = Math.sqrt(total);
  const finite = Number.isFinite(norm);
  const scale = !finite ? 0 : maxNorm > 0 ? Math.min(1, maxNorm / (norm + 1e-6)) : 1;
  return { norm, scale, finite };
}
