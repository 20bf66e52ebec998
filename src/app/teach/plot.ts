// Hand-made plotting helpers shared by Learn mode and the Aha panel (no chart dependency): linear
// scales, "nice" ticks, SVG paths that break at missing values, bucket-mean downsampling so a
// chart over thousands of steps draws a few hundred points, colours for signed values, and number
// formatting. Pure functions; the Svelte components only place what these return.

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

/** About `count` round tick values covering [min, max] (steps of 1, 2 or 5 × 10^k). */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min === max) return [min];
  if (min > max) [min, max] = [max, min];
  const raw = (max - min) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const first = Math.ceil(min / step - 1e-9);
  const last = Math.floor(max / step + 1e-9);
  const ticks: number[] = [];
  // Multiply, do not accumulate, so ticks print without 0.30000000000000004.
  for (let k = first; k <= last; k++) ticks.push(Number((k * step).toPrecision(12)));
  return ticks;
}

/** [min, max] of the finite values (padded when flat), or the fallback when there are none. */
export function extent(
  values: readonly number[],
  fallback: [number, number] = [0, 1],
): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo === Infinity) return fallback;
  if (lo === hi) {
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    return [lo - pad, hi + pad];
  }
  return [lo, hi];
}

export interface Point {
  x: number;
  y: number;
}

/** One line of a chart. */
export interface ChartSeries {
  label: string;
  points: Point[];
  /** A CSS colour, e.g. 'var(--accent)'. */
  color: string;
  dashed?: boolean;
}

/** An SVG path through the points; a non-finite y ends the segment (a gap, not a drop to 0). */
export function linePath(
  points: readonly Point[],
  sx: (v: number) => number,
  sy: (v: number) => number,
): string {
  let d = '';
  let pen = false;
  for (const p of points) {
    if (!Number.isFinite(p.y) || !Number.isFinite(p.x)) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`;
    pen = true;
  }
  return d;
}

/**
 * At most `max` points: consecutive points are averaged in equal buckets (finite values only; a
 * bucket with none stays a gap). Fewer points than `max` come back unchanged.
 */
export function downsample(points: readonly Point[], max: number): Point[] {
  if (points.length <= max || max < 1) return points.slice();
  const out: Point[] = [];
  const size = points.length / max;
  for (let b = 0; b < max; b++) {
    const from = Math.floor(b * size);
    const to = Math.floor((b + 1) * size);
    let sx = 0;
    let sy = 0;
    let n = 0;
    for (let i = from; i < to; i++) {
      sx += points[i].x;
      if (Number.isFinite(points[i].y)) {
        sy += points[i].y;
        n++;
      }
    }
    out.push({ x: sx / (to - from), y: n ? sy / n : NaN });
  }
  return out;
}

/**
 * A CSS colour for a signed value: green for positive, red for negative, transparent at 0, the
 * strength |v| / maxAbs (capped at 1). Uses the theme's --good / --bad so it follows light/dark.
 */
export function signedColor(value: number, maxAbs: number): string {
  if (!Number.isFinite(value) || value === 0 || !(maxAbs > 0)) return 'transparent';
  const pct = Math.round(Math.min(1, Math.abs(value) / maxAbs) * 70 + 10);
  return `color-mix(in srgb, var(${value > 0 ? '--good' : '--bad'}) ${pct}%, transparent)`;
}

/** A CSS colour for a magnitude (≥ 0) in one theme colour, e.g. k3, where more is not "good". */
export function magnitudeColor(value: number, max: number, cssVar = '--accent'): string {
  if (!Number.isFinite(value) || value <= 0 || !(max > 0)) return 'transparent';
  const pct = Math.round(Math.min(1, value / max) * 60 + 8);
  return `color-mix(in srgb, var(${cssVar}) ${pct}%, transparent)`;
}

/** Largest |v| of the finite values (0 when none). */
export function maxAbs(values: readonly number[]): number {
  let m = 0;
  for (const v of values) if (Number.isFinite(v) && Math.abs(v) > m) m = Math.abs(v);
  return m;
}

/** A number for people: '—' when missing, fixed digits in ordinary ranges, exponent otherwise. */
export function fmt(v: number | null | undefined, digits = 3): string {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (!Number.isFinite(v)) return v > 0 ? '∞' : '−∞';
  if (v === 0) return '0';
  const a = Math.abs(v);
  // f64 rounding residue (a sum of advantages, the grpo loss at ρ = 1) is zero for a reader.
  if (a < 1e-12) return '≈ 0';
  const s = a >= 1e-3 && a < 1e5 ? v.toFixed(digits) : v.toExponential(Math.max(1, digits - 1));
  // A typographic minus reads better in formulas.
  return s.replace(/^-/, '−');
}

/** A fraction as a percentage ('—' when missing). */
export function pct(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  return `${(v * 100).toFixed(digits)}%`;
}
