// Checkpoint storage on fake-indexeddb: bit-exact round trips, atomic saves under injected
// failures (a throwing put, a tab closed mid-save, a quota error), orphan collection on reopen,
// retention, runs/metrics/samples, and storage usage without navigator.storage.
import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { LlamaConfig } from '../../src/core/model-config';
import { parameterSpecs } from '../../src/core/model-config';
import {
  CheckpointIntegrityError,
  CheckpointValidationError,
  DB_VERSION,
  GrpoStorage,
  OPTIMIZER_EXP_AVG,
  OPTIMIZER_EXP_AVG_SQ,
  StorageQuotaError,
  retainedIds,
  type CheckpointPayload,
  type CheckpointRecord,
  type CheckpointTensor,
} from '../../src/storage';

// Tiny Llama: 680 parameters, ×3 with AdamW moments = 8160 bytes: 32 chunks of ≤ 256 bytes.
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
const CHUNK_BYTES = 256;
const TOTAL_BYTES = 3 * 680 * 4;
const CHUNKS = Math.ceil(TOTAL_BYTES / CHUNK_BYTES); // 32, the last one partial

/** Deterministic values with awkward bit patterns (NaN payloads, -0, ±Inf, subnormals). */
function tensorsFor(seed: number, withOptimizer = true): CheckpointTensor[] {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  const specs = parameterSpecs(CONFIG);
  const names = specs.map((s) => s.name);
  if (withOptimizer) {
    for (const s of specs) names.push(OPTIMIZER_EXP_AVG + s.name, OPTIMIZER_EXP_AVG_SQ + s.name);
  }
  const shapes = new Map(specs.map((s) => [s.name, s.shape]));
  return names.map((name) => {
    const shape = shapes.get(name.replace(/^optimizer\.exp_avg(_sq)?\./, ''))!;
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    const bits = new Uint32Array(data.buffer);
    for (let i = 0; i < bits.length; i++) bits[i] = next();
    bits[0] = 0x7fc01234; // NaN with a payload
    if (bits.length > 3) {
      bits[1] = 0x80000000; // -0
      bits[2] = 0x7f800000; // +Inf
      bits[3] = 0x00000001; // smallest subnormal
    }
    return { name, shape: shape.slice(), data };
  });
}

function payload(runId: string, step: number, extra: Partial<CheckpointPayload> = {}) {
  const p: CheckpointPayload = {
    runId,
    step,
    optimizerStep: step,
    tensors: tensorsFor(step + 1),
    rng: { sampler: [1, 2, 3, step], dataOrder: 'xorshift:42' },
    config: { learningRate: 1e-5, groupSize: 4, seed: 7 },
    modelConfig: CONFIG,
    modelIdentity: { name: 'tiny', sha256: 'ab'.repeat(32) },
    referenceIdentity: { name: 'tiny', sha256: 'ab'.repeat(32) },
    tokenizerIdentity: { name: 'tiny-tok', sha256: 'cd'.repeat(32) },
    metricsSoFar: [{ step, reward: step / 10, loss: 0.5 }],
    ...extra,
  };
  return p;
}

const bitsEqual = (a: Float32Array, b: Float32Array) => {
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  return x.length === y.length && x.every((v, i) => v === y[i]);
};

function expectSameTensors(actual: CheckpointTensor[], expected: CheckpointTensor[]) {
  expect(actual.map((t) => t.name)).toEqual(expected.map((t) => t.name));
  for (let i = 0; i < expected.length; i++) {
    expect(actual[i].shape).toEqual(expected[i].shape);
    expect(bitsEqual(actual[i].data, expected[i].data), expected[i].name).toBe(true);
  }
}

let dbCounter = 0;
const opened: GrpoStorage[] = [];

async function open(factory: IDBFactory, extra: Parameters<typeof GrpoStorage.open>[0] = {}) {
  const s = await GrpoStorage.open({
    indexedDB: factory,
    name: `test-${dbCounter}`,
    chunkBytes: CHUNK_BYTES,
    storageManager: null,
    ...extra,
  });
  opened.push(s);
  return s;
}

async function fresh(extra: Parameters<typeof GrpoStorage.open>[0] = {}) {
  dbCounter++;
  const factory = new IDBFactory();
  return { factory, storage: await open(factory, extra) };
}

async function countAll(storage: GrpoStorage) {
  const tx = storage.db.transaction(
    ['chunks', 'pendingSaves', 'checkpoints', 'checkpointDetails'],
    'readonly',
  );
  return {
    chunks: await tx.objectStore('chunks').count(),
    pending: await tx.objectStore('pendingSaves').count(),
    checkpoints: await tx.objectStore('checkpoints').count(),
    details: await tx.objectStore('checkpointDetails').count(),
  };
}

/** Makes every put into the chunks store after the first `k` throw `error()`. */
function failChunkPutsAfter(
  k: number,
  error: () => unknown,
  onFail?: (store: IDBObjectStore) => void,
) {
  const original = IDBObjectStore.prototype.put;
  let puts = 0;
  return vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(function (
    this: IDBObjectStore,
    ...args: Parameters<IDBObjectStore['put']>
  ) {
    if (this.name === 'chunks' && ++puts > k) {
      onFail?.(this);
      throw error();
    }
    return original.apply(this, args);
  });
}

afterEach(() => {
  vi.restoreAllMocks();
  for (const s of opened.splice(0)) s.close();
});

describe('schema', () => {
  it('creates every store at DB_VERSION', async () => {
    const { storage } = await fresh();
    expect(storage.db.version).toBe(DB_VERSION);
    expect([...storage.db.objectStoreNames].sort()).toEqual([
      'checkpointDetails',
      'checkpoints',
      'chunks',
      'metrics',
      'notices',
      'pendingSaves',
      'runs',
      'samples',
    ]);
  });
});

describe('checkpoints', () => {
  it('round-trips save → list → load bit-identically, in many chunks', async () => {
    const { storage } = await fresh();
    const p = payload('run-a', 10);
    const record = await storage.saveCheckpoint(p);
    expect(record.bytes).toBe(TOTAL_BYTES);
    expect(record.chunkCount).toBe(CHUNKS);
    expect(record.tensorCount).toBe(p.tensors.length);
    expect(record.metrics).toEqual({ step: 10, reward: 1, loss: 0.5 });

    const listed = await storage.listCheckpoints('run-a');
    expect(listed.map((r) => r.id)).toEqual([record.id]);
    expect((await countAll(storage)).chunks).toBe(CHUNKS);

    const loaded = await storage.loadCheckpoint(record.id);
    expectSameTensors(loaded.tensors, p.tensors);
    expect(loaded.rng).toEqual(p.rng);
    expect(loaded.config).toEqual(p.config);
    expect(loaded.modelConfig).toEqual(CONFIG);
    expect(loaded.modelIdentity).toEqual(p.modelIdentity);
    expect(loaded.referenceIdentity).toEqual(p.referenceIdentity);
    expect(loaded.tokenizerIdentity).toEqual(p.tokenizerIdentity);
    expect(loaded.metricsSoFar).toEqual(p.metricsSoFar);
    expect(loaded.optimizerStep).toBe(10);
    // Loaded tensors own their buffers (transferable to a worker).
    expect(loaded.tensors[0].data.buffer).not.toBe(loaded.tensors[1].data.buffer);

    // The save created the run it belongs to.
    const runs = await storage.listRuns();
    expect(runs.map((r) => [r.id, r.checkpointCount, r.checkpointBytes, r.latestStep])).toEqual([
      ['run-a', 1, TOTAL_BYTES, 10],
    ]);
  });

  it('loads a weights-only checkpoint and the latest of a run', async () => {
    const { storage } = await fresh();
    await storage.saveCheckpoint(payload('r', 1));
    const p = payload('r', 2, { tensors: tensorsFor(99, false) });
    await storage.saveCheckpoint(p);
    const latest = await storage.loadLatestCheckpoint('r');
    expect(latest?.step).toBe(2);
    expectSameTensors(latest!.tensors, p.tensors);
    expect(await storage.loadLatestCheckpoint('nobody')).toBeNull();
  });

  it('rejects payloads that do not fit the model config, writing nothing', async () => {
    const { storage } = await fresh();
    const missing = payload('r', 1);
    missing.tensors = missing.tensors.filter((t) => t.name !== 'model.norm.weight');
    await expect(storage.saveCheckpoint(missing)).rejects.toThrow(
      "tensor 'model.norm.weight' is missing",
    );
    const partialAdam = payload('r', 1);
    partialAdam.tensors = partialAdam.tensors.filter(
      (t) => t.name !== OPTIMIZER_EXP_AVG_SQ + 'lm_head.weight',
    );
    await expect(storage.saveCheckpoint(partialAdam)).rejects.toThrow('AdamW state is partial');
    const wrongLength = payload('r', 1);
    wrongLength.tensors[3] = { ...wrongLength.tensors[3], data: new Float32Array(5) };
    await expect(storage.saveCheckpoint(wrongLength)).rejects.toBeInstanceOf(
      CheckpointValidationError,
    );
    expect(await countAll(storage)).toEqual({ chunks: 0, pending: 0, checkpoints: 0, details: 0 });
  });

  it('detects corrupted stored bytes on load', async () => {
    const { storage } = await fresh();
    const record = await storage.saveCheckpoint(payload('r', 3));
    const chunk = (await storage.db.get('chunks', [record.id, 5]))!;
    const bytes = new Uint8Array(chunk.bytes);
    bytes[17] ^= 0x01;
    await storage.db.put('chunks', { ...chunk, bytes: bytes.buffer });
    await expect(storage.loadCheckpoint(record.id)).rejects.toThrow(/does not match its SHA-256/);

    await storage.db.delete('chunks', [record.id, 7]);
    await expect(storage.loadCheckpoint(record.id)).rejects.toBeInstanceOf(
      CheckpointIntegrityError,
    );
  });

  it('a save failing mid-write leaves the previous checkpoint loadable and nothing partial', async () => {
    const { storage } = await fresh();
    const first = payload('r', 10);
    const good = await storage.saveCheckpoint(first);

    failChunkPutsAfter(CHUNKS / 2, () => new DOMException('disk on fire', 'UnknownError'));
    await expect(storage.saveCheckpoint(payload('r', 20))).rejects.toThrow('disk on fire');
    vi.restoreAllMocks();

    expect((await storage.listCheckpoints('r')).map((r) => r.step)).toEqual([10]);
    // The failed save cleaned up after itself: only the first checkpoint's chunks remain.
    expect(await countAll(storage)).toEqual({
      chunks: CHUNKS,
      pending: 0,
      checkpoints: 1,
      details: 1,
    });
    expectSameTensors((await storage.loadCheckpoint(good.id)).tensors, first.tensors);
  });

  it('a tab closed mid-save leaves orphans that the next open collects', async () => {
    const { factory, storage } = await fresh();
    const first = payload('r', 10);
    const good = await storage.saveCheckpoint(first);

    // Closing the connection while a save is under way: every later transaction, including the
    // failed save's own cleanup, is refused, as when the tab goes away.
    const original = IDBObjectStore.prototype.put;
    let puts = 0;
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(function (
      this: IDBObjectStore,
      ...args: Parameters<IDBObjectStore['put']>
    ) {
      const request = original.apply(this, args);
      if (this.name === 'chunks' && ++puts === 5) this.transaction.db.close();
      return request;
    });
    await expect(storage.saveCheckpoint(payload('r', 20))).rejects.toThrow();
    vi.restoreAllMocks();

    // Reopened at once: the pending save still looks alive, so its chunks are kept.
    const t0 = Date.now();
    const soon = await open(factory, { now: () => t0 + 1000 });
    expect(soon.orphansCollectedOnOpen).toEqual({ saves: 0, chunks: 0 });
    expect(await countAll(soon)).toMatchObject({ chunks: CHUNKS + 5, pending: 1, checkpoints: 1 });
    expect((await soon.listCheckpoints()).map((r) => r.step)).toEqual([10]);
    soon.close();

    // Reopened after the grace period: the orphans go, the committed checkpoint stays.
    const later = await open(factory, { now: () => t0 + 60 * 60 * 1000 });
    expect(later.orphansCollectedOnOpen).toEqual({ saves: 1, chunks: 5 });
    expect(await countAll(later)).toEqual({
      chunks: CHUNKS,
      pending: 0,
      checkpoints: 1,
      details: 1,
    });
    expectSameTensors((await later.loadCheckpoint(good.id)).tensors, first.tensors);
  });

  it('chunks without any pending row are collected at once', async () => {
    const { factory, storage } = await fresh();
    await storage.saveCheckpoint(payload('r', 1));
    await storage.db.put('chunks', { checkpointId: 'ghost', index: 0, bytes: new ArrayBuffer(8) });
    await storage.db.put('chunks', { checkpointId: 'ghost', index: 1, bytes: new ArrayBuffer(8) });
    storage.close();
    const reopened = await open(factory);
    expect(reopened.orphansCollectedOnOpen).toEqual({ saves: 1, chunks: 2 });
    expect((await countAll(reopened)).chunks).toBe(CHUNKS);
  });

  it('turns QuotaExceededError into StorageQuotaError, keeping the previous checkpoint', async () => {
    const { storage } = await fresh();
    await storage.createRun({ id: 'r', name: 'Countdown run', config: {} });
    const first = payload('r', 10);
    const good = await storage.saveCheckpoint(first);
    const other = await storage.saveCheckpoint(
      payload('other', 3, { tensors: tensorsFor(5, false) }),
    );

    failChunkPutsAfter(3, () => new DOMException('quota', 'QuotaExceededError'));
    const err = await storage.saveCheckpoint(payload('r', 20)).catch((e: unknown) => e);
    vi.restoreAllMocks();

    expect(err).toBeInstanceOf(StorageQuotaError);
    const q = err as StorageQuotaError;
    expect([q.runId, q.step, q.bytes, q.previousStep]).toEqual(['r', 20, TOTAL_BYTES, 10]);
    // Largest first: the full checkpoint, then the weights-only one.
    expect(q.candidates.map((c) => [c.checkpointId, c.runName, c.step, c.bytes])).toEqual([
      [good.id, 'Countdown run', 10, TOTAL_BYTES],
      [other.id, 'other', 3, 680 * 4],
    ]);
    expect(q.message).toContain("Checkpoint of run 'r' at step 20 (7.97 KiB) was not saved");
    expect(q.message).toContain('The previous checkpoint (step 10) is intact');
    expect(q.message).toContain("run 'Countdown run' step 10 (7.97 KiB");
    expect(q.message).toContain("run 'other' step 3 (2.66 KiB");

    expect(await countAll(storage)).toEqual({
      chunks: CHUNKS + Math.ceil((680 * 4) / CHUNK_BYTES),
      pending: 0,
      checkpoints: 2,
      details: 2,
    });
    expectSameTensors((await storage.loadCheckpoint(good.id)).tensors, first.tensors);
    // Training goes on: the next save works once space is back.
    const next = await storage.saveCheckpoint(payload('r', 30));
    expect((await storage.listCheckpoints('r')).map((r) => r.id)).toEqual([good.id, next.id]);
  });

  it('reports a quota failure at commit (how Chromium reports it) the same way', async () => {
    const { storage } = await fresh();
    await storage.saveCheckpoint(payload('r', 1));
    const original = IDBObjectStore.prototype.put;
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(function (
      this: IDBObjectStore,
      ...args: Parameters<IDBObjectStore['put']>
    ) {
      if (this.name === 'checkpoints') throw new DOMException('quota', 'QuotaExceededError');
      return original.apply(this, args);
    });
    await expect(storage.saveCheckpoint(payload('r', 2))).rejects.toBeInstanceOf(StorageQuotaError);
    vi.restoreAllMocks();
    expect(await countAll(storage)).toEqual({
      chunks: CHUNKS,
      pending: 0,
      checkpoints: 1,
      details: 1,
    });
  });

  it('deletes checkpoints and applies retention (last n + best by a metric)', async () => {
    const { storage } = await fresh();
    const losses = [0.9, 0.2, 0.7, 0.5, 0.6, 0.8];
    const records: CheckpointRecord[] = [];
    for (const [i, loss] of losses.entries()) {
      const step = (i + 1) * 10;
      records.push(
        await storage.saveCheckpoint(
          payload('r', step, {
            metrics: { step, loss, reward: -loss },
            tensors: tensorsFor(i, false),
          }),
        ),
      );
    }
    // Pure preview first.
    const keep = retainedIds(records, { keepLast: 2, keepBest: { metric: 'loss', mode: 'min' } });
    expect(records.filter((r) => keep.has(r.id)).map((r) => r.step)).toEqual([20, 50, 60]);
    const keepMax = retainedIds(records, {
      keepLast: 1,
      keepBest: { metric: 'loss', mode: 'max' },
    });
    expect(records.filter((r) => keepMax.has(r.id)).map((r) => r.step)).toEqual([10, 60]);

    const deleted = await storage.applyRetention('r', {
      keepLast: 2,
      keepBest: { metric: 'loss', mode: 'min' },
    });
    expect(deleted.map((r) => r.step)).toEqual([10, 30, 40]);
    expect((await storage.listCheckpoints('r')).map((r) => r.step)).toEqual([20, 50, 60]);
    const perCheckpoint = Math.ceil((680 * 4) / CHUNK_BYTES);
    expect(await countAll(storage)).toEqual({
      chunks: 3 * perCheckpoint,
      pending: 0,
      checkpoints: 3,
      details: 3,
    });

    // Retention as part of a save.
    await storage.saveCheckpoint(payload('r', 70, { tensors: tensorsFor(70, false) }), {
      retention: { keepLast: 1 },
    });
    expect((await storage.listCheckpoints('r')).map((r) => r.step)).toEqual([70]);

    expect(await storage.deleteCheckpoint(records[0].id)).toBe(false);
    const last = (await storage.listCheckpoints('r'))[0];
    expect(await storage.deleteCheckpoint(last.id)).toBe(true);
    expect(await countAll(storage)).toEqual({ chunks: 0, pending: 0, checkpoints: 0, details: 0 });
    await expect(storage.loadCheckpoint(last.id)).rejects.toThrow('does not exist');
  });
});

describe('runs', () => {
  it('creates, renames, lists, sets status and deletes runs with everything they own', async () => {
    let t = 1000;
    const { storage } = await fresh({ now: () => t++ });
    const a = await storage.createRun({ id: 'a', name: 'first', config: { seed: 1 } });
    const b = await storage.createRun({ name: 'second', config: { seed: 2 }, modelConfig: CONFIG });
    expect(a.status).toBe('created');
    await expect(storage.createRun({ id: 'a', name: 'dup', config: {} })).rejects.toThrow();

    const renamed = await storage.renameRun('a', '  Countdown, lr 1e-5  ');
    expect(renamed.name).toBe('Countdown, lr 1e-5');
    await expect(storage.renameRun('a', '   ')).rejects.toBeInstanceOf(CheckpointValidationError);
    await expect(storage.renameRun('nope', 'x')).rejects.toThrow("run 'nope' does not exist");
    await storage.setRunStatus(b.id, 'running');
    expect((await storage.listRuns()).map((r) => [r.id, r.name, r.status])).toEqual([
      [b.id, 'second', 'running'],
      ['a', 'Countdown, lr 1e-5', 'created'],
    ]);

    await storage.putMetrics('a', [
      { step: 2, reward: 0.5, 'rewards/format/mean': 1 },
      { step: 1, reward: 0.25, kl: 0.01 },
    ]);
    await storage.putMetrics(b.id, [{ step: 1, reward: 9 }]);
    expect(await storage.getMetrics('a')).toEqual([
      { step: 1, reward: 0.25, kl: 0.01 },
      { step: 2, reward: 0.5, 'rewards/format/mean': 1 },
    ]);
    const samples = {
      runId: 'a',
      step: 1,
      groupSize: 2,
      prompts: ['1+1'],
      completions: ['<answer>2</answer>', '<answer>3</answer>'],
      rewards: [1, 0],
      advantages: [0.7071, -0.7071],
    };
    await storage.putSamples(samples);
    await expect(storage.putSamples({ ...samples, step: 2, rewards: [1] })).rejects.toThrow(
      'expected B·G',
    );
    expect(await storage.getSamples('a', 1)).toEqual(samples);
    expect(await storage.listSampleSteps('a')).toEqual([1]);
    await storage.saveCheckpoint(payload('a', 1));
    await storage.saveCheckpoint(payload(b.id, 1, { tensors: tensorsFor(3, false) }));

    expect(await storage.deleteRun('a')).toBe(true);
    expect(await storage.deleteRun('a')).toBe(false);
    expect((await storage.listRuns()).map((r) => r.id)).toEqual([b.id]);
    expect(await storage.getMetrics('a')).toEqual([]);
    expect(await storage.getSamples('a', 1)).toBeUndefined();
    expect(await storage.getMetrics(b.id)).toEqual([{ step: 1, reward: 9 }]);
    expect(await countAll(storage)).toEqual({
      chunks: Math.ceil((680 * 4) / CHUNK_BYTES),
      pending: 0,
      checkpoints: 1,
      details: 1,
    });
  });

  it("a recipe run's stage checkpoints are counted with it and deleted with it, no other run's", async () => {
    const { storage } = await fresh();
    const meta = (id: string) => ({ id, name: id, config: {} });
    await storage.recordRunMetrics(meta('rec'), [{ step: 1, loss: 1 }]);
    // The stages keep their checkpoints under runs of their own (recipe-service.ts stageRunId).
    await storage.saveCheckpoint(payload('rec/0-cold-start', 2, { tensors: tensorsFor(2, false) }));
    await storage.saveCheckpoint(payload('rec/1-rl', 1, { tensors: tensorsFor(3, false) }));
    // Ids that only look alike: another run whose id starts with 'rec', and its own stage.
    await storage.recordRunMetrics(meta('recx'), [{ step: 1, loss: 2 }]);
    await storage.saveCheckpoint(payload('recx', 1, { tensors: tensorsFor(4, false) }));
    await storage.saveCheckpoint(payload('recx/0-rl', 1, { tensors: tensorsFor(5, false) }));

    const counts = async () =>
      Object.fromEntries(
        (await storage.listRunHistories()).map((r) => [r.id, r.checkpointCount] as const),
      );
    expect(await counts()).toEqual({
      rec: 2,
      'rec/0-cold-start': 1,
      'rec/1-rl': 1,
      recx: 2,
      'recx/0-rl': 1,
    });

    expect(await storage.deleteRun('rec')).toBe(true);
    expect((await storage.listRuns()).map((r) => r.id).sort()).toEqual(['recx', 'recx/0-rl']);
    expect((await storage.listCheckpoints()).map((c) => c.runId).sort()).toEqual([
      'recx',
      'recx/0-rl',
    ]);
    expect(await countAll(storage)).toEqual({
      chunks: 2 * Math.ceil((680 * 4) / CHUNK_BYTES),
      pending: 0,
      checkpoints: 2,
      details: 2,
    });
    expect(await storage.getMetrics('recx')).toEqual([{ step: 1, loss: 2 }]);
  });
});

describe('storage usage', () => {
  it('reports unknown cleanly without navigator.storage', async () => {
    const { storage } = await fresh();
    await storage.saveCheckpoint(payload('r', 1));
    const report = await storage.storageUsage();
    expect(report.known).toBe(false);
    expect(report.checkpointBytes).toBe(TOTAL_BYTES);
    expect(report.checkpointCount).toBe(1);
    expect(await storage.requestPersistence()).toBe('unknown');
  });

  it('uses estimate() / persisted() / persist() when available', async () => {
    const manager = {
      estimate: async () => ({ usage: 1234, quota: 10_000 }),
      persisted: async () => false,
      persist: async () => true,
    } as unknown as StorageManager;
    const { storage } = await fresh({ storageManager: manager });
    expect(await storage.storageUsage()).toEqual({
      known: true,
      usageBytes: 1234,
      quotaBytes: 10_000,
      persisted: false,
      checkpointCount: 0,
      checkpointBytes: 0,
    });
    expect(await storage.requestPersistence()).toBe('granted');
    const failing = {
      estimate: async () => {
        throw new Error('denied');
      },
    } as unknown as StorageManager;
    const { storage: s2 } = await fresh({ storageManager: failing });
    expect(await s2.storageUsage()).toMatchObject({
      known: false,
      reason: expect.stringContaining('denied'),
    });
  });
});
