// Plain-TS CPU reference of the Llama-family model (RMSNorm, HF rotate_half rotary embeddings,
// grouped-query causal attention with left padding, SwiGLU MLP, optional q/k/v bias, Qwen3's
// per-head q/k RMSNorm, tied or untied LM head): forward, backward to every parameter, and KV-cache prefill/decode. The GPU
// model (src/model/llama.ts) is tested against it, and it is the CPU fallback without WebGPU.
//
// Precision: every parameter is widened to f64 on construction and all arithmetic and storage is
// f64 (Float64Array), with sums in index order, so the same inputs give the same bits and the
// torch float64 fixtures (tests/fixtures) agree to ~1e-12.
//
// Every op is the per-kernel reference (src/ref/matmul.ts, rmsnorm.ts, rope.ts, attention.ts,
// swiglu.ts, bias.ts, embedding.ts, add.ts), so the model and each kernel's test share one
// definition. One difference is on purpose: rotary frequencies and angles stay f64 here (as in the
// fixtures), where the rope kernel's reference rounds them to f32 (as HF does in f32).
//
// Layout (shared with the GPU model): hidden states (N·T, C) rows; q (N, T, H, D); k, v
// (N, T, Hkv, D); Linear weights (out, in) as Hugging Face, y = x·Wᵀ (+ b). Rows are LEFT-padded:
// keyStart[n] = number of pad columns; the rotary position of column t is t − keyStart[n] (0 on pad
// columns). A query at column t attends to keys [keyStart[n], t]; a pad query (t < keyStart[n])
// sees no key and its attention output is 0, as in src/ref/attention.ts (it never reaches a loss).
//
// Qwen3 (hasQkNorm): each head's query and key vector (D) goes through its own RMSNorm (weights
// q_norm, k_norm (D), rms_norm_eps) after the projection and before rotary: the row norm of
// src/ref/rmsnorm.ts over (N·T·Hx) rows of D channels, so it needs no reference of its own.
//
// LoRA (src/ref/lora.ts): with adapters, each targeted projection adds s·(x·Aᵀ)·Bᵀ after its bias,
// as PEFT does; backward adds the adapters' gradients (by their PEFT names) and their share of dX.
// `adaptersEnabled = false` gives the base model's exact bits (the reference policy under LoRA).
//
// Legend: N sequences, T time (columns), C hidden, I intermediate, V vocab, H heads, Hkv kv-heads,
// D head dim, L layers, S_cap KV-cache capacity (columns).

import { hasQkNorm, numel, parameterSpecs, type LlamaConfig } from '../core/model-config';
import { addRef } from './add';
import { attentionBackwardRef, attentionForwardRef } from './attention';
import { biasAddRef, biasGradRef } from './bias';
import { embeddingBackwardRef, embeddingForwardRef } from './embedding';
import { logprobGatherBackwardRef, logprobGatherRef } from './logprob';
import { loraBackwardRef, loraForwardRef } from './lora';
import {
  loraAdapterSpecs,
  loraAName,
  loraBName,
  loraScaling,
  type LoraOptions,
} from '../core/lora';
import { matmulF64 } from './matmul';
import { rmsnormBackwardRef, rmsnormBackwardWeightRef, rmsnormForwardRef } from './rmsnorm';
import { ropeInvFreqF64, ropeRotate } from './rope';
import { swigluBackwardRef, swigluForwardRef } from './swiglu';

type ParamInput = Float32Array | Float64Array;

/** LoRA adapters for RefLlama: the options and A/B tensors by PEFT name (src/ref/lora.ts). */
export interface RefLoraInput {
  options: LoraOptions;
  adapters: ReadonlyMap<string, ParamInput>;
}

interface LayerCache {
  xIn: Float64Array; // (N·T, C) residual stream entering the layer
  rstd1: Float64Array; // (N·T) 1/sqrt(mean(x²) + eps) of the input norm
  h1: Float64Array; // (N·T, C) input_layernorm output
  /** Qwen3: the projections before q_norm / k_norm and the norms' rstd; null otherwise. */
  qkNorm: {
    qProj: Float64Array; // (N·T, H·D)
    kProj: Float64Array; // (N·T, Hkv·D)
    rstdQ: Float64Array; // (N·T·H)
    rstdK: Float64Array; // (N·T·Hkv)
  } | null;
  q: Float64Array; // (N, T, H, D) after rotary
  k: Float64Array; // (N, T, Hkv, D) after rotary
  v: Float64Array; // (N, T, Hkv, D)
  attn: Float64Array; // (N·T, H·D) attention output before o_proj
  xMid: Float64Array; // (N·T, C) residual after attention
  rstd2: Float64Array; // (N·T)
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
  rstdFinal: Float64Array; // (N·T)
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
// Linear layers from the per-op references.

/** y = x·Wᵀ (+ b): x (M, K), W (Nout, K), b (Nout) → (M, Nout). */
function linear(
  x: Float64Array,
  w: Float64Array,
  b: Float64Array | null,
  M: number,
  K: number,
  Nout: number,
): Float64Array {
  const y = matmulF64(x, w, { M, N: Nout, K, transB: true });
  return b ? biasAddRef(y, b) : y;
}

/** Adds the gradients of y = x·Wᵀ + b: dX += dY·W, dW += dYᵀ·X, db += Σ_rows dY. */
function linearBackward(
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
  dx.set(matmulF64(dy, w, { M, N: K, K: Nout }, dx));
  dw.set(matmulF64(dy, x, { M: Nout, N: K, K: M, transA: true }, dw));
  if (db) db.set(biasGradRef(dy, M, Nout, db));
}

/** The rotary angle in f64 (see the header). */
const f64Angle = (position: number, invFreq: number) => position * invFreq;

// ---------------------------------------------------------------------------------------------
// Log-probs of completion tokens at a temperature (TRL: logp = log_softmax(z / temperature)[o]),
// on top of the per-row gather reference in src/ref/logprob.ts.

/**
 * The rows that score the completion tokens: completions start at column P (promptLength) in every
 * row, and logits at column P−1+j score token P+j. logits (N, T, V), tokens (N, T) → rows
 * (N·L, V) and targets (N·L), L = T − P.
 */
function completionRows(
  logits: ArrayLike<number>,
  tokens: Uint32Array,
  N: number,
  T: number,
  V: number,
  promptLength: number,
): { rows: Float64Array; targets: Uint32Array; L: number } {
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
  return { rows, targets, L };
}

/** Log-probs of the completion tokens as TRL computes them (see completionRows) → (N, T−P). */
export function completionLogprobsRef(
  logits: ArrayLike<number>,
  tokens: Uint32Array,
  N: number,
  T: number,
  V: number,
  promptLength: number,
  temperature: number,
): Float64Array {
  const { rows, targets, L } = completionRows(logits, tokens, N, T, V, promptLength);
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
  const { rows, targets, L } = completionRows(logits, tokens, N, T, V, promptLength);
  const d = logprobGatherBackwardRef(rows, targets, dLogp, N * L, V, 1 / temperature); // (N·L, V)
  const dLogits = new Float64Array(N * T * V);
  for (let n = 0; n < N; n++) {
    const from = n * L * V;
    dLogits.set(d.subarray(from, from + L * V), (n * T + promptLength - 1) * V);
  }
  return dLogits;
}

// ---------------------------------------------------------------------------------------------

export class RefLlama {
  readonly config: LlamaConfig;
  /** f64 copies owned by the model, keyed by HF name; an optimizer may update them in place. */
  readonly params: Map<string, Float64Array>;
  private readonly invFreq: Float64Array;
  /** Adapter scaling s and rank r, or null without LoRA. */
  private readonly lora: { scaling: number; r: number } | null;
  /** With LoRA: false scores the base model alone (adapters skipped, base bits unchanged). */
  adaptersEnabled = true;

  constructor(config: LlamaConfig, params: Map<string, ParamInput>, lora?: RefLoraInput) {
    this.config = config;
    this.params = new Map();
    const specs = [
      ...parameterSpecs(config),
      ...(lora ? loraAdapterSpecs(config, lora.options) : []),
    ];
    this.lora = lora ? { scaling: loraScaling(lora.options), r: lora.options.r } : null;
    for (const spec of specs) {
      const p = params.get(spec.name) ?? lora?.adapters.get(spec.name);
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

  /** The adapter (A, B) on the projection at `path`, or null (none, or adapters disabled). */
  private adapter(path: string): { A: Float64Array; B: Float64Array } | null {
    if (!this.lora || !this.adaptersEnabled) return null;
    const A = this.params.get(loraAName(path));
    const B = this.params.get(loraBName(path));
    return A && B ? { A, B } : null;
  }

  /** The projection at `path` (weight `${path}.weight`): y = x·Wᵀ (+ b) (+ s·(x·Aᵀ)·Bᵀ). */
  private proj(
    x: Float64Array,
    path: string,
    b: Float64Array | null,
    rows: number,
    K: number,
    Nout: number,
  ): Float64Array {
    const y = linear(x, this.p(`${path}.weight`), b, rows, K, Nout);
    const ad = this.adapter(path);
    if (!ad || !this.lora) return y;
    return loraForwardRef(y, x, ad.A, ad.B, this.lora.scaling, rows, K, this.lora.r, Nout);
  }

  /** Backward of proj(): linearBackward, plus the adapter's dA, dB and its share of dX. */
  private projBackward(
    dy: Float64Array,
    x: Float64Array,
    path: string,
    rows: number,
    K: number,
    Nout: number,
    dx: Float64Array,
    grads: Map<string, Float64Array>,
    db: Float64Array | null,
  ): void {
    const w = `${path}.weight`;
    linearBackward(dy, x, this.p(w), rows, K, Nout, dx, grads.get(w)!, db);
    const ad = this.adapter(path);
    if (!ad || !this.lora) return;
    const dA = grads.get(loraAName(path))!;
    const dB = grads.get(loraBName(path))!;
    loraBackwardRef(dy, x, ad.A, ad.B, this.lora.scaling, rows, K, this.lora.r, Nout, dx, dA, dB);
  }

  private headName(): string {
    return this.config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  }

  private embed(tokens: Uint32Array, rows: number): Float64Array {
    const { hiddenSize: C, vocabSize: V } = this.config;
    for (let r = 0; r < rows; r++) {
      const tok = tokens[r];
      if (tok >= V) throw new RangeError(`RefLlama: token ${tok} out of vocabulary ${V}`);
    }
    return embeddingForwardRef(tokens, this.p('model.embed_tokens.weight'), V, C);
  }

  private mlp(h: Float64Array, rows: number, prefix: string) {
    const { hiddenSize: C, intermediateSize: I } = this.config;
    const gate = this.proj(h, `${prefix}.mlp.gate_proj`, null, rows, C, I);
    const up = this.proj(h, `${prefix}.mlp.up_proj`, null, rows, C, I);
    const act = swigluForwardRef(gate, up);
    const out = this.proj(act, `${prefix}.mlp.down_proj`, null, rows, I, C);
    return { gate, up, act, out };
  }

  private qkv(h: Float64Array, rows: number, prefix: string, pos: Uint32Array) {
    const { hiddenSize: C, numHeads: H, numKvHeads: Hkv, headDim: D, attentionBias } = this.config;
    const bias = (name: string) =>
      attentionBias ? this.p(`${prefix}.self_attn.${name}.bias`) : null;
    const path = (name: string) => `${prefix}.self_attn.${name}`;
    let q = this.proj(h, path('q_proj'), bias('q_proj'), rows, C, H * D);
    let k = this.proj(h, path('k_proj'), bias('k_proj'), rows, C, Hkv * D);
    const v = this.proj(h, path('v_proj'), bias('v_proj'), rows, C, Hkv * D);
    let qkNorm: LayerCache['qkNorm'] = null;
    if (hasQkNorm(this.config)) {
      // Qwen3: RMSNorm of every head's vector, (rows·heads) rows of D channels.
      const eps = this.config.rmsNormEps;
      const nq = rmsnormForwardRef(q, this.p(path('q_norm.weight')), rows * H, D, eps);
      const nk = rmsnormForwardRef(k, this.p(path('k_norm.weight')), rows * Hkv, D, eps);
      qkNorm = { qProj: q, kProj: k, rstdQ: nq.rstd, rstdK: nk.rstd };
      [q, k] = [nq.y, nk.y];
    }
    ropeRotate(q, pos, rows, H, D, this.invFreq, f64Angle, false, q);
    ropeRotate(k, pos, rows, Hkv, D, this.invFreq, f64Angle, false, k);
    return { q, k, v, qkNorm };
  }

  private logitsOf(hFinal: Float64Array, rows: number): Float64Array {
    const { hiddenSize: C, vocabSize: V } = this.config;
    return linear(hFinal, this.p(this.headName()), null, rows, C, V);
  }

  /** Full causal forward over N left-padded rows of T columns. tokens (N, T), keyStart (N). */
  forward(tokens: Uint32Array, N: number, T: number, keyStart: Uint32Array): RefForwardResult {
    const cfg = this.config;
    const { hiddenSize: C, numHeads: H, numKvHeads: Hkv, headDim: D, rmsNormEps: eps } = cfg;
    if (tokens.length !== N * T) throw new RangeError(`tokens has ${tokens.length} ≠ N·T values`);
    if (keyStart.length !== N) throw new RangeError(`keyStart has ${keyStart.length} ≠ N values`);
    const rows = N * T;
    const positions = positionsFromKeyStart(keyStart, N, T);
    let x = this.embed(tokens, rows); // (N·T, C)
    const layers: LayerCache[] = [];
    for (let l = 0; l < cfg.numLayers; l++) {
      const prefix = `model.layers.${l}`;
      const n1 = rmsnormForwardRef(x, this.p(`${prefix}.input_layernorm.weight`), rows, C, eps);
      const { q, k, v, qkNorm } = this.qkv(n1.y, rows, prefix, positions);
      // (N, T, H, D); a pad query (t < keyStart[n]) sees no key: output 0.
      const attn = attentionForwardRef(q, k, v, keyStart, { N, Tq: T, H, Hkv, D }).o;
      const o = this.proj(attn, `${prefix}.self_attn.o_proj`, null, rows, H * D, C);
      const xMid = addRef(x, o);
      const n2 = rmsnormForwardRef(
        xMid,
        this.p(`${prefix}.post_attention_layernorm.weight`),
        rows,
        C,
        eps,
      );
      const mlp = this.mlp(n2.y, rows, prefix);
      const xOut = addRef(xMid, mlp.out);
      layers.push({
        xIn: x,
        rstd1: n1.rstd,
        h1: n1.y,
        qkNorm,
        q,
        k,
        v,
        attn,
        xMid,
        rstd2: n2.rstd,
        h2: n2.y,
        gate: mlp.gate,
        up: mlp.up,
        act: mlp.act,
      });
      x = xOut;
    }
    const nf = rmsnormForwardRef(x, this.p('model.norm.weight'), rows, C, eps);
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
        rstdFinal: nf.rstd,
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
    for (const [name, p] of this.params) grads.set(name, new Float64Array(p.length));
    const g = (name: string) => grads.get(name) as Float64Array;
    const dy = Float64Array.from(dLogits);

    // LM head and final norm.
    const dhFinal = new Float64Array(rows * C);
    const head = this.headName();
    linearBackward(dy, cache.hFinal, this.p(head), rows, C, V, dhFinal, g(head), null);
    const norm = 'model.norm.weight';
    let dx = rmsnormBackwardRef(dhFinal, cache.xFinal, this.p(norm), cache.rstdFinal, rows, C);
    g(norm).set(rmsnormBackwardWeightRef(dhFinal, cache.xFinal, cache.rstdFinal, rows, C, g(norm)));

    for (let l = cfg.numLayers - 1; l >= 0; l--) {
      const prefix = `model.layers.${l}`;
      const lc = cache.layers[l];
      // MLP: xOut = xMid + down(silu(gate(h2))·up(h2)).
      const dAct = new Float64Array(rows * I);
      this.projBackward(dx, lc.act, `${prefix}.mlp.down_proj`, rows, I, C, dAct, grads, null);
      const { dgate: dGate, dup: dUp } = swigluBackwardRef(dAct, lc.gate, lc.up);
      const dh2 = new Float64Array(rows * C);
      this.projBackward(dGate, lc.h2, `${prefix}.mlp.gate_proj`, rows, C, I, dh2, grads, null);
      this.projBackward(dUp, lc.h2, `${prefix}.mlp.up_proj`, rows, C, I, dh2, grads, null);
      const wPost = `${prefix}.post_attention_layernorm.weight`;
      const dxMid = rmsnormBackwardRef(dh2, lc.xMid, this.p(wPost), lc.rstd2, rows, C, dx);
      g(wPost).set(rmsnormBackwardWeightRef(dh2, lc.xMid, lc.rstd2, rows, C, g(wPost)));

      // Attention: xMid = xIn + o_proj(attn(q, k, v)).
      const dAttn = new Float64Array(rows * H * D);
      const pathO = `${prefix}.self_attn.o_proj`;
      this.projBackward(dxMid, lc.attn, pathO, rows, H * D, C, dAttn, grads, null);
      const shape = { N, T, H, Hkv, D };
      const { dq, dk, dv } = attentionBackwardRef(dAttn, lc.q, lc.k, lc.v, cache.keyStart, shape);
      ropeRotate(dq, cache.positions, rows, H, D, this.invFreq, f64Angle, true, dq);
      ropeRotate(dk, cache.positions, rows, Hkv, D, this.invFreq, f64Angle, true, dk);
      let [dqProj, dkProj] = [dq, dk];
      if (lc.qkNorm) {
        // Back through Qwen3's per-head norms to the projections' outputs.
        const { qProj, kProj, rstdQ, rstdK } = lc.qkNorm;
        const wq = `${prefix}.self_attn.q_norm.weight`;
        const wk = `${prefix}.self_attn.k_norm.weight`;
        dqProj = rmsnormBackwardRef(dq, qProj, this.p(wq), rstdQ, rows * H, D);
        dkProj = rmsnormBackwardRef(dk, kProj, this.p(wk), rstdK, rows * Hkv, D);
        g(wq).set(rmsnormBackwardWeightRef(dq, qProj, rstdQ, rows * H, D, g(wq)));
        g(wk).set(rmsnormBackwardWeightRef(dk, kProj, rstdK, rows * Hkv, D, g(wk)));
      }
      const dh1 = new Float64Array(rows * C);
      const bias = (name: string) =>
        cfg.attentionBias ? g(`${prefix}.self_attn.${name}.bias`) : null;
      for (const [name, dOut, width] of [
        ['q_proj', dqProj, H * D],
        ['k_proj', dkProj, Hkv * D],
        ['v_proj', dv, Hkv * D],
      ] as const) {
        const path = `${prefix}.self_attn.${name}`;
        this.projBackward(dOut, lc.h1, path, rows, C, width, dh1, grads, bias(name));
      }
      const wIn = `${prefix}.input_layernorm.weight`;
      dx = rmsnormBackwardRef(dh1, lc.xIn, this.p(wIn), lc.rstd1, rows, C, dxMid);
      g(wIn).set(rmsnormBackwardWeightRef(dh1, lc.xIn, lc.rstd1, rows, C, g(wIn)));
    }

    const dEmb = g('model.embed_tokens.weight');
    dEmb.set(embeddingBackwardRef(cache.tokens, dx, V, C, dEmb));
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
    const row = Hkv * D;
    let x = this.embed(tokens, N); // (N, C)
    for (let l = 0; l < cfg.numLayers; l++) {
      const prefix = `model.layers.${l}`;
      const n1 = rmsnormForwardRef(x, this.p(`${prefix}.input_layernorm.weight`), N, C, eps);
      const { q, k, v } = this.qkv(n1.y, N, prefix, pos);
      const kc = kv.k[l];
      const vc = kv.v[l];
      for (let n = 0; n < N; n++) {
        kc.set(k.subarray(n * row, (n + 1) * row), (n * capacity + col) * row);
        vc.set(v.subarray(n * row, (n + 1) * row), (n * capacity + col) * row);
      }
      // One query row (column col) per sequence against the cache's columns [keyStart, col].
      const shape = { N, Tq: 1, H, Hkv, D, qOffset: col, S: col + 1, sCap: capacity };
      const attn = attentionForwardRef(q, kc, vc, kv.keyStart, shape).o; // (N, H, D)
      const o = this.proj(attn, `${prefix}.self_attn.o_proj`, null, N, H * D, C);
      const xMid = addRef(x, o);
      const n2 = rmsnormForwardRef(
        xMid,
        this.p(`${prefix}.post_attention_layernorm.weight`),
        N,
        C,
        eps,
      );
      const mlp = this.mlp(n2.y, N, prefix);
      x = addRef(xMid, mlp.out);
    }
    kv.length = col + 1;
    const nf = rmsnormForwardRef(x, this.p('model.norm.weight'), N, C, eps);
    return this.logitsOf(nf.y, N);
  }
}
