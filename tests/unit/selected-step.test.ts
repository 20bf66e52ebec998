// The one selected step (src/app/lib/step-select.ts, the Session's selection) and the charts'
// arithmetic rules (src/app/lib/chart-rules.ts): TensorBoard's debiased EMA on hand-worked values,
// y domains that a metric can have, how the picker and arrow keys move through steps, which step
// Learn explains and why, and the session's follow / pin behaviour as step events arrive.
import { describe, expect, it } from 'vitest';
import type * as Comlink from 'comlink';
import { render } from 'svelte/server';
import LineChart from '../../src/app/components/LineChart.svelte';
import { clampDomain, emaSmooth } from '../../src/app/lib/chart-rules';
import { learnChoice, learnWhy, stepBy, stepKey, teaches } from '../../src/app/lib/step-select';
import { Session } from '../../src/app/session.svelte';
import type { TrainerEvent, UiStepReport } from '../../src/worker/protocol';
import type { TrainerApi } from '../../src/worker/trainer-api';

describe('emaSmooth (TensorBoard debiased EMA)', () => {
  it('weight 0.5 on [1, 3, NaN, 5]: 1, 7/3, gap, 27/7', () => {
    // n=1: last = 0.5·1 = 0.5, /(1 − 0.5) = 1.
    // n=2: last = 0.25 + 1.5 = 1.75, /(1 − 0.25) = 7/3.
    // NaN: kept, not averaged. n=3: last = 0.875 + 2.5 = 3.375, /(1 − 0.125) = 27/7.
    const s = emaSmooth([1, 3, NaN, 5], 0.5);
    expect(s[0]).toBeCloseTo(1, 12);
    expect(s[1]).toBeCloseTo(7 / 3, 12);
    expect(s[2]).toBeNaN();
    expect(s[3]).toBeCloseTo(27 / 7, 12);
  });

  it('weight 0.9 on [0, 10]: the second value is 10·0.1/(1 − 0.81) = 100/19', () => {
    const s = emaSmooth([0, 10], 0.9);
    expect(s[0]).toBe(0);
    expect(s[1]).toBeCloseTo(100 / 19, 12);
  });

  it('weight 0 and constant series come back unchanged, the input untouched', () => {
    const raw = [2, 4, 8];
    expect(Array.from(emaSmooth(raw, 0))).toEqual([2, 4, 8]);
    expect(Array.from(emaSmooth([0.3, 0.3, 0.3], 0.95))).toEqual([0.3, 0.3, 0.3]);
    emaSmooth(raw, 0.6);
    expect(raw).toEqual([2, 4, 8]);
  });
});

describe('clampDomain', () => {
  it('keeps rates in [0, 1]', () => {
    expect(clampDomain([-0.08, 1.08], 'rate')).toEqual([0, 1]);
    expect(clampDomain([0.2, 0.6], 'rate')).toEqual([0.2, 0.6]);
    // A flat 1 (extent pads to [0.9, 1.1]) and a flat 0 (extent gives [−1, 1]).
    expect(clampDomain([0.9, 1.1], 'rate')).toEqual([0.9, 1]);
    expect(clampDomain([-1, 1], 'rate')).toEqual([0, 1]);
  });

  it('keeps lengths and times at or above 0', () => {
    expect(clampDomain([-2, 10], 'nonneg')).toEqual([0, 10]);
    expect(clampDomain([-1, 1], 'nonneg')).toEqual([0, 1]);
    expect(clampDomain([-3, -1], 'nonneg')).toEqual([0, 1]);
    expect(clampDomain([40, 60], 'nonneg')).toEqual([40, 60]);
  });

  it('never inverted, never zero height', () => {
    expect(clampDomain([5, 2], 'any')).toEqual([2, 5]);
    const flat = clampDomain([3, 3], 'any');
    expect(flat[0]).toBeCloseTo(2.85, 12);
    expect(flat[1]).toBeCloseTo(3.15, 12);
    expect(clampDomain([0, 0], 'any')).toEqual([-0.5, 0.5]);
    // Values outside a rate's bounds (not possible, but no inverted axis either).
    const above = clampDomain([1.1, 1.2], 'rate');
    expect(above[0]).toBeCloseTo(0.9, 12);
    expect(above[1]).toBe(1);
    expect(clampDomain([1, 1], 'rate')[1]).toBe(1);
  });

  it('falls back to the bounds on non-finite ends', () => {
    expect(clampDomain([NaN, 1], 'rate')).toEqual([0, 1]);
    expect(clampDomain([0, Infinity], 'nonneg')).toEqual([0, 1]);
    expect(clampDomain([NaN, NaN], 'any')).toEqual([0, 1]);
  });
});

describe('stepBy / stepKey', () => {
  const steps = [1, 2, 3, 5];
  it('moves through the run’s steps and stops at the ends', () => {
    expect(stepBy(steps, 3, 1)).toBe(5);
    expect(stepBy(steps, 5, 1)).toBe(5);
    expect(stepBy(steps, 1, -1)).toBe(1);
    expect(stepBy(steps, null, -1)).toBe(3);
    // A number between steps goes to the nearest one (the later on a tie).
    expect(stepBy(steps, 4, 0)).toBe(5);
    expect(stepBy([], 1, 1)).toBeNull();
  });
  it('arrow keys, Home and End', () => {
    expect(stepKey('ArrowLeft', steps, 3)).toBe(2);
    expect(stepKey('ArrowRight', steps, 3)).toBe(5);
    expect(stepKey('Home', steps, 3)).toBe(1);
    expect(stepKey('End', steps, 1)).toBe(5);
    expect(stepKey('a', steps, 3)).toBeNull();
  });
});

/** A report whose groups have these advantages. */
function rep(step: number, ...groups: number[][]) {
  return {
    step,
    groups: groups.map((g) => ({ completions: g.map((advantage) => ({ advantage })) })),
  };
}

describe('learnChoice', () => {
  const reports = [
    rep(1, [0.7, -0.7]),
    rep(2, [0, 0], [0.5, -0.5]),
    rep(3, [0, 0]),
    rep(4, [0, 0]),
  ];

  it('following: the most recent step with a non-zero advantage, and says so', () => {
    expect(teaches(reports[1])).toBe(true);
    expect(teaches(reports[3])).toBe(false);
    const c = learnChoice(reports, 4, true);
    expect(c.step).toBe(2);
    expect(c.report).toBe(reports[1]);
    expect(c.reason).toBe('instructive');
    expect(learnWhy(c, 4)).toBe(
      'Showing step 2: the most recent step whose rewards differ within a group (a step where ' +
        'every group ties has zero advantages and teaches nothing); the latest, step 4, tied everywhere.',
    );
  });

  it('pinned: the selected step, even one that ties', () => {
    const c = learnChoice(reports, 3, false);
    expect([c.step, c.reason]).toEqual([3, 'selected']);
    expect(learnWhy(c, 4)).toMatch(/^Showing step 3: the selected step \(pinned/);
  });

  it('every step ties: the latest; a pinned step no longer kept: gone; nothing: none', () => {
    const c = learnChoice([rep(1, [0, 0]), rep(2, [0, 0])], 2, true);
    expect([c.step, c.reason]).toEqual([2, 'all-tie']);
    const gone = learnChoice(reports, 0, false);
    expect([gone.step, gone.report, gone.reason]).toEqual([0, null, 'gone']);
    expect(learnWhy(gone, 4)).toContain('no longer kept');
    expect(learnChoice([], null, true).reason).toBe('none');
  });
});

describe('Session selection', () => {
  const api = {} as Comlink.Remote<TrainerApi>;
  function step(session: Session, n: number, advantages: number[]) {
    const report = {
      step: n,
      metrics: { reward: n },
      elapsedMs: 1,
      groups: [{ completions: advantages.map((advantage) => ({ advantage })) }],
    } as unknown as UiStepReport;
    (session as unknown as { onEvent(e: TrainerEvent): void }).onEvent({ type: 'step', report });
  }

  it('follows each new step until a step is chosen; pinned, a new step changes nothing', () => {
    const s = new Session(api);
    expect(s.selectedStep).toBeNull();
    step(s, 1, [1, -1]);
    step(s, 2, [0, 0]);
    expect([s.follow, s.selectedStep, s.selectedReport?.step]).toEqual([true, 2, 2]);
    // Learn follows the most recent instructive step.
    expect(s.learnChoice.step).toBe(1);

    s.selectStep(1);
    expect([s.follow, s.selectedStep, s.learnChoice.step]).toEqual([false, 1, 1]);
    step(s, 3, [0.5, -0.5]);
    expect([s.selectedStep, s.selectedReport?.step, s.learnChoice.step]).toEqual([1, 1, 1]);

    s.follow = true;
    expect([s.selectedStep, s.learnChoice.step]).toEqual([3, 3]);
    // Pinning keeps the step shown at that moment.
    s.follow = false;
    step(s, 4, [1, -1]);
    expect([s.selectedStep, s.learnChoice.step, s.learnChoice.reason]).toEqual([3, 3, 'selected']);
  });

  it('hover and smoothing are shared values; smoothing stays in [0, 0.99]', () => {
    const s = new Session(api);
    s.hover(7);
    expect(s.hoverStep).toBe(7);
    s.smoothing = 1.5;
    expect(s.smoothing).toBe(0.99);
    s.smoothing = -1;
    expect(s.smoothing).toBe(0);
  });
});

describe('LineChart (server-rendered)', () => {
  const series = [
    {
      label: 'accuracy',
      points: [
        { x: 1, y: 1 },
        { x: 2, y: 0.5 },
        { x: 3, y: 1 },
      ],
    },
  ];
  const ticks = (body: string) =>
    [...body.matchAll(/<text class="tick[^"]*"[^>]*text-anchor="end"[^>]*>([^<]*)</g)].map((m) =>
      Number(m[1]),
    );

  it('a rate axis stays in [0, 1] (the data’s padded range would reach 1.04)', () => {
    const { body } = render(LineChart, { props: { title: 'Accuracy', series, yKind: 'rate' } });
    const t = ticks(body);
    expect(t.length).toBeGreaterThan(1);
    expect(Math.max(...t)).toBeLessThanOrEqual(1);
    expect(Math.min(...t)).toBeGreaterThanOrEqual(0);
    // The dots of value 1 sit on the plot's top edge (y = 8, the top margin): the axis ends at 1.
    const cys = (b: string) =>
      [...b.matchAll(/<circle[^>]*cy="([^"]+)"/g)].map((m) => Number(m[1]));
    expect(cys(body)[0]).toBeCloseTo(8, 9);
    expect(cys(body)[2]).toBeCloseTo(8, 9);
    // Unbounded, the same data's padded range goes above 1, so those dots sit lower.
    const free = render(LineChart, { props: { title: 'Accuracy', series } }).body;
    expect(cys(free)[0]).toBeGreaterThan(9);
    expect(body).not.toContain('class="raw');
  });

  it('smoothing draws the raw line faint behind the smoothed one', () => {
    const { body } = render(LineChart, {
      props: { title: 'Accuracy', series, yKind: 'rate', smoothing: 0.5 },
    });
    expect(body.match(/<path class="raw/g)?.length).toBe(1);
  });
});
