// Run histories on fake-indexeddb: the schema upgrade 1 → 2 (existing checkpoints kept bit for bit,
// each checkpointed run's history copied from its latest checkpoint's metricsSoFar), recording a
// run's rows step by step (created on the first write, the name a rename gave kept, rows past the
// written step dropped after a restore), the listing's step counts, and a quota failure that keeps
// what was stored and says what to do.
import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parameterSpecs, type LlamaConfig } from '../../src/core/model-config';
import {
  DB_VERSION,
  GrpoStorage,
  RunHistoryQuotaError,
  type CheckpointPayload,
  type StorageOptions,
} from '../../src/storage';

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

/** Weights only, value = index / 7 + seed (exact in f32 for these sizes? no: compared bitwise). */
function payload(runId: string, step: number, rows: number): CheckpointPayload {
  return {
    runId,
    runName: `run ${runId}`,
    step,
    optimizerStep: step,
    tensors: parameterSpecs(CONFIG).map((s, k) => ({
      name: s.name,
      shape: s.shape.slice(),
      data: Float32Array.from({ length: s.shape.reduce((a, b) => a * b, 1) }, (_, i) => i / 7 + k),
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

let n = 0;
const opened: GrpoStorage[] = [];
async function open(factory: IDBFactory, name: string, extra: StorageOptions = {}) {
  const s = await GrpoStorage.open({ indexedDB: factory, name, storageManager: null, ...extra });
  opened.push(s);
  return s;
}

afterEach(() => {
  vi.restoreAllMocks();
  for (const s of opened.splice(0)) s.close();
});

describe('schema upgrade 1 → 2', () => {
  it('keeps every checkpoint and copies each run’s latest metricsSoFar into its history', async () => {
    const factory = new IDBFactory();
    const name = `upgrade-${++n}`;
    const v1 = await open(factory, name, { version: 1 });
    expect(v1.db.version).toBe(1);
    const early = payload('old', 2, 2);
    await v1.saveCheckpoint(early);
    await v1.saveCheckpoint(payload('old', 4, 5)); // a row past the checkpoint's step: left out
    await v1.saveCheckpoint(payload('imported', 3, 3));
    // An imported run already had its rows in the metrics store: they stay as they are.
    await v1.putMetrics('imported', [{ step: 1, reward: 9 }]);
    const before = await v1.listCheckpoints();
    v1.close();

    const v2 = await open(factory, name);
    expect(v2.db.version).toBe(DB_VERSION); // 1 → 2 → 3 (3 adds the notices store)
    expect(await v2.storageNotices()).toEqual([]); // every row was readable
    expect(await v2.listCheckpoints()).toEqual(before);
    const loaded = await v2.loadCheckpoint(before.find((c) => c.step === 2)!.id);
    expect(loaded.tensors.map((t) => Array.from(t.data))).toEqual(
      early.tensors.map((t) => Array.from(t.data)),
    );
    expect(await v2.getMetrics('old')).toEqual([
      { step: 1, reward: 0.25 },
      { step: 2, reward: 0.5 },
      { step: 3, reward: 0.75 },
      { step: 4, reward: 1 },
    ]);
    expect(await v2.getMetrics('imported')).toEqual([{ step: 1, reward: 9 }]);
    const listed = await v2.listRunHistories();
    expect(
      listed.map((r) => [r.id, r.name, r.steps, r.lastStep, r.checkpointCount]).sort(),
    ).toEqual([
      ['imported', 'run imported', 1, 1, 1],
      ['old', 'run old', 4, 4, 2],
    ]);
  });

  it('a fresh database opens at the current version with no rows to copy', async () => {
    const s = await open(new IDBFactory(), `fresh-${++n}`);
    expect(s.db.version).toBe(DB_VERSION);
    expect(await s.listRunHistories()).toEqual([]);
  });
});

describe('recording a run', () => {
  it('creates the run on the first write, appends per step and lists the steps', async () => {
    let t = 1000;
    const s = await open(new IDBFactory(), `rec-${++n}`, { now: () => t });
    const meta = { id: 'r1', name: '  Countdown  ', config: { numIterations: 2 } };
    const first = await s.recordRunMetrics(meta, [{ step: 1, reward: 0.5, loss: 0.1 }]);
    expect(first).toEqual({
      id: 'r1',
      name: 'Countdown',
      status: 'running',
      config: { numIterations: 2 },
      modelConfig: null,
      modelIdentity: null,
      createdAt: 1000,
      updatedAt: 1000,
    });
    t = 1001;
    await s.renameRun('r1', 'Renamed');
    t = 1002;
    const second = await s.recordRunMetrics({ ...meta, name: 'ignored' }, [
      { step: 2, reward: 0.75, kl: 0.01 },
    ]);
    expect([second.name, second.createdAt, second.updatedAt]).toEqual(['Renamed', 1000, 1002]);
    t = 1003;
    await s.recordRunMetrics({ id: 'r2', name: 'other', config: {} }, [{ step: 1, reward: 0 }]);

    expect(await s.getRunHistory('r1')).toEqual({
      ...second,
      rows: [
        { step: 1, reward: 0.5, loss: 0.1 },
        { step: 2, reward: 0.75, kl: 0.01 },
      ],
      // Written without step times (storage/run-history.ts): unknown, not invented.
      times: [null, null],
    });
    expect(await s.getRunHistory('nope')).toBeUndefined();
    expect((await s.listRunHistories()).map((r) => [r.id, r.steps, r.lastStep])).toEqual([
      ['r2', 1, 1],
      ['r1', 2, 2],
    ]);
  });

  it('drops rows past the written step: a restored run trained on has one history', async () => {
    const s = await open(new IDBFactory(), `restore-${++n}`);
    const meta = { id: 'r', name: 'r', config: {} };
    await s.recordRunMetrics(
      meta,
      [1, 2, 3, 4, 5].map((step) => ({ step, reward: step })),
    );
    // Restored at step 2, then step 3 trained again: the old 3, 4 and 5 are gone.
    await s.recordRunMetrics(meta, [
      { step: 3, reward: 30 },
      { step: 1, reward: 1 },
      { step: 2, reward: 2 },
    ]);
    expect(await s.getMetrics('r')).toEqual([
      { step: 1, reward: 1 },
      { step: 2, reward: 2 },
      { step: 3, reward: 30 },
    ]);
  });

  it('carries stages when a multi-stage run gives them', async () => {
    const s = await open(new IDBFactory(), `stages-${++n}`);
    const stages = [
      { name: 'cold-start', kind: 'sft', firstStep: 1 },
      { name: 'rl', kind: 'grpo', firstStep: 11 },
    ];
    const run = await s.recordRunMetrics({ id: 'r', name: 'recipe', config: {}, stages }, []);
    expect(run.stages).toEqual(stages);
    expect((await s.getRunHistory('r'))?.rows).toEqual([]);
  });

  it('a quota failure keeps the stored rows and the run row, and says what to do', async () => {
    let t = 50;
    const s = await open(new IDBFactory(), `quota-${++n}`, { now: () => t });
    const meta = { id: 'r', name: 'Countdown', config: {} };
    await s.recordRunMetrics(meta, [{ step: 1, reward: 1 }]);
    t = 51;
    const original = IDBObjectStore.prototype.put;
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(function (
      this: IDBObjectStore,
      ...args: Parameters<IDBObjectStore['put']>
    ) {
      if (this.name === 'metrics') throw new DOMException('quota', 'QuotaExceededError');
      return original.apply(this, args);
    });
    const err = await s
      .recordRunMetrics(meta, [
        { step: 2, reward: 2 },
        { step: 3, reward: 3 },
      ])
      .catch((e: unknown) => e);
    vi.restoreAllMocks();
    expect(err).toBeInstanceOf(RunHistoryQuotaError);
    expect((err as Error).message).toBe(
      "The metrics of run 'Countdown' (steps 2–3) were not stored: the browser's storage quota " +
        'is exhausted. Nothing is lost yet: this tab keeps them on the charts and stores them ' +
        'with the next step once there is space. Free space by deleting checkpoints or runs in ' +
        "the Checkpoints view, or download the run's CSV now.",
    );
    const kept = await s.getRunHistory('r');
    expect([kept?.updatedAt, kept?.rows]).toEqual([50, [{ step: 1, reward: 1 }]]);
    // Space again: the missed rows go in with the next write.
    await s.recordRunMetrics(
      meta,
      [2, 3, 4].map((step) => ({ step, reward: step })),
    );
    expect((await s.getMetrics('r')).map((r) => r.step)).toEqual([1, 2, 3, 4]);
  });
});
