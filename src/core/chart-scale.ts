// Axes for every chart of the project: the page's line chart (app/components/LineChart.svelte:
// Train view, Aha panel, Learn mode) and the CLI's SVG report (src/formats/svg-chart.ts). Linear scales, "nice" round ticks, the data
// range of several series, tick labels and the nearest step under a pointer. Pure functions.

export type Scale = ((v: number) => number) & { invert: (p: number) => number };

/** Maps [d0, d1] onto [r0, r1] (a degenerate domain maps to the middle of the range). */
export function linearScale(domain: [number, number], range: [number, number]): Scale {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  const span = d1 - d0;
  const f = ((v: number) =>
    span === 0 ? (r0 + r1) / 2 : r0 + ((v - d0) / span) * (r1 - r0)) as Scale;
  f.invert = (p: number) => (r1 === r0 ? d0 : d0 + ((p - r0) / (r1 - r0)) * span);
  return f;
}

/** Tick steps of 1, 2, 2.5 and 5 × 10^k: quarter steps (0.25) read well on rates and losses. */
export const TICK_STEPS = [1, 2, 2.5, 5] as const;
/** Steps of 1, 2 and 5 × 10^k only, for labels printed with a fixed number of decimals. */
export const TICK_STEPS_125 = [1, 2, 5] as const;

/**
 * About `count` round tick values covering [min, max]: the smallest step m × 10^k (m from
 * `steps`) at least (max − min) / count, every multiple of it inside the range (within 1e-9 of
 * a step at both ends). Ticks are multiplied, not accumulated, and rounded to 12 significant
 * digits, so they print without 0.30000000000000004. A flat range gives [min]; a non-finite one
 * gives no ticks.
 */
export function niceTicks(
  min: number,
  max: number,
  count = 5,
  steps: readonly number[] = TICK_STEPS,
): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min === max) return [min];
  if (min > max) [min, max] = [max, min];
  const raw = (max - min) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [...steps, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const first = Math.ceil(min / step - 1e-9);
  const last = Math.floor(max / step + 1e-9);
  const ticks: number[] = [];
  for (let k = first; k <= last; k++) ticks.push(Number((k * step).toPrecision(12)));
  return ticks;
}

/**
 * [min, max] of the finite values, or the fallback when there are none. A flat range is padded
 * by 10% of the value (±1 around 0) so a constant series draws mid-height; otherwise `pad` (a
 * fraction of the span) is added on both sides.
 */
export function extent(
  values: ArrayLike<number>,
  fallback: [number, number] = [0, 1],
  pad = 0,
): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo === Infinity) return fallback;
  if (lo === hi) {
    const flat = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    return [lo - flat, hi + flat];
  }
  const margin = (hi - lo) * pad;
  return [lo - margin, hi + margin];
}

/** A tick label with just enough decimals to tell ticks `step` apart. */
export function formatTick(v: number, step: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || (a < 1e-3 && step < 1e-3)) return v.toExponential(1);
  if (!(step > 0)) return v.toFixed(2);
  let decimals = Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
  const scaled = step * 10 ** decimals;
  if (Math.abs(scaled - Math.round(scaled)) > 1e-9) decimals += 1; // 0.25, 2.5
  return v.toFixed(Math.min(decimals, 6));
}

/** Index of the value of the ascending `xs` nearest to x (the later one on a tie); -1 if empty. */
export function nearestIndex(xs: ArrayLike<number>, x: number): number {
  if (xs.length === 0) return -1;
  let lo = 0;
  let hi = xs.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(xs[lo - 1] - x) < Math.abs(xs[lo] - x)) lo--;
  return lo;
}

/**
 * Where a chart's step cursor goes on a key press (← → one step, Home/End the ends), from `at`
 * (null: the last step) over `n` steps; null when the key does not move it.
 */
export function cursorKey(key: string, at: number | null, n: number): number | null {
  if (n === 0) return null;
  const last = n - 1;
  const cur = at ?? last;
  if (key === 'ArrowLeft') return Math.max(0, cur - 1);
  if (key === 'ArrowRight') return Math.min(last, cur + 1);
  if (key === 'Home') return 0;
  if (key === 'End') return last;
  return null;
}
