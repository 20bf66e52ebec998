// LineChart's reference series (the Aha panel's committed `npm run aha` seeds, drawn faint behind
// the live run): they widen the x axis to the reference's steps, take one legend key, and leave
// the cursor's steps (aria-valuemax), the legend's values and data-points to the live series.
import { render } from 'svelte/server';
import { describe, expect, it } from 'vitest';
import LineChart from '../../src/app/components/LineChart.svelte';

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

  it('without a reference, nothing changes: the axis ends at the run’s last step', () => {
    const { body } = render(LineChart, { props: { title: 'Reflection', series, yKind: 'rate' } });
    expect(body).not.toContain('class="reference');
    expect(body).not.toContain('reference-key');
    expect(Math.max(...xTicks(body))).toBe(3);
  });
});
