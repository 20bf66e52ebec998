// The rates Compare shows for one evaluation report, each as a count out of its trials with a
// 95% Wilson interval (core/wilson.ts): per prompt (greedy accuracy, format, pass@k, cons@k: n
// trials) or per sample (sample accuracy, reflection rate: n·k trials). Counts come from the
// report's items, so the interval is of what was actually decoded.
import { wilsonInterval, type Interval } from '../../core/wilson';
import type { EvalReport } from '../../train/evaluate';

export interface Rate {
  key: string;
  label: string;
  successes: number;
  trials: number;
  /** successes / trials (NaN with no trials). */
  rate: number;
  interval: Interval;
}

function rate(key: string, label: string, successes: number, trials: number): Rate {
  return {
    key,
    label,
    successes,
    trials,
    rate: trials > 0 ? successes / trials : NaN,
    interval: wilsonInterval(successes, trials),
  };
}

export function compareRates(report: EvalReport): Rate[] {
  const items = report.items;
  const n = items.length;
  const greedy = items.flatMap((i) => (i.greedy ? [i.greedy] : []));
  const samples = items.flatMap((i) => i.samples);
  const count = <T>(xs: readonly T[], ok: (x: T) => boolean) => xs.filter(ok).length;
  const rates = [
    rate(
      'greedy_accuracy',
      'greedy accuracy',
      count(greedy, (c) => c.correct === true),
      greedy.length,
    ),
    rate(
      'sample_accuracy',
      'sample accuracy',
      count(samples, (c) => c.correct === true),
      samples.length,
    ),
    rate(
      'pass@k',
      `pass@${report.k}`,
      count(items, (i) => i.passAtK),
      samples.length ? n : 0,
    ),
    rate(
      'cons@k',
      `cons@${report.k}`,
      count(items, (i) => i.consAtK),
      samples.length ? n : 0,
    ),
    // The format rate is a fraction of the greedy completions (evaluate.ts): its count is exact.
    rate(
      'greedy_format_rate',
      'format (greedy)',
      Math.round(report.metrics.greedy_format_rate * greedy.length),
      greedy.length,
    ),
    // Reflection is measured on the samples, or on the greedy completions when k = 0.
    samples.length
      ? rate(
          'reflection_rate',
          'reflection rate',
          count(samples, (c) => c.reflects),
          samples.length,
        )
      : rate(
          'reflection_rate',
          'reflection rate',
          count(greedy, (c) => c.reflects),
          greedy.length,
        ),
  ];
  return rates.filter((r) => r.trials > 0);
}

/** "62.5%" for a rate, "62.5% (30.6–86.3%)" with its interval. */
export function formatRate(r: Rate): string {
  if (!(r.trials > 0)) return '—';
  const pct = (x: number) => `${(100 * x).toFixed(1)}`;
  return `${pct(r.rate)}% (${pct(r.interval.low)}–${pct(r.interval.high)}%)`;
}
