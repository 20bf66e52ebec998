// CPU reference of shaders/sample.wgsl: repetition penalty, temperature, top-k, top-p (nucleus),
// min-p and greedy sampling of one token per row, plus the chosen token's log-prob under the full
// tempered softmax of the raw logits (what TRL stores as the sampling policy's "old" log-probs:
// its training forward applies no sampling processor).
//
// Semantics (Hugging Face's RepetitionPenalty processor, then its TopK and TopP warpers, with ties
// kept together):
//   penalty (p ≠ 1, before everything else, as transformers' _get_logits_processor orders it and
//          vLLM applies it): for every token id the sequence has seen (its prompt and the
//          completion so far), z' = z < 0 ? f32(z · p) : f32(z · f32(1/p)); z' = z elsewhere
//   x = f32(z' · f32(1/T))                              (rounded as the GPU rounds it)
//   top-k: keep x ≥ the k-th largest x                   (k = 0 or k ≥ V: off)
//   top-p: of those, keep x ≥ the largest value u whose mass P(x ≥ u) ≥ p   (p ≥ 1: off)
//          (softmax renormalised over the top-k set, as HF applies top-p after top-k)
//   min-p: of those, keep exp(x − max x) ≥ minP (HF's MinPLogitsWarper, applied after top-p: its
//          probs / max prob is exp(x − max x), the max token always kept); minP = 0 or absent: off
//   sample: inverse CDF over the kept tokens in index order with one uniform u ∈ [0, 1):
//           the first token whose cumulative weight exceeds u · Σ kept weights
//   greedy (or T ≤ 0): argmax of z', lowest index on ties; logp then uses T = 1 when T ≤ 0.
//   logp: of the chosen token under softmax(f32(z · f32(1/T))), the raw z (penalty not applied).
// Legend: N rows, V vocab.
import { sampleUniform } from './rng';

export interface SamplingOptions {
  temperature: number; // ≤ 0 means greedy
  topK: number; // 0 = off
  topP: number; // 1 = off
  greedy: boolean;
  minP?: number; // 0 or absent = off (TRL min_p)
  repetitionPenalty?: number; // 1 or absent = off (TRL repetition_penalty)
}

/**
 * The row after the repetition penalty, in f32 as the GPU computes it: seen token ids with z < 0
 * are multiplied by p, the others by f32(1/p) (transformers divides by p; the reciprocal keeps one
 * correctly rounded multiply on both sides). The row itself when p is 1 or nothing was seen.
 */
export function penalizedRow(
  row: ArrayLike<number>,
  options: SamplingOptions,
  seen?: ReadonlySet<number>,
): ArrayLike<number> {
  const p = Math.fround(options.repetitionPenalty ?? 1);
  if (p === 1 || !seen || seen.size === 0) return row;
  const inv = Math.fround(1 / (options.repetitionPenalty ?? 1));
  return Float64Array.from(row as ArrayLike<number>, (z, v) => {
    const zf = Math.fround(z);
    if (!seen.has(v)) return zf;
    return zf < 0 ? Math.fround(zf * p) : Math.fround(zf * inv);
  });
}

/** Order-preserving map of an f32 value to a u32 key (larger value ↔ larger key). */
export function orderKey(x: number): number {
  const bits = new Uint32Array(new Float32Array([x]).buffer)[0];
  return bits & 0x80000000 ? ~bits >>> 0 : (bits | 0x80000000) >>> 0;
}

const invTemperatureOf = (o: SamplingOptions) => (o.temperature > 0 ? 1 / o.temperature : 1);
const isGreedy = (o: SamplingOptions) => o.greedy || !(o.temperature > 0);

/** Tempered logits exactly as the GPU computes them (one f32 multiply). */
export function temperedRow(row: ArrayLike<number>, options: SamplingOptions): Float64Array {
  const invT = Math.fround(invTemperatureOf(options));
  return Float64Array.from(row as ArrayLike<number>, (z) => Math.fround(Math.fround(z) * invT));
}

/**
 * The distribution sampling draws from after top-k/top-p (probabilities, zero outside the kept
 * set), and the kept set's threshold key. For greedy this is the one-hot of the argmax.
 */
export function filteredDistributionRef(
  rawRow: ArrayLike<number>,
  options: SamplingOptions,
  seen?: ReadonlySet<number>,
): { probs: Float64Array; thresholdKey: number } {
  const row = penalizedRow(rawRow, options, seen);
  const V = row.length;
  const probs = new Float64Array(V);
  if (isGreedy(options)) {
    probs[argmax(row)] = 1;
    return { probs, thresholdKey: orderKey(row[argmax(row)]) };
  }
  const x = temperedRow(row, options);
  const keys = Array.from(x, orderKey);
  let m = -Infinity;
  for (const v of x) m = Math.max(m, v);
  const w = Array.from(x, (v) => Math.exp(v - m));
  let threshold = 0;
  const desc = Array.from({ length: V }, (_, i) => i).sort((a, b) => keys[b] - keys[a]);
  const { topK, topP } = options;
  if (topK > 0 && topK < V) threshold = keys[desc[topK - 1]];
  if (topP < 1) {
    let zKept = 0;
    for (let v = 0; v < V; v++) if (keys[v] >= threshold) zKept += w[v];
    // Walk distinct values from the top; a tie group enters (and counts) as a whole.
    let mass = 0;
    for (let j = 0; j < V;) {
      const key = keys[desc[j]];
      while (j < V && keys[desc[j]] === key) mass += w[desc[j++]];
      if (mass >= topP * zKept) {
        threshold = Math.max(threshold, key);
        break;
      }
    }
  }
  const minP = options.minP ?? 0;
  if (minP > 0) {
    // The kept set is an upper set of keys: its smallest key is the threshold.
    let smallest = Infinity;
    for (let v = 0; v < V; v++)
      if (Math.exp(x[v] - m) >= minP) smallest = Math.min(smallest, keys[v]);
    threshold = Math.max(threshold, smallest);
  }
  let total = 0;
  for (let v = 0; v < V; v++) if (keys[v] >= threshold) total += w[v];
  for (let v = 0; v < V; v++) probs[v] = keys[v] >= threshold ? w[v] / total : 0;
  return { probs, thresholdKey: threshold };
}

function argmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let v = 1; v < row.length; v++) if (row[v] > row[best]) best = v;
  return best;
}

/**
 * The token one uniform u ∈ [0, 1) picks, and its log-prob under the full tempered softmax of the
 * raw row. `seen`: the token ids the repetition penalty applies to (prompt and completion so far).
 */
export function sampleRowRef(
  row: ArrayLike<number>,
  options: SamplingOptions,
  u: number,
  seen?: ReadonlySet<number>,
): { token: number; logp: number } {
  const V = row.length;
  const x = temperedRow(row, options);
  let m = -Infinity;
  for (const v of x) m = Math.max(m, v);
  let s = 0;
  for (const v of x) s += Math.exp(v - m);
  const logpOf = (t: number) => x[t] - m - Math.log(s);
  const selected = penalizedRow(row, options, seen);
  if (isGreedy(options)) {
    const token = argmax(selected);
    return { token, logp: logpOf(token) };
  }
  const { thresholdKey } = filteredDistributionRef(selected, options);
  // The draw's weights: the penalised tempered logits against their own max.
  const xs = selected === row ? x : temperedRow(selected, options);
  let ms = -Infinity;
  for (const v of xs) ms = Math.max(ms, v);
  const w = new Float64Array(V);
  let total = 0;
  for (let v = 0; v < V; v++) {
    if (orderKey(xs[v]) >= thresholdKey) w[v] = Math.exp(xs[v] - ms);
    total += w[v];
  }
  const target = u * total;
  let cum = 0;
  let last = -1;
  for (let v = 0; v < V; v++) {
    if (w[v] <= 0) continue;
    cum += w[v];
    last = v;
    if (cum > target) return { token: v, logp: logpOf(v) };
  }
  return { token: last, logp: logpOf(last) }; // only if rounding put target at the very end
}

/**
 * Every row of (N, V) logits with the uniforms the GPU draws for (seed, sequence, step).
 * `seen[n]`: row n's token ids so far for the repetition penalty; each chosen token is added to
 * it (as the GPU sets its bit), so the same sets serve the next step.
 */
export function sampleRef(
  logits: ArrayLike<number>, // (N, V)
  N: number,
  V: number,
  options: SamplingOptions,
  seed: number,
  step: number,
  sequenceOffset = 0,
  seen?: readonly Set<number>[],
): { tokens: Uint32Array; logps: Float64Array } {
  const tokens = new Uint32Array(N);
  const logps = new Float64Array(N);
  const rows = logits as ArrayLike<number> & {
    subarray?: (a: number, b: number) => ArrayLike<number>;
  };
  for (let n = 0; n < N; n++) {
    const row = rows.subarray
      ? rows.subarray(n * V, (n + 1) * V)
      : Array.from({ length: V }, (_, v) => logits[n * V + v]);
    const r = sampleRowRef(row, options, sampleUniform(seed, sequenceOffset + n, step), seen?.[n]);
    seen?.[n].add(r.token);
    tokens[n] = r.token;
    logps[n] = r.logp;
  }
  return { tokens, logps };
}
