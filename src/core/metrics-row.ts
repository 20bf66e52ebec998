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
