// SVG line charts: coordinates map the data range onto the plot, gaps break lines, text is escaped.
import { describe, expect, it } from 'vitest';
import { lineChartSvg } from '../../src/formats/svg-chart';

describe('lineChartSvg', () => {
  it('draws each series as polylines with one vertex per finite point, split at gaps', () => {
    const svg = lineChartSvg({
      title: 'accuracy <held-out>',
      xLabel: 'step',
      yLabel: 'rate',
      width: 200,
      height: 100,
      yMin: 0,
      yMax: 1,
      series: [
        {
          name: 'seed "1"',
          color: '#123456',
          points: [
            [0, 0],
            [1, 1],
            [2, NaN],
            [3, 0.5],
            [4, 0.5],
          ],
        },
      ],
    });
    const polylines = [...svg.matchAll(/<polyline[^>]*points="([^"]+)"/g)].map((m) =>
      m[1].split(' '),
    );
    expect(polylines.map((p) => p.length)).toEqual([2, 2]);
    // x 0 → left margin 56; y 0 → bottom (100 − 48 = 52); y 1 → top margin 36.
    expect(polylines[0]).toEqual(['56.0,52.0', '88.0,36.0']);
    expect(svg).toContain('accuracy &lt;held-out&gt;');
    expect(svg).toContain('seed &quot;1&quot;');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trim().endsWith('</svg>')).toBe(true);
  });
});
