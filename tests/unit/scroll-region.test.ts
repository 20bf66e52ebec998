// The scroll-region action: a box takes the keyboard focus and a region name only while its
// content overflows it (a wide table on a phone), and gives both up once everything fits.
import { describe, expect, it } from 'vitest';
import { overflows, scrollRegion } from '../../src/app/lib/scroll-region';

/** The few parts of an element the action reads and writes, with extents the test sets. */
class Box {
  scrollWidth = 0;
  clientWidth = 0;
  scrollHeight = 100;
  clientHeight = 100;
  tabIndex = -1;
  children: unknown[] = [];
  attrs = new Map<string, string>();
  setAttribute(k: string, v: string) {
    if (k === 'tabindex') this.tabIndex = Number(v);
    this.attrs.set(k, v);
  }
  removeAttribute(k: string) {
    if (k === 'tabindex') this.tabIndex = -1;
    this.attrs.delete(k);
  }
}

describe('scroll regions', () => {
  it('overflows: wider or taller content, past a pixel of rounding', () => {
    const box = { scrollWidth: 390, clientWidth: 390, scrollHeight: 50, clientHeight: 50 };
    expect(overflows(box)).toBe(false);
    expect(overflows({ ...box, scrollWidth: 391 })).toBe(false);
    expect(overflows({ ...box, scrollWidth: 578 })).toBe(true);
    expect(overflows({ ...box, scrollHeight: 80 })).toBe(true);
  });

  it('focusable and named while the content overflows, neither once it fits', () => {
    const box = new Box();
    box.scrollWidth = 578;
    box.clientWidth = 326;
    const action = scrollRegion(box as unknown as HTMLElement, 'Rewards of each completion');
    expect(box.tabIndex).toBe(0);
    expect(box.attrs.get('role')).toBe('region');
    expect(box.attrs.get('aria-label')).toBe('Rewards of each completion');

    // A wide screen: the table fits, so no tab stop and no region.
    box.clientWidth = 1200;
    box.scrollWidth = 1200;
    action.update?.('Rewards of each completion');
    expect(box.tabIndex).toBe(-1);
    expect([...box.attrs.keys()]).toEqual([]);
  });

  it('without a label it only takes the focus', () => {
    const box = new Box();
    box.scrollWidth = 500;
    box.clientWidth = 300;
    scrollRegion(box as unknown as HTMLElement);
    expect(box.tabIndex).toBe(0);
    expect(box.attrs.has('role')).toBe(false);
  });
});
