// Min/max decimation for the line charts (components/LineChart.svelte): thousands of steps drawn
// in one pass per pixel column, so a chart costs O(points) to reduce and O(width) to draw however
// long the run gets, and a spike stays visible (a bucket mean would flatten it). A missing value
// between two columns breaks the line (a gap, not a drop to 0). Scales and ticks:
// src/core/chart-scale.ts.

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
  /** A pixel column between this one and the previous drawn one had only missing values. */
  gap: boolean;
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
  const column = (x: number) =>
    span > 0 ? Math.min(w - 1, Math.max(0, Math.round(((x - x0) / span) * (w - 1)))) : 0;
  // The column of the first missing value after the current column (one inside the current or
  // the next drawn column hides no gap: those columns draw their values).
  let missingAt: number | null = null;
  for (let i = 0; i < xs.length; i++) {
    const y = ys[i];
    if (!Number.isFinite(y)) {
      if (cur && missingAt === null && column(xs[i]) !== cur.px) missingAt = column(xs[i]);
      continue;
    }
    const px = column(xs[i]);
    if (!cur || cur.px !== px) {
      if (cur) out.push(cur);
      const gap: boolean = missingAt !== null && missingAt < px;
      cur = { px, first: y, min: y, max: y, last: y, minFirst: true, count: 1, gap };
      minAt = maxAt = i;
      missingAt = null;
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

/**
 * An SVG path through the columns (first, min/max, last of each), broken where a column has a
 * gap before it. `x` places a pixel column, `y` a value.
 */
export function columnsPath(
  cols: readonly Column[],
  x: (px: number) => number,
  y: (v: number) => number,
): string {
  let d = '';
  cols.forEach((c, i) => {
    const cx = x(c.px).toFixed(1);
    const ys = columnPath(c);
    ys.forEach((v, k) => {
      if (k > 0 && v === ys[k - 1]) return; // first = min, max = last: one vertex
      const move = k === 0 && (i === 0 || c.gap);
      d += `${move ? 'M' : 'L'}${cx},${y(v).toFixed(1)}`;
    });
  });
  return d;
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
