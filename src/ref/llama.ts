// Plain-TS CPU reference of the Llama-family model (RMSNorm, HF rotate_half rotary embeddings,
// grouped-query causal attention with left padding, SwiGLU MLP, optional q/k/v bias, tied or
// untied LM head): forward, backward to every parameter, and KV-cache prefill/decode. The GPU
// model (src/model/llama.ts) is tested against it, and it is the CPU fallback without WebGPU.
//
// Precision: every parameter is widened to f64 on construction and all arithmetic and storage is
// f64 (Float64Array), with sums in index order, so the same inputs give the same bits and the
// torch float64 fixtures (tests/fixtures) agree to ~1e-12.
//
// Layout (shared with the GPU model): hidden states (N·T, C) rows; q (N, T, H, D); k, v
// (N, T, Hkv, D); Linear weights (out, in) as Hugging Face, y = x·Wᵀ (+ b). Rows are LEFT-padded:
// keyStart[n] = number of pad columns; the rotary position of column t is t − keyStart[n] (0 on pad
// columns). A query at column t attends to keys [keyStart[n], t]; a pad query (t < keyStart[n])
// sees no key and its attention output is 0, as in src/ref/attention.ts (it never reaches a loss).
//
// Legend: N sequences, T time (columns), C hidden, I intermediate, V vocab, H heads, Hkv kv-heads,
// D head dim, L layers, S_cap KV-cache capacity (columns).

import { numel, parameterSpecs, type LlamaConfig } from '../core/model-config';
import { logprobGatherBackwardRef, logprobGatherRef } from './logprob';

type ParamInput = Float32Array | Float64Array;

interface LayerCache {
  xIn: Float64Array; // (N·T, C) residual stream entering the layer
  rms1: Float64Array; // (N·T) 1/sqrt(mean(x²) + eps) of the input norm
  h1: Float64Array; // (N·T, C) input_layernorm output
  q: Float64Array; // (N, T, H, D) after rotary
  k: Float64Array; // (N, T, Hkv, D) after rotary
  v: Float64Array; // (N, T, Hkv, D)
  probs: Float64Array; // (N, H, T, T) attention probabilities (0 outside the allowed keys)
  attn: Float64Array; // (N·T, H·D) attention output before o_proj
  xMid: Float64Array; // (N·T, C) residual after attention
  rms2: Float64Array; // (N·T)
  h2: Float64Array; // (N·T, C) post_attention_layernorm output
  gate: Float64Array; // (N·T, I)
  up: Float64Array; // (N·T, I)
  act: Float64Array; // (N·T, I) silu(gate)·up
}

/** What forward keeps for backward. */
export interface RefForwardCache {
  N: number;
  T: number;
  tokens: Uint32Array; // (N, T)
  keyStart: Uint32Array; // (N)
  positions: Uint32Array; // (N, T)
  layers: LayerCache[];
  xFinal: Float64Array; // (N·T, C) residual entering model.norm
  rmsFinal: Float64Array; // (N·T)
  hFinal: Float64Array; // (N·T, C) model.norm output (the LM head input)
}

export interface RefForwardResult {
  logits: Float64Array; // (N, T, V)
  cache: RefForwardCache;
}

/** Per-sequence KV cache for batched decoding; all rows share the column count (left padding). */
export interface RefKvCache {
  N: number;
  capacity: number; // S_cap
  length: number; // columns filled so far (same for every row)
  keyStart: Uint32Array; // (N)
  k: Float64Array[]; // per layer (N, S_cap, Hkv, D), after rotary
  v: Float64Array[]; // per layer (N, S_cap, Hkv, D)
}

/** Rotary position of every column: t − keyStart[n], 0 on pad columns. (N, T) */
export function positionsFromKeyStart(keyStart: Uint32Array, N: number, T: number): Uint32Array {
  const pos = new Uint32Array(N * T);
  for (let n = 0; n < N; n++) {
    for (let t = 0; t < T; t++) pos[n * T + t] = t >= keyStart[n] ? t - keyStart[n] : 0;
  }
  return pos;
}

// ---------------------------------------------------------------------------------------------
// Building blocks (exported for kernel tests that want a single op in f64).

/** y = x·Wᵀ (+ b): x (M, K), W (Nout, K), b (Nout) → (M, Nout). */
export function linearRef(
  x: Float64Array,
  w: Float64Array,
  b: Float64Array | null,
  M: number,
  K: number,
  Nout: number,
): Float64Array {
  const y = new Float64Array(M * Nout);
  for (let m = 0; m < M; m++) {
    for (let o = 0; o < Nout; o++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += x[m * K + k] * w[o * K + k];
      y[m * Nout + o] = b ? s + b[o] : s;
    }
  }
  return y;
}

/** Adds the gradients of y = x·Wᵀ + b: dX += dY·W, dW += dYᵀ·X, db += Σ_rows dY. */
export function linearBackwardRef(
  dy: Float64Array,
  x: Float64Array,
  w: Float64Array,
  M: number,
  K: number,
  Nout: number,
  dx: Float64Array,
  dw: Float64Array,
  db: Float64Array | null,
): void {
  for (let m = 0; m < M; m++) {
    for (let k = 0; k < K; k++) {
      let s = 0;
      for (let o = 0; o < Nout; o++) s += dy[m * Nout + o] * w[o * K + k];
      dx[m * K + k] += s;
    }
  }
  for (let o = 0; o < Nout; o++) {
    for (let k = 0; k < K; k++) {
      let s = 0;
      for (let m = 0; m < M; m++) s += dy[m * Nout + o] * x[m * K + k];
      dw[o * K + k] += s;
    }
  }
  if (db) {
    for (let o = 0; o < Nout; o++) {
      let s = 0;
      for (let m = 0; m < M; m++) s += dy[m * Nout + o];
      db[o] += s;
    }
  }
}

/** y = x·rsqrt(mean(x²) + eps)·w per row: x (M, C). Returns y and the per-row rsqrt. */
export function rmsNormRef(
  x: Float64Array,
  w: Float64Array,
  M: number,
  C: number,
  eps: number,
): { y: Float64Array; rms: Float64Array } {
  const y = new Float64Array(M * C);
  const rms = new Float64Array(M);
  for (let m = 0; m < M; m++) {
    let ss = 0;
    for (let c = 0; c < C; c++) ss += x[m * C + c] * x[m * C + c];
    const r = 1 / Math.sqrt(ss / C + eps);
    rms[m] = r;
    for (let c = 0; c < C; c++) y[m * C + c] = x[m * C + c] * r * w[c];
  }
  return { y, rms };
}

/** Adds dX and dW of rmsNormRef given dY: dx = r·(dy∘w) − x·r³/C·Σ(dy∘w∘x). */
export function rmsNormBackwardRef(
  dy: Float64Array,
  x: Float64Array,
  w: Float64Array,
  rms: Float64Array,
  M: number,
  C: number,
  dx: Float64Array,
  dw: Float64Array,
): void {
  for (let m = 0; m < M; m++) {
    const r = rms[m];
    let dot = 0;
    for (let c = 0; c < C; c++) dot += dy[m * C + c] * w[c] * x[m * C + c];
    const k = (r * r * r * dot) / C;
    for (let c = 0; c < C; c++) {
      dx[m * C + c] += r * dy[m * C + c] * w[c] - x[m * C + c] * k;
    }
  }
  for (let c = 0; c < C; c++) {
    let s = 0;
    for (let m = 0; m < M; m++) s += dy[m * C + c] * x[m * C + c] * rms[m];
    dw[c] += s;
  }
}

/** inv_freq[i] = theta^(−2i/D), i < D/2, in f64 (HF rounds these and the angles to f32; src/ref/rope.ts does too). */
export function ropeInvFreqF64(D: number, theta: number): Float64Array {
  const f = new Float64Array(D / 2);
  for (let i = 0; i < D / 2; i++) f[i] = 1 / Math.pow(theta, (2 * i) / D);
  return f;
}

/**
 * In-place rotary embedding, HF rotate_half convention: element i pairs with i + D/2 and both use
 * frequency i. x holds `rows` rows of `heads` heads of D; row r has position pos[r].
 * With inverse = true applies the transpose (rotation by −angle), which is the backward.
 */
export function ropeInPlace(
  x: Float64Array,
  pos: Uint32Array,
  rows: number,
  heads: number,
  D: number,
  invFreq: Float64Array,
  inverse = false,
): void {
  const half = D / 2;
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < half; i++) {
      const angle = pos[r] * invFreq[i];
      const cos = Math.cos(angle);
      const sin = inverse ? -Math.sin(angle) : Math.sin(angle);
      for (let h = 0; h < heads; h++) {
        const o = (r * heads + h) * D;
        const a = x[o + i];
        const b = x[o + i + half];
        x[o + i] = a * cos - b * sin;
        x[o + i + half] = b * cos + a * sin;
      }
    }
  }
}

const sigmoid = (g: number) => 1 / (1 + Math.exp(-g));

// ---------------------------------------------------------------------------------------------
// Log-probs of completion tokens at a temperature (TRL: logp = log_softmax(z / temperature)[o]),
// on top of the per-row gather reference in src/ref/logprob.ts.

/**
 * Log-probs of the completion tokens as TRL computes them: completions start at column P
 * (promptLength) in every row, and logits at column P−1+j score token P+j.
 * logits (N, T, V), tokens (N, T) → (N, T−P).
 */
export function completionLogprobsRef(
  logits: ArrayLike<number>,
  tokens: Uint32Array,
  N: number,
  T: number,
  V: number,
  promptLength: number,
  temperature: number,
): Float64Array {
  const L = T - promptLength;
  const rows = new Float64Array(N * L * V);
  const targets = new Uint32Array(N * L);
  for (let n = 0; n < N; n++) {
    for (let j = 0; j < L; j++) {
      const src = (n * T + promptLength - 1 + j) * V;
      for (let c = 0; c < V; c++) rows[(n * L + j) * V + c] = logits[src + c];
      targets[n * L + j] = tokens[n * T + promptLength + j];
    }
  }
  return logprobGatherRef(rows, targets, N * L, V, 1 / temperature).logp;
}

/** Backward of completionLogprobsRef: dLogp (N, T−P) → dLogits (N, T, V), 0 off the completion. */
export function completionLogprobsBackwardRef(
  logits: ArrayLike<number>,
  tokens: Uint32Array,
  dLogp: ArrayLike<number>,
  N: number,
  T: number,
  V: number,
  promptLength: number,
  temperature: number,
): Float64Array {
  const L = T - promptLength;
  const dLogits = new Float64Array(N * T * V);
  const row = new Float64Array(V);
  for (let n = 0; n < N; n++) {
    for (let j = 0; j < L; j++) {
      const col = n * T + promptLength - 1 + j;
      for (let c = 0; c < V; c++) row[c] = logits[col * V + c];
      const target = [tokens[n * T + promptLength + j]];
      const d = logprobGatherBackwardRef(row, target, [dLogp[n * L + j]], 1, V, 1 / temperature);
      dLogits.set(d, col * V);
    }
  }
  return dLogits;
}

// ---------------------------------------------------------------------------------------------

export class RefLlama {
  readonly config: LlamaConfig;
  /** f64 copies owned by the model, keyed by HF name; an optimizer may update them in place. */
  readonly params: Map<string, Float64Array>;
  private readonly invFreq: Float64Array;

  constructor(config: LlamaConfig, params: Map<string, ParamInput>) {
    this.config = config;
    this.params = new Map();
    for (const spec of parameterSpecs(config)) {
      const p = params.get(spec.name);
      if (!p) throw new Error(`RefLlama: missing parameter ${spec.name}`);
      if (p.length !== numel(spec.shape)) {
        throw new Error(
          `RefLlama: ${spec.name} has ${p.length} values, expected [${spec.shape.join(', ')}]`,
        );
      }
      this.params.set(spec.name, Float64Array.from(p));
    }
    this.invFreq = ropeInvFreqF64(config.headDim, config.ropeTheta);
  }

  private p(name: string): Float64Array {
    const t = this.params.get(name);
    if (!t) throw new Error(`RefLlama: no parameter ${name}`);
    return t;
  }

  private headName(): string {
    return this.config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  }

  private embed(tokens: Uint32Array, rows: number): Float64Array {
    const { hiddenSize: C, vocabSize: V } = this.config;
    const emb = this.p('model.embed_tokens.weight');
    const x = new Float64Array(rows * C);
    for (let r = 0; r < rows; r++) {
      const tok = tokens[r];
      if (tok >= V) throw new RangeError(`RefLlama: token ${tok} out of vocabulary ${V}`);
      x.set(emb.subarray(tok * C, tok * C + C), r * C);
    }
    return x;
  }

  private mlp(h: Float64Array, rows: number, prefix: string) {
    const { hiddenSize: C, intermediateSize: I } = this.config;
    const gate = linearRef(h, this.p(`${prefix}.mlp.gate_proj.weight`), null, rows, C, I);
    const up = linearRef(h, this.p(`${prefix}.mlp.up_proj.weight`), null, rows, C, I);
    const act = new Float64Array(rows * I);
    for (let i = 0; i < act.length; i++) act[i] = gate[i] * sigmoid(gate[i]) * up[i];
    const out = linearRef(act, this.p(`${prefix}.mlp.down_proj.weight`), null, rows, I, C);
    return { gate, up, act, out };
  }

  private qkv(h: Float64Array, rows: number, prefix: string, pos: Uint32Array) {
    const { hiddenSize: C, numHeads: H, numKvHeads: Hkv, headDim: D, attentionBias } = this.config;
    const bias = (name: string) =>
      attentionBias ? this.p(`${prefix}.self_attn.${name}.bias`) : null;
    const w = (name: string) => this.p(`${prefix}.self_attn.${name}.weight`);
    const q = linearRef(h, w('q_proj'), bias('q_proj'), rows, C, H * D);
    const k = linearRef(h, w('k_proj'), bias('k_proj'), rows, C, Hkv * D);
    const v = linearRef(h, w('v_proj'), bias('v_proj'), rows, C, Hkv * D);
    ropeInPlace(q, pos, rows, H, D, this.invFreq);
    ropeInPlace(k, pos, rows, Hkv, D, this.invFreq);
    return { q, k, v };
  }

  private logitsOf(hFinal: Float64Array, rows: number): Float64Array {
    const { hiddenSize: C, vocabSize: V } = this.config;
    return linearRef(hFinal, this.p(this.headName()), null, rows, C, V);
  }

  /** Full causal forward over N left-padded rows of T columns. tokens (N, T), keyStart (N). */
  forward(tokens: Uint32Array, N: number, T: number, keyStart: Uint32Array): RefForwardResult {
    const cfg = this.config;
    const { hiddenSize: C, numHeads: H, numKvHeads: Hkv, headDim: D, rmsNormEps: eps } = cfg;
    if (tokens.length !== N * T) throw new RangeError(`tokens has ${tokens.length} ≠ N·T values`);
    if (keyStart.length !== N) throw new RangeError(`keyStart has ${keyStart.length} ≠ N values`);
    const rows = N * T;
    const positions = positionsFromKeyStart(keyStart, N, T);
    const rep = H / Hkv;
    const scale = 1 / Math.sqrt(D);
    let x = this.embed(tokens, rows); // (N·T, C)
    const layers: LayerCache[] = [];
    for (let l = 0; l < cfg.numLayers; l++) {
      const prefix = `model.layers.${l}`;
      const n1 = rmsNormRef(x, this.p(`${prefix}.input_layernorm.weight`), rows, C, eps);
      const { q, k, v } = this.qkv(n1.y, rows, prefix, positions);
      const probs = new Float64Array(N * H * T * T); // (N, H, T, T)
      const attn = new Float64Array(rows * H * D); // (N, T, H, D)
      const scores = new Float64Array(T);
      for (let n = 0; n < N; n++) {
        for (let h = 0; h < H; h++) {
          const kvh = Math.floor(h / rep);
          for (let t = 0; t < T; t++) {
            const lo = keyStart[n]; // a pad query (t < lo) sees no key: output 0
            const qo = ((n * T + t) * H + h) * D;
            let max = -Infinity;
            for (let s = lo; s <= t; s++) {
              const ko = ((n * T + s) * Hkv + kvh) * D;
              let dot = 0;
              for (let d = 0; d < D; d++) dot += q[qo + d] * k[ko + d];
              scores[s] = dot * scale;
              max = Math.max(max, scores[s]);
            }
            let sum = 0;
            for (let s = lo; s <= t; s++) sum += Math.exp(scores[s] - max);
            const po = ((n * H + h) * T + t) * T;
            for (let s = lo; s <= t; s++) {
              const p = Math.exp(scores[s] - max) / sum;
              probs[po + s] = p;
              const vo = ((n * T + s) * Hkv + kvh) * D;
              for (let d = 0; d < D; d++) attn[qo + d] += p * v[vo + d];
            }
          }
        }
      }
      const o = linearRef(attn, this.p(`${prefix}.self_attn.o_proj.weight`), null, rows, H * D, C);
      const xMid = new Float64Array(rows * C);
      for (let i = 0; i < xMid.length; i++) xMid[i] = x[i] + o[i];
      const n2 = rmsNormRef(
        xMid,
        this.p(`${prefix}.post_attention_layernorm.weight`),
        rows,
        C,
        eps,
      );
      const mlp = this.mlp(n2.y, rows, prefix);
      const xOut = new Float64Array(rows * C);
      for (let i = 0; i < xOut.length; i++) xOut[i] = xMid[i] + mlp.out[i];
      layers.push({
        xIn: x,
        rms1: n1.rms,
        h1: n1.y,
        q,
        k,
        v,
        probs,
        attn,
        xMid,
        rms2: n2.rms,
        h2: n2.y,
        gate: mlp.gate,
        up: mlp.up,
        act: mlp.act,
      });
      x = xOut;
    }
    const nf = rmsNormRef(x, this.p('model.norm.weight'), rows, C, eps);
    const logits = this.logitsOf(nf.y, rows);
    return {
      logits,
      cache: {
        N,
        T,
        tokens: Uint32Array.from(tokens),
        keyStart: Uint32Array.from(keyStart),
        positions,
        layers,
        xFinal: x,
        rmsFinal: nf.rms,
        hFinal: nf.y,
      },
    };
  }

  /** Gradients of Σ dLogits ∘ logits with respect to every parameter, by HF name. dLogits (N, T, V). */
  backward(cache: RefForwardCache, dLogits: ArrayLike<number>): Map<string, Float64Array> {
    const cfg = this.config;
    const {
      hiddenSize: C,
      intermediateSize: I,
      numHeads: H,
      numKvHeads: Hkv,
      headDim: D,
      vocabSize: V,
    } = cfg;
    const { N, T } = cache;
    const rows = N * T;
    if (dLogits.length !== rows * V) throw new RangeError('dLogits must be (N, T, V)');
    const grads = new Map<string, Float64Array>();
    for (const spec of parameterSpecs(cfg))
      grads.set(spec.name, new Float64Array(numel(spec.shape)));
    const g = (name: string) => grads.get(name) as Float64Array;
    const dy = Float64Array.from(dLogits);

    // LM head and final norm.
    const dhFinal = new Float64Array(rows * C);
    const head = this.headName();
    linearBackwardRef(dy, cache.hFinal, this.p(head), rows, C, V, dhFinal, g(head), null);
    let dx = new Float64Array(rows * C);
    rmsNormBackwardRef(
      dhFinal,
      cache.xFinal,
      this.p('model.norm.weight'),
      cache.rmsFinal,
      rows,
      C,
      dx,
      g('model.norm.weight'),
    );

    const rep = H / Hkv;
    const scale = 1 / Math.sqrt(D);
    for (let l = cfg.numLayers - 1; l >= 0; l--) {
      const prefix = `model.layers.${l}`;
      const lc = cache.layers[l];
      // MLP: xOut = xMid + down(silu(gate(h2))·up(h2)).
      const dAct = new Float64Array(rows * I);
      const wDown = `${prefix}.mlp.down_proj.weight`;
      linearBackwardRef(dx, lc.act, this.p(wDown), rows, I, C, dAct, g(wDown), null);
      const dGate = new Float64Array(rows * I);
      const dUp = new Float64Array(rows * I);
      for (let i = 0; i < rows * I; i++) {
        const z = lc.gate[i];
        const s = sigmoid(z);
        dUp[i] = dAct[i] * z * s;
        dGate[i] = dAct[i] * lc.up[i] * s * (1 + z * (1 - s));
      }
      const dh2 = new Float64Array(rows * C);
      const wGate = `${prefix}.mlp.gate_proj.weight`;
      const wUp = `${prefix}.mlp.up_proj.weight`;
      linearBackwardRef(dGate, lc.h2, this.p(wGate), rows, C, I, dh2, g(wGate), null);
      linearBackwardRef(dUp, lc.h2, this.p(wUp), rows, C, I, dh2, g(wUp), null);
      const dxMid = Float64Array.from(dx);
      const wPost = `${prefix}.post_attention_layernorm.weight`;
      rmsNormBackwardRef(dh2, lc.xMid, this.p(wPost), lc.rms2, rows, C, dxMid, g(wPost));

      // Attention: xMid = xIn + o_proj(attn(q, k, v)).
      const dAttn = new Float64Array(rows * H * D);
      const wO = `${prefix}.self_attn.o_proj.weight`;
      linearBackwardRef(dxMid, lc.attn, this.p(wO), rows, H * D, C, dAttn, g(wO), null);
      const dq = new Float64Array(rows * H * D);
      const dk = new Float64Array(rows * Hkv * D);
      const dv = new Float64Array(rows * Hkv * D);
      const dp = new Float64Array(T);
      for (let n = 0; n < N; n++) {
        for (let h = 0; h < H; h++) {
          const kvh = Math.floor(h / rep);
          for (let t = 0; t < T; t++) {
            const lo = cache.keyStart[n];
            const qo = ((n * T + t) * H + h) * D;
            const po = ((n * H + h) * T + t) * T;
            let pdp = 0;
            for (let s = lo; s <= t; s++) {
              const vo = ((n * T + s) * Hkv + kvh) * D;
              let dot = 0;
              for (let d = 0; d < D; d++) dot += dAttn[qo + d] * lc.v[vo + d];
              dp[s] = dot;
              pdp += lc.probs[po + s] * dot;
            }
            for (let s = lo; s <= t; s++) {
              const p = lc.probs[po + s];
              const ds = p * (dp[s] - pdp) * scale;
              const ko = ((n * T + s) * Hkv + kvh) * D;
              for (let d = 0; d < D; d++) {
                dq[qo + d] += ds * lc.k[ko + d];
                dk[ko + d] += ds * lc.q[qo + d];
                dv[ko + d] += p * dAttn[qo + d];
              }
            }
          }
        }
      }
      ropeInPlace(dq, cache.positions, rows, H, D, this.invFreq, true);
      ropeInPlace(dk, cache.positions, rows, Hkv, D, this.invFreq, true);
      const dh1 = new Float64Array(rows * C);
      const bias = (name: string) =>
        cfg.attentionBias ? g(`${prefix}.self_attn.${name}.bias`) : null;
      for (const [name, dOut, width] of [
        ['q_proj', dq, H * D],
        ['k_proj', dk, Hkv * D],
        ['v_proj', dv, Hkv * D],
      ] as const) {
        const w = `${prefix}.self_attn.${name}.weight`;
        linearBackwardRef(dOut, lc.h1, this.p(w), rows, C, width, dh1, g(w), bias(name));
      }
      const dxIn = Float64Array.from(dxMid);
      const wIn = `${prefix}.input_layernorm.weight`;
      rmsNormBackwardRef(dh1, lc.xIn, this.p(wIn), lc.rms1, rows, C, dxIn, g(wIn));
      dx = dxIn;
    }

    const dEmb = g('model.embed_tokens.weight');
    for (let r = 0; r < rows; r++) {
      const tok = cache.tokens[r];
      for (let c = 0; c < C; c++) dEmb[tok * C + c] += dx[r * C + c];
    }
    return grads;
  }

  /**
   * Runs the prompt columns (N, T) through the model, keeps k and v in a cache of `capacity`
   * columns, and returns the logits of the last column (N, V).
   */
  prefill(
    tokens: Uint32Array,
    N: number,
    T: number,
    keyStart: Uint32Array,
    capacity: number,
  ): { logits: Float64Array; kv: RefKvCache } {
    if (capacity < T) throw new RangeError(`KV capacity ${capacity} < prompt columns ${T}`);
    const { numKvHeads: Hkv, headDim: D, vocabSize: V } = this.config;
    const { logits, cache } = this.forward(tokens, N, T, keyStart);
    const kv: RefKvCache = {
      N,
      capacity,
      length: T,
      keyStart: Uint32Array.from(keyStart),
      k: [],
      v: [],
    };
    const row = Hkv * D;
    for (const lc of cache.layers) {
      const k = new Float64Array(N * capacity * row); // (N, S_cap, Hkv, D)
      const v = new Float64Array(N * capacity * row);
      for (let n = 0; n < N; n++) {
        k.set(lc.k.subarray(n * T * row, (n + 1) * T * row), n * capacity * row);
        v.set(lc.v.subarray(n * T * row, (n + 1) * T * row), n * capacity * row);
      }
      kv.k.push(k);
      kv.v.push(v);
    }
    const last = new Float64Array(N * V);
    for (let n = 0; n < N; n++) {
      last.set(logits.subarray((n * T + T - 1) * V, (n * T + T) * V), n * V);
    }
    return { logits: last, kv };
  }

  /** Appends one token per row (N) at column kv.length and returns that column's logits (N, V). */
  decodeStep(kv: RefKvCache, tokens: Uint32Array): Float64Array {
    const cfg = this.config;
    const { hiddenSize: C, numHeads: H, numKvHeads: Hkv, headDim: D, rmsNormEps: eps } = cfg;
    const { N, capacity } = kv;
    const col = kv.length;
    if (tokens.length !== N) throw new RangeError(`decodeStep needs ${N} tokens`);
    if (col >= capacity) throw new RangeError(`KV cache full (${capacity} columns)`);
    const pos = new Uint32Array(N);
    for (let n = 0; n < N; n++) pos[n] = col >= kv.keyStart[n] ? col - kv.keyStart[n] : 0;
    const rep = H / Hkv;
    const scale = 1 / Math.sqrt(D);
    const row = Hkv * D;
    let x = this.embed(tokens, N); // (N, C)
    const scores = new Float64Array(col + 1);
    for (let l = 0; l < cfg.numLayers; l++) {
      const prefix = `model.layers.${l}`;
      const n1 = rmsNormRef(x, this.p(`${prefix}.input_layernorm.weight`), N, C, eps);
      const { q, k, v } = this.qkv(n1.y, N, prefix, pos);
      const kc = kv.k[l];
      const vc = kv.v[l];
      for (let n = 0; n < N; n++) {
        kc.set(k.subarray(n * row, (n + 1) * row), (n * capacity + col) * row);
        vc.set(v.subarray(n * row, (n + 1) * row), (n * capacity + col) * row);
      }
      const attn = new Float64Array(N * H * D); // (N, H, D)
      for (let n = 0; n < N; n++) {
        const lo = kv.keyStart[n];
        for (let h = 0; h < H; h++) {
          const kvh = Math.floor(h / rep);
          const qo = (n * H + h) * D;
          let max = -Infinity;
          for (let s = lo; s <= col; s++) {
            const ko = (n * capacity + s) * row + kvh * D;
            let dot = 0;
            for (let d = 0; d < D; d++) dot += q[qo + d] * kc[ko + d];
            scores[s] = dot * scale;
            max = Math.max(max, scores[s]);
          }
          let sum = 0;
          for (let s = lo; s <= col; s++) sum += Math.exp(scores[s] - max);
          for (let s = lo; s <= col; s++) {
            const p = Math.exp(scores[s] - max) / sum;
            const vo = (n * capacity + s) * row + kvh * D;
            for (let d = 0; d < D; d++) attn[qo + d] += p * vc[vo + d];
          }
        }
      }
      const o = linearRef(attn, this.p(`${prefix}.self_attn.o_proj.weight`), null, N, H * D, C);
      for (let i = 0; i < x.length; i++) x[i] += o[i];
      const n2 = rmsNormRef(x, this.p(`${prefix}.post_attention_layernorm.weight`), N, C, eps);
      const mlp = this.mlp(n2.y, N, prefix);
      const xOut = new Float64Array(N * C);
      for (let i = 0; i < xOut.length; i++) xOut[i] = x[i] + mlp.out[i];
      x = xOut;
    }
    kv.length = col + 1;
    const nf = rmsNormRef(x, this.p('model.norm.weight'), N, C, eps);
    return this.logitsOf(nf.y, N);
  }
}
