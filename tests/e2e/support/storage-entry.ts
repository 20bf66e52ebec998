// Browser-side entry of the storage end-to-end tests: bundled by vite (lib mode) together with
// src/storage, served on the app's origin and loaded into the real app page. It publishes the
// storage API plus test helpers on `globalThis.__grpoE2E` for page.evaluate to drive: tensors are
// generated and hashed inside the page so that tens of MB never cross the DevTools protocol.

import * as storage from '../../../src/storage';
import { parameterSpecs, type LlamaConfig } from '../../../src/core/model-config';
import type { CheckpointPayload, CheckpointTensor, LoadedCheckpoint } from '../../../src/storage';

/** A Llama config of the requested size (H = C / 64 heads of D = 64, Hkv = H / 2). */
export function llamaConfig(
  hiddenSize: number,
  intermediateSize: number,
  numLayers: number,
  vocabSize: number,
): LlamaConfig {
  const numHeads = Math.max(2, hiddenSize / 64);
  return {
    architecture: 'LlamaForCausalLM',
    hiddenSize,
    intermediateSize,
    numLayers,
    numHeads,
    numKvHeads: numHeads / 2,
    headDim: hiddenSize / numHeads,
    vocabSize,
    maxPositions: 256,
    ropeTheta: 10000,
    rmsNormEps: 1e-5,
    tieWordEmbeddings: false,
    attentionBias: false,
    bosTokenId: 1,
    eosTokenIds: [2],
  };
}

/**
 * Every parameter and both AdamW moments filled with xorshift32 bit patterns (so NaN payloads,
 * -0, infinities and subnormals all occur): any byte that storage changes changes the digest.
 */
export function makeTensors(config: LlamaConfig, seed: number): CheckpointTensor[] {
  let state = seed >>> 0 || 1;
  const specs = parameterSpecs(config);
  const names = [
    ...specs.map((s) => s.name),
    ...specs.map((s) => storage.OPTIMIZER_EXP_AVG + s.name),
    ...specs.map((s) => storage.OPTIMIZER_EXP_AVG_SQ + s.name),
  ];
  const shapes = new Map(specs.map((s) => [s.name, s.shape]));
  return names.map((name) => {
    const shape = shapes.get(name.replace(/^optimizer\.exp_avg(_sq)?\./, ''))!;
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    const bits = new Uint32Array(data.buffer);
    for (let i = 0; i < bits.length; i++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      bits[i] = state >>> 0;
    }
    bits[0] = 0x7fc01234; // a NaN with a payload must survive bit for bit
    return { name, shape: shape.slice(), data };
  });
}

export interface PayloadSpec {
  runId: string;
  runName?: string;
  step: number;
  seed: number;
  config: LlamaConfig;
}

export function makePayload(spec: PayloadSpec): CheckpointPayload {
  return {
    runId: spec.runId,
    runName: spec.runName,
    step: spec.step,
    optimizerStep: spec.step + 1,
    tensors: makeTensors(spec.config, spec.seed),
    rng: { sampler: [spec.seed, 0x9e3779b9, spec.step], dataOrder: 'xorshift:' + spec.seed },
    config: { task: 'countdown', groupSize: 4, learningRate: 1e-5, seed: spec.seed },
    modelConfig: spec.config,
    modelIdentity: { name: 'e2e-llama', sha256: 'ab'.repeat(32) },
    referenceIdentity: { name: 'e2e-llama', sha256: 'ab'.repeat(32) },
    tokenizerIdentity: { name: 'e2e-tokenizer', sha256: 'cd'.repeat(32) },
    metricsSoFar: [{ step: spec.step, reward: spec.step / 10, loss: 0.25 }],
  };
}

const hex = (buf: ArrayBuffer) =>
  Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');

/** One SHA-256 over every tensor's name, shape and bytes, in order: the checkpoint's identity. */
export async function tensorsDigest(tensors: CheckpointTensor[]): Promise<string> {
  const parts: Uint8Array[] = [];
  const enc = new TextEncoder();
  for (const t of tensors) {
    parts.push(enc.encode(`${t.name}:${t.shape.join('x')};`));
    parts.push(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
  const total = parts.reduce((n, p) => n + p.byteLength, 0);
  const all = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    all.set(p, offset);
    offset += p.byteLength;
  }
  return hex(await crypto.subtle.digest('SHA-256', all));
}

export const payloadBytes = (p: CheckpointPayload) =>
  p.tensors.reduce((n, t) => n + t.data.byteLength, 0);

/** What a test compares after loading: the digest and everything that is not tensor bytes. */
export async function summarize(loaded: LoadedCheckpoint) {
  return {
    id: loaded.id,
    runId: loaded.runId,
    runName: loaded.runName,
    step: loaded.step,
    optimizerStep: loaded.optimizerStep,
    bytes: loaded.bytes,
    tensorCount: loaded.tensors.length,
    digest: await tensorsDigest(loaded.tensors),
    rng: loaded.rng,
    config: loaded.config,
    modelConfig: loaded.modelConfig,
    metricsSoFar: loaded.metricsSoFar,
  };
}

// ---- the database as IndexedDB itself sees it, bypassing src/storage ---------------------------

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

/** Opens the app's database at whatever version it has, without upgrading or collecting. */
export function openRaw(name = storage.DB_NAME): Promise<IDBDatabase> {
  return request(indexedDB.open(name));
}

export interface RawSnapshot {
  /** Every key of every store, JSON-encoded, so two snapshots compare with toEqual. */
  keys: Record<string, string[]>;
  /** Chunks per checkpoint id. */
  chunksById: Record<string, number>;
}

export async function rawSnapshot(): Promise<RawSnapshot> {
  const db = await openRaw();
  try {
    const names = Array.from(db.objectStoreNames).sort();
    const tx = db.transaction(names, 'readonly');
    const keys: Record<string, string[]> = {};
    for (const name of names) {
      keys[name] = (await request(tx.objectStore(name).getAllKeys())).map((k) => JSON.stringify(k));
    }
    const chunksById: Record<string, number> = {};
    for (const k of await request(tx.objectStore('chunks').getAllKeys())) {
      const id = (k as [string, number])[0];
      chunksById[id] = (chunksById[id] ?? 0) + 1;
    }
    return { keys, chunksById };
  } finally {
    db.close();
  }
}

/**
 * Waits until the `chunks` store holds at least `minChunks` records, then keeps a readwrite
 * transaction over `chunks` and `pendingSaves` open until release() is called. IndexedDB runs
 * readwrite transactions with overlapping scopes one at a time, so while it is held no other
 * tab's save can write another chunk or commit: a save seen mid-way stays mid-way.
 */
export async function holdSaveMidway(minChunks: number): Promise<{ chunks: number }> {
  const db = await openRaw();
  for (;;) {
    const tx = db.transaction(['chunks', 'pendingSaves'], 'readwrite');
    const chunks = tx.objectStore('chunks');
    const count = await request(chunks.count());
    if (count < minChunks) {
      // No timer between polls: a background tab's timers are throttled to one a second, long
      // enough for the save to finish unseen. Back-to-back transactions take turns with the save's.
      await new Promise((resolve) => (tx.oncomplete = resolve));
      continue;
    }
    // Keep the transaction alive with a chain of cheap requests until released.
    let released = false;
    const spin = () => {
      if (!released) chunks.getKey(['', -1]).onsuccess = spin;
    };
    spin();
    const done = new Promise<void>((resolve, reject) => {
      tx.oncomplete = () => resolve();
      tx.onabort = () => reject(tx.error);
    });
    held = {
      release: async () => {
        released = true;
        await done;
        db.close();
      },
    };
    return { chunks: count };
  }
}
let held: { release: () => Promise<void> } | null = null;

export async function releaseSaveHold(): Promise<void> {
  const h = held;
  held = null;
  if (!h) throw new Error('holdSaveMidway() holds nothing');
  await h.release();
}

const api = {
  ...storage,
  llamaConfig,
  makeTensors,
  makePayload,
  payloadBytes,
  tensorsDigest,
  summarize,
  rawSnapshot,
  holdSaveMidway,
  releaseSaveHold,
};
export type GrpoE2E = typeof api;

(globalThis as unknown as { __grpoE2E: GrpoE2E }).__grpoE2E = api;
