// CPU reference for shaders/matmul.wgsl: batched C = alpha·op(A)·op(B) (+ C), accumulated in f64.
// matmulF64 keeps the result in f64 (the model reference's Linear layers, src/ref/llama.ts);
// matmulRef rounds it to f32 as the kernel stores it.

export interface MatmulShape {
  M: number;
  N: number;
  K: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
}

/** C (batch, M, N) = cInit + alpha·op(A)·op(B) in f64, each dot product summed in k order. */
export function matmulF64(
  a: ArrayLike<number>, // (batch, M, K), or (batch, K, M) with transA
  b: ArrayLike<number>, // (batch, K, N), or (batch, N, K) with transB
  shape: MatmulShape,
  cInit?: ArrayLike<number>, // (batch, M, N)
): Float64Array {
  const { M, N, K, batch = 1, transA = false, transB = false, alpha = 1 } = shape;
  const c = new Float64Array(batch * M * N);
  // Element strides of A along m and k, and of B along k and n.
  const [aM, aK] = transA ? [1, M] : [K, 1];
  const [bK, bN] = transB ? [1, K] : [N, 1];
  for (let z = 0; z < batch; z++) {
    const ao = z * M * K;
    const bo = z * K * N;
    const co = z * M * N;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let sum = 0;
        const ar = ao + m * aM;
        const bc = bo + n * bN;
        for (let k = 0; k < K; k++) sum += a[ar + k * aK] * b[bc + k * bK];
        c[co + m * N + n] = (cInit ? cInit[co + m * N + n] : 0) + alpha * sum;
      }
    }
  }
  return c;
}

/** matmulF64 rounded to f32, as the kernel writes C. */
export function matmulRef(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  shape: MatmulShape,
  cInit?: Float32Array,
): Float32Array {
  return Float32Array.from(matmulF64(a, b, shape, cInit));
}
