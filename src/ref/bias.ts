// CPU reference for shaders/bias_add.wgsl and shaders/bias_grad.wgsl, in f64. Rows (R, Cout).

/** y + bias broadcast over rows. */
export function biasAddRef(
  y: ArrayLike<number>, // (R, Cout)
  bias: ArrayLike<number>, // (Cout)
): Float64Array {
  const C = bias.length;
  const out = new Float64Array(y.length);
  for (let i = 0; i < out.length; i++) out[i] = y[i] + bias[i % C];
  return out;
}

/** db (Cout) = Σ_rows dy (+ dbInit when accumulating). */
export function biasGradRef(
  dy: ArrayLike<number>, // (R, Cout)
  R: number,
  C: number,
  dbInit?: ArrayLike<number>, // (Cout)
): Float64Array {
  const db = new Float64Array(C);
  for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) db[c] += dy[r * C + c];
  if (dbInit) for (let c = 0; c < C; c++) db[c] += dbInit[c];
  return db;
}
