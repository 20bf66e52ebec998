// The storage API the app, the trainer and the CLI use: a GrpoStorage bound to one open database
// (injectable IDBFactory and StorageManager), and module-level functions over a lazily opened
// default instance (the browser's IndexedDB) for the UI.

import type { CheckpointRecord, GrpoDatabase, RunRecord, RunStatus } from './db';
import type { FlatMetricsRow } from '../core/metrics-row';
import type { SamplesRecord, StoredRecipe } from './db';
import { openDatabase, type OpenDbOptions } from './db';
import * as ckpt from './checkpoints';
import * as runs from './runs';
import * as history from './run-history';
import * as recipes from './recipe-runs';
import * as runFile from './run-file';
import * as transfer from './transfer';
import * as usage from './usage';
import * as notices from './notices';

export * from './errors';
export type * from './db';
export { DB_NAME, DB_VERSION } from './db';
export {
  MAX_CHUNK_BYTES,
  OPTIMIZER_EXP_AVG,
  OPTIMIZER_EXP_AVG_SQ,
  checkTensorSet,
  retainedIds,
  type CheckpointPayload,
  type CheckpointTensor,
  type LoadedCheckpoint,
  type OrphanReport,
  type RetentionPolicy,
  type SaveOptions,
} from './checkpoints';
export type { NewRun, RunSummary } from './runs';
export {
  RunHistoryQuotaError,
  type RunHistory,
  type RunHistoryMeta,
  type RunHistorySummary,
} from './run-history';
export {
  RUN_FILE_EXTENSION,
  RUN_FILE_FORMAT,
  RUN_FILE_VERSION,
  parseRunFile,
  runFileName,
  type ParsedRunFile,
  type RunFileDocument,
  type RunImportResult,
} from './run-file';
export {
  CHECKPOINT_FILE_EXTENSION,
  EXPORT_SCHEMA_VERSION,
  checkpointFileName,
  parseCheckpointFile,
  type ExportManifest,
  type ImportOptions,
  type ImportResult,
  type ParsedCheckpointFile,
} from './transfer';
export type { PersistenceResult, StorageUsage } from './usage';
export { UNKNOWN_RUN, type StorageNotice } from './notices';

export interface StorageOptions extends OpenDbOptions, ckpt.CheckpointStoreOptions {
  /** Default navigator.storage; null where there is none (Node). */
  storageManager?: StorageManager | null;
  /** Default true: delete the chunks of saves that never committed. */
  collectOrphansOnOpen?: boolean;
}

/** What the storage panel shows: the browser's estimate plus what checkpoints take. */
export type StorageReport = usage.StorageUsage & {
  checkpointCount: number;
  checkpointBytes: number;
};

export class GrpoStorage {
  /** What the garbage collection at open removed. */
  orphansCollectedOnOpen: ckpt.OrphanReport = { saves: 0, chunks: 0 };

  private constructor(
    readonly db: GrpoDatabase,
    private readonly options: StorageOptions,
  ) {}

  static async open(options: StorageOptions = {}): Promise<GrpoStorage> {
    const storage = new GrpoStorage(await openDatabase(options), options);
    if (options.collectOrphansOnOpen !== false) {
      storage.orphansCollectedOnOpen = await storage.collectOrphans();
    }
    return storage;
  }

  close(): void {
    this.db.close();
  }

  private get now(): () => number {
    return this.options.now ?? Date.now;
  }

  // Runs, metrics, samples.
  listRuns(): Promise<runs.RunSummary[]> {
    return runs.listRuns(this.db);
  }
  getRun(id: string): Promise<RunRecord | undefined> {
    return runs.getRun(this.db, id);
  }
  createRun(run: runs.NewRun): Promise<RunRecord> {
    return runs.createRun(this.db, run, this.now);
  }
  renameRun(id: string, name: string): Promise<RunRecord> {
    return runs.renameRun(this.db, id, name, this.now);
  }
  setRunStatus(id: string, status: RunStatus): Promise<RunRecord> {
    return runs.setRunStatus(this.db, id, status, this.now);
  }
  deleteRun(id: string): Promise<boolean> {
    return runs.deleteRun(this.db, id);
  }
  putMetrics(runId: string, rows: FlatMetricsRow[]): Promise<void> {
    return runs.putMetrics(this.db, runId, rows);
  }
  getMetrics(runId: string): Promise<FlatMetricsRow[]> {
    return this.noting((onSkip) => runs.getMetrics(this.db, runId, onSkip));
  }
  putSamples(record: SamplesRecord): Promise<void> {
    return runs.putSamples(this.db, record);
  }
  getSamples(runId: string, step: number): Promise<SamplesRecord | undefined> {
    return runs.getSamples(this.db, runId, step);
  }
  listSampleSteps(runId: string): Promise<number[]> {
    return runs.listSampleSteps(this.db, runId);
  }

  // Run histories: one run's metrics as a whole (the Runs panel, CSV / JSONL, chart overlay).
  recordRunMetrics(
    meta: history.RunHistoryMeta,
    rows: FlatMetricsRow[],
    times?: ReadonlyMap<number, number>,
  ): Promise<RunRecord> {
    return history.recordRunMetrics(this.db, meta, rows, this.now, times);
  }
  setRunNotes(id: string, notes: string): Promise<RunRecord> {
    return runs.setRunNotes(this.db, id, notes, this.now);
  }
  /** A stored run as one file (run-file.ts), with its latest checkpoint when asked and present. */
  exportRunFile(id: string, withCheckpoint = false): Promise<runFile.ExportedRunFile> {
    return runFile.exportRunFile(this.db, id, withCheckpoint);
  }
  /** Imports a run file as a new run; a rejected file writes nothing. */
  importRunFile(
    bytes: Uint8Array,
    options: runFile.RunImportOptions = {},
  ): Promise<runFile.RunImportResult> {
    return runFile.importRunFile(this.db, bytes, { ...this.options, ...options });
  }
  listRunHistories(): Promise<history.RunHistorySummary[]> {
    return this.noting((onSkip) => history.listRunHistories(this.db, onSkip));
  }
  getRunHistory(id: string): Promise<history.RunHistory | undefined> {
    return this.noting((onSkip) => history.getRunHistory(this.db, id, onSkip));
  }

  // Notices: stored rows left out because they could not be read (by the schema upgrade or a
  // reader above), for the page to show until dismissed.
  storageNotices(): Promise<notices.StorageNotice[]> {
    return notices.listNotices(this.db);
  }
  /** Dismisses the notices with these keys (default all); returns how many were dismissed. */
  dismissStorageNotices(keys?: readonly string[]): Promise<number> {
    return notices.dismissNotices(this.db, keys);
  }
  /** Runs a read, then stores the notices of the rows it skipped. */
  private async noting<T>(read: (onSkip: notices.OnSkip) => Promise<T>): Promise<T> {
    const found: notices.FoundNotice[] = [];
    const result = await read((n) => found.push(n));
    // Best-effort: the read succeeded and its rows are what the caller needs; a notice that
    // cannot be stored (full quota) is found again, and stored, on a later read.
    await notices.recordNotices(this.db, found, this.now).catch(() => {});
    return result;
  }

  // Recipe runs: the state that resumes a multi-stage recipe, on its run row.
  putRecipe(
    meta: history.RunHistoryMeta,
    recipe: StoredRecipe,
    status: RunStatus,
  ): Promise<RunRecord> {
    return recipes.putRecipe(this.db, meta, recipe, status, this.now);
  }
  listRecipeRuns(): Promise<RunRecord[]> {
    return recipes.listRecipeRuns(this.db);
  }

  // Checkpoints.
  listCheckpoints(runId?: string): Promise<CheckpointRecord[]> {
    return ckpt.listCheckpoints(this.db, runId);
  }
  getCheckpoint(id: string): Promise<CheckpointRecord | undefined> {
    return ckpt.getCheckpoint(this.db, id);
  }
  saveCheckpoint(
    payload: ckpt.CheckpointPayload,
    options: ckpt.SaveOptions = {},
  ): Promise<CheckpointRecord> {
    return ckpt.saveCheckpoint(this.db, payload, { ...this.options, ...options });
  }
  checkpointBase(id: string): Promise<ckpt.CheckpointBase> {
    return ckpt.checkpointBase(this.db, id);
  }
  loadCheckpoint(id: string): Promise<ckpt.LoadedCheckpoint> {
    return ckpt.loadCheckpoint(this.db, id);
  }
  loadLatestCheckpoint(runId: string): Promise<ckpt.LoadedCheckpoint | null> {
    return ckpt.loadLatestCheckpoint(this.db, runId);
  }
  deleteCheckpoint(id: string): Promise<boolean> {
    return ckpt.deleteCheckpoint(this.db, id);
  }
  applyRetention(runId: string, policy: ckpt.RetentionPolicy): Promise<CheckpointRecord[]> {
    return ckpt.applyRetention(this.db, runId, policy);
  }
  collectOrphans(): Promise<ckpt.OrphanReport> {
    return ckpt.collectOrphans(this.db, this.options);
  }

  // Export / import.
  exportCheckpoint(id: string): Promise<Uint8Array> {
    return transfer.exportCheckpoint(this.db, id);
  }
  async exportCheckpointBlob(id: string): Promise<{ blob: Blob; fileName: string }> {
    const loaded = await ckpt.loadCheckpoint(this.db, id);
    const bytes = transfer.checkpointToFile(loaded);
    return {
      blob: new Blob([bytes as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' }),
      fileName: transfer.checkpointFileName(loaded.runName ?? loaded.runId, loaded.step),
    };
  }
  importCheckpoint(
    file: Uint8Array | ArrayBuffer | Blob,
    options: transfer.ImportOptions = {},
  ): Promise<transfer.ImportResult> {
    return transfer.importCheckpoint(this.db, file, { ...this.options, ...options });
  }

  // Browser storage.
  async storageUsage(): Promise<StorageReport> {
    const manager =
      this.options.storageManager === undefined
        ? usage.defaultStorageManager()
        : this.options.storageManager;
    const records = await ckpt.listCheckpoints(this.db);
    return {
      ...(await usage.storageUsage(manager)),
      checkpointCount: records.length,
      checkpointBytes: records.reduce((sum, r) => sum + r.bytes, 0),
    };
  }
  requestPersistence(): Promise<usage.PersistenceResult> {
    return usage.requestPersistence(
      this.options.storageManager === undefined
        ? usage.defaultStorageManager()
        : this.options.storageManager,
    );
  }
}

export const openStorage = (options?: StorageOptions) => GrpoStorage.open(options);

// ---- the UI's function set, over one default storage ------------------------------------------

let defaultStorage: Promise<GrpoStorage> | null = null;

/** The app's storage (browser IndexedDB), opened on first use. */
export function getStorage(): Promise<GrpoStorage> {
  if (!defaultStorage) {
    defaultStorage = GrpoStorage.open();
    // A failed open (private mode, blocked storage) is retried on the next call.
    defaultStorage.catch(() => (defaultStorage = null));
  }
  return defaultStorage;
}

export const listRuns = async () => (await getStorage()).listRuns();
export const renameRun = async (id: string, name: string) =>
  (await getStorage()).renameRun(id, name);
export const deleteRun = async (id: string) => (await getStorage()).deleteRun(id);
export const listCheckpoints = async (runId?: string) =>
  (await getStorage()).listCheckpoints(runId);
export const saveCheckpoint = async (payload: ckpt.CheckpointPayload, options?: ckpt.SaveOptions) =>
  (await getStorage()).saveCheckpoint(payload, options);
export const loadCheckpoint = async (id: string) => (await getStorage()).loadCheckpoint(id);
export const deleteCheckpoint = async (id: string) => (await getStorage()).deleteCheckpoint(id);
export const exportCheckpoint = async (id: string) => (await getStorage()).exportCheckpointBlob(id);
export const importCheckpoint = async (
  file: Uint8Array | ArrayBuffer | Blob,
  options?: transfer.ImportOptions,
) => (await getStorage()).importCheckpoint(file, options);
export const storageUsage = async () => (await getStorage()).storageUsage();
export const storageNotices = async () => (await getStorage()).storageNotices();
export const dismissStorageNotices = async (keys?: readonly string[]) =>
  (await getStorage()).dismissStorageNotices(keys);
export const requestPersistence = async () => (await getStorage()).requestPersistence();
