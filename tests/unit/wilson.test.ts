// The Wilson score interval against hand-worked values (z = 1.959964):
//   8/10: p = 0.8, z²/n = 0.384146, centre = (0.8 + 0.192073)/1.384146 = 0.716740,
//         half = 1.959964/1.384146 · √(0.016 + 0.0096036) = 0.226577 → [0.490163, 0.943317]
//   0/10: centre = 0.192073/1.384146 = 0.138766, half = 1.959964/1.384146 · √0.0096036 = 0.138766
//         → [0, 0.277532]
//   1/2:  z²/n = 1.920730, centre = 0.5, half = (1.959964/2.920730)·√(0.125 + 0.240091)
//         = 0.405469 → [0.094531, 0.905469]
import { describe, expect, it } from 'vitest';
import { wilsonInterval, Z95 } from '../../src/core/wilson';

describe('wilsonInterval', () => {
  it('8 of 10 at 95% is [0.490, 0.943]', () => {
    const { low, high } = wilsonInterval(8, 10);
    expect(low).toBeCloseTo(0.490163, 5);
    expect(high).toBeCloseTo(0.943317, 5);
  });

  it('0 of 10 starts at 0 and is not empty; 10 of 10 mirrors it', () => {
    const none = wilsonInterval(0, 10);
    expect(none.low).toBe(0);
    expect(none.high).toBeCloseTo(0.277532, 5);
    const all = wilsonInterval(10, 10);
    expect(all.high).toBe(1);
    expect(all.low).toBeCloseTo(1 - 0.277532, 5);
  });

  it('1 of 2 is centred on 0.5 and wide', () => {
    const { low, high } = wilsonInterval(1, 2);
    expect(low).toBeCloseTo(0.094531, 5);
    expect(high).toBeCloseTo(0.905469, 5);
  });

  it('a smaller z gives a narrower interval; no trials gives [0, 1]', () => {
    const wide = wilsonInterval(8, 10, Z95);
    const narrow = wilsonInterval(8, 10, 1);
    expect(narrow.low).toBeGreaterThan(wide.low);
    expect(narrow.high).toBeLessThan(wide.high);
    expect(wilsonInterval(0, 0)).toEqual({ low: 0, high: 1 });
  });

  it('refuses impossible counts', () => {
    expect(() => wilsonInterval(11, 10)).toThrow(/11 successes out of 10/);
    expect(() => wilsonInterval(-1, 10)).toThrow(RangeError);
    expect(() => wilsonInterval(0.5, 10)).toThrow(/integers/);
  });
});
