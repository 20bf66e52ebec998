// A run as one file (src/storage/run-file.ts) on fake-indexeddb, between two databases standing for
// two browser profiles: the exported run imports as a new run with the same name, notes, config,
// every metric row (NaN included) and each row's step time; with its latest checkpoint, the
// checkpoint imports too, bit for bit; each kind of bad file is refused with a message naming the
// field, and a refused file writes nothing. Also: run notes, a stored run without notes (written
// before runs had them) still lists and exports, and a new run whose name is taken gets the date.
import 'fake-indexeddb/auto';
import { describe, expect, it } from 'vitest';
import type { FlatMetricsRow } from '../../src/core/metrics-row';
import type { CheckpointPayload, GrpoStorage } from '../../src/storage';
import { parseRunFile, RUN_FILE_MAGIC } from '../../src/storage/run-file';
import {
  storageOpener,
  TINY_CONFIG as CONFIG,
  TINY_IDENTITY,
  tinyCheckpoint,
} from '../support/run-storage';

const profile = storageOpener('run-file');

const META = {
  id: 'r1',
  name: 'countdown · tiny · lr=3e-5',
  config: { task: 'countdown', learningRate: 3e-5, customRewards: {} },
  modelConfig: CONFIG,
  modelIdentity: TINY_IDENTITY,
};
const ROWS: FlatMetricsRow[] = [
  { step: 1, reward: 0.25, loss: 0.5, kl: NaN },
  { step: 2, reward: 0.5, loss: -0.25, 'rewards/format/mean': 1 },
];

/** A stored run of two steps at known times, with notes. */
async function storedRun(s: GrpoStorage) {
  await s.recordRunMetrics(
    META,
    ROWS,
    new Map([
      [1, 1_700_000_000_000],
      [2, 1_700_000_090_000],
    ]),
  );
  await s.setRunNotes('r1', '  first try: lr too high?  ');
}

/** Step `step`'s checkpoint of the stored run: tensor k's element i is k + i/8. */
function checkpointPayload(step: number, config: Record<string, unknown>): CheckpointPayload {
  return tinyCheckpoint(step, config, (k, i) => k + i / 8, {
    runName: META.name,
    rng: { sampler: [1, 2, 3, step] },
    metricsSoFar: ROWS.slice(0, step),
    metrics: ROWS[step - 1],
  });
}

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const json = (doc: unknown) => new TextEncoder().encode(JSON.stringify(doc));

describe('a run file', () => {
  it('carries a run to another profile: name, notes, config, every row and its time', async () => {
    const a = await profile();
    await storedRun(a);
    const file = await a.exportRunFile('r1');
    expect(file.fileName).toBe('countdown_tiny_lr_3e-5.grporun.json');
    expect(file.checkpointStep).toBeNull();
    expect(JSON.parse(text(file.bytes)).rows[0]).toEqual({
      step: 1,
      reward: 0.25,
      loss: 0.5,
      kl: null,
    });

    const b = await profile();
    const result = await b.importRunFile(file.bytes, { fileName: file.fileName });
    expect(result.rows).toBe(2);
    expect(result.run.id).not.toBe('r1');
    const imported = (await b.getRunHistory(result.run.id))!;
    const original = (await a.getRunHistory('r1'))!;
    expect(imported.rows).toEqual(original.rows); // NaN stays NaN
    expect(imported.times).toEqual([1_700_000_000_000, 1_700_000_090_000]);
    expect([imported.name, imported.notes, imported.config, imported.modelIdentity]).toEqual([
      META.name,
      'first try: lr too high?',
      META.config,
      META.modelIdentity,
    ]);
    expect(imported.status).toBe('paused'); // it was training there, not here
    expect((await b.listRunHistories()).map((r) => [r.name, r.steps])).toEqual([[META.name, 2]]);

    // Imported twice: a second run, named apart.
    const again = await b.importRunFile(file.bytes);
    expect(again.run.name).toBe(`${META.name} (imported)`);
  });

  it('carries the latest checkpoint, which imports bit for bit under the new run', async () => {
    const a = await profile();
    await storedRun(a);
    await a.saveCheckpoint(checkpointPayload(1, META.config));
    await a.saveCheckpoint(checkpointPayload(2, { ...META.config, learningRate: 1e-5 }));
    const file = await a.exportRunFile('r1', true);
    expect(file.checkpointStep).toBe(2);
    expect(file.fileName).toBe('countdown_tiny_lr_3e-5.grporun');
    expect(text(file.bytes.subarray(0, 8))).toBe(RUN_FILE_MAGIC);
    const parsed = await parseRunFile(file.bytes, file.fileName);
    // What the page asks consent about: the config the checkpoint restores with.
    expect(parsed.checkpoint?.manifest.config.learningRate).toBe(1e-5);

    const b = await profile();
    const result = await b.importRunFile(file.bytes);
    expect(result.checkpointStep).toBe(2);
    const [ckpt] = await b.listCheckpoints(result.run.id);
    const loaded = await b.loadCheckpoint(ckpt.id);
    const source = (await a.loadLatestCheckpoint('r1'))!;
    expect(loaded.tensors.map((t) => [t.name, [...t.data]])).toEqual(
      source.tensors.map((t) => [t.name, [...t.data]]),
    );
    expect((await b.getRunHistory(result.run.id))!.rows).toHaveLength(2);
  });

  it('refuses a bad file with the field at fault, and writes nothing', async () => {
    const a = await profile();
    await storedRun(a);
    const good = JSON.parse(text((await a.exportRunFile('r1')).bytes));
    const cases: Array<[unknown, string]> = [
      [{ ...good, format: 'other' }, "its format is not 'grpo-playground-run'"],
      [{ ...good, schemaVersion: 2 }, 'newer GRPO Playground'],
      [{ ...good, run: { ...good.run, name: '' } }, 'run.name: a run name must be 1 to 200'],
      [{ ...good, run: { ...good.run, notes: 'x'.repeat(10_001) } }, 'run.notes: run notes'],
      [{ ...good, run: { ...good.run, status: 'done' } }, 'run.status must be one of'],
      [{ ...good, run: { ...good.run, config: [] } }, 'run.config must be an object'],
      [
        { ...good, run: { ...good.run, modelConfig: { ...CONFIG, numLayers: 0 } } },
        'run.modelConfig.numLayers must be a positive integer',
      ],
      [{ ...good, rows: [{ step: 1, '=HYPERLINK(1)': 2 }] }, 'rows[0]: metric name'],
      [{ ...good, rows: [...good.rows].reverse() }, 'rows[1].step 1 does not follow'],
      [{ ...good, rows: [{ step: 1, reward: '1' }], times: [null] }, 'rows[0].reward must be'],
      [
        {
          ...good,
          rows: [
            {
              step: 1,
              ...Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [`m${i}`, 0])),
            },
          ],
          times: [null],
        },
        'rows[0] 1025 is more than the limit of 1024 metrics per row',
      ],
      [{ ...good, times: [1] }, 'times must be a list of 2 entries'],
      [{ ...good, times: [1, -5] }, 'times[1] must be a time'],
      [
        { ...good, checkpoint: { step: 1, bytes: 10 } },
        'the file is plain JSON with no checkpoint',
      ],
    ];
    const b = await profile();
    for (const [doc, message] of cases) {
      await expect(b.importRunFile(json(doc), { fileName: 'x.grporun.json' })).rejects.toThrow(
        message,
      );
    }
    await expect(b.importRunFile(new TextEncoder().encode('not json'))).rejects.toThrow(
      'neither the',
    );

    // A container whose checkpoint was damaged in transit: the checkpoint's own checks name it.
    await a.saveCheckpoint(checkpointPayload(2, META.config));
    const withCkpt = (await a.exportRunFile('r1', true)).bytes;
    const flipped = withCkpt.slice();
    flipped[flipped.length - 3] ^= 0xff;
    await expect(b.importRunFile(flipped)).rejects.toThrow(
      /its checkpoint: tensor '.*' does not match its SHA-256 checksum/,
    );
    await expect(b.importRunFile(withCkpt.subarray(0, withCkpt.length - 8))).rejects.toThrow(
      'file is truncated: the checkpoint should be',
    );
    expect(await b.listRunHistories()).toEqual([]);
    expect(await b.listCheckpoints()).toEqual([]);
  });
});

describe('run names and notes', () => {
  it('keeps notes, bounds them, and lists a run stored before runs had notes', async () => {
    const s = await profile();
    await s.recordRunMetrics({ id: 'old', name: 'Legacy run', config: {} }, [
      { step: 1, reward: 1 },
    ]);
    const [listed] = await s.listRunHistories();
    expect(listed.notes).toBeUndefined();
    const file = JSON.parse(text((await s.exportRunFile('old')).bytes));
    expect(file.run.notes).toBe('');
    expect((await s.setRunNotes('old', 'why it diverged')).notes).toBe('why it diverged');
    await expect(s.setRunNotes('old', 'x'.repeat(10_001))).rejects.toThrow('at most 10000');
  });

  it("gives a new run whose name another run has the date as a tiebreak, never another's name", async () => {
    const s = await profile(() => Date.UTC(2026, 10, 27, 19, 20));
    const meta = { id: 'a', name: 'countdown · tiny', config: {} };
    await s.recordRunMetrics(meta, [{ step: 1, reward: 0 }]);
    await s.recordRunMetrics({ ...meta, id: 'b' }, [{ step: 1, reward: 0 }]);
    await s.recordRunMetrics({ ...meta, id: 'c' }, [{ step: 1, reward: 0 }]);
    // A later write of run b keeps the name it was stored with.
    await s.recordRunMetrics({ ...meta, id: 'b' }, [{ step: 2, reward: 0 }]);
    const names = Object.fromEntries((await s.listRunHistories()).map((r) => [r.id, r.name]));
    expect(names).toEqual({
      a: 'countdown · tiny',
      b: 'countdown · tiny · 2026-11-27 19:20',
      c: 'countdown · tiny · 2026-11-27 19:20 (2)',
    });
  });

  it('keeps a step time when a restored history (no times) is written again', async () => {
    const s = await profile();
    await s.recordRunMetrics(META, ROWS.slice(0, 1), new Map([[1, 5_000]]));
    await s.recordRunMetrics(META, ROWS, new Map([[2, 9_000]]));
    expect((await s.getRunHistory('r1'))!.times).toEqual([5_000, 9_000]);
  });
});
