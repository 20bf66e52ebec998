// Runs as things of their own, on the page: every step's metrics go to IndexedDB as they arrive
// (the session tells this store through its RunLog), the Runs panel lists the stored runs and
// downloads them, and one other run (or a seed of the committed Aha reference) can be overlaid on
// the Train charts while the live run keeps drawing on top.
//
// Writes are queued one at a time; each is one transaction (storage/run-history.ts) holding every
// row not yet stored, so a failed write (storage full, say) loses nothing: its rows stay here and
// go in with the next step's write, and the charts and the downloads of the live run use the
// session's own history, which never depended on storage.
import {
  GrpoStorage,
  RunHistoryQuotaError,
  type MetricsRow as StoredRow,
  type RunHistorySummary,
} from '../storage/index';
import type { MetricsRow } from '../worker/types';

/** The run a row belongs to, as the session knows it. */
export interface RunLogMeta {
  runId: string;
  runName: string;
  /** The run's resolved config (stored with the run when its first row is). */
  config: object;
}

/** What the session calls as runs are adopted and steps arrive (Session.runLog). */
export interface RunLog {
  /** The session now holds this run, with this history (step 0, or restored). Writes nothing
   * until its next step: a run without a trained step is not listed. */
  adopt(meta: RunLogMeta, history: readonly MetricsRow[]): void;
  /** One new step of the session's run: stored now, with any rows still waiting. */
  record(meta: RunLogMeta, row: MetricsRow): void;
}

/** Another run's metrics drawn dashed behind the live ones. */
export interface Overlay {
  /** A stored run's id, or 'aha:<seed>'. */
  id: string;
  /** What the legends call it. */
  name: string;
  /** A shorter name for each chart's legend keys (default: the name, shortened). */
  tag?: string;
  source: 'run' | 'aha';
  rows: MetricsRow[];
}

const flat = (r: MetricsRow): StoredRow => ({ ...r.metrics, step: r.step });
const nested = ({ step, ...metrics }: StoredRow): MetricsRow => ({ step, metrics });
const msg = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class Runs implements RunLog {
  readonly #open: () => Promise<GrpoStorage>;
  #storage: Promise<GrpoStorage> | null = null;
  #meta: RunLogMeta | null = null;
  /** Rows of the current run not yet stored, by step (not shown anywhere: no reactivity). */
  // eslint-disable-next-line svelte/prefer-svelte-reactivity -- plain bookkeeping, never rendered
  #pending = new Map<number, StoredRow>();
  /** A step was recorded since the run was adopted: only then is anything of it written (a
   * restored run's later rows are replaced only once it trains on from there). */
  #stepped = false;
  #queue: Promise<void> = Promise.resolve();
  /** The last write failed and said so: the next failure is not repeated, a success resets it. */
  #reported = false;

  /** Told when a write fails (the session's banner). */
  notify: (title: string, message: string) => void = () => {};
  /** Successful writes so far: the Runs panel lists again when it changes. */
  saved = $state(0);
  list: RunHistorySummary[] = $state.raw([]);
  listError: string | null = $state(null);
  overlay: Overlay | null = $state.raw(null);

  constructor(open: () => Promise<GrpoStorage>) {
    this.#open = open;
  }

  /** The session stores each step here and shows write failures as its banners. */
  connect(session: {
    runLog: RunLog | null;
    notify(kind: 'warn', title: string, message: string): void;
  }): void {
    session.runLog = this;
    this.notify = (title, message) => session.notify('warn', title, message);
  }

  #db(): Promise<GrpoStorage> {
    if (!this.#storage) {
      this.#storage = this.#open();
      this.#storage.catch(() => (this.#storage = null)); // retried on the next use
    }
    return this.#storage;
  }

  adopt(meta: RunLogMeta, history: readonly MetricsRow[]): void {
    this.#meta = meta;
    // eslint-disable-next-line svelte/prefer-svelte-reactivity -- plain bookkeeping, never rendered
    this.#pending = new Map(history.map((r) => [r.step, flat(r)]));
    this.#stepped = false;
  }

  record(meta: RunLogMeta, row: MetricsRow): void {
    if (this.#meta?.runId !== meta.runId) this.adopt(meta, []);
    else this.#meta = meta;
    this.#pending.set(row.step, flat(row));
    this.#stepped = true;
    void this.flush();
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
      const storage = await this.#db();
      await storage.recordRunMetrics(
        { id: meta.runId, name: meta.runName, config: meta.config as Record<string, unknown> },
        batch,
      );
      // Stored: forget those rows (a row of the same step that arrived meanwhile stays).
      for (const row of batch) if (pending.get(row.step) === row) pending.delete(row.step);
      this.#reported = false;
      this.saved++;
    } catch (err) {
      if (this.#reported) return;
      this.#reported = true;
      if (err instanceof RunHistoryQuotaError) {
        this.notify('Storage full: the run’s metrics were not stored', err.message);
      } else {
        this.notify(
          'The run’s metrics were not stored',
          `${msg(err)}. This tab keeps them on the charts and tries again with the next step.`,
        );
      }
    }
  }

  /** Lists the stored runs again: those with stored steps (a run row without any, such as a
   * recipe stage's checkpoint holder, has nothing to download or overlay). */
  async refresh(): Promise<void> {
    try {
      this.list = (await (await this.#db()).listRunHistories()).filter((r) => r.steps > 0);
      this.listError = null;
    } catch (err) {
      this.listError = `The stored runs could not be read: ${msg(err)}`;
    }
  }

  /** A stored run's metrics in step order (empty when it is gone). */
  async rows(id: string): Promise<StoredRow[]> {
    return (await (await this.#db()).getRunHistory(id))?.rows ?? [];
  }

  /** Deletes a stored run with its metrics and checkpoints; its overlay goes too. */
  async remove(id: string): Promise<void> {
    await (await this.#db()).deleteRun(id);
    if (this.overlay?.id === id) this.overlay = null;
    await this.refresh();
  }

  /** Draws a stored run behind the live one. */
  async overlayRun(id: string): Promise<void> {
    const history = await (await this.#db()).getRunHistory(id);
    if (!history) throw new Error('That run is no longer stored (deleted in another tab?).');
    this.overlay = { id, name: history.name, source: 'run', rows: history.rows.map(nested) };
  }

  /** The seeds of the committed Aha reference (loaded on first use: it is not in the main chunk). */
  async ahaSeeds(): Promise<number[]> {
    const { AHA_REFERENCE } = await import('./aha/reference');
    return AHA_REFERENCE.seeds.map((s) => s.seed);
  }

  /** Draws one seed of the committed `npm run aha` result (src/app/aha/reference.ts). */
  async overlayAha(seed: number): Promise<void> {
    const { AHA_REFERENCE } = await import('./aha/reference');
    const s = AHA_REFERENCE.seeds.find((x) => x.seed === seed);
    if (!s) throw new Error(`The Aha reference has no seed ${seed}.`);
    const rows: MetricsRow[] = s.steps.map((step, i) => {
      const metrics: Record<string, number> = {};
      for (const [key, values] of Object.entries(s.curves)) {
        const v = values[i];
        if (typeof v === 'number') metrics[key] = v;
      }
      return { step, metrics };
    });
    this.overlay = {
      id: `aha:${seed}`,
      name: `Aha reference, seed ${seed}`,
      tag: `Aha seed ${seed}`,
      source: 'aha',
      rows,
    };
  }

  clearOverlay(): void {
    this.overlay = null;
  }
}

/** The page's runs, on the browser's IndexedDB. Orphaned checkpoint chunks are the worker's to
 * collect (it opens the same database), so the page's open only reads and writes runs. */
export const runs = new Runs(() => GrpoStorage.open({ collectOrphansOnOpen: false }));
