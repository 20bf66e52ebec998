// The playground run's metrics history into IndexedDB, written by the worker as each step ends:
// the worker is the only writer of run history (the page lists, downloads and overlays stored runs,
// and writes none). Writes are queued one at a time; each is one transaction
// (storage/run-history.ts) holding every row not yet stored, so a failed write (storage full, say)
// loses nothing: its rows wait here and go in with the next step's write, and the page's charts
// never depended on storage. Outcomes reach the page as 'history-saved' / 'history-failed' events.
import type { GrpoStorage } from '../storage/index';
import { RunHistoryQuotaError, type RunHistoryMeta } from '../storage/run-history';
import type { TrainerEvent } from './protocol';
import {
  flattenMetricsRow as flat,
  type FlatMetricsRow as StoredRow,
  type MetricsRow,
} from '../core/metrics-row';
const msg = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class RunHistoryWriter {
  #meta: RunHistoryMeta | null = null;
  /** Rows of the current run not stored yet, by step. */
  #pending = new Map<number, StoredRow>();
  /** When each step of the current run ended (ms since epoch), for the wall-clock axis; a row
   * adopted from a restored history has none (storage keeps the time it stored before). */
  #times = new Map<number, number>();
  /** A step was recorded since the run was adopted: only then is anything of it written (a
   * restored run's later stored rows are replaced only once it trains on from there). */
  #stepped = false;
  #queue: Promise<void> = Promise.resolve();
  /** The last write failed and said so: the next failure is not repeated, a success resets it. */
  #reported = false;

  constructor(
    private readonly storage: () => Promise<GrpoStorage>,
    private readonly emit: (event: TrainerEvent) => void,
  ) {}

  /** The worker now holds this run, with this history (step 0, or restored). Writes nothing
   * until its next step: a run without a trained step is not listed. */
  adopt(meta: RunHistoryMeta, history: readonly MetricsRow[]): void {
    this.#meta = meta;
    this.#pending = new Map(history.map((r) => [r.step, flat(r)]));
    this.#times = new Map();
    this.#stepped = false;
  }

  /** One new step of the run: stored now, with any rows still waiting. */
  record(meta: RunHistoryMeta, row: MetricsRow, at: number = Date.now()): void {
    if (this.#meta?.id !== meta.id) this.adopt(meta, []);
    else this.#meta = meta;
    this.#pending.set(row.step, flat(row));
    this.#times.set(row.step, at);
    this.#stepped = true;
    void this.flush();
  }

  /** The run's new name, for the rows written from now on. */
  rename(runId: string, name: string): void {
    if (this.#meta?.id === runId) this.#meta = { ...this.#meta, name };
  }

  /** Stores the rows still waiting (after any write under way); resolves when done or failed. */
  flush(): Promise<void> {
    this.#queue = this.#queue.then(() => this.#write());
    return this.#queue;
  }

  /** Steps of the current run not stored yet (a failed write's rows wait here). */
  get pendingSteps(): number[] {
    return [...this.#pending.keys()].sort((a, b) => a - b);
  }

  async #write(): Promise<void> {
    const meta = this.#meta;
    const pending = this.#pending;
    if (!meta || !this.#stepped || pending.size === 0) return;
    const batch = [...pending.values()];
    try {
      await (await this.storage()).recordRunMetrics(meta, batch, this.#times);
      // Stored: forget those rows (a row of the same step that arrived meanwhile stays).
      for (const row of batch) if (pending.get(row.step) === row) pending.delete(row.step);
      this.#reported = false;
      this.emit({ type: 'history-saved', runId: meta.id, steps: batch.map((r) => r.step) });
    } catch (err) {
      if (this.#reported) return;
      this.#reported = true;
      const quota = err instanceof RunHistoryQuotaError;
      this.emit({
        type: 'history-failed',
        runId: meta.id,
        quota,
        title: quota
          ? 'Storage full: the run’s metrics were not stored'
          : 'The run’s metrics were not stored',
        message: quota
          ? msg(err)
          : `${msg(err)}. This tab keeps them on the charts and tries again with the next step.`,
      });
    }
  }
}
