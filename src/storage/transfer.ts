// Export / import of one checkpoint as one file (.grpockpt): a small container around a
// safetensors body, so the tensors stay readable by any safetensors reader after stripping the
// prefix.
//
//   bytes 0..8    magic 'GRPOCKPT'
//   bytes 8..16   u64 little-endian M: manifest length (a multiple of 8; JSON padded with spaces)
//   next M bytes  manifest JSON (ExportManifest: schema version, run, config, identities, RNG,
//                 metrics, and per tensor name / shape / dtype / data offsets / SHA-256)
//   the rest      a safetensors file (8-aligned, so its f32 tensors are read without copying)
//
// Import checks everything (magic, lengths, JSON, schema version, model config, tensor names and
// shapes against parameterSpecs, manifest vs safetensors header, checksums) before it writes
// anything; a rejected file leaves the database untouched.

import {
  SUPPORTED_ARCHITECTURES,
  llamaConfigProblem,
  numel,
  type LlamaConfig,
  type SupportedArchitecture,
} from '../core/model-config';
import { parseSafetensors, writeSafetensors } from '../formats/safetensors';
import type { LoraOptions } from '../core/lora';
import type { CheckpointRecord, GrpoDatabase, Identity, RunRecord } from './db';
import { metricNameProblem, type FlatMetricsRow } from '../core/metrics-row';
import { CheckpointImportError } from './errors';
import {
  checkTensorSet,
  loadCheckpoint,
  saveCheckpoint,
  sha256Hex,
  type CheckpointStoreOptions,
  type CheckpointTensor,
  type LoadedCheckpoint,
} from './checkpoints';
import { putMetrics } from './runs';

export const CHECKPOINT_MAGIC = 'GRPOCKPT';
export const EXPORT_SCHEMA_VERSION = 1;
export const CHECKPOINT_FILE_EXTENSION = '.grpockpt';
const PREFIX_BYTES = 16;

export interface ExportTensorEntry {
  name: string;
  shape: number[];
  dtype: 'F32';
  /** [begin, end) in the safetensors data section, as in its header. */
  dataOffsets: [number, number];
  sha256: string;
}

export interface ExportManifest {
  format: 'grpo-playground-checkpoint';
  schemaVersion: number;
  exportedAt: string;
  run: { id: string; name: string };
  step: number;
  optimizerStep: number;
  createdAt: number;
  config: Record<string, unknown>;
  modelConfig: LlamaConfig;
  modelIdentity: Identity;
  referenceIdentity: Identity | null;
  tokenizerIdentity: Identity | null;
  /** A LoRA run's adapter config (its tensors are the adapters); null for every parameter. Files
   * exported before LoRA runs could be saved have no such key and are full-weight checkpoints. */
  adapter?: LoraOptions | null;
  rng: Record<string, number[] | string>;
  /** Metrics at this step; JSON has no NaN, so non-finite values travel as null. */
  metrics: Record<string, number | null> | null;
  metricsSoFar: Array<Record<string, number | null>> | null;
  /** Length of the safetensors body, to tell a truncated file from a corrupt one. */
  safetensorsBytes: number;
  tensors: ExportTensorEntry[];
}

/** Joins manifest and safetensors body into the file layout above. */
export function encodeCheckpointFile(manifest: unknown, safetensors: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(manifest));
  const padded = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(PREFIX_BYTES + padded + safetensors.byteLength);
  out.set(new TextEncoder().encode(CHECKPOINT_MAGIC), 0);
  new DataView(out.buffer).setBigUint64(8, BigInt(padded), true);
  out.set(json, PREFIX_BYTES);
  out.fill(0x20, PREFIX_BYTES + json.length, PREFIX_BYTES + padded);
  out.set(safetensors, PREFIX_BYTES + padded);
  return out;
}

/** Splits a file into its parsed (unvalidated) manifest and safetensors body. */
export function decodeCheckpointFile(
  bytes: Uint8Array,
  fileName: string,
): { manifest: unknown; safetensors: Uint8Array } {
  const fail = (detail: string): never => {
    throw new CheckpointImportError(fileName, detail);
  };
  const magic = new TextDecoder('latin1').decode(bytes.subarray(0, CHECKPOINT_MAGIC.length));
  if (magic !== CHECKPOINT_MAGIC) {
    fail(
      bytes.byteLength < CHECKPOINT_MAGIC.length
        ? `not a GRPO Playground checkpoint: only ${bytes.byteLength} bytes`
        : `not a GRPO Playground checkpoint: it does not start with '${CHECKPOINT_MAGIC}'` +
            ` (a plain .safetensors file is loaded as a model, not imported as a checkpoint)`,
    );
  }
  if (bytes.byteLength < PREFIX_BYTES) {
    fail(
      `file is truncated: ${bytes.byteLength} bytes, shorter than its ${PREFIX_BYTES}-byte header`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const manifestBytes = Number(view.getBigUint64(8, true));
  if (PREFIX_BYTES + manifestBytes > bytes.byteLength) {
    fail(
      `file is truncated: the manifest needs ${manifestBytes} bytes but only ` +
        `${bytes.byteLength - PREFIX_BYTES} follow the header`,
    );
  }
  let manifest: unknown;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(
      bytes.subarray(PREFIX_BYTES, PREFIX_BYTES + manifestBytes),
    );
    manifest = JSON.parse(text);
  } catch (err) {
    fail(`the manifest is not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  return { manifest, safetensors: bytes.subarray(PREFIX_BYTES + manifestBytes) };
}

const jsonMetrics = (row: FlatMetricsRow): Record<string, number | null> =>
  Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number.isFinite(v) ? v : null]));

/** Builds the export file of a loaded (hence verified) checkpoint. */
export function checkpointToFile(ckpt: LoadedCheckpoint): Uint8Array {
  const tensors: ExportTensorEntry[] = [];
  // writeSafetensors lays the tensors out in order without gaps; the manifest repeats the offsets
  // so that a reader can seek without parsing the safetensors header.
  let offset = 0;
  for (const t of ckpt.tensors) {
    tensors.push({
      name: t.name,
      shape: t.shape.slice(),
      dtype: 'F32',
      dataOffsets: [offset, offset + t.data.byteLength],
      sha256: ckpt.tensorSha256[t.name],
    });
    offset += t.data.byteLength;
  }
  const safetensors = writeSafetensors(ckpt.tensors, {
    format: 'pt',
    'grpo-playground': 'checkpoint',
    step: String(ckpt.step),
  });
  const runName = ckpt.runName ?? ckpt.runId;
  const manifest: ExportManifest = {
    format: 'grpo-playground-checkpoint',
    schemaVersion: EXPORT_SCHEMA_VERSION,
    exportedAt: new Date().toISOString(),
    run: { id: ckpt.runId, name: runName },
    step: ckpt.step,
    optimizerStep: ckpt.optimizerStep,
    createdAt: ckpt.createdAt,
    config: ckpt.config,
    modelConfig: ckpt.modelConfig,
    modelIdentity: ckpt.modelIdentity,
    referenceIdentity: ckpt.referenceIdentity,
    tokenizerIdentity: ckpt.tokenizerIdentity,
    adapter: ckpt.adapter,
    rng: ckpt.rng,
    metrics: ckpt.metrics ? jsonMetrics(ckpt.metrics) : null,
    metricsSoFar: ckpt.metricsSoFar ? ckpt.metricsSoFar.map(jsonMetrics) : null,
    safetensorsBytes: safetensors.byteLength,
    tensors,
  };
  return encodeCheckpointFile(manifest, safetensors);
}

/** A suggested file name: run name and step, safe on every file system. */
export function checkpointFileName(runName: string, step: number): string {
  const base = runName.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^_+|_+$/g, '') || 'run';
  return `${base}-step${step}${CHECKPOINT_FILE_EXTENSION}`;
}

export async function exportCheckpoint(db: GrpoDatabase, id: string): Promise<Uint8Array> {
  return checkpointToFile(await loadCheckpoint(db, id));
}

// ---- import ---------------------------------------------------------------------------------

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isPosInt = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 1;
const isNonNegInt = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** The first problem with a manifest's model config, or null. */
export function checkLlamaConfig(c: unknown): string | null {
  if (!isObject(c)) return 'modelConfig is not an object';
  if (!SUPPORTED_ARCHITECTURES.includes(c.architecture as SupportedArchitecture)) {
    return `modelConfig.architecture ${JSON.stringify(c.architecture)} is not supported`;
  }
  for (const key of [
    'hiddenSize',
    'intermediateSize',
    'numLayers',
    'numHeads',
    'numKvHeads',
    'headDim',
    'vocabSize',
    'maxPositions',
  ]) {
    if (!isPosInt(c[key])) return `modelConfig.${key} must be a positive integer`;
  }
  for (const key of ['ropeTheta', 'rmsNormEps']) {
    if (typeof c[key] !== 'number' || !Number.isFinite(c[key])) {
      return `modelConfig.${key} must be a number`;
    }
  }
  for (const key of ['tieWordEmbeddings', 'attentionBias']) {
    if (typeof c[key] !== 'boolean') return `modelConfig.${key} must be true or false`;
  }
  if (c.bosTokenId !== null && !isNonNegInt(c.bosTokenId)) {
    return 'modelConfig.bosTokenId must be a token id or null';
  }
  if (!Array.isArray(c.eosTokenIds) || !c.eosTokenIds.every(isNonNegInt)) {
    return 'modelConfig.eosTokenIds must be a list of token ids';
  }
  // Bounds before anything is sized from the config (checkTensorSet lists every parameter).
  const problem = llamaConfigProblem(c as unknown as LlamaConfig);
  return problem === null ? null : `modelConfig.${problem}`;
}

const isAdapterConfig = (v: unknown): v is LoraOptions =>
  isObject(v) &&
  typeof v.r === 'number' &&
  typeof v.alpha === 'number' &&
  (v.targetModules === 'all-linear' ||
    (Array.isArray(v.targetModules) && v.targetModules.every((m) => typeof m === 'string'))) &&
  typeof v.useRslora === 'boolean' &&
  typeof v.dropout === 'number';

const isIdentity = (v: unknown): v is Identity =>
  isObject(v) && typeof v.name === 'string' && typeof v.sha256 === 'string';

/** A metrics row of a manifest, null when it is not one; a name outside the metric grammar is
 * refused with its reason (`where` names the row), since names become CSV headers and labels. */
function toMetricsRow(v: unknown, where: string, fileName: string): FlatMetricsRow | null {
  if (!isObject(v) || typeof v.step !== 'number') return null;
  const row: Record<string, number> = {};
  for (const [k, x] of Object.entries(v)) {
    const problem = metricNameProblem(k);
    if (problem) throw new CheckpointImportError(fileName, `${where}: ${problem}`);
    if (typeof x === 'number') row[k] = x;
    else if (x === null) row[k] = NaN;
    else return null;
  }
  return row as FlatMetricsRow;
}

/** A fully validated checkpoint file: what importCheckpoint writes, what the UI can preview. */
export interface ParsedCheckpointFile {
  manifest: ExportManifest;
  tensors: CheckpointTensor[];
  metrics: FlatMetricsRow | null;
  metricsSoFar: FlatMetricsRow[] | null;
}

/** Validates a checkpoint file completely (including checksums) without touching the database. */
export async function parseCheckpointFile(
  bytes: Uint8Array,
  fileName: string,
): Promise<ParsedCheckpointFile> {
  const fail = (detail: string): never => {
    throw new CheckpointImportError(fileName, detail);
  };
  const { manifest: m, safetensors } = decodeCheckpointFile(bytes, fileName);
  if (!isObject(m) || m.format !== 'grpo-playground-checkpoint') {
    fail(`the manifest does not describe a GRPO Playground checkpoint`);
  }
  const manifest = m as Record<string, unknown>;
  if (manifest.schemaVersion !== EXPORT_SCHEMA_VERSION) {
    fail(
      `schema version ${JSON.stringify(manifest.schemaVersion)} is not supported: this app reads ` +
        `version ${EXPORT_SCHEMA_VERSION}` +
        (typeof manifest.schemaVersion === 'number' &&
        manifest.schemaVersion > EXPORT_SCHEMA_VERSION
          ? ' (the file comes from a newer GRPO Playground; update the app)'
          : ''),
    );
  }
  const run = manifest.run;
  if (!isObject(run) || typeof run.id !== 'string' || typeof run.name !== 'string') {
    fail('manifest.run must be { id, name }');
  }
  if (!isNonNegInt(manifest.step)) fail('manifest.step must be an integer ≥ 0');
  if (!isNonNegInt(manifest.optimizerStep)) fail('manifest.optimizerStep must be an integer ≥ 0');
  if (typeof manifest.createdAt !== 'number') fail('manifest.createdAt must be a number');
  if (!isObject(manifest.config)) fail('manifest.config must be an object');
  if (!isObject(manifest.rng)) fail('manifest.rng must be an object');
  const configProblem = checkLlamaConfig(manifest.modelConfig);
  if (configProblem) fail(configProblem);
  if (!isIdentity(manifest.modelIdentity)) fail('manifest.modelIdentity must be { name, sha256 }');
  for (const key of ['referenceIdentity', 'tokenizerIdentity']) {
    if (manifest[key] !== null && !isIdentity(manifest[key])) {
      fail(`manifest.${key} must be { name, sha256 } or null`);
    }
  }
  let metrics: FlatMetricsRow | null = null;
  if (manifest.metrics !== null && manifest.metrics !== undefined) {
    metrics =
      toMetricsRow(manifest.metrics, 'manifest.metrics', fileName) ??
      fail('manifest.metrics is not a metrics row');
  }
  let metricsSoFar: FlatMetricsRow[] | null = null;
  if (manifest.metricsSoFar !== null && manifest.metricsSoFar !== undefined) {
    if (!Array.isArray(manifest.metricsSoFar)) fail('manifest.metricsSoFar must be a list');
    metricsSoFar = (manifest.metricsSoFar as unknown[]).map(
      (row, i) =>
        toMetricsRow(row, `manifest.metricsSoFar[${i}]`, fileName) ??
        fail(`manifest.metricsSoFar[${i}] is not a metrics row`),
    );
  }
  if (!isNonNegInt(manifest.safetensorsBytes)) fail('manifest.safetensorsBytes must be an integer');
  if (!Array.isArray(manifest.tensors)) fail('manifest.tensors must be a list');
  const entries = manifest.tensors as unknown[];
  for (const [i, e] of entries.entries()) {
    if (
      !isObject(e) ||
      typeof e.name !== 'string' ||
      !Array.isArray(e.shape) ||
      !e.shape.every(isNonNegInt) ||
      e.dtype !== 'F32' ||
      !Array.isArray(e.dataOffsets) ||
      e.dataOffsets.length !== 2 ||
      !e.dataOffsets.every(isNonNegInt) ||
      typeof e.sha256 !== 'string'
    ) {
      fail(`manifest.tensors[${i}] must be { name, shape, dtype: 'F32', dataOffsets, sha256 }`);
    }
  }
  const manifestTensors = entries as ExportTensorEntry[];

  // Truncation is the likeliest damage (an interrupted download): name it before the details.
  if (safetensors.byteLength < (manifest.safetensorsBytes as number)) {
    fail(
      `file is truncated: the tensor data should be ${manifest.safetensorsBytes} bytes but only ` +
        `${safetensors.byteLength} are present (was the download or copy interrupted?)`,
    );
  }
  if (safetensors.byteLength > (manifest.safetensorsBytes as number)) {
    fail(
      `the file has ${safetensors.byteLength - (manifest.safetensorsBytes as number)} unexpected ` +
        `bytes after the tensor data`,
    );
  }

  const adapter = manifest.adapter ?? null;
  if (adapter !== null && !isAdapterConfig(adapter)) {
    fail('manifest.adapter must be { r, alpha, targetModules, useRslora, dropout } or null');
  }
  const modelConfig = manifest.modelConfig as LlamaConfig;
  const setProblem = checkTensorSet(modelConfig, manifestTensors, adapter as LoraOptions | null);
  if (setProblem) fail(setProblem);

  let parsed: ReturnType<typeof parseSafetensors>;
  try {
    parsed = parseSafetensors(safetensors, fileName);
  } catch (err) {
    return fail(
      `the tensor data is not a valid safetensors body: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const bodyNames = [...parsed.tensors.keys()];
  let offset = 0;
  for (const [i, e] of manifestTensors.entries()) {
    const t = parsed.tensors.get(e.name);
    const expectedOffsets = [offset, offset + numel(e.shape) * 4];
    offset = expectedOffsets[1];
    if (
      !t ||
      bodyNames[i] !== e.name ||
      t.dtype !== 'F32' ||
      t.shape.length !== e.shape.length ||
      t.shape.some((d, k) => d !== e.shape[k]) ||
      e.dataOffsets[0] !== expectedOffsets[0] ||
      e.dataOffsets[1] !== expectedOffsets[1]
    ) {
      fail(`the manifest and the safetensors header disagree about tensor '${e.name}'`);
    }
  }
  if (bodyNames.length !== manifestTensors.length) {
    const extra = bodyNames.find((n) => !manifestTensors.some((e) => e.name === n));
    fail(`the safetensors body has tensor '${extra}' that the manifest does not list`);
  }

  const tensors: CheckpointTensor[] = [];
  for (const e of manifestTensors) {
    const data = parsed.tensors.get(e.name)!.data;
    const actual = await sha256Hex(
      new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength),
    );
    if (actual !== e.sha256) {
      fail(`tensor '${e.name}' does not match its SHA-256 checksum: the file is corrupted`);
    }
    tensors.push({ name: e.name, shape: e.shape.slice(), data });
  }
  return { manifest: manifest as unknown as ExportManifest, tensors, metrics, metricsSoFar };
}

export interface ImportOptions extends CheckpointStoreOptions {
  /** Shown in error messages (default 'checkpoint.grpockpt'). */
  fileName?: string;
  /** Name of the new run (default: the exported run's name, + ' (imported)' if taken). */
  runName?: string;
}

export interface ImportResult {
  run: RunRecord;
  checkpoint: CheckpointRecord;
}

/**
 * Imports a checkpoint file as a new run (a fresh id, so an import never overwrites a local run),
 * with the metrics it carries. A rejected file writes nothing.
 */
export async function importCheckpoint(
  db: GrpoDatabase,
  file: Uint8Array | ArrayBuffer | Blob,
  options: ImportOptions = {},
): Promise<ImportResult> {
  const fileName =
    options.fileName ??
    (typeof File !== 'undefined' && file instanceof File
      ? file.name
      : 'checkpoint' + CHECKPOINT_FILE_EXTENSION);
  const bytes =
    file instanceof Uint8Array
      ? file
      : new Uint8Array(file instanceof ArrayBuffer ? file : await file.arrayBuffer());
  const parsed = await parseCheckpointFile(bytes, fileName);
  const { manifest } = parsed;
  const runId = crypto.randomUUID();
  // Keep the exported name, but never show two runs with the same name side by side.
  let runName = options.runName ?? manifest.run.name;
  if (options.runName === undefined) {
    const names = new Set((await db.getAll('runs')).map((r) => r.name));
    if (names.has(runName)) runName = `${runName} (imported)`;
  }
  const checkpoint = await saveCheckpoint(
    db,
    {
      runId,
      runName,
      step: manifest.step,
      optimizerStep: manifest.optimizerStep,
      tensors: parsed.tensors,
      rng: manifest.rng,
      config: manifest.config,
      modelConfig: manifest.modelConfig,
      modelIdentity: manifest.modelIdentity,
      referenceIdentity: manifest.referenceIdentity,
      tokenizerIdentity: manifest.tokenizerIdentity,
      adapter: manifest.adapter ?? null,
      metrics: parsed.metrics,
      metricsSoFar: parsed.metricsSoFar,
    },
    options,
  );
  if (parsed.metricsSoFar) await putMetrics(db, runId, parsed.metricsSoFar);
  const run = await db.get('runs', runId);
  return { run: run!, checkpoint };
}
