// CPU reference for shaders/rmsnorm_forward.wgsl, rmsnorm_backward.wgsl and
// rmsnorm_backward_weight.wgsl, in f64. Rows (R, C); weight (C).

export interface RmsNormForward {
  y: Float64Array; // (R, C)
  rstd: Float64Array; // (R)
}

/** y = x / sqrt(mean(x²) + eps) · w per row, and rstd = 1 / sqrt(mean(x²) + eps). */
export function rmsnormForwardRef(
  x: ArrayLike<number>, // (R, C)
  w: ArrayLike<number>, // (C)
  R: number,
  C: number,
  eps: number,
): RmsNormForward {
  const y = new Float64Array(R * C);
  const rstd = new Float64Array(R);
  for (let r = 0; r < R; r++) {
    let sum = 0;
    for (let c = 0; c < C; c++) sum += x[r * C + c] ** 2;
    const s = 1 / Math.sqrt(sum / C + eps);
    rstd[r] = s;
    for (let c = 0; c < C; c++) y[r * C + c] = x[r * C + c] * s * w[c];
  }
  return { y, rstd };
}

/** dx (R, C) from dy, x, w, rstd (+ dxInit when accumulating). */
export function rmsnormBackwardRef(
  dy: ArrayLike<number>, // (R, C)
  x: ArrayLike<number>, // (R, C)
  w: ArrayLike<number>, // (C)
  rstd: ArrayLike<number>, // (R)
  R: number,
  C: number,
  dxInit?: ArrayLike<number>, // (R, C)
): Float64Array {
  const dx = new Float64Array(R * C);
  for (let r = 0; r < R; r++) {
    let s = 0;
    for (let c = 0; c < C; c++) s += dy[r * C + c] * w[c] * x[r * C + c];
    const rs = rstd[r];
    for (let c = 0; c < C; c++) {
      const i = r * C + c;
      dx[i] = rs * (w[c] * dy[i] - (x[i] * rs * rs * s) / C) + (dxInit ? dxInit[i] : 0);
    }
  }
  return dx;
}

/** dw (C) = Σ_rows dy · x · rstd (+ dwInit when accumulating). */
export function rmsnormBackwardWeightRef(
  dy: ArrayLike<number>, // (R, C)
  x: ArrayLike<number>, // (R, C)
  rstd: ArrayLike<number>, // (R)
  R: number,
  C: number,
  dwInit?: ArrayLike<number>, // (C)
): Float64Array {
  const dw = new Float64Array(C);
  for (let r = 0; r < R; r++) {
    for (let c = 0; c < C; c++) dw[c] += dy[r * C + c] * x[r * C + c] * rstd[r];
  }
  if (dwInit) for (let c = 0; c < C; c++) dw[c] += dwInit[c];
  return dw;
}
