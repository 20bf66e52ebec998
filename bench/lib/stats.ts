// Summaries of repeated timings and the machine description every benchmark report carries.
// A figure is never one run: median with min/max and the interquartile range of `n` runs, so a
// reader sees the spread (on a shared 2-core machine it is large).

export interface Stat {
  unit: string;
  n: number;
  median: number;
  min: number;
  max: number;
  /** First and third quartile (linear interpolation between order statistics). */
  q1: number;
  q3: number;
  samples: number[];
}

function quantile(sorted: readonly number[], q: number): number {
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

export function summarize(samples: readonly number[], unit: string): Stat {
  if (samples.length === 0) throw new Error('summarize: no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    unit,
    n: sorted.length,
    median: quantile(sorted, 0.5),
    min: sorted[0],
    max: sorted[sorted.length - 1],
    q1: quantile(sorted, 0.25),
    q3: quantile(sorted, 0.75),
    samples: [...samples],
  };
}

/** The same measurement expressed as a rate: `work / seconds` per sample (min and max swap). */
export function rateOf(secondsSamples: readonly number[], work: number, unit: string): Stat {
  return summarize(
    secondsSamples.map((s) => work / s),
    unit,
  );
}

/**
 * Ours ÷ theirs for a rate (tokens/s, GFLOP/s: higher is better, so > 1 means ours is faster).
 * `median` is median over median; `min`–`max` is the range over every pairing of runs, min(ours) ÷
 * max(theirs) to max(ours) ÷ min(theirs). The engines run one after another, not in lockstep, so no
 * run of one belongs with a run of the other: this range is what the runs allow, and on a loaded
 * machine it is wide (the 2026-11 ratios moved up to 5× between whole benchmark runs).
 */
export interface RatioRange {
  median: number;
  min: number;
  max: number;
}

export function ratioRange(ours: Stat, theirs: Stat): RatioRange {
  if (ours.n === 0 || theirs.n === 0) throw new Error('ratioRange: no samples');
  if (!(ours.min > 0 && theirs.min > 0)) throw new Error('ratioRange: rates must be positive');
  return {
    median: ours.median / theirs.median,
    min: ours.min / theirs.max,
    max: ours.max / theirs.min,
  };
}

/** Significant digits that keep small and large figures readable in one table. */
export function fmt(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 1000) return x.toFixed(0);
  if (a >= 100) return x.toFixed(1);
  if (a >= 10) return x.toFixed(2);
  if (a >= 1) return x.toFixed(3);
  return x.toPrecision(3);
}

export function fmtStat(s: Stat): string {
  return `${fmt(s.median)} [${fmt(s.min)}–${fmt(s.max)}]`;
}

/** `8.43× [7.90–9.12]`: a ratio's median and its range over the runs. */
export function fmtRatio(r: RatioRange): string {
  return `${fmt(r.median)}× [${fmt(r.min)}–${fmt(r.max)}]`;
}

/** A plain-text table with right-aligned numeric columns. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** Runs `fn` `warmup` times unmeasured (pipeline compilation, first-touch allocations), then `runs`
 * times measured; returns wall seconds per measured run. */
export async function timeRuns(
  warmup: number,
  runs: number,
  fn: (run: number) => Promise<void>,
): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn(-1 - i);
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn(i);
    out.push((performance.now() - t0) / 1000);
  }
  return out;
}
