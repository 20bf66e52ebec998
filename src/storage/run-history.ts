// A run's metrics history as one thing to list, download and overlay: the run row plus its rows
// in the metrics store ([runId, step] keys, one record per step). The trainer worker records every
// step as it ends (src/worker/run-history-writer.ts; the page's src/app/stores/runs.svelte.ts lists
// and reads): one small transaction per write, so a tab closed mid-write
// keeps the history up to the previous write, never a half-written one. The write also drops rows
// past its last step: a run restored from an earlier checkpoint and trained on has one history,
// the continuation, not a mix of two branches.

import type { LlamaConfig } from '../core/model-config';
import type { GrpoDatabase, Identity, MetricsRecord, RunRecord, RunStage } from './db';
import type { FlatMetricsRow } from '../core/metrics-row';
import { isQuotaExceeded, StorageError } from './errors';
import { prefixRange, writeTx } from './tx';
import {
  describeKey,
  describeValue,
  readableMetricsRows,
  UNKNOWN_RUN,
  type OnSkip,
} from './notices';
import { isStageRunOf } from './runs';

/** What the first write of a run creates its run row from (later writes keep the stored row's). */
export interface RunHistoryMeta {
  id: string;
  name: string;
  config: Record<string, unknown>;
  modelConfig?: LlamaConfig | null;
  modelIdentity?: Identity | null;
  stages?: RunStage[];
}

/** A run with its whole metrics history, in step order. */
export interface RunHistory extends RunRecord {
  rows: FlatMetricsRow[];
  /** When each row's step ended (ms since epoch), aligned with `rows`; null where unknown. */
  times: Array<number | null>;
}

/** A new run's name when another run already has it: the date and time as the tiebreak
 * ('countdown · tiny · 2026-11-27 19:20'), then a counter. */
export function untakenName(name: string, taken: ReadonlySet<string>, t: number): string {
  if (!taken.has(name)) return name;
  const when = new Date(t).toISOString().slice(0, 16).replace('T', ' ');
  const dated = `${name} · ${when}`;
  if (!taken.has(dated)) return dated;
  for (let k = 2; ; k++) if (!taken.has(`${dated} (${k})`)) return `${dated} (${k})`;
}

/** What the Runs panel lists. */
export interface RunHistorySummary extends RunRecord {
  /** Stored metric rows (steps with metrics). */
  steps: number;
  /** Highest stored step, or null when none. */
  lastStep: number | null;
  checkpointCount: number;
}

/**
 * The browser refused to store a run's metrics (QuotaExceededError). Nothing of that write was
 * kept; the rows stored before it are intact, and the page keeps the missed rows to write again.
 */
export class RunHistoryQuotaError extends StorageError {
  override name = 'RunHistoryQuotaError';
  constructor(
    readonly runId: string,
    readonly runName: string,
    readonly fromStep: number,
    readonly toStep: number,
    override readonly cause?: unknown,
  ) {
    const steps = fromStep === toStep ? `step ${toStep}` : `steps ${fromStep}–${toStep}`;
    super(
      `The metrics of run '${runName}' (${steps}) were not stored: the browser's storage quota ` +
        `is exhausted. Nothing is lost yet: this tab keeps them on the charts and stores them ` +
        `with the next step once there is space. Free space by deleting checkpoints or runs in ` +
        `the Checkpoints view, or download the run's CSV now.`,
    );
  }
}

/**
 * Stores `rows` of a run (replacing rows of the same steps), creates or touches its run row, and
 * deletes the run's rows after the last of `rows`: all in one transaction. `rows` may be empty
 * (then only the run row is touched). `times` gives when steps ended (ms since epoch); a row
 * without one keeps the time its step's stored row had (a restored history re-written). A new run
 * whose name another run has gets the date as a tiebreak (untakenName). Returns the run row as
 * stored.
 */
export async function recordRunMetrics(
  db: GrpoDatabase,
  meta: RunHistoryMeta,
  rows: readonly FlatMetricsRow[],
  now: () => number = Date.now,
  times: ReadonlyMap<number, number> = new Map(),
): Promise<RunRecord> {
  const sorted = [...rows].sort((a, b) => a.step - b.step);
  const last = sorted.at(-1)?.step;
  let stored: RunRecord | undefined;
  try {
    await writeTx(db, ['runs', 'metrics'], async (tx) => {
      const runs = tx.objectStore('runs');
      const existing = await runs.get(meta.id);
      const t = now();
      const name = meta.name.trim() || meta.id;
      const taken = existing
        ? new Set<string>()
        : new Set((await runs.getAll()).map((r) => r.name));
      stored = existing
        ? {
            ...existing,
            ...(meta.stages ? { stages: meta.stages } : {}),
            status: existing.status === 'created' ? 'running' : existing.status,
            updatedAt: t,
          }
        : {
            id: meta.id,
            name: untakenName(name, taken, t),
            status: 'running',
            config: meta.config,
            modelConfig: meta.modelConfig ?? null,
            modelIdentity: meta.modelIdentity ?? null,
            createdAt: t,
            updatedAt: t,
            ...(meta.stages ? { stages: meta.stages } : {}),
          };
      await runs.put(stored);
      const metrics = tx.objectStore('metrics');
      for (const values of sorted) {
        const at = times.get(values.step) ?? (await metrics.get([meta.id, values.step]))?.at;
        const record: MetricsRecord = { runId: meta.id, step: values.step, values };
        if (typeof at === 'number' && Number.isFinite(at)) record.at = at;
        await metrics.put(record);
      }
      if (last !== undefined) {
        await metrics.delete(IDBKeyRange.bound([meta.id, last], [meta.id, Infinity], true));
      }
    });
  } catch (err) {
    if (isQuotaExceeded(err)) {
      throw new RunHistoryQuotaError(meta.id, meta.name, sorted[0]?.step ?? 0, last ?? 0, err);
    }
    throw err;
  }
  return stored!;
}

/**
 * Every run with its stored step count, most recently updated first. A run row whose id is not a
 * string (no run this app writes) is left out and reported: it would fail the whole listing.
 */
export async function listRunHistories(
  db: GrpoDatabase,
  onSkip: OnSkip = () => {},
): Promise<RunHistorySummary[]> {
  const tx = db.transaction(['runs', 'metrics', 'checkpoints'], 'readonly');
  const runs = (await tx.objectStore('runs').getAll()).filter((run) => {
    if (typeof run.id === 'string') return true;
    onSkip({
      during: 'listing runs',
      runId: UNKNOWN_RUN,
      row: `run row ${describeKey(run.id)}`,
      problem: `its id is ${describeValue(run.id)}, not a string`,
    });
    return false;
  });
  const byRun = tx.objectStore('checkpoints').index('byRun');
  const out: RunHistorySummary[] = [];
  for (const run of runs) {
    const keys = await tx.objectStore('metrics').getAllKeys(prefixRange(run.id));
    // A recipe run's checkpoints are its stages' (deleted with it: runs.ts deleteRun).
    let checkpointCount = await byRun.count(run.id);
    for (const stage of runs.filter((r) => isStageRunOf(r.id, run.id)))
      checkpointCount += await byRun.count(stage.id);
    out.push({
      ...run,
      steps: keys.length,
      lastStep: keys.length ? keys[keys.length - 1][1] : null,
      checkpointCount,
    });
  }
  return out.sort((a, b) => b.updatedAt - a.updatedAt);
}

/**
 * A run's row and its metrics in step order, or undefined when there is no such run. Rows it
 * cannot read (not an object, no numeric step) are left out and reported to `onSkip`.
 */
export async function getRunHistory(
  db: GrpoDatabase,
  id: string,
  onSkip: OnSkip = () => {},
): Promise<RunHistory | undefined> {
  const tx = db.transaction(['runs', 'metrics'], 'readonly');
  const run = await tx.objectStore('runs').get(id);
  if (!run) return undefined;
  const records = await tx.objectStore('metrics').getAll(prefixRange(id));
  const rows = readableMetricsRows(records, id, 'reading a run history', onSkip);
  const at = new Map(records.map((r) => [r.step, r.at]));
  const times = rows.map((r) => {
    const t = at.get(r.step);
    return typeof t === 'number' && Number.isFinite(t) ? t : null;
  });
  return { ...run, rows, times };
}
