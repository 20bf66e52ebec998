// Storage notices: rows the storage could not read and left out, kept in the `notices` store so
// the page can tell the user once. A malformed row (a NaN step, a null row, a history that is not
// a list, a checkpoint without a run id) is skipped, never deleted and never fatal: before this,
// one such row in a version-1 database failed the upgrade on every open and every run became
// unreachable. The schema upgrade records what it skipped in its own transaction; the readers of
// run histories record theirs afterwards, best-effort. A notice is keyed by its run and row, so
// the same unreadable row read on every listing is reported once, and dismissing it is kept.

import type { GrpoDatabase, MetricsRecord, StorageNoticeRecord } from './db';
import type { FlatMetricsRow } from '../core/metrics-row';
import { writeTx } from './tx';

/** What the page shows: one row that was left out, where, and why. */
export type StorageNotice = Omit<StorageNoticeRecord, 'dismissed'>;

/** A notice before it is stored (its key and time are added on the way in). */
export type FoundNotice = Pick<StorageNotice, 'during' | 'runId' | 'row' | 'problem'>;

/** Run id of a notice whose row names no (readable) run. */
export const UNKNOWN_RUN = '(unknown)';

export const noticeKey = (n: Pick<StorageNotice, 'runId' | 'row'>): string =>
  `${n.runId}\n${n.row}`;

export const toRecord = (n: FoundNotice, at: number): StorageNoticeRecord => ({
  key: noticeKey(n),
  ...n,
  at,
  dismissed: false,
});

/** A short, printable account of a value found where something else was expected. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'missing';
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (typeof value === 'number') return String(value); // NaN, Infinity as such
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  }
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

/** A row's key as a notice names it: a string quoted whole (ids make notice keys unique). */
export function describeKey(key: unknown): string {
  return typeof key === 'string' ? `'${key}'` : describeValue(key);
}

/**
 * Why a stored metrics row (FlatMetricsRow: `{ step, <metric>: number, … }`) cannot be read, or null
 * when it can. Only the shape is checked: a metric's value is kept as stored (NaN is a real
 * value: a diverged loss), so a readable row comes back exactly as it was written.
 */
export function metricsRowProblem(values: unknown): string | null {
  if (typeof values !== 'object' || values === null || Array.isArray(values)) {
    return `the row is ${describeValue(values)}, not an object`;
  }
  const step = (values as { step?: unknown }).step;
  if (typeof step !== 'number') return `its step is ${describeValue(step)}, not a number`;
  if (!Number.isFinite(step)) return `its step is ${step}`;
  return null;
}

/**
 * Stores notices not stored before (same run and row), in one transaction. A notice already there
 * keeps its first time and its dismissal.
 */
export async function recordNotices(
  db: GrpoDatabase,
  found: readonly FoundNotice[],
  now: () => number = Date.now,
): Promise<void> {
  if (found.length === 0) return;
  const at = now();
  await writeTx(db, ['notices'], async (tx) => {
    const store = tx.objectStore('notices');
    for (const n of found) {
      const record = toRecord(n, at);
      if ((await store.getKey(record.key)) === undefined) await store.add(record);
    }
  });
}

/** The notices not dismissed, oldest first (then by run and row). */
export async function listNotices(db: GrpoDatabase): Promise<StorageNotice[]> {
  const records = await db.getAll('notices');
  return records
    .filter((r) => !r.dismissed)
    .sort((a, b) => a.at - b.at || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map(({ dismissed: _, ...notice }) => notice);
}

/**
 * Dismisses the notices with these keys (default: every notice), so they are not listed again;
 * the records stay, so a row still unreadable on the next read is not reported anew. Returns how
 * many were dismissed now.
 */
export async function dismissNotices(db: GrpoDatabase, keys?: readonly string[]): Promise<number> {
  let dismissed = 0;
  await writeTx(db, ['notices'], async (tx) => {
    const store = tx.objectStore('notices');
    const records: Array<StorageNoticeRecord | undefined> = [];
    if (keys) for (const k of keys) records.push(await store.get(k));
    else records.push(...(await store.getAll()));
    for (const r of records) {
      if (!r || r.dismissed) continue;
      await store.put({ ...r, dismissed: true });
      dismissed++;
    }
  });
  return dismissed;
}

/** Where a reader reports a row it left out (GrpoStorage records them: recordNotices). */
export type OnSkip = (notice: FoundNotice) => void;

/**
 * The readable rows of a run's metrics records, in their order; each other one is reported to
 * `onSkip` instead of reaching a chart or a download that would fail on it.
 */
export function readableMetricsRows(
  records: readonly MetricsRecord[],
  runId: string,
  during: string,
  onSkip: OnSkip,
): FlatMetricsRow[] {
  const rows: FlatMetricsRow[] = [];
  for (const r of records) {
    const problem = metricsRowProblem(r.values);
    if (problem)
      onSkip({ during, runId, row: `metrics row at step ${describeValue(r.step)}`, problem });
    else rows.push(r.values);
  }
  return rows;
}
