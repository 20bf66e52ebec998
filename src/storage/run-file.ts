// A run as one file, so runs can leave the browser: its row (name, notes, status, config, model),
// every stored metric row with the time its step ended, and optionally its latest checkpoint.
//
//   without a checkpoint: the JSON document below, as UTF-8 text ('<name>.grporun.json')
//   with a checkpoint ('<name>.grporun'):
//     bytes 0..8    magic 'GRPORUN1'
//     bytes 8..16   u64 little-endian M: the document's length (JSON padded with spaces to 8)
//     next M bytes  the JSON document (its `checkpoint.bytes` says how long the rest is)
//     the rest      the checkpoint exactly as a .grpockpt file (storage/transfer.ts)
//
// Import validates everything, field by field with a message naming the field, before it writes
// anything (the embedded checkpoint by parseCheckpointFile: magic, model config, tensor set,
// checksums), bounds every count, and stores the run under a fresh id, never over a local run.
// Consent for custom reward code is the page's, as for a checkpoint import (the code can run
// only when the imported checkpoint is restored, which asks again).

import type { FlatMetricsRow } from '../core/metrics-row';
import { metricNameProblem } from '../core/metrics-row';
import { overLimitMessage, type SizeLimit } from '../core/limits';
import type { LlamaConfig } from '../core/model-config';
import type { GrpoDatabase, Identity, MetricsRecord, RunRecord, RunStage, RunStatus } from './db';
import { StorageError } from './errors';
import { loadLatestCheckpoint, saveCheckpoint, type CheckpointStoreOptions } from './checkpoints';
import {
  checkLlamaConfig,
  checkpointToFile,
  parseCheckpointFile,
  type ParsedCheckpointFile,
} from './transfer';
import { cleanName, cleanNotes, deleteRun } from './runs';
import { getRunHistory, untakenName } from './run-history';
import { writeTx } from './tx';

export const RUN_FILE_FORMAT = 'grpo-playground-run';
export const RUN_FILE_VERSION = 1;
export const RUN_FILE_MAGIC = 'GRPORUN1';
/** With a checkpoint: the container; without, the plain JSON document gets '.json' after it. */
export const RUN_FILE_EXTENSION = '.grporun';
const PREFIX_BYTES = 16;

/** Rows a run file may carry: a run's steps are bounded by the config's steps limit (1,000,000). */
export const RUN_FILE_ROWS: SizeLimit = { max: 1_000_000, unit: 'metric rows' };
/** Metrics one row may carry (a run logs a few dozen; every reward function adds two). */
export const RUN_FILE_ROW_METRICS: SizeLimit = { max: 1024, unit: 'metrics per row' };
/** The JSON document's size: its rows at a few dozen metrics each stay far below. */
export const RUN_FILE_DOCUMENT_BYTES: SizeLimit = { max: 256 * 1024 * 1024, unit: 'bytes' };
/** The run's config as JSON (options and custom reward code). */
export const RUN_FILE_CONFIG_BYTES: SizeLimit = { max: 4 * 1024 * 1024, unit: 'bytes' };
/** Stages of a multi-stage (recipe) run. */
export const RUN_FILE_STAGES: SizeLimit = { max: 1024, unit: 'stages' };

const RUN_STATUSES: readonly RunStatus[] = ['created', 'running', 'paused', 'finished', 'failed'];

/** The JSON document (JSON has no NaN: a non-finite metric travels as null). */
export interface RunFileDocument {
  format: typeof RUN_FILE_FORMAT;
  schemaVersion: number;
  exportedAt: string;
  run: {
    id: string;
    name: string;
    notes: string;
    status: RunStatus;
    createdAt: number;
    updatedAt: number;
    config: Record<string, unknown>;
    modelConfig: LlamaConfig | null;
    modelIdentity: Identity | null;
    stages?: RunStage[];
  };
  /** Every metric row in step order, flat: { step, <metric>: number | null, … }. */
  rows: Array<Record<string, number | null>>;
  /** When each row's step ended (ms since epoch), aligned with `rows`; null where unknown. */
  times: Array<number | null>;
  /** The embedded checkpoint (after the document in the container), or null. */
  checkpoint: { step: number; bytes: number } | null;
}

/** A run file that is not one, or is damaged: names the file and the field. */
export class RunImportError extends StorageError {
  override name = 'RunImportError';
  constructor(
    readonly file: string,
    readonly detail: string,
  ) {
    super(`${file}: ${detail}`);
  }
}

/** A fully validated run file: what importRunFile writes and the page previews (consent). */
export interface ParsedRunFile {
  document: RunFileDocument;
  rows: FlatMetricsRow[];
  times: Array<number | null>;
  checkpoint: ParsedCheckpointFile | null;
}

export interface ExportedRunFile {
  bytes: Uint8Array;
  fileName: string;
  /** The step of the checkpoint it carries, or null. */
  checkpointStep: number | null;
}

/** A suggested file name: the run's name, safe on every file system. */
export function runFileName(runName: string, withCheckpoint: boolean): string {
  const base = runName.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^_+|_+$/g, '') || 'run';
  return `${base}${RUN_FILE_EXTENSION}${withCheckpoint ? '' : '.json'}`;
}

const jsonValue = (v: number): number | null => (Number.isFinite(v) ? v : null);

/** The file of a run row, its rows and times, and optionally a checkpoint file's bytes. */
export function encodeRunFile(
  run: RunRecord,
  rows: readonly FlatMetricsRow[],
  times: ReadonlyArray<number | null>,
  checkpoint: { step: number; file: Uint8Array } | null,
): Uint8Array {
  const document: RunFileDocument = {
    format: RUN_FILE_FORMAT,
    schemaVersion: RUN_FILE_VERSION,
    exportedAt: new Date().toISOString(),
    run: {
      id: run.id,
      name: run.name,
      notes: run.notes ?? '',
      status: run.status,
      createdAt: run.createdAt,
      updatedAt: run.updatedAt,
      config: run.config,
      modelConfig: run.modelConfig,
      modelIdentity: run.modelIdentity,
      ...(run.stages ? { stages: run.stages } : {}),
    },
    rows: rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, jsonValue(v)]))),
    times: rows.map((_, i) => times[i] ?? null),
    checkpoint: checkpoint ? { step: checkpoint.step, bytes: checkpoint.file.byteLength } : null,
  };
  const json = new TextEncoder().encode(JSON.stringify(document));
  if (!checkpoint) return json;
  const padded = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(PREFIX_BYTES + padded + checkpoint.file.byteLength);
  out.set(new TextEncoder().encode(RUN_FILE_MAGIC), 0);
  new DataView(out.buffer).setBigUint64(8, BigInt(padded), true);
  out.set(json, PREFIX_BYTES);
  out.fill(0x20, PREFIX_BYTES + json.length, PREFIX_BYTES + padded);
  out.set(checkpoint.file, PREFIX_BYTES + padded);
  return out;
}

/** A stored run as a file: every readable row, and its latest checkpoint when asked and present. */
export async function exportRunFile(
  db: GrpoDatabase,
  id: string,
  withCheckpoint: boolean,
): Promise<ExportedRunFile> {
  const history = await getRunHistory(db, id);
  if (!history) throw new StorageError(`run '${id}' is no longer stored (deleted?)`);
  const latest = withCheckpoint ? await loadLatestCheckpoint(db, id) : null;
  const checkpoint = latest ? { step: latest.step, file: checkpointToFile(latest) } : null;
  return {
    bytes: encodeRunFile(history, history.rows, history.times, checkpoint),
    fileName: runFileName(history.name, checkpoint !== null),
    checkpointStep: checkpoint?.step ?? null,
  };
}

// ---- import ---------------------------------------------------------------------------------

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isNonNegInt = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isIdentity = (v: unknown): v is Identity =>
  isObject(v) && typeof v.name === 'string' && typeof v.sha256 === 'string';

/** Splits a run file into its JSON text and the checkpoint bytes after it (empty when none). */
function splitRunFile(bytes: Uint8Array, fail: (d: string) => never) {
  const magic = new TextDecoder('latin1').decode(bytes.subarray(0, RUN_FILE_MAGIC.length));
  if (magic !== RUN_FILE_MAGIC) return { json: bytes, rest: null };
  if (bytes.byteLength < PREFIX_BYTES)
    fail(
      `file is truncated: ${bytes.byteLength} bytes, shorter than its ${PREFIX_BYTES}-byte header`,
    );
  const length = Number(
    new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getBigUint64(8, true),
  );
  if (length > RUN_FILE_DOCUMENT_BYTES.max)
    fail(overLimitMessage('the run document', length, RUN_FILE_DOCUMENT_BYTES));
  if (PREFIX_BYTES + length > bytes.byteLength)
    fail(
      `file is truncated: the run document needs ${length} bytes but only ` +
        `${bytes.byteLength - PREFIX_BYTES} follow the header`,
    );
  return {
    json: bytes.subarray(PREFIX_BYTES, PREFIX_BYTES + length),
    rest: bytes.subarray(PREFIX_BYTES + length),
  };
}

/** One metric row of the document, validated: names by the metric grammar, values numbers. */
function readRow(v: unknown, i: number, fail: (d: string) => never): FlatMetricsRow {
  const where = `rows[${i}]`;
  if (!isObject(v)) return fail(`${where} must be an object { step, <metric>: number | null }`);
  if (!isNonNegInt(v.step)) fail(`${where}.step must be an integer ≥ 0`);
  const entries = Object.entries(v);
  if (entries.length - 1 > RUN_FILE_ROW_METRICS.max)
    fail(overLimitMessage(where, entries.length - 1, RUN_FILE_ROW_METRICS));
  const row: Record<string, number> = {};
  for (const [k, x] of entries) {
    if (k === 'step') continue;
    const problem = metricNameProblem(k);
    if (problem) fail(`${where}: ${problem}`);
    if (typeof x === 'number') row[k] = x;
    else if (x === null) row[k] = NaN;
    else fail(`${where}.${k} must be a number or null, got ${typeof x}`);
  }
  row.step = v.step as number;
  return row as FlatMetricsRow;
}

function readStages(v: unknown, fail: (d: string) => never): RunStage[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) return fail('run.stages must be a list');
  if (v.length > RUN_FILE_STAGES.max)
    fail(overLimitMessage('run.stages', v.length, RUN_FILE_STAGES));
  return v.map((s, i) => {
    if (
      !isObject(s) ||
      typeof s.name !== 'string' ||
      s.name.length > 200 ||
      !isNonNegInt(s.firstStep) ||
      (s.kind !== undefined && (typeof s.kind !== 'string' || s.kind.length > 64))
    )
      fail(`run.stages[${i}] must be { name, kind?, firstStep } (names up to 200 characters)`);
    return {
      name: s.name as string,
      firstStep: s.firstStep as number,
      ...(s.kind !== undefined ? { kind: s.kind as string } : {}),
    };
  });
}

/** Validates a run file completely (an embedded checkpoint to its checksums), writing nothing. */
export async function parseRunFile(bytes: Uint8Array, fileName: string): Promise<ParsedRunFile> {
  const fail = (detail: string): never => {
    throw new RunImportError(fileName, detail);
  };
  if (bytes.byteLength === 0) fail('the file is empty');
  const { json, rest } = splitRunFile(bytes, fail);
  if (json.byteLength > RUN_FILE_DOCUMENT_BYTES.max)
    fail(overLimitMessage('the run document', json.byteLength, RUN_FILE_DOCUMENT_BYTES));
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(json));
  } catch (err) {
    fail(
      `not a GRPO Playground run file: it is neither the '${RUN_FILE_MAGIC}' container nor valid ` +
        `JSON (${err instanceof Error ? err.message : String(err)})`,
    );
  }
  if (!isObject(doc) || doc.format !== RUN_FILE_FORMAT)
    fail(`not a GRPO Playground run file: its format is not '${RUN_FILE_FORMAT}'`);
  const d = doc as Record<string, unknown>;
  if (d.schemaVersion !== RUN_FILE_VERSION)
    fail(
      `schema version ${JSON.stringify(d.schemaVersion)} is not supported: this app reads ` +
        `version ${RUN_FILE_VERSION}` +
        (typeof d.schemaVersion === 'number' && d.schemaVersion > RUN_FILE_VERSION
          ? ' (the file comes from a newer GRPO Playground; update the app)'
          : ''),
    );

  const run = d.run;
  if (!isObject(run)) return fail('run must be an object');
  if (typeof run.id !== 'string' || run.id.length > 200)
    fail('run.id must be text of at most 200 characters');
  let name = '';
  let notes = '';
  try {
    name = cleanName(run.name as string);
    notes = run.notes === undefined ? '' : cleanNotes(run.notes as string);
  } catch (err) {
    fail(`run.${name ? 'notes' : 'name'}: ${(err as Error).message}`);
  }
  if (!RUN_STATUSES.includes(run.status as RunStatus))
    fail(`run.status must be one of ${RUN_STATUSES.join(', ')}`);
  for (const key of ['createdAt', 'updatedAt'])
    if (!isTime(run[key])) fail(`run.${key} must be a time (ms since 1970, ≥ 0)`);
  if (!isObject(run.config)) fail('run.config must be an object');
  const configBytes = new TextEncoder().encode(JSON.stringify(run.config)).byteLength;
  if (configBytes > RUN_FILE_CONFIG_BYTES.max)
    fail(overLimitMessage('run.config', configBytes, RUN_FILE_CONFIG_BYTES));
  if (run.modelConfig !== null) {
    const problem = checkLlamaConfig(run.modelConfig);
    if (problem) fail(`run.${problem}`);
  }
  if (run.modelIdentity !== null && !isIdentity(run.modelIdentity))
    fail('run.modelIdentity must be { name, sha256 } or null');
  const stages = readStages(run.stages, fail);

  if (!Array.isArray(d.rows)) return fail('rows must be a list');
  if (d.rows.length > RUN_FILE_ROWS.max)
    fail(overLimitMessage('rows', d.rows.length, RUN_FILE_ROWS));
  const rows = d.rows.map((r, i) => readRow(r, i, fail));
  for (let i = 1; i < rows.length; i++)
    if (rows[i].step <= rows[i - 1].step)
      fail(
        `rows[${i}].step ${rows[i].step} does not follow rows[${i - 1}].step ${rows[i - 1].step}`,
      );
  if (!Array.isArray(d.times) || d.times.length !== rows.length)
    fail(`times must be a list of ${rows.length} entries, one per row`);
  const times = (d.times as unknown[]).map((t, i) =>
    t === null ? null : isTime(t) ? t : fail(`times[${i}] must be a time (ms) or null`),
  );

  let checkpoint: ParsedCheckpointFile | null = null;
  const c = d.checkpoint;
  if (c === null || c === undefined) {
    if (rest && rest.byteLength > 0)
      fail(`${rest.byteLength} unexpected bytes follow the run document (it names no checkpoint)`);
  } else {
    if (!isObject(c) || !isNonNegInt(c.step) || !isNonNegInt(c.bytes))
      fail('checkpoint must be { step, bytes } or null');
    const { step, bytes: size } = c as { step: number; bytes: number };
    if (!rest) return fail('checkpoint is named, but the file is plain JSON with no checkpoint');
    if (rest.byteLength < size)
      fail(
        `file is truncated: the checkpoint should be ${size} bytes but only ${rest.byteLength} ` +
          `are present (was the download or copy interrupted?)`,
      );
    if (rest.byteLength > size)
      fail(`the file has ${rest.byteLength - size} unexpected bytes after the checkpoint`);
    try {
      checkpoint = await parseCheckpointFile(rest, fileName);
    } catch (err) {
      // The checkpoint's own checks (transfer.ts), named as this file's checkpoint.
      const detail = (err as { detail?: unknown }).detail;
      fail(`its checkpoint: ${typeof detail === 'string' ? detail : String(err)}`);
    }
    if (checkpoint!.manifest.step !== step)
      fail(
        `checkpoint.step ${step} differs from its checkpoint's step ${checkpoint!.manifest.step}`,
      );
  }
  const document = {
    ...(d as unknown as RunFileDocument),
    run: {
      ...(run as unknown as RunFileDocument['run']),
      name,
      notes,
      ...(stages ? { stages } : {}),
    },
  };
  return { document, rows, times, checkpoint };
}

export interface RunImportOptions extends CheckpointStoreOptions {
  /** Shown in error messages (default 'run.grporun'). */
  fileName?: string;
}

export interface RunImportResult {
  run: RunRecord;
  rows: number;
  /** The step of the checkpoint it stored, or null. */
  checkpointStep: number | null;
}

/**
 * Imports a run file as a new run (a fresh id; the name gets ' (imported)' when another run has
 * it) with its rows, their times, and its checkpoint if it has one. A rejected file writes nothing.
 */
export async function importRunFile(
  db: GrpoDatabase,
  bytes: Uint8Array,
  options: RunImportOptions = {},
): Promise<RunImportResult> {
  const fileName = options.fileName ?? `run${RUN_FILE_EXTENSION}`;
  const parsed = await parseRunFile(bytes, fileName);
  const { run } = parsed.document;
  const id = crypto.randomUUID();
  const now = options.now ?? Date.now;
  const taken = new Set((await db.getAll('runs')).map((r) => r.name));
  const name = taken.has(run.name) ? untakenName(`${run.name} (imported)`, taken, now()) : run.name;
  const c = parsed.checkpoint;
  if (c) {
    await saveCheckpoint(
      db,
      {
        runId: id,
        runName: name,
        step: c.manifest.step,
        optimizerStep: c.manifest.optimizerStep,
        tensors: c.tensors,
        rng: c.manifest.rng,
        config: c.manifest.config,
        modelConfig: c.manifest.modelConfig,
        modelIdentity: c.manifest.modelIdentity,
        referenceIdentity: c.manifest.referenceIdentity,
        tokenizerIdentity: c.manifest.tokenizerIdentity,
        adapter: c.manifest.adapter ?? null,
        metrics: c.metrics,
        metricsSoFar: c.metricsSoFar,
      },
      options,
    );
  }
  const record: RunRecord = {
    id,
    name,
    ...(run.notes ? { notes: run.notes } : {}),
    // A run that was training when exported is not training here.
    status: run.status === 'running' || run.status === 'created' ? 'paused' : run.status,
    config: run.config,
    modelConfig: run.modelConfig,
    modelIdentity: run.modelIdentity,
    createdAt: run.createdAt,
    updatedAt: now(),
    ...(run.stages ? { stages: run.stages } : {}),
  };
  try {
    await writeTx(db, ['runs', 'metrics'], async (tx) => {
      await tx.objectStore('runs').put(record);
      for (const [i, values] of parsed.rows.entries()) {
        const m: MetricsRecord = { runId: id, step: values.step, values };
        const at = parsed.times[i];
        if (at !== null) m.at = at;
        await tx.objectStore('metrics').put(m);
      }
    });
  } catch (err) {
    // The checkpoint went in first (its own transactions): take it out again, so a failed
    // import (storage full) leaves nothing behind.
    if (c) await deleteRun(db, id).catch(() => {});
    throw err;
  }
  return { run: record, rows: parsed.rows.length, checkpointStep: c?.manifest.step ?? null };
}
