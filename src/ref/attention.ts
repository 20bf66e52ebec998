// CPU reference for the attention kernels (shaders/attention_forward.wgsl,
// attention_backward_dq.wgsl, attention_backward_dkv.wgsl, kv_cache_write.wgsl): causal
// grouped-query attention with left padding, computed naively in f64 (full softmax per row,
// backward by the chain rule through the softmax, not from the saved lse).
//
// Legend: N sequences, Tq query rows, T time, S_cap cache capacity, S filled length, H heads,
// Hkv kv-heads, D head dim. Layouts: q, o (N, Tq, H, D); k, v (N, S_cap, Hkv, D); lse (N, H, Tq).

export interface AttentionRefShape {
  N: number;
  Tq: number;
  H: number;
  Hkv: number;
  D: number;
  /** Absolute column of query row 0 (training 0; decoding the current position t). Default 0. */
  qOffset?: number;
  /** Filled cache length: keys j ≥ S are never read. Default qOffset + Tq. */
  S?: number;
  /** Cache capacity (columns per sequence in k and v). Default S. */
  sCap?: number;
  /** Score scale; default 1/√D. */
  scale?: number;
}

/** Visible keys of query i: keyStart ≤ j < end, end = min(qOffset + i + 1, S). */
function keyEnd(shape: AttentionRefShape, i: number): number {
  const qOffset = shape.qOffset ?? 0;
  const S = shape.S ?? qOffset + shape.Tq;
  return Math.min(qOffset + i + 1, S);
}

/** Softmax weights of query (n, i, h) over its visible keys, indexed by j − keyStart[n]. */
function attentionWeights(
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  keyStart: ArrayLike<number>,
  shape: AttentionRefShape,
  n: number,
  i: number,
  h: number,
): { p: Float64Array; lse: number } {
  const { Tq, H, Hkv, D } = shape;
  const sCap = shape.sCap ?? shape.S ?? (shape.qOffset ?? 0) + Tq;
  const scale = shape.scale ?? 1 / Math.sqrt(D);
  const g = Math.floor(h / (H / Hkv));
  const first = keyStart[n];
  const end = keyEnd(shape, i);
  const count = Math.max(0, end - first);
  const scores = new Float64Array(count);
  const qBase = ((n * Tq + i) * H + h) * D;
  let max = -Infinity;
  for (let j = first; j < end; j++) {
    const kBase = ((n * sCap + j) * Hkv + g) * D;
    let dot = 0;
    for (let d = 0; d < D; d++) dot += q[qBase + d] * k[kBase + d];
    scores[j - first] = dot * scale;
    max = Math.max(max, dot * scale);
  }
  let sum = 0;
  for (let c = 0; c < count; c++) sum += Math.exp(scores[c] - max);
  const p = scores.map((s) => Math.exp(s - max) / sum);
  return { p, lse: count > 0 ? max + Math.log(sum) : 0 };
}

/** o (N, Tq, H, D) and lse (N, H, Tq); rows without a visible key give o = 0, lse = 0. */
export function attentionForwardRef(
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
  keyStart: ArrayLike<number>,
  shape: AttentionRefShape,
): { o: Float64Array; lse: Float64Array } {
  const { N, Tq, H, Hkv, D } = shape;
  const sCap = shape.sCap ?? shape.S ?? (shape.qOffset ?? 0) + Tq;
  const o = new Float64Array(N * Tq * H * D);
  const lse = new Float64Array(N * H * Tq);
  for (let n = 0; n < N; n++) {
    for (let i = 0; i < Tq; i++) {
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / (H / Hkv));
        const w = attentionWeights(q, k, keyStart, shape, n, i, h);
        lse[(n * H + h) * Tq + i] = w.lse;
        const oBase = ((n * Tq + i) * H + h) * D;
        for (let c = 0; c < w.p.length; c++) {
          const vBase = ((n * sCap + keyStart[n] + c) * Hkv + g) * D;
          for (let d = 0; d < D; d++) o[oBase + d] += w.p[c] * v[vBase + d];
        }
      }
    }
  }
  return { o, lse };
}

export interface AttentionBackwardRefShape {
  N: number;
  T: number;
  H: number;
  Hkv: number;
  D: number;
  scale?: number;
}

/**
 * Gradients of Σ dO∘o with respect to q (N, T, H, D), k and v (N, T, Hkv, D) for the training
 * shape (Tq = S = S_cap = T, qOffset = 0). dS_ij = P_ij·(dP_ij − Σ_j' P_ij'·dP_ij').
 */
export function attentionBackwardRef(
  dO: ArrayLike<number>,
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
  keyStart: ArrayLike<number>,
  shape: AttentionBackwardRefShape,
): { dq: Float64Array; dk: Float64Array; dv: Float64Array } {
  const { N, T, H, Hkv, D } = shape;
  const scale = shape.scale ?? 1 / Math.sqrt(D);
  const fwdShape: AttentionRefShape = { N, Tq: T, H, Hkv, D, scale };
  const dq = new Float64Array(N * T * H * D);
  const dk = new Float64Array(N * T * Hkv * D);
  const dv = new Float64Array(N * T * Hkv * D);
  for (let n = 0; n < N; n++) {
    const first = keyStart[n];
    for (let i = 0; i < T; i++) {
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / (H / Hkv));
        const { p } = attentionWeights(q, k, keyStart, fwdShape, n, i, h);
        const qBase = ((n * T + i) * H + h) * D;
        const dp = new Float64Array(p.length);
        let rowDot = 0;
        for (let c = 0; c < p.length; c++) {
          const vBase = ((n * T + first + c) * Hkv + g) * D;
          for (let d = 0; d < D; d++) dp[c] += dO[qBase + d] * v[vBase + d];
          rowDot += p[c] * dp[c];
        }
        for (let c = 0; c < p.length; c++) {
          const kvBase = ((n * T + first + c) * Hkv + g) * D;
          const ds = p[c] * (dp[c] - rowDot);
          for (let d = 0; d < D; d++) {
            dq[qBase + d] += scale * ds * k[kvBase + d];
            dk[kvBase + d] += scale * ds * q[qBase + d];
            dv[kvBase + d] += p[c] * dO[qBase + d];
          }
        }
      }
    }
  }
  return { dq, dk, dv };
}

export interface KvCacheWriteRefShape {
  N: number;
  Tsrc: number;
  sCap: number;
  Hkv: number;
  D: number;
  t0: number;
}

/** A copy of cache (N, S_cap, Hkv, D) with src (N, Tsrc, Hkv, D) written at column t0. */
export function kvCacheWriteRef(
  src: Float32Array,
  cache: Float32Array,
  shape: KvCacheWriteRefShape,
): Float32Array {
  const { N, Tsrc, sCap, Hkv, D, t0 } = shape;
  const out = Float32Array.from(cache);
  const row = Hkv * D;
  for (let n = 0; n < N; n++) {
    out.set(src.subarray(n * Tsrc * row, (n + 1) * Tsrc * row), (n * sCap + t0) * row);
  }
  return out;
}
