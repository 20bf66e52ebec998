// A run's metrics history as files: CSV (one row per step, for a spreadsheet or pandas) and JSONL
// in the style of TRL's log lines (the `log_history` entries of trainer_state.json, one JSON
// object per logged step), so a playground run and a TRL run of the exported project line up.
// Pure text formatting; the Runs panel (src/app) downloads what these return.

/** One step's metrics, docs/grpo.md §6 names; a metric that was not computed is absent. */
export interface LogRow {
  step: number;
  [metric: string]: number;
}

/** Every metric key of the rows ('step' excluded), in the order each first appears (rows taken in
 * step order): the order the trainer writes them, the same for every export of the run. */
export function metricColumns(rows: readonly LogRow[]): string[] {
  const seen = new Set<string>();
  for (const row of [...rows].sort((a, b) => a.step - b.step)) {
    for (const key of Object.keys(row)) if (key !== 'step') seen.add(key);
  }
  return [...seen];
}

/**
 * RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. A text cell
 * that begins with '=', '+', '-', '@', a tab or a carriage return would be a formula in a
 * spreadsheet (CSV injection: '=HYPERLINK(…)' as a metric name), so it gets a leading "'" first
 * (OWASP's rule), which spreadsheets show as text. Numbers are written by csvNumber, never here,
 * so -0.25 stays a number.
 */
export function csvField(text: string): string {
  const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** A number as pandas / numpy read it back: shortest round-trip digits, NaN, inf, -inf. */
function csvNumber(v: number | undefined): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'number') return csvField(String(v));
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
  return String(v);
}

/** Header `step,<every metric>`, then one line per step in step order; a missing value is an
 * empty field. Lines end with '\n', the last one too. */
export function runCsv(rows: readonly LogRow[]): string {
  const columns = metricColumns(rows);
  const lines = [['step', ...columns].map(csvField).join(',')];
  for (const row of [...rows].sort((a, b) => a.step - b.step)) {
    lines.push([csvNumber(row.step), ...columns.map((c) => csvNumber(row[c]))].join(','));
  }
  return lines.join('\n') + '\n';
}

/** Keys Transformers' Trainer logs first (loss, grad_norm, learning_rate), before the trainer's own. */
const TRAINER_FIRST = ['loss', 'grad_norm', 'learning_rate'];

export interface JsonlOptions {
  /** The run's numIterations μ: TRL counts optimizer steps, μ per sampled batch, so the line of
   * playground step s says "step": s·μ (with logging_steps = μ, as the TRL export sets it). */
  numIterations?: number;
  /** TRL's fractional epoch of a step, where the run has a finite dataset; absent: no "epoch". */
  epochOf?: (step: number) => number;
}

/**
 * One JSON object per step, keys in TRL's log order: loss, grad_norm, learning_rate, the rest of
 * the step's metrics, then "epoch" (when known) and "step" (TRL's global step), as Transformers'
 * Trainer.log appends them. A non-finite value (NaN: undefined for this step) is written as null,
 * which JSON has and Python's json reads as None.
 */
export function runJsonl(rows: readonly LogRow[], options: JsonlOptions = {}): string {
  const mu = options.numIterations ?? 1;
  if (!Number.isInteger(mu) || mu < 1) throw new Error(`numIterations must be ≥ 1, got ${mu}`);
  const columns = metricColumns(rows);
  const order = [
    ...TRAINER_FIRST.filter((k) => columns.includes(k)),
    ...columns.filter((k) => !TRAINER_FIRST.includes(k)),
  ];
  const lines: string[] = [];
  for (const row of [...rows].sort((a, b) => a.step - b.step)) {
    const line: Record<string, number | null> = {};
    for (const key of order) {
      const v = row[key];
      if (v === undefined) continue;
      line[key] = Number.isFinite(v) ? v : null;
    }
    if (options.epochOf) line.epoch = options.epochOf(row.step);
    line.step = row.step * mu;
    lines.push(JSON.stringify(line));
  }
  return lines.map((l) => l + '\n').join('');
}

/** A file name from a run's name: letters, digits, '.', '_' and '-' kept, the rest '_'. */
export function runFileName(runName: string, suffix: string): string {
  const base = runName.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^_+|_+$/g, '') || 'run';
  return `${base}${suffix}`;
}
