// CPU reference for shaders/add.wgsl: a + alpha · b, in f64.

export function addRef(a: ArrayLike<number>, b: ArrayLike<number>, alpha = 1): Float64Array {
  const out = new Float64Array(a.length);
  for (let i = 0; i < out.length; i++) out[i] = a[i] + alpha * b[i];
  return out;
}
