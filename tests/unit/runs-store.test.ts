// Run history on fake-indexeddb: the worker's writer (src/worker/run-history-writer.ts, the only
// writer) stores a run from its first trained step with the history it was adopted with, reports a
// storage-full write once (a 'history-failed' event) and its rows go in with the next write that
// succeeds; the page's runs store (src/app/stores/runs.svelte.ts) lists and overlays what was written, and
// the Aha reference overlays as its committed curves; and the charts' overlay series
// (lib/overlay.ts): dashed, faint, named after the other run, left out where it has no values.
import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GrpoStorage } from '../../src/storage';
import { Runs } from '../../src/app/stores/runs.svelte';
import { RunHistoryWriter } from '../../src/worker/run-history-writer';
import type { TrainerEvent } from '../../src/worker/protocol';
import { overlayTag, withOverlay } from '../../src/app/lib/overlay';
import { AHA_REFERENCE } from '../../src/app/aha/reference';

let n = 0;
const opened: GrpoStorage[] = [];
async function store() {
  const storage = await GrpoStorage.open({
    indexedDB: new IDBFactory(),
    name: `runs-${++n}`,
    storageManager: null,
  });
  opened.push(storage);
  const runs = new Runs(async () => storage);
  const events: TrainerEvent[] = [];
  const writer = new RunHistoryWriter(
    async () => storage,
    (e) => events.push(e),
  );
  const told = () =>
    events.flatMap((e) => (e.type === 'history-failed' ? [[e.title, e.message]] : []));
  const saved = () => events.filter((e) => e.type === 'history-saved').length;
  return { storage, runs, writer, told, saved };
}

afterEach(() => {
  vi.restoreAllMocks();
  for (const s of opened.splice(0)) s.close();
});

const row = (step: number, reward: number) => ({ step, metrics: { reward, loss: -reward } });
const META = { id: 'r1', name: 'Countdown', config: { numIterations: 1 } };

describe('run history: the worker writes, the page lists', () => {
  it('stores a run from its first step, with the history it was adopted with', async () => {
    const { storage, runs, writer, saved } = await store();
    writer.adopt(META, [row(1, 0.25), row(2, 0.5)]); // restored at step 2
    await writer.flush();
    expect(await storage.listRunHistories()).toEqual([]);
    expect(saved()).toBe(0);

    writer.record(META, row(3, 0.75));
    await writer.flush();
    expect(saved()).toBe(1);
    expect(writer.pendingSteps).toEqual([]);
    expect(await storage.getMetrics('r1')).toEqual([
      { step: 1, reward: 0.25, loss: -0.25 },
      { step: 2, reward: 0.5, loss: -0.5 },
      { step: 3, reward: 0.75, loss: -0.75 },
    ]);
    // A run row without steps (a recipe stage's checkpoint holder) is not listed.
    await storage.createRun({ id: 'empty', name: 'no steps', config: {} });
    await runs.refresh();
    expect(runs.list.map((r) => [r.id, r.name, r.steps, r.lastStep, r.config])).toEqual([
      ['r1', 'Countdown', 3, 3, { numIterations: 1 }],
    ]);

    // A new run (Reset): its own rows only.
    const next = { ...META, id: 'r2', name: 'Again' };
    writer.adopt(next, []);
    writer.record(next, row(1, 1));
    await writer.flush();
    expect(await storage.getMetrics('r2')).toEqual([{ step: 1, reward: 1, loss: -1 }]);
    expect((await storage.getMetrics('r1')).length).toBe(3);
  });

  it('a full storage is reported once, and the missed rows go in with the next good write', async () => {
    const { storage, writer, told } = await store();
    writer.record(META, row(1, 0.1));
    await writer.flush();
    const original = IDBObjectStore.prototype.put;
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(function (
      this: IDBObjectStore,
      ...args: Parameters<IDBObjectStore['put']>
    ) {
      if (this.name === 'metrics') throw new DOMException('quota', 'QuotaExceededError');
      return original.apply(this, args);
    });
    writer.record(META, row(2, 0.2));
    writer.record(META, row(3, 0.3));
    await writer.flush();
    expect(told().length).toBe(1);
    expect(told()[0][0]).toBe('Storage full: the run’s metrics were not stored');
    expect(told()[0][1]).toContain("The metrics of run 'Countdown' (steps 2–3) were not stored");
    expect(writer.pendingSteps).toEqual([2, 3]);
    expect((await storage.getMetrics('r1')).map((r) => r.step)).toEqual([1]);

    vi.restoreAllMocks();
    writer.record(META, row(4, 0.4));
    await writer.flush();
    expect(writer.pendingSteps).toEqual([]);
    expect((await storage.getMetrics('r1')).map((r) => [r.step, r.reward])).toEqual([
      [1, 0.1],
      [2, 0.2],
      [3, 0.3],
      [4, 0.4],
    ]);
    expect(told().length).toBe(1);
  });

  it('overlays several runs at once (a stored run, a seed of the Aha reference); deleting the run removes its overlay', async () => {
    const { runs, writer } = await store();
    writer.record(META, row(1, 0.5), 1_000);
    writer.record(META, row(2, 1), 61_000);
    await writer.flush();
    await runs.overlayRun('r1');
    expect(runs.overlays).toEqual([
      {
        id: 'r1',
        name: 'Countdown',
        source: 'run',
        rows: [
          { step: 1, metrics: { reward: 0.5, loss: -0.5 } },
          { step: 2, metrics: { reward: 1, loss: -1 } },
        ],
        times: [1_000, 61_000],
        createdAt: expect.any(Number),
      },
    ]);
    await expect(runs.overlayRun('gone')).rejects.toThrow('no longer stored');

    expect(await runs.ahaSeeds()).toEqual(AHA_REFERENCE.seeds.map((s) => s.seed));
    await runs.overlayAha(2);
    const seed = AHA_REFERENCE.seeds.find((s) => s.seed === 2)!;
    expect(runs.overlays.map((o) => [o.name, o.tag])).toEqual([
      ['Countdown', undefined],
      ['Aha reference, seed 2', 'Aha seed 2'],
    ]);
    const aha = runs.overlays[1];
    expect(aha.rows.map((r) => r.step)).toEqual(seed.steps);
    expect(aha.rows.map((r) => r.metrics.accuracy ?? null)).toEqual(seed.curves.accuracy);
    // The live run and both overlays, each with its own legend text: the stored run of the live
    // run's name shows its creation date (UTC) as the tiebreak.
    const tags = runs.tags('Countdown');
    expect([tags[0], tags[2]]).toEqual(['Countdown', 'Aha seed 2']);
    expect(tags[1]).toMatch(/^Count… \d\d-\d\d \d\d:\d\d$/);
    // On the wall-clock axis the stored run's rows sit at minutes since its first step.
    runs.xAxis = 'wall';
    expect(runs.sources('live').map((s) => s.xs)).toEqual([[0, 1], seed.steps.map(() => null)]);

    await runs.overlayRun('r1'); // again: stays one overlay
    expect(runs.overlays.map((o) => o.id)).toEqual(['aha:2', 'r1']);
    await runs.remove('r1');
    expect(runs.overlays.map((o) => o.id)).toEqual(['aha:2']);
    expect(runs.list).toEqual([]);
    runs.clearOverlay();
    expect(runs.overlays).toEqual([]);
  });
});

describe('chart overlay series', () => {
  const live = [
    { label: 'total', points: [{ x: 1, y: 0.5 }] },
    { label: 'format', points: [{ x: 1, y: 1 }] },
  ];
  const keys = ['reward', 'rewards/format/mean'];

  it('adds a dashed, faint series per metric the other run has, named after it', () => {
    const rows = [
      { step: 1, metrics: { reward: 0.25 } },
      { step: 2, metrics: { reward: 0.75 } },
    ];
    expect(withOverlay(live, keys, { name: 'Countdown lr 1e-4', rows })).toEqual([
      ...live,
      {
        label: 'total · Countdown lr 1e-4',
        points: [
          { x: 1, y: 0.25 },
          { x: 2, y: 0.75 },
        ],
        color: 'color-mix(in srgb, var(--series-1) 55%, transparent)',
        dashed: true,
        dash: '5 3',
        overlay: true,
      },
    ]);
    expect(withOverlay(live, keys, null)).toBe(live);
    const tagged = withOverlay(live, keys, {
      name: 'Aha reference, seed 1',
      tag: 'Aha seed 1',
      rows,
    });
    expect(tagged.map((s) => s.label)).toEqual(['total', 'format', 'total · Aha seed 1']);
  });

  it('shortens long run names', () => {
    expect(overlayTag('  a very long run name indeed ')).toBe('a very long run n…');
    expect(overlayTag('short')).toBe('short');
  });
});
