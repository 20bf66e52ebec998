// Checkpoints in IndexedDB: weights + AdamW moments + RNG + config + metrics, stored as ≤ 4 MiB
// binary chunks with a SHA-256 per tensor.
//
// Atomicity without one giant transaction: the tensors are hashed first, then the chunks are
// written under a fresh checkpoint id that nothing lists yet (a `pendingSaves` row marks the save
// as alive), and only then one small transaction writes the CheckpointRecord that makes the
// checkpoint visible. A failed save, a quota error or a closed tab therefore never touches an
// earlier checkpoint; the pending chunks are deleted on failure, and chunks that still have no
// manifest (the tab closed mid-save) are garbage-collected when the database is next opened.

import { numel, parameterSpecs, type LlamaConfig } from '../core/model-config';
import { checkLoraOptions, loraAdapterSpecs, type LoraOptions } from '../core/lora';
import type {
  CheckpointDetailRecord,
  CheckpointRecord,
  GrpoDatabase,
  Identity,
  PendingSaveRecord,
  TensorEntry,
} from './db';
import type { FlatMetricsRow } from '../core/metrics-row';
import {
  CheckpointIntegrityError,
  CheckpointValidationError,
  NotFoundError,
  StorageError,
  StorageQuotaError,
  isQuotaExceeded,
  type DeletionCandidate,
} from './errors';
import { afterPrefix, prefixRange, writeTx } from './tx';

/** Chunk size: big enough that a 500 MB checkpoint is ~125 records, small enough for any browser. */
export const MAX_CHUNK_BYTES = 4 * 1024 * 1024;
/** Chunks of a save whose pending row was not touched for this long are orphans. */
export const DEFAULT_ORPHAN_GRACE_MS = 5 * 60 * 1000;

export const OPTIMIZER_EXP_AVG = 'optimizer.exp_avg.';
export const OPTIMIZER_EXP_AVG_SQ = 'optimizer.exp_avg_sq.';

export interface CheckpointTensor {
  /** HF parameter name, or 'optimizer.exp_avg.<name>' / 'optimizer.exp_avg_sq.<name>'. */
  name: string;
  shape: number[];
  data: Float32Array;
}

export interface CheckpointPayload {
  runId: string;
  step: number;
  /** The trainable tensors (every parameter, or a LoRA run's adapters) and (optionally, all or
   * none) their AdamW moments. */
  tensors: CheckpointTensor[];
  /** A LoRA run's adapter config (PEFT's r, alpha, targets): the tensors are then its adapters on a
   * frozen base that `modelIdentity` names. Null or absent: the tensors are every parameter. */
  adapter?: LoraOptions | null;
  /** Sampler / data-order RNG states, restored as is on resume. */
  rng: Record<string, number[] | string>;
  /** The resolved run config (JSON-serialisable). */
  config: Record<string, unknown>;
  /** The model the tensors belong to; names and shapes are checked against parameterSpecs(). */
  modelConfig: LlamaConfig;
  modelIdentity: Identity;
  referenceIdentity: Identity | null;
  tokenizerIdentity: Identity | null;
  metricsSoFar?: FlatMetricsRow[] | null;
  /** Metrics at this step, for "keep the best"; default: metricsSoFar's row for `step`. */
  metrics?: FlatMetricsRow | null;
  /** AdamW's step count t (bias correction), which can differ from the GRPO step. */
  optimizerStep: number;
  /** Name of the run when saving creates it (default: the run id). */
  runName?: string;
}

export interface LoadedCheckpoint extends CheckpointPayload {
  id: string;
  createdAt: number;
  bytes: number;
  metricsSoFar: FlatMetricsRow[] | null;
  metrics: FlatMetricsRow | null;
  adapter: LoraOptions | null;
  /** Hex SHA-256 per tensor name, verified on load. */
  tensorSha256: Record<string, string>;
}

export interface CheckpointStoreOptions {
  /** Clock (tests move it forward to age pending saves). */
  now?: () => number;
  /** ≤ MAX_CHUNK_BYTES, a multiple of 4; tests use small chunks to get many of them. */
  chunkBytes?: number;
  orphanGraceMs?: number;
}

export interface RetentionPolicy {
  /** Keep the newest n checkpoints (by step). */
  keepLast: number;
  /** Also keep the single best checkpoint by this metric (checkpoints without it never count). */
  keepBest?: { metric: string; mode: 'max' | 'min' };
}

export interface SaveOptions {
  /** Applied to the run after the checkpoint is committed. */
  retention?: RetentionPolicy;
}

/**
 * The tensors a checkpoint of this model trains: every parameter, or with `adapter` the LoRA
 * adapters only (the base is frozen and not stored). The one list every validation checks against.
 */
export function trainableSpecs(
  config: LlamaConfig,
  adapter: LoraOptions | null | undefined,
): { name: string; shape: number[] }[] {
  return adapter ? loraAdapterSpecs(config, adapter) : parameterSpecs(config);
}

/**
 * The first problem with a tensor set for `config` (and `adapter` for a LoRA run), or null: every
 * trainable tensor exactly once with its shape, AdamW moments all or none, nothing else.
 */
export function checkTensorSet(
  config: LlamaConfig,
  tensors: ReadonlyArray<{ name: string; shape: readonly number[] }>,
  adapter: LoraOptions | null = null,
): string | null {
  if (adapter) {
    try {
      checkLoraOptions(adapter);
    } catch (err) {
      return `adapter config: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  const expected = new Map<string, number[]>();
  const specs = trainableSpecs(config, adapter);
  const what = adapter
    ? `a LoRA adapter (r ${adapter.r}) of this model config`
    : 'a parameter of this model config';
  for (const spec of specs) expected.set(spec.name, spec.shape);
  const seen = new Set<string>();
  let optimizerCount = 0;
  for (const t of tensors) {
    if (seen.has(t.name)) return `tensor '${t.name}' appears twice`;
    seen.add(t.name);
    let paramName = t.name;
    if (t.name.startsWith(OPTIMIZER_EXP_AVG)) paramName = t.name.slice(OPTIMIZER_EXP_AVG.length);
    else if (t.name.startsWith(OPTIMIZER_EXP_AVG_SQ))
      paramName = t.name.slice(OPTIMIZER_EXP_AVG_SQ.length);
    const shape = expected.get(paramName);
    if (!shape) {
      return `unexpected tensor '${t.name}': neither ${what} nor its AdamW state`;
    }
    if (paramName !== t.name) optimizerCount++;
    if (shape.length !== t.shape.length || shape.some((d, i) => d !== t.shape[i])) {
      return `tensor '${t.name}' has shape [${t.shape.join(', ')}] but the model config expects [${shape.join(', ')}]`;
    }
  }
  for (const spec of specs) {
    if (!seen.has(spec.name)) return `tensor '${spec.name}' is missing`;
  }
  if (optimizerCount > 0) {
    for (const spec of specs) {
      for (const prefix of [OPTIMIZER_EXP_AVG, OPTIMIZER_EXP_AVG_SQ]) {
        if (!seen.has(prefix + spec.name)) {
          return `tensor '${prefix + spec.name}' is missing (the AdamW state is partial)`;
        }
      }
    }
  }
  return null;
}

const bytesOf = (data: Float32Array) =>
  new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>),
  );
  let hex = '';
  for (const b of digest) hex += b.toString(16).padStart(2, '0');
  return hex;
}

/** The bytes of chunk `index` of the stream formed by the tensors laid out at their offsets. */
function buildChunk(
  tensors: CheckpointTensor[],
  entries: TensorEntry[],
  start: number,
  end: number,
): ArrayBuffer {
  const out = new Uint8Array(end - start);
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    const lo = Math.max(start, e.offset);
    const hi = Math.min(end, e.offset + e.byteLength);
    if (lo >= hi) continue;
    out.set(bytesOf(tensors[i].data).subarray(lo - e.offset, hi - e.offset), lo - start);
  }
  return out.buffer;
}

function validatePayload(payload: CheckpointPayload): void {
  const fail = (msg: string) => {
    throw new CheckpointValidationError(
      `checkpoint of run '${payload.runId}' step ${payload.step}: ${msg}`,
    );
  };
  if (typeof payload.runId !== 'string' || payload.runId === '') fail('runId must be non-empty');
  if (!Number.isSafeInteger(payload.step) || payload.step < 0) fail(`step must be an integer ≥ 0`);
  if (!Number.isSafeInteger(payload.optimizerStep) || payload.optimizerStep < 0)
    fail(`optimizerStep must be an integer ≥ 0`);
  for (const t of payload.tensors) {
    if (!(t.data instanceof Float32Array)) fail(`tensor '${t.name}' is not a Float32Array`);
    if (t.data.length !== numel(t.shape)) {
      fail(
        `tensor '${t.name}' has shape [${t.shape.join(', ')}] (${numel(t.shape)} values) ` +
          `but ${t.data.length} values`,
      );
    }
  }
  const problem = checkTensorSet(payload.modelConfig, payload.tensors, payload.adapter ?? null);
  if (problem) fail(problem);
}

/** A metric snapshot for `step`: the explicit one, else metricsSoFar's row for that step. */
function metricsAt(payload: CheckpointPayload): FlatMetricsRow | null {
  if (payload.metrics) return payload.metrics;
  const rows = payload.metricsSoFar ?? [];
  for (let i = rows.length - 1; i >= 0; i--) if (rows[i].step === payload.step) return rows[i];
  return null;
}

/**
 * Saves a checkpoint atomically and returns its listing record. Throws StorageQuotaError when the
 * browser refuses the bytes (earlier checkpoints stay intact, nothing of this one remains).
 */
export async function saveCheckpoint(
  db: GrpoDatabase,
  payload: CheckpointPayload,
  options: CheckpointStoreOptions & SaveOptions = {},
): Promise<CheckpointRecord> {
  validatePayload(payload);
  const now = options.now ?? Date.now;
  const chunkBytes = options.chunkBytes ?? MAX_CHUNK_BYTES;
  if (chunkBytes <= 0 || chunkBytes > MAX_CHUNK_BYTES || chunkBytes % 4 !== 0) {
    throw new CheckpointValidationError(
      `chunkBytes must be a positive multiple of 4 ≤ ${MAX_CHUNK_BYTES}`,
    );
  }

  // Hash before any transaction: crypto.subtle is not an IDB request and would let it commit.
  const entries: TensorEntry[] = [];
  let offset = 0;
  for (const t of payload.tensors) {
    entries.push({
      name: t.name,
      shape: t.shape.slice(),
      dtype: 'F32',
      offset,
      byteLength: t.data.byteLength,
      sha256: await sha256Hex(bytesOf(t.data)),
    });
    offset += t.data.byteLength;
  }
  const totalBytes = offset;
  const chunkCount = Math.ceil(totalBytes / chunkBytes);
  const id = crypto.randomUUID();
  const startedAt = now();
  const pending: PendingSaveRecord = {
    id,
    runId: payload.runId,
    step: payload.step,
    startedAt,
    touchedAt: startedAt,
  };

  let record: CheckpointRecord;
  try {
    await writeTx(db, ['pendingSaves'], async (tx) => {
      await tx.objectStore('pendingSaves').put(pending);
    });
    for (let index = 0; index < chunkCount; index++) {
      const start = index * chunkBytes;
      const bytes = buildChunk(
        payload.tensors,
        entries,
        start,
        Math.min(totalBytes, start + chunkBytes),
      );
      await writeTx(db, ['chunks', 'pendingSaves'], async (tx) => {
        await tx.objectStore('chunks').put({ checkpointId: id, index, bytes });
        await tx.objectStore('pendingSaves').put({ ...pending, touchedAt: now() });
      });
    }
    record = {
      id,
      runId: payload.runId,
      step: payload.step,
      optimizerStep: payload.optimizerStep,
      createdAt: now(),
      bytes: totalBytes,
      chunkCount,
      tensorCount: entries.length,
      modelIdentity: payload.modelIdentity,
      metrics: metricsAt(payload),
    };
    const detail: CheckpointDetailRecord = {
      id,
      chunkSize: chunkBytes,
      tensors: entries,
      rng: payload.rng,
      config: payload.config,
      modelConfig: payload.modelConfig,
      referenceIdentity: payload.referenceIdentity,
      tokenizerIdentity: payload.tokenizerIdentity,
      metricsSoFar: payload.metricsSoFar ?? null,
      adapter: payload.adapter ?? null,
    };
    // The commit: the only write that makes the checkpoint visible, in its own transaction.
    await writeTx(
      db,
      ['checkpoints', 'checkpointDetails', 'pendingSaves', 'runs'],
      async (tx) => {
        if (!(await tx.objectStore('pendingSaves').get(id))) {
          throw new StorageError(
            `checkpoint of run '${payload.runId}' step ${payload.step} was not saved: the save ` +
              `stalled and another tab garbage-collected its chunks; save again`,
          );
        }
        await tx.objectStore('checkpointDetails').put(detail);
        await tx.objectStore('checkpoints').put(record);
        await tx.objectStore('pendingSaves').delete(id);
        const runs = tx.objectStore('runs');
        const run = await runs.get(payload.runId);
        await runs.put(
          run
            ? { ...run, updatedAt: record.createdAt }
            : {
                id: payload.runId,
                name: payload.runName ?? payload.runId,
                status: 'paused',
                config: payload.config,
                modelConfig: payload.modelConfig,
                modelIdentity: payload.modelIdentity,
                createdAt: record.createdAt,
                updatedAt: record.createdAt,
              },
        );
      },
      'strict',
    );
  } catch (err) {
    await discardPending(db, id);
    if (isQuotaExceeded(err)) {
      const candidates = await deletionCandidates(db).catch(() => []);
      const previous = candidates
        .filter((c) => c.runId === payload.runId)
        .reduce<number | null>((best, c) => (best === null || c.step > best ? c.step : best), null);
      throw new StorageQuotaError(
        payload.runId,
        payload.step,
        totalBytes,
        candidates,
        previous,
        err,
      );
    }
    throw err;
  }
  if (options.retention) await applyRetention(db, payload.runId, options.retention);
  return record;
}

/** Deletes what a failed save wrote; if even that fails, the next open collects it. */
async function discardPending(db: GrpoDatabase, id: string): Promise<void> {
  try {
    await writeTx(db, ['chunks', 'pendingSaves', 'checkpoints'], async (tx) => {
      // A failure after the commit (e.g. in retention) must not delete a visible checkpoint.
      if (await tx.objectStore('checkpoints').getKey(id)) return;
      await tx.objectStore('chunks').delete(prefixRange(id));
      await tx.objectStore('pendingSaves').delete(id);
    });
  } catch {
    // Left for collectOrphans().
  }
}

/** Every stored checkpoint, largest first, then oldest: what to offer for deletion. */
export async function deletionCandidates(db: GrpoDatabase): Promise<DeletionCandidate[]> {
  const tx = db.transaction(['checkpoints', 'runs'], 'readonly');
  const records = await tx.objectStore('checkpoints').getAll();
  const runs = await tx.objectStore('runs').getAll();
  const names = new Map(runs.map((r) => [r.id, r.name]));
  return records
    .map((r) => ({
      checkpointId: r.id,
      runId: r.runId,
      runName: names.get(r.runId) ?? r.runId,
      step: r.step,
      bytes: r.bytes,
      createdAt: r.createdAt,
    }))
    .sort((a, b) => b.bytes - a.bytes || a.createdAt - b.createdAt);
}

const byStep = (a: CheckpointRecord, b: CheckpointRecord) =>
  a.step - b.step || a.createdAt - b.createdAt;

/** Complete checkpoints only (of one run, or all), oldest step first. */
export async function listCheckpoints(
  db: GrpoDatabase,
  runId?: string,
): Promise<CheckpointRecord[]> {
  const records =
    runId === undefined
      ? await db.getAll('checkpoints')
      : await db.getAllFromIndex('checkpoints', 'byRun', runId);
  return records.sort(byStep);
}

export async function getCheckpoint(
  db: GrpoDatabase,
  id: string,
): Promise<CheckpointRecord | undefined> {
  return db.get('checkpoints', id);
}

/** What a checkpoint was trained on, read without its tensors: restore checks this before it asks
 * anything or loads megabytes (the base model, and for a LoRA run its adapter config). */
export interface CheckpointBase {
  modelIdentity: Identity;
  referenceIdentity: Identity | null;
  modelConfig: LlamaConfig;
  adapter: LoraOptions | null;
  /** The run's config as stored (a recipe stage's is tagged with `recipe`, an SFT stage's with
   * `stage: 'sft'`). */
  config: Record<string, unknown>;
}

export async function checkpointBase(db: GrpoDatabase, id: string): Promise<CheckpointBase> {
  const tx = db.transaction(['checkpoints', 'checkpointDetails'], 'readonly');
  const record = await tx.objectStore('checkpoints').get(id);
  if (!record) throw new NotFoundError(`checkpoint '${id}' does not exist (deleted?)`);
  const detail = await tx.objectStore('checkpointDetails').get(id);
  if (!detail) throw new CheckpointIntegrityError(`checkpoint '${id}' has no manifest details`);
  await tx.done;
  return {
    modelIdentity: record.modelIdentity,
    referenceIdentity: detail.referenceIdentity,
    modelConfig: detail.modelConfig,
    adapter: detail.adapter ?? null,
    config: detail.config,
  };
}

/** Loads and verifies a checkpoint; the tensors are fresh Float32Arrays (transferable). */
export async function loadCheckpoint(db: GrpoDatabase, id: string): Promise<LoadedCheckpoint> {
  const tx = db.transaction(['checkpoints', 'checkpointDetails', 'chunks', 'runs'], 'readonly');
  const record = await tx.objectStore('checkpoints').get(id);
  if (!record) throw new NotFoundError(`checkpoint '${id}' does not exist (deleted?)`);
  const detail = await tx.objectStore('checkpointDetails').get(id);
  if (!detail) throw new CheckpointIntegrityError(`checkpoint '${id}' has no manifest details`);
  const run = await tx.objectStore('runs').get(record.runId);
  const where = `checkpoint of run '${record.runId}' step ${record.step}`;

  const tensors: CheckpointTensor[] = detail.tensors.map((e) => ({
    name: e.name,
    shape: e.shape.slice(),
    data: new Float32Array(e.byteLength / 4),
  }));
  const targets = tensors.map((t) => bytesOf(t.data));
  let expectedIndex = 0;
  let cursor = await tx.objectStore('chunks').openCursor(prefixRange(id));
  while (cursor) {
    const { index, bytes } = cursor.value;
    const start = index * detail.chunkSize;
    const end = Math.min(record.bytes, start + detail.chunkSize);
    if (index !== expectedIndex || bytes.byteLength !== end - start) {
      throw new CheckpointIntegrityError(
        `${where}: chunk ${expectedIndex} of ${record.chunkCount} is missing or has the wrong size`,
      );
    }
    const chunk = new Uint8Array(bytes);
    for (let i = 0; i < detail.tensors.length; i++) {
      const e = detail.tensors[i];
      const lo = Math.max(start, e.offset);
      const hi = Math.min(end, e.offset + e.byteLength);
      if (lo < hi) targets[i].set(chunk.subarray(lo - start, hi - start), lo - e.offset);
    }
    expectedIndex++;
    cursor = await cursor.continue();
  }
  await tx.done;
  if (expectedIndex !== record.chunkCount) {
    throw new CheckpointIntegrityError(
      `${where}: ${expectedIndex} of ${record.chunkCount} chunks are present`,
    );
  }
  for (let i = 0; i < tensors.length; i++) {
    if ((await sha256Hex(targets[i])) !== detail.tensors[i].sha256) {
      throw new CheckpointIntegrityError(
        `${where}: tensor '${tensors[i].name}' does not match its SHA-256 (storage corrupted)`,
      );
    }
  }
  return {
    id,
    createdAt: record.createdAt,
    bytes: record.bytes,
    runId: record.runId,
    step: record.step,
    optimizerStep: record.optimizerStep,
    tensors,
    rng: detail.rng,
    config: detail.config,
    modelConfig: detail.modelConfig,
    modelIdentity: record.modelIdentity,
    referenceIdentity: detail.referenceIdentity,
    tokenizerIdentity: detail.tokenizerIdentity,
    metricsSoFar: detail.metricsSoFar,
    metrics: record.metrics,
    adapter: detail.adapter ?? null,
    runName: run?.name ?? record.runId,
    tensorSha256: Object.fromEntries(detail.tensors.map((e) => [e.name, e.sha256])),
  };
}

/** The newest (highest step) checkpoint of a run, loaded, or null: what "resume" calls. */
export async function loadLatestCheckpoint(
  db: GrpoDatabase,
  runId: string,
): Promise<LoadedCheckpoint | null> {
  const records = await listCheckpoints(db, runId);
  const latest = records[records.length - 1];
  return latest ? loadCheckpoint(db, latest.id) : null;
}

/** Deletes a checkpoint and its chunks in one transaction; false if it did not exist. */
export async function deleteCheckpoint(db: GrpoDatabase, id: string): Promise<boolean> {
  let existed = false;
  await writeTx(db, ['checkpoints', 'checkpointDetails', 'chunks'], async (tx) => {
    existed = (await tx.objectStore('checkpoints').getKey(id)) !== undefined;
    await tx.objectStore('checkpoints').delete(id);
    await tx.objectStore('checkpointDetails').delete(id);
    await tx.objectStore('chunks').delete(prefixRange(id));
  });
  return existed;
}

/** The checkpoints `policy` keeps among `records` (any order); pure, so the UI can preview it. */
export function retainedIds(records: CheckpointRecord[], policy: RetentionPolicy): Set<string> {
  if (!Number.isSafeInteger(policy.keepLast) || policy.keepLast < 0) {
    throw new CheckpointValidationError(
      `retention keepLast must be an integer ≥ 0, got ${policy.keepLast}`,
    );
  }
  const sorted = records.slice().sort(byStep);
  const keep = new Set(sorted.slice(Math.max(0, sorted.length - policy.keepLast)).map((r) => r.id));
  if (policy.keepBest) {
    const { metric, mode } = policy.keepBest;
    let best: CheckpointRecord | null = null;
    for (const r of sorted) {
      const value = r.metrics?.[metric];
      if (typeof value !== 'number' || !Number.isFinite(value)) continue;
      const bestValue = best?.metrics?.[metric] as number | undefined;
      if (bestValue === undefined || (mode === 'max' ? value > bestValue : value < bestValue)) {
        best = r;
      }
    }
    if (best) keep.add(best.id);
  }
  return keep;
}

/** Keeps the last n checkpoints of a run and the best by a metric; deletes the rest. */
export async function applyRetention(
  db: GrpoDatabase,
  runId: string,
  policy: RetentionPolicy,
): Promise<CheckpointRecord[]> {
  const records = await listCheckpoints(db, runId);
  const keep = retainedIds(records, policy);
  const doomed = records.filter((r) => !keep.has(r.id));
  if (doomed.length === 0) return [];
  await writeTx(db, ['checkpoints', 'checkpointDetails', 'chunks'], async (tx) => {
    for (const r of doomed) {
      await tx.objectStore('checkpoints').delete(r.id);
      await tx.objectStore('checkpointDetails').delete(r.id);
      await tx.objectStore('chunks').delete(prefixRange(r.id));
    }
  });
  return doomed;
}

export interface OrphanReport {
  /** Incomplete saves whose chunks were deleted. */
  saves: number;
  chunks: number;
}

/**
 * Deletes chunks that no checkpoint lists and no live save owns: the remains of a save that
 * failed and could not clean up, or of a tab closed mid-save. One transaction, so a save
 * committing in another tab is either fully seen or not at all.
 */
export async function collectOrphans(
  db: GrpoDatabase,
  options: CheckpointStoreOptions = {},
): Promise<OrphanReport> {
  const now = (options.now ?? Date.now)();
  const grace = options.orphanGraceMs ?? DEFAULT_ORPHAN_GRACE_MS;
  const report: OrphanReport = { saves: 0, chunks: 0 };
  await writeTx(db, ['chunks', 'checkpoints', 'pendingSaves'], async (tx) => {
    const chunks = tx.objectStore('chunks');
    const checkpoints = tx.objectStore('checkpoints');
    const pendingSaves = tx.objectStore('pendingSaves');
    const isAlive = async (id: string) => {
      const pending = await pendingSaves.get(id);
      return pending !== undefined && now - pending.touchedAt < grace;
    };
    const orphans: string[] = [];
    let cursor = await chunks.openKeyCursor();
    while (cursor) {
      const id = cursor.key[0];
      if ((await checkpoints.getKey(id)) === undefined && !(await isAlive(id))) orphans.push(id);
      cursor = await cursor.continue(afterPrefix(id));
    }
    for (const id of orphans) {
      report.chunks += await chunks.count(prefixRange(id));
      await chunks.delete(prefixRange(id));
      await pendingSaves.delete(id);
      report.saves++;
    }
    // Pending rows of saves that died before writing any chunk.
    for (const pending of await pendingSaves.getAll()) {
      if (now - pending.touchedAt >= grace) await pendingSaves.delete(pending.id);
    }
  });
  return report;
}
