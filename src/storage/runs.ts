// Runs and their per-step metrics and samples. A run row is the unit the UI lists, renames and
// deletes; deleting a run deletes its metrics, samples and checkpoints in the same transaction
// (a recipe run's, its stages' too).

import type { LlamaConfig } from '../core/model-config';
import type {
  GrpoDatabase,
  Identity,
  MetricsRecord,
  RunRecord,
  RunStatus,
  SamplesRecord,
} from './db';
import type { FlatMetricsRow } from '../core/metrics-row';
import { CheckpointValidationError, NotFoundError } from './errors';
import { prefixRange, writeTx } from './tx';
import { readableMetricsRows, type OnSkip } from './notices';

export interface NewRun {
  /** Default: a random UUID. */
  id?: string;
  name: string;
  config: Record<string, unknown>;
  modelConfig?: LlamaConfig | null;
  modelIdentity?: Identity | null;
  status?: RunStatus;
}

/** A run row plus what its checkpoints add up to, for the run list. */
export interface RunSummary extends RunRecord {
  checkpointCount: number;
  checkpointBytes: number;
  /** Highest checkpointed step, or null. */
  latestStep: number | null;
}

export const MAX_NAME_LENGTH = 200;
/** The longest notes a run keeps (a paragraph or a few; a file's notes are checked against it). */
export const MAX_NOTES_LENGTH = 10_000;

export function cleanName(name: string): string {
  const trimmed = typeof name === 'string' ? name.trim() : '';
  if (trimmed === '' || trimmed.length > MAX_NAME_LENGTH) {
    throw new CheckpointValidationError(
      `a run name must be 1 to ${MAX_NAME_LENGTH} characters, got ${JSON.stringify(name)}`,
    );
  }
  return trimmed;
}

export function cleanNotes(notes: string): string {
  if (typeof notes !== 'string' || notes.length > MAX_NOTES_LENGTH) {
    throw new CheckpointValidationError(
      `run notes must be text of at most ${MAX_NOTES_LENGTH} characters, got ` +
        (typeof notes === 'string' ? `${notes.length}` : typeof notes),
    );
  }
  return notes.trim();
}

export async function createRun(
  db: GrpoDatabase,
  run: NewRun,
  now: () => number = Date.now,
): Promise<RunRecord> {
  const t = now();
  const record: RunRecord = {
    id: run.id ?? crypto.randomUUID(),
    name: cleanName(run.name),
    status: run.status ?? 'created',
    config: run.config,
    modelConfig: run.modelConfig ?? null,
    modelIdentity: run.modelIdentity ?? null,
    createdAt: t,
    updatedAt: t,
  };
  // add(), not put(): an existing id is an error, never a silent overwrite.
  await writeTx(db, ['runs'], async (tx) => {
    await tx.objectStore('runs').add(record);
  });
  return record;
}

export async function getRun(db: GrpoDatabase, id: string): Promise<RunRecord | undefined> {
  return db.get('runs', id);
}

/** Every run, most recently updated first, with its checkpoint count and bytes. */
export async function listRuns(db: GrpoDatabase): Promise<RunSummary[]> {
  const tx = db.transaction(['runs', 'checkpoints'], 'readonly');
  const runs = await tx.objectStore('runs').getAll();
  const checkpoints = await tx.objectStore('checkpoints').getAll();
  return runs
    .map((run) => {
      const own = checkpoints.filter((c) => c.runId === run.id);
      return {
        ...run,
        checkpointCount: own.length,
        checkpointBytes: own.reduce((sum, c) => sum + c.bytes, 0),
        latestStep: own.length ? Math.max(...own.map((c) => c.step)) : null,
      };
    })
    .sort((a, b) => b.updatedAt - a.updatedAt);
}

async function updateRun(
  db: GrpoDatabase,
  id: string,
  change: Partial<Pick<RunRecord, 'name' | 'notes' | 'status'>>,
  now: () => number,
): Promise<RunRecord> {
  let updated: RunRecord | undefined;
  await writeTx(db, ['runs'], async (tx) => {
    const run = await tx.objectStore('runs').get(id);
    if (!run) throw new NotFoundError(`run '${id}' does not exist (deleted?)`);
    updated = { ...run, ...change, updatedAt: now() };
    await tx.objectStore('runs').put(updated);
  });
  return updated!;
}

export async function renameRun(
  db: GrpoDatabase,
  id: string,
  name: string,
  now: () => number = Date.now,
): Promise<RunRecord> {
  return updateRun(db, id, { name: cleanName(name) }, now);
}

/** Sets a run's notes (empty text clears them). */
export async function setRunNotes(
  db: GrpoDatabase,
  id: string,
  notes: string,
  now: () => number = Date.now,
): Promise<RunRecord> {
  return updateRun(db, id, { notes: cleanNotes(notes) }, now);
}

export async function setRunStatus(
  db: GrpoDatabase,
  id: string,
  status: RunStatus,
  now: () => number = Date.now,
): Promise<RunRecord> {
  return updateRun(db, id, { status }, now);
}

/**
 * The ids of the runs that belong to run `id`: a recipe's stages store their checkpoints under
 * runs of their own, `${id}/${index}-${name}` (src/worker/recipe-service.ts stageRunId).
 */
export const stageRunRange = (id: string): IDBKeyRange =>
  IDBKeyRange.bound(`${id}/`, `${id}/\uffff`);

/** Whether `runId` is one of run `id`'s stage runs. */
export const isStageRunOf = (runId: string, id: string): boolean => runId.startsWith(`${id}/`);

/**
 * Deletes a run with its metrics, samples and checkpoints, and a recipe run with its stages' runs
 * and checkpoints (one transaction); false if absent.
 */
export async function deleteRun(db: GrpoDatabase, id: string): Promise<boolean> {
  let existed = false;
  await writeTx(
    db,
    ['runs', 'metrics', 'samples', 'checkpoints', 'checkpointDetails', 'chunks'],
    async (tx) => {
      existed = (await tx.objectStore('runs').getKey(id)) !== undefined;
      const stages = await tx.objectStore('runs').getAllKeys(stageRunRange(id));
      for (const runId of [id, ...stages]) {
        const ids = await tx.objectStore('checkpoints').index('byRun').getAllKeys(runId);
        for (const checkpointId of ids) {
          await tx.objectStore('checkpoints').delete(checkpointId);
          await tx.objectStore('checkpointDetails').delete(checkpointId);
          await tx.objectStore('chunks').delete(prefixRange(checkpointId));
        }
        await tx.objectStore('metrics').delete(prefixRange(runId));
        await tx.objectStore('samples').delete(prefixRange(runId));
        await tx.objectStore('runs').delete(runId);
      }
    },
  );
  return existed;
}

/** Stores (or replaces) metric rows of a run, one per step. */
export async function putMetrics(
  db: GrpoDatabase,
  runId: string,
  rows: FlatMetricsRow[],
): Promise<void> {
  await writeTx(db, ['metrics'], async (tx) => {
    for (const values of rows) {
      const record: MetricsRecord = { runId, step: values.step, values };
      await tx.objectStore('metrics').put(record);
    }
  });
}

/** A run's metric rows in step order; rows it cannot read are left out and reported to `onSkip`. */
export async function getMetrics(
  db: GrpoDatabase,
  runId: string,
  onSkip: OnSkip = () => {},
): Promise<FlatMetricsRow[]> {
  const records = await db.getAll('metrics', prefixRange(runId));
  return readableMetricsRows(records, runId, 'reading run metrics', onSkip);
}

export async function putSamples(db: GrpoDatabase, record: SamplesRecord): Promise<void> {
  const n = record.completions.length;
  if (
    record.rewards.length !== n ||
    record.advantages.length !== n ||
    n !== record.prompts.length * record.groupSize
  ) {
    throw new CheckpointValidationError(
      `samples of run '${record.runId}' step ${record.step}: expected B·G = ` +
        `${record.prompts.length}·${record.groupSize} completions, rewards and advantages, got ` +
        `${n}, ${record.rewards.length}, ${record.advantages.length}`,
    );
  }
  await writeTx(db, ['samples'], async (tx) => {
    await tx.objectStore('samples').put(record);
  });
}

export async function getSamples(
  db: GrpoDatabase,
  runId: string,
  step: number,
): Promise<SamplesRecord | undefined> {
  return db.get('samples', [runId, step]);
}

/** The steps of a run that have stored samples, ascending. */
export async function listSampleSteps(db: GrpoDatabase, runId: string): Promise<number[]> {
  const keys = await db.getAllKeys('samples', prefixRange(runId));
  return keys.map((k) => k[1]);
}
