// The same Llama-family decoder written with tfjs ops, for the side-by-side training-step
// comparison: RMSNorm, rotary embeddings (Hugging Face rotate_half), grouped-query causal
// attention, SwiGLU MLP, tied or untied LM head, mean next-token cross-entropy, and tf.train.adam
// on every weight. Weights are tf.variables under Hugging Face names, Linear weights (out, in) as
// stored. No padding: every sequence is T real tokens at positions 0…T−1.
//
// Legend: N sequences, T tokens, C hidden, I intermediate, V vocab, H heads, Hkv kv-heads,
// R = H / Hkv, D head dim.
import * as tf from '@tensorflow/tfjs';
import { parameterSpecs, type LlamaConfig } from '../../src/core/model-config';

export class TfjsLlama {
  readonly vars = new Map<string, tf.Variable>();
  private readonly cos: tf.Tensor; // (1, T, 1, D)
  private readonly sin: tf.Tensor; // (1, T, 1, D)
  private readonly causal: tf.Tensor; // (T, T) additive mask: 0 on and below the diagonal
  private readonly kvHead: tf.Tensor1D; // (H) int32: the kv-head of each head, ⌊h / R⌋

  constructor(
    readonly config: LlamaConfig,
    tensors: ReadonlyMap<string, Float32Array>,
    readonly T: number,
  ) {
    for (const spec of parameterSpecs(config)) {
      this.vars.set(spec.name, tf.variable(tf.tensor(tensors.get(spec.name)!, spec.shape)));
    }
    const D = config.headDim;
    const cos = new Float32Array(T * D);
    const sin = new Float32Array(T * D);
    for (let t = 0; t < T; t++) {
      for (let j = 0; j < D / 2; j++) {
        const angle = t / Math.pow(config.ropeTheta, (2 * j) / D);
        for (const i of [j, j + D / 2]) {
          cos[t * D + i] = Math.cos(angle);
          sin[t * D + i] = Math.sin(angle);
        }
      }
    }
    this.cos = tf.tensor(cos, [1, T, 1, D]);
    this.sin = tf.tensor(sin, [1, T, 1, D]);
    const mask = new Float32Array(T * T);
    for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) mask[i * T + j] = -1e9;
    this.causal = tf.tensor(mask, [T, T]);
    const R = config.numHeads / config.numKvHeads;
    this.kvHead = tf.tensor1d(
      Int32Array.from({ length: config.numHeads }, (_, h) => Math.floor(h / R)),
      'int32',
    );
  }

  private w(name: string): tf.Variable {
    const v = this.vars.get(name);
    if (!v) throw new Error(`tfjs llama: no weight ${name}`);
    return v;
  }

  /** x (rows, in) · Wᵀ with W (out, in). */
  private linear(x: tf.Tensor2D, name: string): tf.Tensor2D {
    return tf.matMul(x, this.w(name), false, true);
  }

  private rmsNorm(x: tf.Tensor2D, name: string): tf.Tensor2D {
    const ms = tf.mean(tf.square(x), -1, true);
    return tf.mul(tf.mul(x, tf.rsqrt(tf.add(ms, this.config.rmsNormEps))), this.w(name));
  }

  /** x (N, T, heads, D) → x·cos + rotate_half(x)·sin. */
  private rope(x: tf.Tensor4D): tf.Tensor4D {
    const half = this.config.headDim / 2;
    const [x1, x2] = tf.split(x, [half, half], -1);
    const rotated = tf.concat([tf.neg(x2), x1], -1);
    return tf.add(tf.mul(x, this.cos), tf.mul(rotated, this.sin));
  }

  /** Logits (N·T, V) for tokens (N, T) int32. */
  logits(tokens: tf.Tensor2D): tf.Tensor2D {
    const cfg = this.config;
    const [N, T] = tokens.shape;
    const { hiddenSize: C, numHeads: H, numKvHeads: Hkv, headDim: D } = cfg;
    if (T !== this.T) throw new Error(`tfjs llama: built for T = ${this.T}, got ${T}`);
    const heads = (x: tf.Tensor2D, n: number) => tf.reshape(x, [N, T, n, D]) as tf.Tensor4D;
    let x = tf.reshape(tf.gather(this.w('model.embed_tokens.weight'), tf.reshape(tokens, [-1])), [
      N * T,
      C,
    ]) as tf.Tensor2D;
    for (let l = 0; l < cfg.numLayers; l++) {
      const p = `model.layers.${l}`;
      const h = this.rmsNorm(x, `${p}.input_layernorm.weight`);
      const bias = (y: tf.Tensor2D, name: string) =>
        cfg.attentionBias ? (tf.add(y, this.w(`${p}.self_attn.${name}.bias`)) as tf.Tensor2D) : y;
      const q = this.rope(heads(bias(this.linear(h, `${p}.self_attn.q_proj.weight`), 'q_proj'), H));
      const k = this.rope(
        heads(bias(this.linear(h, `${p}.self_attn.k_proj.weight`), 'k_proj'), Hkv),
      );
      const v = heads(bias(this.linear(h, `${p}.self_attn.v_proj.weight`), 'v_proj'), Hkv);
      // (N, T, n, D) → (N·H, T, D); kv-heads repeated R times (head h reads kv-head ⌊h / R⌋).
      const qh = tf.reshape(tf.transpose(q, [0, 2, 1, 3]), [N * H, T, D]);
      const repeat = (x4: tf.Tensor4D) =>
        tf.reshape(tf.gather(tf.transpose(x4, [0, 2, 1, 3]), this.kvHead, 1), [N * H, T, D]);
      const scores = tf.add(
        tf.mul(tf.matMul(qh, repeat(k), false, true), 1 / Math.sqrt(D)),
        this.causal,
      );
      const ctx = tf.matMul(tf.softmax(scores), repeat(v)); // (N·H, T, D)
      const o = tf.reshape(tf.transpose(tf.reshape(ctx, [N, H, T, D]), [0, 2, 1, 3]), [
        N * T,
        H * D,
      ]) as tf.Tensor2D;
      x = tf.add(x, this.linear(o, `${p}.self_attn.o_proj.weight`));
      const h2 = this.rmsNorm(x, `${p}.post_attention_layernorm.weight`);
      const gate = this.linear(h2, `${p}.mlp.gate_proj.weight`);
      const up = this.linear(h2, `${p}.mlp.up_proj.weight`);
      const act = tf.mul(tf.mul(gate, tf.sigmoid(gate)), up) as tf.Tensor2D;
      x = tf.add(x, this.linear(act, `${p}.mlp.down_proj.weight`));
    }
    const xn = this.rmsNorm(x, 'model.norm.weight');
    return this.linear(xn, cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
  }

  /** Mean over the N·T rows of −log softmax(logits)[target]. targets (N·T) int32. */
  loss(tokens: tf.Tensor2D, targets: tf.Tensor1D): tf.Scalar {
    const logp = tf.logSoftmax(this.logits(tokens));
    const picked = tf.sum(tf.mul(logp, tf.oneHot(targets, this.config.vocabSize)), -1);
    return tf.neg(tf.mean(picked)) as tf.Scalar;
  }

  dispose(): void {
    for (const v of this.vars.values()) v.dispose();
    this.vars.clear();
    tf.dispose([this.cos, this.sin, this.causal, this.kvHead]);
  }
}
