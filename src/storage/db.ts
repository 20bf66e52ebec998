// The one IndexedDB schema module: database name, DB_VERSION, the record types of every store and
// the single upgrade function with its numbered migrations. Nothing else in the app calls
// createObjectStore; a schema change is a new entry in MIGRATIONS and DB_VERSION + 1.
//
// The IDBFactory is injectable so the same code runs on Chromium's real IndexedDB (browser, e2e)
// and on fake-indexeddb (Node unit tests). idb's wrappers check `instanceof` against the global
// IDB classes, so in Node the globals must exist (`import 'fake-indexeddb/auto'`).

import { wrap, type DBSchema, type IDBPDatabase, type IDBPTransaction, type StoreNames } from 'idb';
import type { LlamaConfig } from '../core/model-config';

export const DB_NAME = 'grpo-playground';
export const DB_VERSION = 1;

/** Identifies a model, reference model or tokenizer: a display name and the SHA-256 of its bytes. */
export interface Identity {
  name: string;
  /** Hex SHA-256 of the weights (or of the source files the weights were made from). */
  sha256: string;
}

export type RunStatus = 'created' | 'running' | 'paused' | 'finished' | 'failed';

export interface RunRecord {
  id: string;
  name: string;
  status: RunStatus;
  /** The resolved run config (JSON-serialisable), stored with every run as DESIGN.md asks. */
  config: Record<string, unknown>;
  modelConfig: LlamaConfig | null;
  modelIdentity: Identity | null;
  createdAt: number; // ms since epoch
  updatedAt: number;
}

/**
 * One step's metrics under docs/grpo.md §6 names ('reward', 'rewards/<name>/mean', 'kl', 'loss',
 * 'completions/mean_length', …). Metrics that were not computed are absent, never 0.
 */
export interface MetricsRow {
  step: number;
  [name: string]: number;
}

export interface MetricsRecord {
  runId: string;
  step: number;
  values: MetricsRow;
}

/** One step's samples; sequence i = b·G + g (group-major), as the trainer lays them out. */
export interface SamplesRecord {
  runId: string;
  step: number;
  groupSize: number; // G
  prompts: string[]; // (B)
  completions: string[]; // (N)
  rewards: number[]; // (N) total reward r_i
  advantages: number[]; // (N) A_i
  /** Per reward function, per completion; null = "not applicable" (docs/grpo.md §1). */
  rewardsByFunction?: Record<string, Array<number | null>>;
}

/** Where one tensor lives in a checkpoint's byte stream (the chunks concatenated). */
export interface TensorEntry {
  name: string;
  shape: number[];
  dtype: 'F32';
  /** Byte offset in the concatenated chunk stream; always a multiple of 4. */
  offset: number;
  byteLength: number;
  /** Hex SHA-256 of the tensor's little-endian f32 bytes. */
  sha256: string;
}

/** What lists show: small, read on every listing. Its presence makes a checkpoint visible. */
export interface CheckpointRecord {
  id: string;
  runId: string;
  step: number;
  optimizerStep: number;
  createdAt: number;
  /** Tensor bytes (the chunks), what deleting this checkpoint frees. */
  bytes: number;
  chunkCount: number;
  tensorCount: number;
  modelIdentity: Identity;
  /** The metrics at this step, used by "keep the best" retention. */
  metrics: MetricsRow | null;
}

/** Everything else needed to resume, written in the same transaction as its CheckpointRecord. */
export interface CheckpointDetailRecord {
  id: string;
  chunkSize: number;
  tensors: TensorEntry[];
  rng: Record<string, number[] | string>;
  config: Record<string, unknown>;
  modelConfig: LlamaConfig;
  referenceIdentity: Identity | null;
  tokenizerIdentity: Identity | null;
  metricsSoFar: MetricsRow[] | null;
}

export interface ChunkRecord {
  checkpointId: string;
  index: number;
  bytes: ArrayBuffer; // ≤ MAX_CHUNK_BYTES
}

/** A save in progress: its chunks are not orphans while `touchedAt` is recent. */
export interface PendingSaveRecord {
  id: string;
  runId: string;
  step: number;
  startedAt: number;
  touchedAt: number;
}

export interface GrpoDB extends DBSchema {
  runs: { key: string; value: RunRecord; indexes: { byUpdatedAt: number } };
  metrics: { key: [string, number]; value: MetricsRecord };
  samples: { key: [string, number]; value: SamplesRecord };
  checkpoints: {
    key: string;
    value: CheckpointRecord;
    indexes: { byRun: string; byRunStep: [string, number] };
  };
  checkpointDetails: { key: string; value: CheckpointDetailRecord };
  chunks: { key: [string, number]; value: ChunkRecord };
  pendingSaves: { key: string; value: PendingSaveRecord };
}

export type GrpoDatabase = IDBPDatabase<GrpoDB>;
type UpgradeTx = IDBPTransaction<GrpoDB, StoreNames<GrpoDB>[], 'versionchange'>;

/**
 * MIGRATIONS[k] takes the database from version k to k + 1. Existing entries never change once
 * released: a user's database on version k replays only the entries after it.
 */
const MIGRATIONS: Array<(db: GrpoDatabase, tx: UpgradeTx) => void> = [
  // 0 → 1: the initial schema.
  (db) => {
    const runs = db.createObjectStore('runs', { keyPath: 'id' });
    runs.createIndex('byUpdatedAt', 'updatedAt');
    db.createObjectStore('metrics', { keyPath: ['runId', 'step'] });
    db.createObjectStore('samples', { keyPath: ['runId', 'step'] });
    const checkpoints = db.createObjectStore('checkpoints', { keyPath: 'id' });
    checkpoints.createIndex('byRun', 'runId');
    checkpoints.createIndex('byRunStep', ['runId', 'step']);
    db.createObjectStore('checkpointDetails', { keyPath: 'id' });
    db.createObjectStore('chunks', { keyPath: ['checkpointId', 'index'] });
    db.createObjectStore('pendingSaves', { keyPath: 'id' });
  },
];

if (MIGRATIONS.length !== DB_VERSION) {
  throw new Error(`storage/db.ts: ${MIGRATIONS.length} migrations for DB_VERSION ${DB_VERSION}`);
}

/** The one upgrade function: replays the migrations between the stored and the current version. */
export function upgrade(db: GrpoDatabase, oldVersion: number, tx: UpgradeTx): void {
  for (let v = oldVersion; v < DB_VERSION; v++) MIGRATIONS[v](db, tx);
}

export interface OpenDbOptions {
  /** Default: globalThis.indexedDB (the browser's). Tests pass fake-indexeddb's IDBFactory. */
  indexedDB?: IDBFactory;
  /** Default DB_NAME. */
  name?: string;
}

/** Opens (creating or upgrading) the database with an explicit factory, as idb's openDB would. */
export function openDatabase(options: OpenDbOptions = {}): Promise<GrpoDatabase> {
  const factory = options.indexedDB ?? globalThis.indexedDB;
  if (!factory) {
    return Promise.reject(
      new Error('IndexedDB is not available here (pass an IDBFactory, e.g. from fake-indexeddb)'),
    );
  }
  const request = factory.open(options.name ?? DB_NAME, DB_VERSION);
  request.addEventListener('upgradeneeded', (event) => {
    upgrade(
      wrap(request.result) as unknown as GrpoDatabase,
      event.oldVersion,
      wrap(request.transaction!) as unknown as UpgradeTx,
    );
  });
  return new Promise<GrpoDatabase>((resolve, reject) => {
    request.addEventListener('success', () => {
      const raw = request.result;
      // A newer version opened in another tab: close so its upgrade is not blocked by us.
      raw.addEventListener('versionchange', () => raw.close());
      resolve(wrap(raw) as unknown as GrpoDatabase);
    });
    // 'blocked' (an older tab without the versionchange handler) is not an error: the request
    // completes once that tab closes its connection.
    request.addEventListener('error', () => reject(request.error));
  });
}
