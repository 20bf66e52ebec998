// Plot helpers shared by Learn mode and the Aha panel (src/app/teach/plot.ts), and the shared
// scales and ticks they draw with (src/core/chart-scale.ts, with the teaching charts' 1-2-5 steps).
import { describe, expect, it } from 'vitest';
import {
  downsample,
  fmt,
  linePath,
  pct,
  signedColor,
  magnitudeColor,
} from '../../src/app/teach/plot';
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

describe('paths and downsampling', () => {
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

  it('bucket means, gaps stay gaps, short series untouched', () => {
    const pts = Array.from({ length: 8 }, (_, i) => ({ x: i, y: i < 4 ? i : NaN }));
    expect(downsample(pts, 4)).toEqual([
      { x: 0.5, y: 0.5 },
      { x: 2.5, y: 2.5 },
      { x: 4.5, y: NaN },
      { x: 6.5, y: NaN },
    ]);
    expect(downsample(pts, 100)).toEqual(pts);
    const many = Array.from({ length: 10_000 }, (_, i) => ({ x: i, y: 1 }));
    expect(downsample(many, 300)).toHaveLength(300);
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
