// The one IndexedDB schema module: database name, DB_VERSION, the record types of every store and
// the single upgrade function with its numbered migrations. Nothing else in the app calls
// createObjectStore; a schema change is a new entry in MIGRATIONS and DB_VERSION + 1.
//
// The IDBFactory is injectable so the same code runs on Chromium's real IndexedDB (browser, e2e)
// and on fake-indexeddb (Node unit tests). idb's wrappers check `instanceof` against the global
// IDB classes, so in Node the globals must exist (`import 'fake-indexeddb/auto'`).

import { wrap, type DBSchema, type IDBPDatabase, type IDBPTransaction, type StoreNames } from 'idb';
import type { LlamaConfig } from '../core/model-config';
import type { FlatMetricsRow } from '../core/metrics-row';
import type { LoraOptions } from '../core/lora';
import {
  describeKey,
  describeValue,
  metricsRowProblem,
  toRecord,
  UNKNOWN_RUN,
  type FoundNotice,
} from './notices';

export const DB_NAME = 'grpo-playground';
export const DB_VERSION = 3;

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
  /** The user's notes on the run (free text); absent on runs stored before runs had notes. */
  notes?: string;
  status: RunStatus;
  /** The resolved run config (JSON-serialisable), stored with every run as DESIGN.md asks. */
  config: Record<string, unknown>;
  modelConfig: LlamaConfig | null;
  modelIdentity: Identity | null;
  createdAt: number; // ms since epoch
  updatedAt: number;
  /** A multi-stage run (a recipe: SFT, GRPO, rejection sampling) names its stages here, each with
   * the first step of the one metrics timeline it covers; absent for a single-stage run. */
  stages?: RunStage[];
  /** A recipe run (src/recipes/recipe.ts run by the page's worker): what resumes it after a reload;
   * absent for any other run. */
  recipe?: StoredRecipe;
}

/** RunRecord.recipe. Typed loosely here (storage sits below grpo): src/worker/recipe-service.ts reads
 * `state` as grpo's RecipeState and `rejections` as RejectionSamplingReports. */
export interface StoredRecipe {
  /** RecipeState: the recipe, the stage under way, the finished stages' results, the sets that
   * rejection-sample stages kept, the timeline. With the current stage's latest checkpoint (run
   * id `${runId}/${index}-${stageName}`) it resumes the recipe. */
  state: { stageIndex: number; recipe: { name: string; stages: unknown[] } } & Record<
    string,
    unknown
  >;
  /** Each rejection-sample stage's report by stage name: every sample, kept or not, and why. */
  rejections: Record<string, unknown>;
}

/** One stage of a multi-stage run (RunRecord.stages). */
export interface RunStage {
  name: string;
  /** 'sft', 'grpo', 'rejection-sample', … (the recipe's StageKind). */
  kind?: string;
  /** The first step of the run's metrics that belongs to this stage. */
  firstStep: number;
}

export interface MetricsRecord {
  runId: string;
  step: number;
  values: FlatMetricsRow;
  /** When the step ended (ms since epoch), for the charts' wall-clock axis; kept outside `values`
   * so the metric exports stay the run's metrics. Absent on rows stored before it was recorded and
   * on rows whose time is unknown (a history restored from a checkpoint). */
  at?: number;
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
  metrics: FlatMetricsRow | null;
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
  metricsSoFar: FlatMetricsRow[] | null;
  /** A LoRA run's adapter config: the tensors are its adapters, not every parameter. Absent in
   * checkpoints saved before LoRA runs could be stored (those are full-weight checkpoints). */
  adapter?: LoraOptions | null;
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

/**
 * A stored row the storage could not read and left out (the row itself is neither changed nor
 * deleted), kept to tell the user: src/storage/notices.ts.
 */
export interface StorageNoticeRecord {
  /** The run id and the row: the same unreadable row is reported once. */
  key: string;
  /** When it was found: 'upgrade to version 2', 'reading run histories', … */
  during: string;
  /** The run the row belongs to, or '(unknown)' when the row names none. */
  runId: string;
  /** Which row: "checkpoint 'c1' metricsSoFar[2]", "metrics row at step 3", … */
  row: string;
  /** What was wrong with it: 'its step is NaN', 'the row is null, not an object', … */
  problem: string;
  /** When it was first found, ms since epoch. */
  at: number;
  /** Dismissed notices are not listed; the record stays so the row is not reported again. */
  dismissed: boolean;
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
  notices: { key: string; value: StorageNoticeRecord };
}

export type GrpoDatabase = IDBPDatabase<GrpoDB>;
type UpgradeTx = IDBPTransaction<GrpoDB, StoreNames<GrpoDB>[], 'versionchange'>;

/** What the migrations of one upgrade share: the rows they skipped, recorded once they are done. */
interface UpgradeContext {
  skipped: FoundNotice[];
}

/**
 * MIGRATIONS[k] takes the database from version k to k + 1. Existing entries never change their
 * schema once released: a user's database on version k replays only the entries after it (a data
 * copy may become more forgiving, as 1 → 2 did: a database it failed on is still at version k).
 * Schema changes run synchronously; a migration that copies data returns the promise of that
 * copy, which may await only requests of the upgrade transaction (so the open succeeds only after
 * it), and skips rows it cannot read into `ctx.skipped` instead of failing: one unreadable row
 * must not lock every run out.
 */
const MIGRATIONS: Array<
  (db: GrpoDatabase, tx: UpgradeTx, ctx: UpgradeContext) => void | Promise<void>
> = [
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
  // 1 → 2: no new store; the metrics store becomes every run's history (the Runs panel, its CSV
  // and JSONL, the chart overlay), written after every step. A run that reached version 1 kept its
  // history only inside its checkpoints' metricsSoFar: copy its latest checkpoint's rows in, so
  // it is listed with its steps. Runs that already have rows (imported ones) keep them. Rows it
  // cannot read are skipped and reported (this copy used to abort the upgrade on the first one).
  (_db, tx, ctx) => backfillMetrics(tx, ctx.skipped),
  // 2 → 3: the notices store: rows the storage skipped because it could not read them (the copy
  // above, the readers of run histories), so the page can say which were left out and why.
  (db) => {
    db.createObjectStore('notices', { keyPath: 'key' });
  },
];

const UPGRADE_TO_2 = 'upgrade to version 2';

/** Migration 1 → 2: per run, the metricsSoFar of its highest-step checkpoint into `metrics`.
 * Checks every value a key is made of before its put: a failed put would abort the upgrade. */
async function backfillMetrics(tx: UpgradeTx, skipped: FoundNotice[]): Promise<void> {
  const skip = (runId: string, row: string, problem: string) =>
    skipped.push({ during: UPGRADE_TO_2, runId, row, problem });
  const latest = new Map<string, CheckpointRecord>();
  for (const c of await tx.objectStore('checkpoints').getAll()) {
    // Its key is valid (IndexedDB checked it); the fields the copy reads may not be.
    const row = `checkpoint ${describeKey(c.id)}`;
    if (typeof c.runId !== 'string') {
      skip(UNKNOWN_RUN, row, `its run id is ${describeValue(c.runId)}: no history copied from it`);
      continue;
    }
    if (typeof c.step !== 'number' || Number.isNaN(c.step)) {
      skip(c.runId, row, `its step is ${describeValue(c.step)}: no history copied from it`);
      continue;
    }
    const seen = latest.get(c.runId);
    if (!seen || c.step > seen.step) latest.set(c.runId, c);
  }
  const metrics = tx.objectStore('metrics');
  for (const [runId, c] of latest) {
    const range = IDBKeyRange.bound([runId, -Infinity], [runId, Infinity]);
    if ((await metrics.count(range)) > 0) continue;
    const detail = await tx.objectStore('checkpointDetails').get(c.id);
    const rows: unknown = detail?.metricsSoFar;
    const where = `checkpoint ${describeKey(c.id)} metricsSoFar`;
    if (rows === undefined || rows === null) continue; // saved without a history: nothing to copy
    if (!Array.isArray(rows)) {
      skip(runId, where, `it is ${describeValue(rows)}, not a list of rows: no history copied`);
      continue;
    }
    for (let i = 0; i < rows.length; i++) {
      const values = rows[i] as FlatMetricsRow;
      const problem = metricsRowProblem(values);
      if (problem) skip(runId, `${where}[${i}]`, problem);
      else if (values.step <= c.step) await metrics.put({ runId, step: values.step, values });
    }
  }
}

/** Writes what the migrations skipped into the notices store (absent below version 3: dropped). */
async function recordSkipped(tx: UpgradeTx, ctx: UpgradeContext, at: number): Promise<void> {
  if (ctx.skipped.length === 0 || !tx.objectStoreNames.contains('notices')) return;
  const notices = tx.objectStore('notices');
  for (const n of ctx.skipped) await notices.put(toRecord(n, at));
}

if (MIGRATIONS.length !== DB_VERSION) {
  throw new Error(`storage/db.ts: ${MIGRATIONS.length} migrations for DB_VERSION ${DB_VERSION}`);
}

/**
 * The one upgrade function: replays the migrations between the stored and the current version,
 * then records the rows they skipped. An error of the upgrade's own requests aborts it: nothing
 * of it is kept and the stored version stays.
 */
export function upgrade(
  db: GrpoDatabase,
  oldVersion: number,
  tx: UpgradeTx,
  newVersion = DB_VERSION,
  now: () => number = Date.now,
): void {
  const ctx: UpgradeContext = { skipped: [] };
  const copies: Promise<void>[] = [];
  for (let v = oldVersion; v < newVersion; v++) {
    const copy = MIGRATIONS[v](db, tx, ctx);
    if (copy) copies.push(copy);
  }
  void Promise.all(copies)
    .then(() => recordSkipped(tx, ctx, now()))
    .catch(() => {
      try {
        tx.abort();
      } catch {
        // Already aborted by the failed request.
      }
    });
}

export interface OpenDbOptions {
  /** Default: globalThis.indexedDB (the browser's). Tests pass fake-indexeddb's IDBFactory. */
  indexedDB?: IDBFactory;
  /** Default DB_NAME. */
  name?: string;
  /** Default DB_VERSION. Only the upgrade tests open an older version (to test its migration). */
  version?: number;
  /** Clock of the notices an upgrade records (tests pin it). */
  now?: () => number;
}

/** Opens (creating or upgrading) the database with an explicit factory, as idb's openDB would. */
export function openDatabase(options: OpenDbOptions = {}): Promise<GrpoDatabase> {
  const factory = options.indexedDB ?? globalThis.indexedDB;
  if (!factory) {
    return Promise.reject(
      new Error('IndexedDB is not available here (pass an IDBFactory, e.g. from fake-indexeddb)'),
    );
  }
  const version = options.version ?? DB_VERSION;
  const request = factory.open(options.name ?? DB_NAME, version);
  request.addEventListener('upgradeneeded', (event) => {
    upgrade(
      wrap(request.result) as unknown as GrpoDatabase,
      event.oldVersion,
      wrap(request.transaction!) as unknown as UpgradeTx,
      version,
      options.now,
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
