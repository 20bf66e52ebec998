// CPU references (f64) of shaders/logprob_gather.wgsl, shaders/logprob_gather_backward.wgsl and the
// supervised cross-entropy built from them (src/kernels/cross-entropy.ts).
//
// Legend: R rows (tokens), V vocab. Logits are scaled by invTemperature before the softmax, as TRL
// computes log-probs: logp = log_softmax(z / temperature)[o].

export interface LogprobGatherResult {
  logp: Float64Array; // (R)
  entropy: Float64Array; // (R) −Σ p log p of softmax(z · invT)
  lse: Float64Array; // (R) logsumexp(z · invT)
  /** (R) 1 where the target is argmax_v z[r, v] (the lowest id on ties, as torch.argmax), else 0. */
  correct: Float64Array;
}

export function logprobGatherRef(
  logits: ArrayLike<number>, // (R, V)
  targets: ArrayLike<number>, // (R)
  R: number,
  V: number,
  invTemperature = 1,
): LogprobGatherResult {
  const logp = new Float64Array(R);
  const entropy = new Float64Array(R);
  const lse = new Float64Array(R);
  const correct = new Float64Array(R);
  for (let r = 0; r < R; r++) {
    const base = r * V;
    let m = -Infinity;
    let best = -Infinity;
    let argmax = -1;
    for (let v = 0; v < V; v++) {
      const x = logits[base + v] * invTemperature;
      m = Math.max(m, x); // NaN propagates into lse, as before
      if (x > best) [best, argmax] = [x, v]; // strictly: a tie keeps the lower id
    }
    let s = 0;
    let t = 0;
    for (let v = 0; v < V; v++) {
      const d = logits[base + v] * invTemperature - m;
      const e = Math.exp(d);
      s += e;
      t += e * d;
    }
    const logS = Math.log(s);
    lse[r] = m + logS;
    entropy[r] = logS - t / s;
    const o = targets[r];
    logp[r] = o < V ? logits[base + o] * invTemperature - m - logS : NaN;
    correct[r] = argmax === o ? 1 : 0;
  }
  return { logp, entropy, lse, correct };
}

/**
 * dz (+)= g[r] · invT · (onehot(o_r) − softmax(z[r] · invT)), plus with `gradEntropy` (∂loss/∂H per
 * row, the entropy bonus of docs/grpo.md §5) gH[r] · invT · (−p_v · (log p_v + H[r])), the chain
 * rule through H = −Σ p log p; returns a new array (R, V).
 */
export function logprobGatherBackwardRef(
  logits: ArrayLike<number>, // (R, V)
  targets: ArrayLike<number>, // (R)
  g: ArrayLike<number>, // (R) ∂loss/∂logp
  R: number,
  V: number,
  invTemperature = 1,
  accumulateInto?: ArrayLike<number>, // (R, V)
  gradEntropy?: ArrayLike<number>, // (R) ∂loss/∂entropy
): Float64Array {
  const { lse, entropy } = logprobGatherRef(logits, targets, R, V, invTemperature);
  const dz = new Float64Array(R * V);
  for (let r = 0; r < R; r++) {
    for (let v = 0; v < V; v++) {
      const i = r * V + v;
      let value = 0;
      if (g[r] !== 0) {
        const p = Math.exp(logits[i] * invTemperature - lse[r]);
        value = g[r] * invTemperature * ((v === targets[r] ? 1 : 0) - p);
      }
      if (gradEntropy && gradEntropy[r] !== 0) {
        const logP = logits[i] * invTemperature - lse[r];
        value += gradEntropy[r] * invTemperature * (-Math.exp(logP) * (logP + entropy[r]));
      }
      dz[i] = value + (accumulateInto ? accumulateInto[i] : 0);
    }
  }
  return dz;
}

/**
 * Per-row upstream gradient of the masked-mean cross-entropy: g[r] = −mask[r] / count, with count
 * = Σ mask by default (pass the whole accumulated batch's count for gradient accumulation).
 */
export function crossEntropyRowWeights(mask: ArrayLike<number>, count?: number): Float32Array {
  let total = 0;
  for (let i = 0; i < mask.length; i++) total += mask[i];
  const denom = Math.max(count ?? total, 1);
  const g = new Float32Array(mask.length);
  for (let i = 0; i < mask.length; i++) g[i] = -mask[i] / denom;
  return g;
}

export interface CrossEntropyResult {
  loss: number; // mean over masked rows of −logp
  dLogits: Float64Array; // (R, V)
}

export function crossEntropyRef(
  logits: ArrayLike<number>, // (R, V)
  targets: ArrayLike<number>, // (R)
  mask: ArrayLike<number>, // (R)
  R: number,
  V: number,
  invTemperature = 1,
  count?: number,
): CrossEntropyResult {
  const { logp } = logprobGatherRef(logits, targets, R, V, invTemperature);
  const g = crossEntropyRowWeights(mask, count);
  let loss = 0;
  for (let r = 0; r < R; r++) if (g[r] !== 0) loss += g[r] * logp[r];
  return { loss, dLogits: logprobGatherBackwardRef(logits, targets, g, R, V, invTemperature) };
}
