// Hand-made plotting helpers shared by Learn mode, the Aha panel and the line chart (no chart
// dependency): the series type, SVG paths that break at missing values, colours for signed values,
// and number formatting. (Long series are reduced per pixel column by lib/decimate.ts.) Scales and ticks
// are the project's shared ones (src/core/chart-scale.ts). Pure functions; the Svelte components
// only place what these return.

import { formatNumber, MISSING } from '../../core/format';

export interface Point {
  x: number;
  y: number;
}

/** One line of a chart. */
export interface ChartSeries {
  label: string;
  points: Point[];
  /** A CSS colour, e.g. 'var(--accent)'; by default the theme's palette (--series-k). */
  color?: string;
  dashed?: boolean;
  /** Another run's series (an overlay): drawn and in the legend, but a click or an arrow key
   * selects only steps of the chart's own series, which are the run the views show. */
  overlay?: boolean;
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

/** Learn mode's numbers: the project's one formatter in its fixed-decimals style (src/core/format.ts). */
export const fmt = (v: number | null | undefined, digits = 3): string =>
  formatNumber(v, digits, 'fixed');

/** A fraction as a percentage (MISSING when missing). */
export function pct(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return MISSING;
  return `${(v * 100).toFixed(digits)}%`;
}

/**
 * The value a key gives a slider handle (the ARIA slider pattern, as the explorables' draggable
 * handles use it): ← ↓ one step down, → ↑ one up, PageDown / PageUp ten steps, Home / End the
 * ends; null for any other key. The result is clamped to [min, max] and rounded to the step's
 * decimals, so repeated presses do not accumulate float noise.
 */
export function sliderKey(
  key: string,
  value: number,
  step: number,
  min: number,
  max: number,
): number | null {
  const delta: Record<string, number> = {
    ArrowLeft: -step,
    ArrowDown: -step,
    ArrowRight: step,
    ArrowUp: step,
    PageDown: -10 * step,
    PageUp: 10 * step,
  };
  let next: number;
  if (key === 'Home') next = min;
  else if (key === 'End') next = max;
  else if (key in delta) next = value + delta[key];
  else return null;
  const decimals = Math.max(0, Math.ceil(-Math.log10(step)));
  return Number(Math.min(max, Math.max(min, next)).toFixed(decimals));
}

/** A pointer's position in an SVG's viewBox units (the plots scale their viewBox to the width). */
export function viewBoxPoint(
  box: { left: number; top: number; width: number; height: number },
  viewWidth: number,
  viewHeight: number,
  clientX: number,
  clientY: number,
): Point {
  return {
    x: ((clientX - box.left) / (box.width || 1)) * viewWidth,
    y: ((clientY - box.top) / (box.height || 1)) * viewHeight,
  };
}
