// One step's metrics, the one type every layer uses: the step and its values under docs/grpo.md §6
// names ('reward', 'rewards/<name>/mean', 'kl', 'loss', …; a metric not computed is absent, never
// 0), as the trainer reports it, the page charts it and the CLI writes it. Storage keeps the same
// row flat ({ step, <metric>: number, … }: IndexedDB records, checkpoints, exported files).

export interface MetricsRow {
  step: number;
  metrics: Record<string, number>;
}

/** A MetricsRow as stored: the step beside the metrics in one flat object. */
export interface FlatMetricsRow {
  step: number;
  [name: string]: number;
}

export const flattenMetricsRow = (r: MetricsRow): FlatMetricsRow => ({
  ...r.metrics,
  step: r.step,
});

export const nestMetricsRow = ({ step, ...metrics }: FlatMetricsRow): MetricsRow => ({
  step,
  metrics,
});

/**
 * The grammar of a metric name (docs/grpo.md §6): a lower-case letter, then lower-case letters,
 * digits and '_'; then '/'-separated parts of lower-case letters, digits, '_', '.', '@', ':' and
 * '-' ('rewards/custom:len-bonus/mean', 'clip_ratio/low_min'), at most METRIC_NAME_MAX_LENGTH in
 * all. Every name the trainers log fits it; an imported file's names are checked against it, so a
 * name such as '=HYPERLINK(…)' never reaches the page, a chart legend or a CSV header.
 */
export const METRIC_NAME_PATTERN = /^[a-z][a-z0-9_]*(?:\/[a-z0-9_][a-z0-9_.@:-]*)*$/;
export const METRIC_NAME_MAX_LENGTH = 128;

/** Why `name` is not a metric name (a sentence quoting it, escaped and cut), or null. */
export function metricNameProblem(name: string): string | null {
  if (name.length <= METRIC_NAME_MAX_LENGTH && METRIC_NAME_PATTERN.test(name)) return null;
  const cut = name.length > 60 ? `${name.slice(0, 60)}...` : name;
  const shown = JSON.stringify(cut).replace(
    /[^\x20-\x7e]/g,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return (
    `metric name ${shown} is not one this app logs (a lower-case letter, then letters, digits ` +
    `and '_', then '/'-separated parts of letters, digits and _ . @ : -; at most ` +
    `${METRIC_NAME_MAX_LENGTH} characters)`
  );
}
