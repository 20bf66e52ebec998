// Min/max decimation for the line charts: thousands of steps drawn in one pass per pixel column,
// so a chart costs O(points) to reduce and O(width) to draw however long the run gets.

export interface Column {
  /** Pixel column (0 … width − 1). */
  px: number;
  /** y of the first, lowest, highest and last point that falls in the column. */
  first: number;
  min: number;
  max: number;
  last: number;
  /** Whether the minimum came before the maximum (draw order keeps the line's shape). */
  minFirst: boolean;
  count: number;
}

/**
 * Reduces (x, y) points, x ascending, to at most `width` columns over [x0, x1]. Non-finite y
 * values (metrics that were not defined at a step) are skipped.
 */
export function decimate(
  xs: ArrayLike<number>,
  ys: ArrayLike<number>,
  x0: number,
  x1: number,
  width: number,
): Column[] {
  const out: Column[] = [];
  const w = Math.max(1, Math.floor(width));
  const span = x1 - x0;
  let cur: Column | null = null;
  let minAt = 0;
  let maxAt = 0;
  for (let i = 0; i < xs.length; i++) {
    const y = ys[i];
    if (!Number.isFinite(y)) continue;
    const x = xs[i];
    const px = span > 0 ? Math.min(w - 1, Math.max(0, Math.round(((x - x0) / span) * (w - 1)))) : 0;
    if (!cur || cur.px !== px) {
      if (cur) out.push(cur);
      cur = { px, first: y, min: y, max: y, last: y, minFirst: true, count: 1 };
      minAt = maxAt = i;
      continue;
    }
    cur.last = y;
    cur.count++;
    if (y < cur.min) {
      cur.min = y;
      minAt = i;
    }
    if (y > cur.max) {
      cur.max = y;
      maxAt = i;
    }
    cur.minFirst = minAt <= maxAt;
  }
  if (cur) out.push(cur);
  return out;
}

/** The y values a polyline through the columns visits, in order (first, min/max, last). */
export function columnPath(c: Column): number[] {
  if (c.count === 1) return [c.first];
  const mid = c.minFirst ? [c.min, c.max] : [c.max, c.min];
  return [c.first, ...mid, c.last];
}

/** A padded [lo, hi] for the y axis over several series' finite values; never empty. */
export function yRange(series: ArrayLike<number>[]): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of series) {
    for (let i = 0; i < s.length; i++) {
      const v = s[i];
      if (!Number.isFinite(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  if (lo === Infinity) return [0, 1];
  if (lo === hi) {
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    return [lo - pad, hi + pad];
  }
  const pad = (hi - lo) * 0.08;
  return [lo - pad, hi + pad];
}

/** About `count` round tick values covering [lo, hi]. */
export function niceTicks(lo: number, hi: number, count = 4): number[] {
  const span = hi - lo;
  if (!(span > 0) || !Number.isFinite(span)) return [lo];
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return out;
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
