// Runs as a tracker keeps them, on the page: the Runs panel lists the stored runs (the trainer
// worker stores every step's metrics as it ends: it is run history's only writer, and tells the
// page through 'history-saved' / 'history-failed' events, which the session passes here) with
// their names, notes and config; downloads them as CSV / JSONL or as one run file (storage/
// run-file.ts, optionally with the latest checkpoint) and imports such a file as a new run; and
// several other runs (or seeds of the committed Aha reference) can be overlaid on the Train charts
// at once, each with a legend text of its own, while the live run keeps drawing on top. The charts'
// x axis is the step or the wall-clock time (minutes since each run's first step).
import {
  GrpoStorage,
  type ParsedRunFile,
  type RunHistorySummary,
  type RunImportResult,
} from '../../storage/index';
import { parseRunFile } from '../../storage/run-file';
import { nestMetricsRow, type FlatMetricsRow, type MetricsRow } from '../../core/metrics-row';
import { customRewardCode, rewardIdsProblem } from '../../rewards/reward-id';
import type { ConsentOrigin } from '../consent';
import { distinctTags, relativeMinutes, type OverlaySource } from '../lib/overlay';

/** Another run's metrics drawn dashed behind the live ones. */
export interface Overlay {
  /** A stored run's id, or 'aha:<seed>'. */
  id: string;
  /** What the legends call it (the full name: a legend key's title). */
  name: string;
  /** A shorter name for each chart's legend keys (default: distinct tags of the names). */
  tag?: string;
  source: 'run' | 'aha';
  rows: MetricsRow[];
  /** When each row's step ended (ms since epoch), aligned with rows; null where unknown. */
  times: Array<number | null>;
  /** When the run was created: the legend's tiebreak between runs of the same name. */
  createdAt?: number;
}

/** The charts' x axis: the step, or wall-clock minutes since the run's first step. */
export type XAxis = 'step' | 'wall';

/** Most runs overlaid at once (each has a dash pattern and a legend key on every chart). */
export const MAX_OVERLAYS = 6;

const msg = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class Runs {
  readonly #open: () => Promise<GrpoStorage>;
  #storage: Promise<GrpoStorage> | null = null;

  /** Writes the worker reported so far: the Runs panel lists again when it changes. */
  saved = $state(0);
  list: RunHistorySummary[] = $state.raw([]);
  listError: string | null = $state(null);
  /** The runs drawn behind the live one, in the order they were added. */
  overlays: Overlay[] = $state.raw([]);
  xAxis: XAxis = $state('step');
  /** The live run's step times from storage (the wall-clock axis reads them), by step. */
  liveTimes: { runId: string; times: Record<number, number> } | null = $state.raw(null);

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
    this.clearOverlay(id);
    await this.refresh();
  }

  /** Sets a stored run's notes (the worker never writes them: no race with its writes' rows,
   * which keep the stored row's other fields). */
  async setNotes(id: string, notes: string): Promise<void> {
    await (await this.#db()).setRunNotes(id, notes);
    await this.refresh();
  }

  /** A renamed run's overlay takes the new name (the rename itself goes through the worker). */
  noteRenamed(id: string, name: string): void {
    if (this.overlays.some((o) => o.id === id))
      this.overlays = this.overlays.map((o) => (o.id === id ? { ...o, name } : o));
  }

  isOverlaid(id: string): boolean {
    return this.overlays.some((o) => o.id === id);
  }

  #add(overlay: Overlay): void {
    const others = this.overlays.filter((o) => o.id !== overlay.id);
    if (others.length >= MAX_OVERLAYS)
      throw new Error(`At most ${MAX_OVERLAYS} runs are overlaid at once: remove one first.`);
    this.overlays = [...others, overlay];
  }

  /** Draws a stored run behind the live one (with the others already overlaid). */
  async overlayRun(id: string): Promise<void> {
    const history = await (await this.#db()).getRunHistory(id);
    if (!history) throw new Error('That run is no longer stored (deleted in another tab?).');
    this.#add({
      id,
      name: history.name,
      source: 'run',
      rows: history.rows.map(nestMetricsRow),
      times: history.times,
      createdAt: history.createdAt,
    });
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
    this.#add({
      id: `aha:${seed}`,
      name: `Aha reference, seed ${seed}`,
      tag: `Aha seed ${seed}`,
      source: 'aha',
      rows,
      // The reference records no times: it draws on the step axis only.
      times: rows.map(() => null),
    });
  }

  /** Removes one overlay, or every overlay without an id. */
  clearOverlay(id?: string): void {
    this.overlays = id === undefined ? [] : this.overlays.filter((o) => o.id !== id);
  }

  /**
   * The legend texts of the live run and each overlay, all different (lib/overlay.ts
   * distinctTags): [live, ...overlays]. An overlay's own tag (the Aha seed's) is kept.
   */
  tags(liveName: string | null): string[] {
    const live = { name: liveName ?? 'this run', when: null };
    const tags = distinctTags([
      live,
      ...this.overlays.map((o) => ({ name: o.tag ?? o.name, when: o.createdAt ?? null })),
    ]);
    return tags;
  }

  /** What the charts draw of the overlays, on the chosen x axis. */
  sources(liveName: string | null): OverlaySource[] {
    const tags = this.tags(liveName);
    return this.overlays.map((o, i) => ({
      name: o.name,
      tag: tags[i + 1],
      rows: o.rows,
      ...(this.xAxis === 'wall' ? { xs: relativeMinutes(o.times) } : {}),
    }));
  }

  /** The live run's points of one metric on the chosen x axis: on the wall-clock axis, the steps
   * whose time storage has (a step whose write failed waits for the next write). */
  livePoints(
    runId: string | null,
    history: readonly MetricsRow[],
    key: string,
  ): Array<{ x: number; y: number }> {
    if (this.xAxis === 'step') return history.map((r) => ({ x: r.step, y: r.metrics[key] ?? NaN }));
    const times: Record<number, number> =
      this.liveTimes?.runId === runId ? this.liveTimes.times : {};
    const xs = relativeMinutes(history.map((r) => times[r.step] ?? null));
    return history.flatMap((r, i) => {
      const x = xs[i];
      return x === null ? [] : [{ x, y: r.metrics[key] ?? NaN }];
    });
  }

  /** Reads the live run's step times from storage (for the wall-clock axis). */
  async loadLiveTimes(runId: string | null): Promise<void> {
    if (!runId) {
      this.liveTimes = null;
      return;
    }
    const history = await (await this.#db()).getRunHistory(runId);
    const times: Record<number, number> = {};
    history?.rows.forEach((r, i) => {
      const t = history.times[i];
      if (t !== null) times[r.step] = t;
    });
    this.liveTimes = { runId, times };
  }

  /** A stored run as one file (storage/run-file.ts). */
  async exportFile(
    id: string,
    withCheckpoint: boolean,
  ): Promise<{ blob: Blob; fileName: string; checkpointStep: number | null }> {
    const file = await (await this.#db()).exportRunFile(id, withCheckpoint);
    return {
      blob: new Blob([file.bytes as Uint8Array<ArrayBuffer>], {
        type: file.checkpointStep === null ? 'application/json' : 'application/octet-stream',
      }),
      fileName: file.fileName,
      checkpointStep: file.checkpointStep,
    };
  }

  /** Validates a run file without storing anything (the page asks for consent from this). */
  async parseFile(file: Blob & { name?: string }): Promise<ParsedRunFile> {
    return parseRunFile(new Uint8Array(await file.arrayBuffer()), file.name || 'run file');
  }

  /**
   * Imports a run file as a checkpoint import does (stores/checkpoints.svelte.ts import): the file
   * is validated on the page first; a checkpoint in it must have valid reward ids, and its custom
   * reward code (the code its restore would run) is shown for consent through `askConsent` before
   * anything is stored. Declining still imports the data (weights are data; the answer is
   * remembered for the session, so restoring it leaves the code out without asking again). A run
   * file without a checkpoint carries nothing that can run, so it asks nothing.
   */
  async importWithConsent(
    file: Blob & { name?: string },
    askConsent: (
      origin: ConsentOrigin,
      subject: string,
      code: Record<string, string>,
    ) => Promise<boolean>,
  ): Promise<{ result: RunImportResult; allowed: boolean }> {
    const name = file.name || 'run file';
    const parsed = await this.parseFile(file);
    let allowed = true;
    const checkpoint = parsed.checkpoint;
    if (checkpoint) {
      const ids = rewardIdsProblem(checkpoint.manifest.config);
      if (ids) throw new Error(`${name}: ${ids.message}`);
      allowed = await askConsent(
        'import',
        `The run file '${name}'`,
        customRewardCode(checkpoint.manifest.config),
      );
    }
    return { result: await this.importFile(file), allowed };
  }

  /** Imports a run file as a new run (validated again, then stored; nothing on a rejection). */
  async importFile(file: Blob & { name?: string }): Promise<RunImportResult> {
    const result = await (
      await this.#db()
    ).importRunFile(new Uint8Array(await file.arrayBuffer()), {
      fileName: file.name || undefined,
    });
    await this.refresh();
    return result;
  }
}

/** The page's runs, on the browser's IndexedDB. Orphaned checkpoint chunks are the worker's to
 * collect (it opens the same database), so the page's open only reads and writes runs. */
export const runs = new Runs(() => GrpoStorage.open({ collectOrphansOnOpen: false }));
