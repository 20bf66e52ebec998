// Small, dependency-free SVG line charts for reports (the aha report's plots). Text is escaped;
// non-finite points break a line instead of drawing to infinity. Scales and ticks are the ones the
// page's charts use (src/core/chart-scale.ts).

import { linearScale, niceTicks } from '../core/chart-scale';

export interface ChartSeries {
  name: string;
  /** (x, y) points; NaN/±Inf y values leave a gap. */
  points: ReadonlyArray<readonly [number, number]>;
  color: string;
  /** Stroke width (default 2); thin lines for per-seed runs, thick for their mean. */
  width?: number;
  dashed?: boolean;
}

export interface LineChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: ChartSeries[];
  width?: number;
  height?: number;
  /** Fixed y range (default: the data's, padded). */
  yMin?: number;
  yMax?: number;
}

const escapeXml = (text: string) =>
  text.replace(
    /[<>&"']/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!,
  );

export function lineChartSvg(options: LineChartOptions): string {
  const W = options.width ?? 640;
  const H = options.height ?? 360;
  const m = { left: 56, right: 16, top: 36, bottom: 48 };
  const finite = options.series.flatMap((s) =>
    s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)),
  );
  const xs = finite.map(([x]) => x);
  const ys = finite.map(([, y]) => y);
  const xMin = xs.length ? Math.min(...xs) : 0;
  const xMax = xs.length ? Math.max(...xs) : 1;
  let yMin = options.yMin ?? (ys.length ? Math.min(...ys) : 0);
  let yMax = options.yMax ?? (ys.length ? Math.max(...ys) : 1);
  if (yMax === yMin) {
    yMin -= 0.5;
    yMax += 0.5;
  }
  // A single x value sits at the left edge (its range is taken as [x, x + 1]).
  const px = linearScale([xMin, xMax === xMin ? xMin + 1 : xMax], [m.left, W - m.right]);
  const py = linearScale([yMin, yMax], [H - m.bottom, m.top]);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="600">${escapeXml(options.title)}</text>`,
  ];
  for (const t of niceTicks(yMin, yMax)) {
    const y = py(t).toFixed(1);
    parts.push(`<line x1="${m.left}" x2="${W - m.right}" y1="${y}" y2="${y}" stroke="#e5e7eb"/>`);
    parts.push(
      `<text x="${m.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle" fill="#4b5563">${t}</text>`,
    );
  }
  for (const t of niceTicks(xMin, xMax)) {
    const x = px(t).toFixed(1);
    parts.push(
      `<text x="${x}" y="${H - m.bottom + 16}" text-anchor="middle" fill="#4b5563">${t}</text>`,
    );
  }
  parts.push(
    `<line x1="${m.left}" x2="${W - m.right}" y1="${H - m.bottom}" y2="${H - m.bottom}" stroke="#9ca3af"/>`,
    `<text x="${(m.left + W - m.right) / 2}" y="${H - 12}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(14 ${(m.top + H - m.bottom) / 2}) rotate(-90)" text-anchor="middle">${escapeXml(options.yLabel)}</text>`,
  );
  options.series.forEach((s, i) => {
    // Split at non-finite points so a gap is a gap.
    let run: string[] = [];
    const flush = () => {
      if (run.length > 1) {
        parts.push(
          `<polyline fill="none" stroke="${escapeXml(s.color)}" stroke-width="${s.width ?? 2}"${s.dashed ? ' stroke-dasharray="5 4"' : ''} points="${run.join(' ')}"/>`,
        );
      } else if (run.length === 1) {
        const [x, y] = run[0].split(',');
        parts.push(`<circle cx="${x}" cy="${y}" r="2.5" fill="${escapeXml(s.color)}"/>`);
      }
      run = [];
    };
    for (const [x, y] of s.points) {
      if (Number.isFinite(x) && Number.isFinite(y))
        run.push(`${px(x).toFixed(1)},${py(y).toFixed(1)}`);
      else flush();
    }
    flush();
    const ly = m.top + 4 + i * 16;
    parts.push(
      `<line x1="${W - m.right - 150}" x2="${W - m.right - 130}" y1="${ly}" y2="${ly}" stroke="${escapeXml(s.color)}" stroke-width="${s.width ?? 2}"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`,
      `<text x="${W - m.right - 124}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}
