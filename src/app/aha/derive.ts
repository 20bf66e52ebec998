// The Aha panel's numbers (docs/grpo.md §7): reflection metrics over steps from the metrics
// history, an early-versus-late comparison that states the claim as a pair (reflection rises AND
// reflecting completions are right more often), and example completions of a step with their
// reflection markers found. Pure functions; AhaPanel.svelte lays them out.
import { DEFAULT_REFLECTION_MARKERS, findReflectionMarkers } from '../../rewards/reflection';
import type { StepReport } from '../../grpo/trainer';
import type { Point } from '../teach/plot';
import type { MetricsRow } from '../../worker/types';

/** The metric keys the panel reads: src/rewards/reflection.ts reflectionMetrics, docs/grpo.md §6. */
export const AHA_METRICS = {
  rate: 'reflection_rate',
  accuracyReflecting: 'reflection/accuracy_reflecting',
  accuracyNotReflecting: 'reflection/accuracy_not_reflecting',
  lengthReflecting: 'reflection/mean_length_reflecting',
  lengthNotReflecting: 'reflection/mean_length_not_reflecting',
  countReflecting: 'reflection/count_reflecting',
  countNotReflecting: 'reflection/count_not_reflecting',
  meanLength: 'completions/mean_length',
  accuracy: 'accuracy',
} as const;

/** Steps per window at most when comparing the start of the run with its end. */
export const AHA_WINDOW = 20;
/** Reflection rate must rise by at least this much (absolute) to count as rising. */
export const RISE_MIN = 0.05;
/** Reflecting completions must be right this much more often (absolute) to count. */
export const GAP_MIN = 0.05;
/** Completions needed on each side in the late window before accuracies are compared. */
export const MIN_COUNT = 5;
/** Steps needed before any verdict: the reference run (`npm run aha`, reference.json) kept its
 * reflection rate near its start (10–30 % a step) for about its first 30 steps before it rose to
 * 70–90 %, so fewer steps cannot tell a rise from noise. */
export const MIN_STEPS = 30;

/** One metric over steps; a step without the metric (or with NaN) is a gap. */
export function seriesOf(history: readonly MetricsRow[], key: string): Point[] {
  return history.map((row) => {
    const v = row.metrics[key];
    return { x: row.step, y: typeof v === 'number' ? v : NaN };
  });
}

export interface WindowStats {
  steps: number;
  firstStep: number;
  lastStep: number;
  countReflecting: number;
  countNotReflecting: number;
  /** Pooled over the window: reflecting completions / all completions. */
  rate: number;
  /** Pooled, each step's accuracy weighted by its count (NaN when there is none). */
  accuracyReflecting: number;
  accuracyNotReflecting: number;
  lengthReflecting: number;
  lengthNotReflecting: number;
}

function pooled(rows: readonly MetricsRow[], valueKey: string, countKey: string): number {
  let sum = 0;
  let n = 0;
  for (const r of rows) {
    const v = r.metrics[valueKey];
    const c = r.metrics[countKey];
    if (Number.isFinite(v) && Number.isFinite(c) && c > 0) {
      sum += v * c;
      n += c;
    }
  }
  return n > 0 ? sum / n : NaN;
}

export function windowStats(rows: readonly MetricsRow[]): WindowStats {
  const count = (key: string) =>
    rows.reduce((s, r) => s + (Number.isFinite(r.metrics[key]) ? r.metrics[key] : 0), 0);
  const yes = count(AHA_METRICS.countReflecting);
  const no = count(AHA_METRICS.countNotReflecting);
  const M = AHA_METRICS;
  return {
    steps: rows.length,
    firstStep: rows.length ? rows[0].step : NaN,
    lastStep: rows.length ? rows[rows.length - 1].step : NaN,
    countReflecting: yes,
    countNotReflecting: no,
    rate: yes + no > 0 ? yes / (yes + no) : NaN,
    accuracyReflecting: pooled(rows, M.accuracyReflecting, M.countReflecting),
    accuracyNotReflecting: pooled(rows, M.accuracyNotReflecting, M.countNotReflecting),
    lengthReflecting: pooled(rows, M.lengthReflecting, M.countReflecting),
    lengthNotReflecting: pooled(rows, M.lengthNotReflecting, M.countNotReflecting),
  };
}

export type AhaStatus =
  'too-early' | 'no-data' | 'pair' | 'rise-only' | 'accuracy-only' | 'neither';

export interface AhaVerdict {
  status: AhaStatus;
  early: WindowStats;
  late: WindowStats;
  /** late.rate − early.rate ≥ RISE_MIN; null before `minSteps` (MIN_STEPS). */
  rising: boolean | null;
  /** In the late window, reflecting accuracy − non-reflecting ≥ GAP_MIN; null when it cannot be
   * judged (no accuracy reward, or fewer than MIN_COUNT completions on a side). */
  reflectingMoreAccurate: boolean | null;
  /** Share of reflecting completions in the first window: oat-zero's point that base models
   * often reflect before any RL. */
  baseRate: number;
}

/**
 * The first and the last `window` steps (each at most half the history, so they never overlap),
 * compared. A description for people, not a significance test: the panel says so.
 */
export function ahaVerdict(
  history: readonly MetricsRow[],
  window = AHA_WINDOW,
  minSteps = MIN_STEPS,
): AhaVerdict {
  const rows = [...history].sort((a, b) => a.step - b.step);
  const w = Math.max(1, Math.min(window, Math.floor(rows.length / 2)));
  const early = windowStats(rows.slice(0, w));
  const late = windowStats(rows.slice(rows.length - w));
  if (rows.length < minSteps) {
    return {
      status: 'too-early',
      early,
      late,
      rising: null,
      reflectingMoreAccurate: null,
      baseRate: early.rate,
    };
  }
  const rising = Number.isFinite(late.rate - early.rate)
    ? late.rate - early.rate >= RISE_MIN
    : null;
  const judgeable =
    late.countReflecting >= MIN_COUNT &&
    late.countNotReflecting >= MIN_COUNT &&
    Number.isFinite(late.accuracyReflecting) &&
    Number.isFinite(late.accuracyNotReflecting);
  const better = judgeable ? late.accuracyReflecting - late.accuracyNotReflecting >= GAP_MIN : null;
  const status: AhaStatus =
    rising === null
      ? 'no-data'
      : rising && better
        ? 'pair'
        : rising
          ? 'rise-only'
          : better
            ? 'accuracy-only'
            : 'neither';
  return { status, early, late, rising, reflectingMoreAccurate: better, baseRate: early.rate };
}

// ---------------------------------------------------------------------------------------------
// Example completions
// ---------------------------------------------------------------------------------------------

export type ExampleFilter = 'all' | 'reflecting' | 'not-reflecting' | 'correct' | 'wrong';

export interface Example {
  group: number;
  index: number;
  text: string;
  reflects: boolean;
  /** From the accuracy reward: null when the run has none or it did not apply. */
  correct: boolean | null;
  reward: number;
  advantage: number;
  length: number;
  truncated: boolean;
}

export function examples(report: StepReport, filter: ExampleFilter = 'all'): Example[] {
  const out: Example[] = [];
  report.groups.forEach((g, group) =>
    g.completions.forEach((c, index) => {
      const acc = c.reward.perFunction.accuracy;
      const correct = acc === undefined || acc === null ? null : acc > 0;
      out.push({
        group,
        index,
        text: c.text,
        reflects: c.reflects,
        correct,
        reward: c.reward.total,
        advantage: c.advantage,
        length: c.tokens.length,
        truncated: c.truncated,
      });
    }),
  );
  return out.filter((e) => {
    switch (filter) {
      case 'reflecting':
        return e.reflects;
      case 'not-reflecting':
        return !e.reflects;
      case 'correct':
        return e.correct === true;
      case 'wrong':
        return e.correct === false;
      default:
        return true;
    }
  });
}

export interface Segment {
  text: string;
  marker: boolean;
}

/**
 * The text cut into plain and marker segments (rendered as text nodes and <mark>, never as HTML:
 * completions are untrusted model output). Joining the segments gives the text back.
 */
export function highlightMarkers(
  text: string,
  markers: readonly string[] = DEFAULT_REFLECTION_MARKERS,
): Segment[] {
  const segments: Segment[] = [];
  let at = 0;
  for (const hit of findReflectionMarkers(text, markers)) {
    if (hit.index > at) segments.push({ text: text.slice(at, hit.index), marker: false });
    segments.push({ text: text.slice(hit.index, hit.index + hit.length), marker: true });
    at = hit.index + hit.length;
  }
  if (at < text.length) segments.push({ text: text.slice(at), marker: false });
  return segments;
}

/** Reports by step (ascending, one per step: the latest given wins). */
export function reportsByStep(reports: readonly StepReport[]): StepReport[] {
  const byStep = new Map<number, StepReport>();
  for (const r of reports) byStep.set(r.step, r);
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}
