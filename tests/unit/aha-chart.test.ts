// LineChart's reference series (the Aha panel's committed `npm run aha` seeds, drawn faint behind
// the live run): they widen the x axis to the reference's steps, take one legend key, and leave
// the cursor's steps (aria-valuemax), the legend's values and data-points to the live series. An
// overlaid run's series (overlay: true) widen the axis too but add no cursor steps.
import { render } from 'svelte/server';
import { describe, expect, it } from 'vitest';
import LineChart from '../../src/app/components/LineChart.svelte';
import AhaPanel from '../../src/app/aha/AhaPanel.svelte';
import { resolveConfig } from '../../src/grpo/config';
import { PRESETS } from '../../src/grpo/presets';

const series = [
  {
    label: 'this run',
    points: [
      { x: 1, y: 0.2 },
      { x: 2, y: 0.4 },
      { x: 3, y: 0.3 },
    ],
  },
];
const reference = [1, 2].map((seed) => ({
  label: `seed ${seed}`,
  points: Array.from({ length: 10 }, (_, i) => ({ x: i + 1, y: (i * seed) / 20 })),
}));
const xTicks = (body: string) =>
  [...body.matchAll(/<text class="tick[^"]*"[^>]*text-anchor="middle"[^>]*>([^<]*)</g)].map((m) =>
    Number(m[1]),
  );

describe('LineChart reference series', () => {
  it('draws one faint path per reference series behind the run, the axis to step 10', () => {
    const { body } = render(LineChart, {
      props: {
        title: 'Reflection',
        series,
        yKind: 'rate',
        reference,
        referenceLabel: 'npm run aha',
      },
    });
    const paths = [...body.matchAll(/<path class="reference[^"]*"[^>]*data-label="([^"]+)"/g)];
    expect(paths.map((m) => m[1])).toEqual(['seed 1', 'seed 2']);
    // Reference paths come first in the SVG: the run's line is drawn over them.
    expect(body.indexOf('class="reference')).toBeLessThan(body.indexOf('stroke-width="2"'));
    expect(Math.max(...xTicks(body))).toBe(10);
    expect(body).toContain('data-points="3"');
    expect(body).toContain('aria-valuemax="3"');
    expect(body.match(/reference-key/g)?.length).toBe(1);
    expect(body).toContain('npm run aha');
  });

  it('an overlaid longer run widens the axis, not the steps a click or an arrow key selects', () => {
    const other = {
      label: 'rate · other run',
      points: Array.from({ length: 8 }, (_, i) => ({ x: i + 1, y: 0.1 })),
      dashed: true,
      overlay: true,
    };
    const { body } = render(LineChart, {
      props: { title: 'Reflection', series: [...series, other], yKind: 'rate' },
    });
    expect(Math.max(...xTicks(body))).toBe(8);
    expect(body).toContain('aria-valuemax="3"');
    expect(body).toContain('data-points="3"');
    // Without the flag the same series would be this run's: its steps are selectable.
    const mine = render(LineChart, {
      props: {
        title: 'Reflection',
        series: [...series, { ...other, overlay: false }],
        yKind: 'rate',
      },
    });
    expect(mine.body).toContain('aria-valuemax="8"');
  });

  it('without a reference, nothing changes: the axis ends at the run’s last step', () => {
    const { body } = render(LineChart, { props: { title: 'Reflection', series, yKind: 'rate' } });
    expect(body).not.toContain('class="reference');
    expect(body).not.toContain('reference-key');
    expect(Math.max(...xTicks(body))).toBe(3);
  });
});

describe('AhaPanel (server-rendered) with a run', () => {
  const history = [1, 2, 3].map((step) => ({
    step,
    metrics: {
      reflection_rate: 0.25,
      accuracy: 0.5,
      'completions/mean_length': 30,
      'reflection/count_reflecting': 8,
      'reflection/count_not_reflecting': 24,
      'reflection/accuracy_reflecting': 0.75,
      'reflection/accuracy_not_reflecting': 0.125 * step,
    },
  }));
  const text = (body: string) => body.replace(/<!--[^>]*-->/g, '').replace(/\s+/g, ' ');

  it('waits, lists the differences, overlays the reference seeds and shows the base rates', () => {
    const config = resolveConfig({ ...PRESETS.aha, learningRate: 1e-3 });
    const { body } = render(AhaPanel, {
      props: { history, reports: [], config, perStepMs: 7500, selected: 2 },
    });
    const t = text(body);
    expect(t).toContain('Waiting: 27 more steps needed before a verdict (3 of 30).');
    expect(t).toContain('learningRate: 0.001 (preset 0.0006)');
    expect(t).toContain('in 1 setting:');
    // Three seeds behind each of the three charts.
    expect(body.match(/<path class="reference/g)?.length).toBe(9);
    // The run's step shape is the preset's: 95 × 7.5 s = 11.9 min.
    expect(t).toContain('Expected ≈ <strong>11.9 min</strong>');
    expect(t).toContain('reference: 38.7 min for 3 seeds on 2 CPU cores, SwiftShader');
    // Step 1 and the selected step 2: reflecting right 75% vs 12.5% and 25%.
    expect(t).toContain('step 1 (start)');
    expect(t).toContain('step 2 (selected)');
    expect(t).toContain('+63 points');
    expect(t).toContain('+50 points');
  });

  it('a tiny run’s measured step time does not carry over to the preset', () => {
    const config = resolveConfig({ ...PRESETS.aha, numGenerations: 2 });
    const { body } = render(AhaPanel, { props: { history, reports: [], config, perStepMs: 900 } });
    const t = text(body);
    expect(t).toContain('(numGenerations differ), so its step time does not carry over');
    expect(t).not.toContain('Expected ≈');
  });
});
