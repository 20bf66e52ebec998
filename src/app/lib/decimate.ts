// Min/max decimation for the Train view's line charts: thousands of steps drawn in one pass per
// pixel column, so a chart costs O(points) to reduce and O(width) to draw however long the run
// gets. Scales and ticks: src/core/chart-scale.ts.

import { extent } from '../../core/chart-scale';

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
  const all = new Float64Array(series.reduce((n, s) => n + s.length, 0));
  let at = 0;
  for (const s of series) {
    all.set(s, at);
    at += s.length;
  }
  // 8% above and below so the extreme points do not sit on the plot's edge.
  return extent(all, [0, 1], 0.08);
}
