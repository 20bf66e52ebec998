// The axes every chart shares (src/core/chart-scale.ts): the two tick-step sets, padded ranges,
// the nearest step under a pointer and the cursor keys.
import { describe, expect, it } from 'vitest';
import {
  cursorKey,
  extent,
  nearestIndex,
  niceTicks,
  TICK_STEPS_125,
} from '../../src/core/chart-scale';

describe('chart scale', () => {
  it('quarter steps by default, 1-2-5 steps for fixed-decimal labels', () => {
    expect(niceTicks(0, 1, 4)).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect(niceTicks(0, 1, 4, TICK_STEPS_125)).toEqual([0, 0.5, 1]);
    // Reversed bounds are swapped; ticks print without accumulated rounding.
    expect(niceTicks(0.3, 0, 3)).toEqual([0, 0.1, 0.2, 0.3]);
  });

  it('extent pads a span by a fraction and a flat range by 10%', () => {
    expect(extent([0, 10], [0, 1], 0.1)).toEqual([-1, 11]);
    expect(extent([5, 5], [0, 1], 0.1)).toEqual([4.5, 5.5]);
    expect(extent(new Float64Array([NaN]), [2, 3], 0.1)).toEqual([2, 3]);
  });

  it('nearest step and cursor keys', () => {
    const steps = [1, 2, 4, 8];
    expect(nearestIndex(steps, 5.9)).toBe(2);
    expect(nearestIndex(steps, 6.1)).toBe(3);
    expect(nearestIndex(steps, -3)).toBe(0);
    expect(nearestIndex([], 1)).toBe(-1);
    expect(cursorKey('ArrowLeft', null, 4)).toBe(2);
    expect(cursorKey('ArrowRight', 3, 4)).toBe(3);
    expect(cursorKey('ArrowLeft', 0, 4)).toBe(0);
    expect(cursorKey('Home', 2, 4)).toBe(0);
    expect(cursorKey('End', 0, 4)).toBe(3);
    expect(cursorKey('a', 1, 4)).toBeNull();
    expect(cursorKey('ArrowLeft', null, 0)).toBeNull();
  });
});
