// Unreadable rows on fake-indexeddb: a version-1 database holding malformed rows (a NaN step, a
// null row, rows that are not objects, a row without a step, a history that is not a list, a
// checkpoint without a run id or with a NaN step) upgrades to the current version instead of
// aborting on every open; every readable run keeps its rows and every checkpoint its bytes, and
// the notices store lists exactly the rows left out, with why, until dismissed. A database already
// at version 2 gains the empty store. At the current version, a run row with a non-string id and
// metrics rows without a readable step are left out of listings and histories and reported once.
// The trainer worker's storageNotices() / dismissStorageNotices() read and dismiss the report.
import type { FlatMetricsRow } from '../../src/core/metrics-row';
import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it } from 'vitest';
import { parameterSpecs, type LlamaConfig } from '../../src/core/model-config';
import {
  DB_VERSION,
  GrpoStorage,
  type CheckpointPayload,
  type GrpoDatabase,
  type StorageOptions,
} from '../../src/storage';
import { createTrainerApi } from '../../src/worker/trainer-api';

const CONFIG: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 8,
  intermediateSize: 12,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 4,
  vocabSize: 11,
  maxPositions: 32,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  attentionBias: false,
  bosTokenId: null,
  eosTokenIds: [0],
};

/** Weights only, each value distinct per tensor and seed, and `rows` rows of history. */
function payload(runId: string, step: number, rows: number, seed = 0): CheckpointPayload {
  return {
    runId,
    runName: `run ${runId}`,
    step,
    optimizerStep: step,
    tensors: parameterSpecs(CONFIG).map((s, k) => ({
      name: s.name,
      shape: s.shape.slice(),
      data: Float32Array.from(
        { length: s.shape.reduce((a, b) => a * b, 1) },
        (_, i) => i / 7 + k + seed,
      ),
    })),
    rng: { sampler: [1, 2, 3, step] },
    config: { learningRate: 1e-5, numIterations: 1 },
    modelConfig: CONFIG,
    modelIdentity: { name: 'tiny', sha256: 'ab'.repeat(32) },
    referenceIdentity: null,
    tokenizerIdentity: null,
    metricsSoFar: Array.from({ length: rows }, (_, i) => ({ step: i + 1, reward: (i + 1) / 4 })),
  };
}

const AT = 1_700_000_000_000;
let n = 0;
const opened: GrpoStorage[] = [];
async function open(factory: IDBFactory, name: string, extra: StorageOptions = {}) {
  const s = await GrpoStorage.open({
    indexedDB: factory,
    name,
    storageManager: null,
    now: () => AT,
    ...extra,
  });
  opened.push(s);
  return s;
}

afterEach(() => {
  for (const s of opened.splice(0)) s.close();
});

/** Every record of the checkpoint stores, chunk bytes as plain arrays: equal means byte-identical. */
async function checkpointStores(db: GrpoDatabase) {
  return {
    checkpoints: await db.getAll('checkpoints'),
    checkpointDetails: await db.getAll('checkpointDetails'),
    chunks: (await db.getAll('chunks')).map((c) => ({
      ...c,
      bytes: Array.from(new Uint8Array(c.bytes)),
    })),
  };
}

const UPGRADE = 'upgrade to version 2';

describe('upgrading a version-1 database with unreadable rows', () => {
  it('keeps every readable run and checkpoint and reports exactly the rows it skipped', async () => {
    const factory = new IDBFactory();
    const name = `notices-upgrade-${++n}`;
    const v1 = await open(factory, name, { version: 1 });
    expect(v1.db.version).toBe(1);

    // Readable runs: their histories are copied as the upgrade always did.
    const good = payload('good', 3, 4, 1); // row 4 is past the checkpoint: left out, not reported
    await v1.saveCheckpoint(payload('good', 1, 1, 2));
    await v1.saveCheckpoint(good);
    await v1.saveCheckpoint(payload('imported', 2, 2, 3));
    await v1.putMetrics('imported', [{ step: 1, reward: 9 }]); // already has rows: kept as is

    // A run whose latest checkpoint's history mixes readable and unreadable rows.
    const mixed = await v1.saveCheckpoint(payload('mixed', 5, 0, 4));
    const mixedRows: unknown[] = [
      { step: 1, reward: 0.1 },
      { step: NaN, reward: 9 },
      null,
      'not a row',
      42,
      { reward: 3 },
      { step: '2', reward: 1 },
      { step: 2, reward: NaN, loss: 1 }, // a NaN metric is a real value (a diverged loss): kept
      [1, 2],
      { step: Infinity, reward: 4 },
      { step: 3, reward: 0.3 },
    ];
    const mixedDetail = (await v1.db.get('checkpointDetails', mixed.id))!;
    await v1.db.put('checkpointDetails', {
      ...mixedDetail,
      metricsSoFar: mixedRows as FlatMetricsRow[],
    });

    // A run whose checkpoint's history is not a list.
    const notList = await v1.saveCheckpoint(payload('not-a-list', 2, 0, 5));
    const notListDetail = (await v1.db.get('checkpointDetails', notList.id))!;
    await v1.db.put('checkpointDetails', {
      ...notListDetail,
      metricsSoFar: { step: 1, reward: 1 } as unknown as FlatMetricsRow[],
    });

    // Checkpoint rows the copy cannot place: no run id, and a NaN step.
    const base = (await v1.db.get('checkpoints', mixed.id))!;
    const { runId: _, ...noRun } = { ...base, id: 'no-run' };
    await v1.db.put('checkpoints', noRun as unknown as typeof base);
    await v1.db.put('checkpoints', { ...base, id: 'nan-step', runId: 'nan-ckpt', step: NaN });

    const before = await checkpointStores(v1.db);
    const goodId = before.checkpoints.find((c) => c.runId === 'good' && c.step === 3)!.id;
    v1.close();

    // Today's code aborted this open (a null row threw in the copy): it must succeed.
    const s = await open(factory, name);
    expect(s.db.version).toBe(DB_VERSION);
    expect(await checkpointStores(s.db)).toEqual(before);
    const loaded = await s.loadCheckpoint(goodId);
    expect(loaded.tensors.map((t) => Array.from(t.data))).toEqual(
      good.tensors.map((t) => Array.from(t.data)),
    );

    expect(await s.getMetrics('good')).toEqual([
      { step: 1, reward: 0.25 },
      { step: 2, reward: 0.5 },
      { step: 3, reward: 0.75 },
    ]);
    expect(await s.getMetrics('imported')).toEqual([{ step: 1, reward: 9 }]);
    expect(await s.getMetrics('mixed')).toEqual([
      { step: 1, reward: 0.1 },
      { step: 2, reward: NaN, loss: 1 },
      { step: 3, reward: 0.3 },
    ]);
    expect(await s.getMetrics('not-a-list')).toEqual([]);
    expect(await s.getMetrics('nan-ckpt')).toEqual([]);

    const history = `checkpoint '${mixed.id}' metricsSoFar`;
    const expected = [
      ['(unknown)', "checkpoint 'no-run'", 'its run id is missing: no history copied from it'],
      ['mixed', `${history}[1]`, 'its step is NaN'],
      ['mixed', `${history}[2]`, 'the row is null, not an object'],
      ['mixed', `${history}[3]`, 'the row is "not a row", not an object'],
      ['mixed', `${history}[4]`, 'the row is 42, not an object'],
      ['mixed', `${history}[5]`, 'its step is missing, not a number'],
      ['mixed', `${history}[6]`, 'its step is "2", not a number'],
      ['mixed', `${history}[8]`, 'the row is a list of 2, not an object'],
      ['mixed', `${history}[9]`, 'its step is Infinity'],
      ['nan-ckpt', "checkpoint 'nan-step'", 'its step is NaN: no history copied from it'],
      [
        'not-a-list',
        `checkpoint '${notList.id}' metricsSoFar`,
        'it is an object, not a list of rows: no history copied',
      ],
    ].map(([runId, row, problem]) => ({
      key: `${runId}\n${row}`,
      during: UPGRADE,
      runId,
      row,
      problem,
      at: AT,
    }));
    expect(await s.storageNotices()).toEqual(expected);

    // The report is durable until dismissed, and a dismissal is kept.
    s.close();
    const again = await open(factory, name, { now: () => AT + 1 });
    expect(await again.storageNotices()).toEqual(expected);
    expect(await again.dismissStorageNotices([expected[0].key, 'no such key'])).toBe(1);
    expect(await again.storageNotices()).toEqual(expected.slice(1));
    expect(await again.dismissStorageNotices()).toBe(expected.length - 1);
    expect(await again.dismissStorageNotices()).toBe(0);
    again.close();
    const third = await open(factory, name);
    expect(await third.storageNotices()).toEqual([]);
    expect(await third.getMetrics('mixed')).toHaveLength(3);
  });

  it('a version-2 database gains an empty notices store and keeps its runs', async () => {
    const factory = new IDBFactory();
    const name = `notices-v2-${++n}`;
    const v2 = await open(factory, name, { version: 2 });
    await v2.recordRunMetrics({ id: 'r', name: 'R', config: {} }, [{ step: 1, reward: 0.5 }]);
    const record = await v2.saveCheckpoint(payload('r', 1, 1));
    const before = await checkpointStores(v2.db);
    v2.close();

    const s = await open(factory, name);
    expect(s.db.version).toBe(DB_VERSION);
    expect(DB_VERSION).toBe(3);
    expect(s.db.objectStoreNames.contains('notices')).toBe(true);
    expect(await s.storageNotices()).toEqual([]);
    expect(await checkpointStores(s.db)).toEqual(before);
    expect((await s.getRunHistory('r'))?.rows).toEqual([{ step: 1, reward: 0.5 }]);
    expect((await s.loadCheckpoint(record.id)).step).toBe(1);
  });
});

describe('unreadable rows at the current version', () => {
  it('lists and reads every other run, and reports each unreadable row once', async () => {
    const s = await open(new IDBFactory(), `notices-read-${++n}`);
    await s.recordRunMetrics({ id: 'r1', name: 'One', config: {} }, [
      { step: 1, reward: 0.25 },
      { step: 4, reward: 1 },
    ]);
    await s.recordRunMetrics({ id: 'r2', name: 'Two', config: {} }, [{ step: 1, reward: 0 }]);
    // Rows no version of the app writes (a foreign writer, a damaged profile).
    await s.db.put('metrics', { runId: 'r1', step: 2, values: null as never });
    await s.db.put('metrics', { runId: 'r1', step: 3, values: { step: NaN } as never });
    const run = (await s.getRun('r2'))!;
    await s.db.put('runs', { ...run, id: 7 as unknown as string, name: 'numeric id' });

    // Today's listing threw for every run on the numeric id (String.prototype.startsWith).
    const listed = await s.listRunHistories();
    // `steps` counts stored rows (keys only, so the listing stays cheap), readable or not.
    expect(listed.map((r) => [r.id, r.steps, r.lastStep]).sort()).toEqual([
      ['r1', 4, 4],
      ['r2', 1, 1],
    ]);
    expect((await s.getRunHistory('r1'))?.rows).toEqual([
      { step: 1, reward: 0.25 },
      { step: 4, reward: 1 },
    ]);
    expect(await s.getMetrics('r1')).toEqual([
      { step: 1, reward: 0.25 },
      { step: 4, reward: 1 },
    ]);

    const expected = [
      ['listing runs', '(unknown)', 'run row 7', 'its id is 7, not a string'],
      ['reading a run history', 'r1', 'metrics row at step 2', 'the row is null, not an object'],
      ['reading a run history', 'r1', 'metrics row at step 3', 'its step is NaN'],
    ].map(([during, runId, row, problem]) => ({
      key: `${runId}\n${row}`,
      during,
      runId,
      row,
      problem,
      at: AT,
    }));
    expect(await s.storageNotices()).toEqual(expected);

    // Read again (getMetrics finds the same rows): no duplicates; once dismissed, not re-added.
    await s.listRunHistories();
    await s.getRunHistory('r1');
    expect(await s.storageNotices()).toEqual(expected);
    expect(await s.dismissStorageNotices()).toBe(3);
    await s.listRunHistories();
    expect((await s.getRunHistory('r1'))?.rows).toHaveLength(2);
    expect(await s.storageNotices()).toEqual([]);
  });
});

describe('the trainer worker', () => {
  it('returns the stored notices and dismisses them', async () => {
    const factory = new IDBFactory();
    const name = `notices-worker-${++n}`;
    const v1 = await open(factory, name, { version: 1 });
    const record = await v1.saveCheckpoint(payload('w', 2, 0));
    const detail = (await v1.db.get('checkpointDetails', record.id))!;
    await v1.db.put('checkpointDetails', {
      ...detail,
      metricsSoFar: [{ step: 1, reward: 0.5 }, null] as unknown as FlatMetricsRow[],
    });
    v1.close();

    const api = createTrainerApi({ openStorage: () => open(factory, name) });
    const row = `checkpoint '${record.id}' metricsSoFar[1]`;
    expect(await api.storageNotices()).toEqual([
      {
        key: `w\n${row}`,
        during: UPGRADE,
        runId: 'w',
        row,
        problem: 'the row is null, not an object',
        at: AT,
      },
    ]);
    expect(await api.dismissStorageNotices()).toBe(1);
    expect(await api.storageNotices()).toEqual([]);
  });
});
