// Runs as things of their own, on the page: the Runs panel lists the stored runs (the trainer
// worker stores every step's metrics as it ends: it is run history's only writer, and tells the
// page through 'history-saved' / 'history-failed' events, which the session passes here), downloads
// them, and one other run (or a seed of the committed Aha reference) can be overlaid on the Train
// charts while the live run keeps drawing on top.
import { GrpoStorage, type RunHistorySummary } from '../../storage/index';
import { nestMetricsRow, type FlatMetricsRow, type MetricsRow } from '../../core/metrics-row';

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

const msg = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class Runs {
  readonly #open: () => Promise<GrpoStorage>;
  #storage: Promise<GrpoStorage> | null = null;

  /** Writes the worker reported so far: the Runs panel lists again when it changes. */
  saved = $state(0);
  list: RunHistorySummary[] = $state.raw([]);
  listError: string | null = $state(null);
  overlay: Overlay | null = $state.raw(null);

  constructor(open: () => Promise<GrpoStorage>) {
    this.#open = open;
  }

  /** The session passes the worker's history events here. */
  connect(session: { runs: { historySaved(): void } | null }): void {
    session.runs = this;
  }

  /** The worker stored rows of the run: the list is out of date. */
  historySaved(): void {
    this.saved++;
  }

  #db(): Promise<GrpoStorage> {
    if (!this.#storage) {
      this.#storage = this.#open();
      this.#storage.catch(() => (this.#storage = null)); // retried on the next use
    }
    return this.#storage;
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
  async rows(id: string): Promise<FlatMetricsRow[]> {
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
    this.overlay = {
      id,
      name: history.name,
      source: 'run',
      rows: history.rows.map(nestMetricsRow),
    };
  }

  /** The seeds of the committed Aha reference (loaded on first use: it is not in the main chunk). */
  async ahaSeeds(): Promise<number[]> {
    const { AHA_REFERENCE } = await import('../aha/reference');
    return AHA_REFERENCE.seeds.map((s) => s.seed);
  }

  /** Draws one seed of the committed `npm run aha` result (src/app/aha/reference.ts). */
  async overlayAha(seed: number): Promise<void> {
    const { AHA_REFERENCE } = await import('../aha/reference');
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
