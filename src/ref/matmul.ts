// CPU reference for shaders/matmul.wgsl: batched C = alpha·op(A)·op(B) (+ C), accumulated in f64.

export interface MatmulShape {
  M: number;
  N: number;
  K: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
}

export function matmulRef(
  a: Float32Array,
  b: Float32Array,
  shape: MatmulShape,
  cInit?: Float32Array,
): Float32Array {
  const { M, N, K, batch = 1, transA = false, transB = false, alpha = 1 } = shape;
  const c = cInit ? Float32Array.from(cInit) : new Float32Array(batch * M * N);
  for (let z = 0; z < batch; z++) {
    const ao = z * M * K;
    const bo = z * K * N;
    const co = z * M * N;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let sum = 0;
        for (let k = 0; k < K; k++) {
          const av = transA ? a[ao + k * M + m] : a[ao + m * K + k];
          const bv = transB ? b[bo + n * K + k] : b[bo + k * N + n];
          sum += av * bv;
        }
        c[co + m * N + n] = (cInit ? c[co + m * N + n] : 0) + alpha * sum;
      }
    }
  }
  return c;
}
