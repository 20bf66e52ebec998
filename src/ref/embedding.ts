// CPU reference for shaders/embedding_forward.wgsl and shaders/embedding_backward.wgsl, in f64.
// Legend: R = N·T token rows, V vocab, C channels.

/** x (R, C) = weight[tokens] (a token id ≥ V gives a zero row, as the kernel does). */
export function embeddingForwardRef(
  tokens: ArrayLike<number>, // (R)
  weight: ArrayLike<number>, // (V, C)
  V: number,
  C: number,
): Float64Array {
  const R = tokens.length;
  const x = new Float64Array(R * C); // (R, C)
  for (let r = 0; r < R; r++) {
    const t = tokens[r];
    if (t >= V) continue;
    for (let c = 0; c < C; c++) x[r * C + c] = weight[t * C + c];
  }
  return x;
}

/** dW (V, C) = scatter-add of dX rows by token (+ dwInit when accumulating). */
export function embeddingBackwardRef(
  tokens: ArrayLike<number>, // (R)
  dx: ArrayLike<number>, // (R, C)
  V: number,
  C: number,
  dwInit?: ArrayLike<number>, // (V, C)
): Float64Array {
  const dw = new Float64Array(V * C); // (V, C)
  for (let r = 0; r < tokens.length; r++) {
    const t = tokens[r];
    if (t >= V) throw new RangeError(`token ${t} at row ${r} is outside the vocabulary (${V})`);
    for (let c = 0; c < C; c++) dw[t * C + c] += dx[r * C + c];
  }
  if (dwInit) for (let i = 0; i < dw.length; i++) dw[i] += dwInit[i];
  return dw;
}
