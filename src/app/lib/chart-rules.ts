// The live charts' rules that are arithmetic, not drawing (components/LineChart.svelte draws):
// TensorBoard's debiased EMA smoothing of a series, the y range a metric can have (a rate cannot
// leave [0, 1], a length or a time cannot go below 0) and a y domain that is never inverted or flat.

/** What values a metric can take: its y axis never shows more. */
export type YKind = 'rate' | 'nonneg' | 'any';

/** The bounds of each kind (undefined: unbounded on that side). */
export const Y_BOUNDS: Record<YKind, { min?: number; max?: number }> = {
  rate: { min: 0, max: 1 },
  nonneg: { min: 0 },
  any: {},
};

/**
 * TensorBoard's scalar smoothing (tensorboard/plugins/scalar, `smoothing`): an exponential moving
 * average with weight w, debiased by 1 − w^n over the n finite values so far, so the first value is
 * itself rather than pulled towards 0. w = 0, or a constant series, returns the values unchanged;
 * a non-finite value stays as it is (a gap in the line) and does not enter the average. Weights
 * are capped at 0.999.
 */
export function emaSmooth(values: ArrayLike<number>, weight: number): Float64Array {
  const out = Float64Array.from(values);
  const w = Number.isFinite(weight) ? Math.min(Math.max(weight, 0), 0.999) : 0;
  if (w === 0) return out;
  // As TensorBoard: a constant series is returned as it is (no rounding from the division).
  if (out.every((v) => v === out[0])) return out;
  let last = 0;
  let n = 0;
  for (let i = 0; i < out.length; i++) {
    const v = out[i];
    if (!Number.isFinite(v)) continue;
    last = last * w + (1 - w) * v;
    n++;
    out[i] = last / (1 - w ** n);
  }
  return out;
}

/**
 * A y domain the metric can have: `domain` (the data's, padded, or a fixed one) cut to the kind's
 * bounds, put in order, and given a height when it has none (a flat series, or data entirely
 * outside the bounds): then it spans 10% of the value (1 around 0), moved inside the bounds.
 * Non-finite ends fall back to the bounds, or [0, 1].
 */
export function clampDomain(domain: readonly [number, number], kind: YKind): [number, number] {
  const { min, max } = Y_BOUNDS[kind];
  let lo = domain[0];
  let hi = domain[1];
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
    lo = min ?? (max !== undefined ? max - 1 : 0);
    hi = max ?? lo + 1;
  }
  if (lo > hi) [lo, hi] = [hi, lo];
  if (min !== undefined) lo = Math.max(lo, min);
  if (max !== undefined) hi = Math.min(hi, max);
  if (hi > lo) return [lo, hi];
  // No height left: a span around the value, then shifted (and cut) to fit the bounds.
  const at = lo > hi ? (min !== undefined && lo === min ? lo : hi) : lo;
  let span = at === 0 ? 1 : Math.abs(at) * 0.1;
  if (min !== undefined && max !== undefined) span = Math.min(span, max - min);
  let a = at - span / 2;
  let b = at + span / 2;
  if (min !== undefined && a < min) [a, b] = [min, min + span];
  if (max !== undefined && b > max) [a, b] = [max - span, max];
  return [a, b];
}
