// Plot helpers shared by Learn mode and the Aha panel (src/app/teach/plot.ts), the line chart's
// per-pixel-column reduction (src/app/lib/decimate.ts), and the shared scales and ticks they draw
// with (src/core/chart-scale.ts, with the fixed-decimals 1-2-5 steps).
import { describe, expect, it } from 'vitest';
import { columnsPath, decimate } from '../../src/app/lib/decimate';
import { fmt, linePath, pct, signedColor, magnitudeColor } from '../../src/app/teach/plot';
import { extent, linearScale, niceTicks, TICK_STEPS_125 } from '../../src/core/chart-scale';

describe('scales and ticks', () => {
  it('linear scale and its inverse (SVG y grows downward)', () => {
    const y = linearScale([0, 10], [100, 0]);
    expect(y(0)).toBe(100);
    expect(y(2.5)).toBe(75);
    expect(y.invert(75)).toBe(2.5);
    expect(linearScale([3, 3], [0, 10])(3)).toBe(5);
  });

  it('nice ticks are round steps inside the domain', () => {
    expect(niceTicks(0, 1, 5, TICK_STEPS_125)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0.8, 1.28, 4, TICK_STEPS_125)).toEqual([0.8, 1, 1.2]);
    expect(niceTicks(0.8, 1.28, 6, TICK_STEPS_125)).toEqual([0.8, 0.9, 1, 1.1, 1.2]);
    expect(niceTicks(-3, 7, 5, TICK_STEPS_125)).toEqual([-2, 0, 2, 4, 6]);
    expect(niceTicks(2, 2)).toEqual([2]);
    expect(niceTicks(NaN, 1)).toEqual([]);
  });

  it('extent ignores non-finite values and pads a flat series', () => {
    expect(extent([3, NaN, 1, Infinity])).toEqual([1, 3]);
    expect(extent([2, 2])).toEqual([1.8, 2.2]);
    expect(extent([NaN], [0, 5])).toEqual([0, 5]);
  });
});

describe('paths and reduction', () => {
  const id = (v: number) => v;
  it('a NaN breaks the line instead of drawing to 0', () => {
    const d = linePath(
      [
        { x: 0, y: 1 },
        { x: 1, y: 2 },
        { x: 2, y: NaN },
        { x: 3, y: 4 },
      ],
      id,
      id,
    );
    expect(d).toBe('M0.0,1.0L1.0,2.0M3.0,4.0');
  });

  it('one column per pixel: a missing value between columns breaks the line, not within one', () => {
    // x 0…7 on 8 columns: 0, 1 drawn, 2 missing, 3 drawn, then 4…7 missing.
    const xs = [0, 1, 2, 3, 4, 5, 6, 7];
    const ys = [1, 2, NaN, 4, NaN, NaN, NaN, NaN];
    const cols = decimate(xs, ys, 0, 7, 8);
    expect(cols.map((c) => [c.px, c.first, c.gap])).toEqual([
      [0, 1, false],
      [1, 2, false],
      [3, 4, true],
    ]);
    expect(columnsPath(cols, id, id)).toBe('M0.0,1.0L1.0,2.0M3.0,4.0');
    // 8 steps on 4 columns: the NaN at x 2 shares column 1 with x 3, so no gap; a column draws
    // first → min/max → last, a repeated value once.
    const packed = decimate(xs, [1, 5, NaN, 3, 2, 0, 9, 4], 0, 7, 4);
    expect(packed.map((c) => c.gap)).toEqual([false, false, false, false]);
    expect(columnsPath(packed, id, id)).toBe(
      'M0.0,1.0L0.0,5.0L1.0,3.0L2.0,2.0L2.0,0.0L3.0,9.0L3.0,4.0',
    );
  });
});

describe('colour and numbers', () => {
  it('signed colours use the theme and scale with |v|', () => {
    expect(signedColor(1, 1)).toBe('color-mix(in srgb, var(--good) 80%, transparent)');
    expect(signedColor(-0.5, 1)).toBe('color-mix(in srgb, var(--bad) 45%, transparent)');
    expect(signedColor(0, 1)).toBe('transparent');
    expect(signedColor(3, 0)).toBe('transparent');
    expect(magnitudeColor(0.5, 1)).toBe('color-mix(in srgb, var(--accent) 38%, transparent)');
    expect(magnitudeColor(0, 1)).toBe('transparent');
  });

  it('fmt and pct', () => {
    expect(fmt(NaN)).toBe('—');
    expect(fmt(null)).toBe('—');
    expect(fmt(0)).toBe('0');
    expect(fmt(-0.5)).toBe('−0.500');
    expect(fmt(2e-6)).toBe('2.00e-6');
    expect(fmt(3.3e-16)).toBe('≈ 0');
    expect(fmt(Infinity)).toBe('∞');
    expect(pct(0.256)).toBe('26%');
    expect(pct(NaN)).toBe('—');
  });
});
