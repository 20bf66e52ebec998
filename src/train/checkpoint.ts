// The checkpoint codec shared by the trainer worker and the command line: a trainer snapshot ⇄ a
// CheckpointPayload (named f32 tensors + JSON fields) ⇄ bytes. A checkpoint holds the policy
// weights in Hugging Face names, the AdamW moments, the optimizer step, and the trainer's counters;
// sampling needs no RNG state because its draws are keyed by (seed, step). Restoring into a trainer
// built with the run's initial weights (the frozen reference) continues the run exactly.
// The browser stores a payload in IndexedDB (src/storage/checkpoints.ts: its tensors as chunks);
// the CLI stores it as files (checkpointToFiles: model.safetensors, optimizer.safetensors,
// trainer_state.json, which with a Hugging Face folder's config and tokenizer PyTorch loads).
// A LoRA run (config.usePeft) saves only its adapters (PEFT names) and their AdamW moments: the base
// is frozen, so the base model's identity (modelIdentity) is all a restore needs to find it.
import { EXP_AVG_PREFIX, EXP_AVG_SQ_PREFIX } from '../optim/adamw';
import { loraOptionsOf, type Config, type LiveChange } from '../grpo/config';
import { loraAdapterSpecs } from '../core/lora';
import type { TrainerSnapshot } from '../grpo/trainer';
import { numel, parameterSpecs, type LlamaConfig } from '../core/model-config';
import { Sha256 } from '../core/sha256';
import { parseSafetensors, writeSafetensors } from '../formats/safetensors';
import { storedToF32, type WeightReader } from '../formats/hf-folder';
import {
  checkTensorSet,
  type CheckpointPayload,
  type CheckpointTensor,
} from '../storage/checkpoints';
import type { Identity } from '../storage/db';
import {
  flattenMetricsRow,
  nestMetricsRow,
  type FlatMetricsRow,
  type MetricsRow,
} from '../core/metrics-row';

/** The trainer's data-order and bookkeeping counters, stored in the checkpoint's `rng` record. */
type StateKey = 'trainer.promptCursor' | 'trainer.numTokens' | 'trainer.consecutiveSkips';

export interface CheckpointContext {
  runId: string;
  runName?: string;
  config: Config;
  modelConfig: LlamaConfig;
  modelIdentity: Identity;
  /** The frozen reference policy (the run's initial weights); null when β = 0. */
  referenceIdentity: Identity | null;
  tokenizerIdentity: Identity | null;
  metricsSoFar?: FlatMetricsRow[];
  /** The options changed in the middle of the run so far (Run.applyLiveOptions): `config` is the
   * one in force after them. Kept in the `rng` record with the trainer's other bookkeeping. */
  liveChanges?: readonly LiveChange[];
}

/** Where a checkpoint keeps its run's live option changes (a JSON string in its `rng` record). */
const LIVE_CHANGES_KEY = 'run.liveChanges';

export function snapshotToPayload(
  snapshot: TrainerSnapshot,
  ctx: CheckpointContext,
): CheckpointPayload {
  const tensors: CheckpointTensor[] = [];
  const specs = savedSpecs(ctx.config, ctx.modelConfig);
  for (const spec of specs) {
    tensors.push({ name: spec.name, shape: spec.shape, data: snapshot.weights.get(spec.name)! });
  }
  // Moments have their parameter's shape (PyTorch's exp_avg / exp_avg_sq).
  for (const prefix of [EXP_AVG_PREFIX, EXP_AVG_SQ_PREFIX]) {
    for (const spec of specs) {
      const data = snapshot.optimizer.get(prefix + spec.name);
      if (data) tensors.push({ name: prefix + spec.name, shape: spec.shape, data });
    }
  }
  return {
    runId: ctx.runId,
    runName: ctx.runName,
    step: snapshot.step,
    tensors,
    rng: {
      'trainer.promptCursor': [snapshot.promptCursor],
      'trainer.numTokens': [snapshot.numTokens],
      'trainer.consecutiveSkips': [snapshot.consecutiveSkips],
      sampler: `philox4x32-10 keyed by (seed ${ctx.config.seed}, step): no state`,
      ...(ctx.liveChanges?.length ? { [LIVE_CHANGES_KEY]: JSON.stringify(ctx.liveChanges) } : {}),
    },
    config: ctx.config as unknown as Record<string, unknown>,
    adapter: loraOptionsOf(ctx.config),
    modelConfig: ctx.modelConfig,
    modelIdentity: ctx.modelIdentity,
    referenceIdentity: ctx.referenceIdentity,
    tokenizerIdentity: ctx.tokenizerIdentity,
    metricsSoFar: ctx.metricsSoFar ?? null,
    optimizerStep: snapshot.optimizerStep,
  };
}

export function payloadToSnapshot(payload: CheckpointPayload): TrainerSnapshot {
  const counter = (key: StateKey) => {
    const value = payload.rng[key];
    if (!Array.isArray(value) || typeof value[0] !== 'number') {
      throw new Error(
        `checkpoint at step ${payload.step} has no '${key}': it was not saved by this trainer`,
      );
    }
    return value[0];
  };
  const weights = new Map<string, Float32Array>();
  const optimizer = new Map<string, Float32Array>();
  for (const t of payload.tensors)
    (t.name.startsWith('optimizer.') ? optimizer : weights).set(t.name, t.data);
  const config = payload.config as Partial<Config> | null;
  for (const spec of savedSpecs(config, payload.modelConfig)) {
    if (weights.get(spec.name)?.length !== numel(spec.shape)) {
      throw new Error(
        `checkpoint at step ${payload.step}: parameter ${spec.name} is missing or has the wrong size`,
      );
    }
  }
  return {
    step: payload.step,
    numTokens: counter('trainer.numTokens'),
    promptCursor: counter('trainer.promptCursor'),
    consecutiveSkips: counter('trainer.consecutiveSkips'),
    optimizerStep: payload.optimizerStep,
    weights,
    optimizer,
  };
}

/** The live option changes a checkpoint's run had made by then (none for one saved without). */
export function liveChangesOf(payload: Pick<CheckpointPayload, 'rng'>): LiveChange[] {
  const stored = payload.rng[LIVE_CHANGES_KEY];
  if (typeof stored !== 'string') return [];
  const parsed = JSON.parse(stored) as unknown;
  if (!Array.isArray(parsed)) throw new Error(`checkpoint: '${LIVE_CHANGES_KEY}' is not a list`);
  return parsed as LiveChange[];
}

/** The weights a checkpoint holds: every parameter, or a LoRA run's adapters only. */
function savedSpecs(config: Partial<Config> | null, modelConfig: LlamaConfig) {
  const lora = config?.usePeft ? loraOptionsOf(config as Config) : null;
  return lora ? loraAdapterSpecs(modelConfig, lora) : parameterSpecs(modelConfig);
}

/** Identity of a set of weights: a name and the SHA-256 of names, shapes and bytes in order. */
export async function weightsIdentity(
  name: string,
  tensors: ReadonlyMap<string, Float32Array>,
): Promise<Identity> {
  const encoder = new TextEncoder();
  const parts: Uint8Array[] = [];
  for (const key of [...tensors.keys()].sort()) {
    const data = tensors.get(key)!;
    parts.push(
      encoder.encode(`${key}:${data.length};`),
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    );
  }
  const total = parts.reduce((n, p) => n + p.length, 0);
  const joined = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    joined.set(p, offset);
    offset += p.length;
  }
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', joined));
  return { name, sha256: [...digest].map((b) => b.toString(16).padStart(2, '0')).join('') };
}

/**
 * weightsIdentity fed one tensor at a time (a streamed load hashes each tensor as it is uploaded,
 * never holding the model): add() every tensor in sorted name order (the order weightsIdentity
 * hashes in, which ParameterStore.uploadStreamed follows), as the f32 values the Map would hold
 * (16-bit values widened); finish() gives the same identity as weightsIdentity on those tensors.
 */
export function weightsIdentityHasher(name: string) {
  const hash = new Sha256();
  const encoder = new TextEncoder();
  let last: string | null = null;
  return {
    add(key: string, data: Float32Array): void {
      if (last !== null && !(last < key)) {
        throw new Error(`weightsIdentityHasher: ${key} after ${last}; add tensors in sorted order`);
      }
      last = key;
      hash.update(encoder.encode(`${key}:${data.length};`));
      hash.update(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    },
    finish(): Identity {
      return { name, sha256: hash.hex() };
    },
  };
}

/**
 * Models whose f32 weights take at most this many bytes get their identity hashed whole by
 * crypto.subtle (fast: about 0.1 s for 64 MiB); larger ones tensor by tensor (weightsIdentityHasher,
 * a plain-JS SHA-256 of about 55 MB/s in V8), so no whole-model f32 copy is made for them. The
 * digest is the same. The whole hash holds the f32 tensors and their concatenation, so a load holds
 * at most the largest tensor plus twice this window (the fixed margin of docs/guide/models.md's
 * streamed load): small models load fast, and 3–4B ones never make a whole-model copy.
 */
export const WHOLE_IDENTITY_MAX_BYTES = 64 * 2 ** 20;

/**
 * weightsIdentity of a model folder's weights, read from `reader` (a streamed load); models above
 * `wholeMaxBytes` of f32 weights are hashed tensor by tensor (default WHOLE_IDENTITY_MAX_BYTES).
 */
export async function readerIdentity(
  name: string,
  reader: WeightReader,
  wholeMaxBytes = WHOLE_IDENTITY_MAX_BYTES,
): Promise<Identity> {
  const names = reader.specs.map((spec) => spec.name).sort();
  const bytes = reader.specs.reduce((sum, spec) => sum + numel(spec.shape) * 4, 0);
  if (bytes <= wholeMaxBytes) {
    const tensors = new Map<string, Float32Array>();
    for (const key of names) tensors.set(key, storedToF32(await reader.read(key)));
    return weightsIdentity(name, tensors);
  }
  const hasher = weightsIdentityHasher(name);
  for (const key of names) hasher.add(key, storedToF32(await reader.read(key)));
  return hasher.finish();
}

/** A run's metrics history as storage rows (one flat object per step) and back. */
export const toStoredMetrics = (rows: readonly MetricsRow[]): FlatMetricsRow[] =>
  rows.map(flattenMetricsRow);

export const fromStoredMetrics = (
  rows: readonly FlatMetricsRow[] | null | undefined,
): MetricsRow[] => (rows ?? []).map(nestMetricsRow);

/**
 * Whether a checkpoint belongs on these initial weights: restoring needs the run's base model
 * loaded (it is the reference policy with β > 0, and the weights a fresh trainer starts from).
 * Throws a message naming both models when not. A checkpoint without identities (written by the
 * CLI before it recorded them) is taken on trust.
 */
export function checkBaseModel(
  payload: Pick<CheckpointPayload, 'referenceIdentity' | 'modelIdentity'> & {
    modelConfig?: LlamaConfig | null;
  },
  loaded: Identity,
  loadedLabel = loaded.name,
  /** The loaded model's config: a checkpoint of the same weights under another config (RoPE θ,
   * norm ε, tied head…) computes another model, so it is refused too, naming what differs. */
  loadedConfig?: LlamaConfig,
): void {
  const base = payload.referenceIdentity ?? payload.modelIdentity;
  if (base?.sha256 && base.sha256 !== loaded.sha256) {
    throw new Error(
      `This checkpoint was trained from '${base.name}', not from the loaded model ` +
        `('${loadedLabel}'): load that model, then restore.`,
    );
  }
  const saved = payload.modelConfig;
  if (!saved || !loadedConfig) return;
  const differ = (Object.keys(saved) as (keyof LlamaConfig)[]).filter(
    (k) => JSON.stringify(saved[k]) !== JSON.stringify(loadedConfig[k]),
  );
  if (differ.length === 0) return;
  const what = differ
    .map((k) => `${k} ${JSON.stringify(saved[k])} (loaded: ${JSON.stringify(loadedConfig[k])})`)
    .join(', ');
  throw new Error(
    `This checkpoint was trained on '${base?.name || 'its model'}' with another config than the ` +
      `loaded model's ('${loadedLabel}'): ${what}. Load the model it was trained on, then restore.`,
  );
}

/** The files of a checkpoint on the file system (beside a Hugging Face folder's other files). */
export const CHECKPOINT_FILES = {
  weights: 'model.safetensors',
  /** A LoRA run's adapters instead of model.safetensors (PEFT's file name; PEFT names inside). */
  adapters: 'adapter_model.safetensors',
  optimizer: 'optimizer.safetensors',
  state: 'trainer_state.json',
} as const;

/** The weights file of a checkpoint of this config: the adapters' for a LoRA run. */
const weightsFile = (config: Record<string, unknown> | null | undefined) =>
  config?.usePeft === true ? CHECKPOINT_FILES.adapters : CHECKPOINT_FILES.weights;

// The same split as payloadToSnapshot: every optimizer tensor is an AdamW moment.
const isOptimizerTensor = (name: string) => name.startsWith('optimizer.');

/**
 * A payload as files: the weights as model.safetensors (parameter order, `format: pt`, exactly the
 * file a Hugging Face export writes; a LoRA run's adapters as adapter_model.safetensors instead),
 * the AdamW moments as optimizer.safetensors, and everything else as trainer_state.json with
 * `extraState` merged in. The metrics history stays out: the run folder's metrics.jsonl holds it,
 * and a growing copy in every checkpoint would be quadratic.
 */
export function checkpointToFiles(
  payload: CheckpointPayload,
  extraState: Record<string, unknown> = {},
): Map<string, Uint8Array> {
  const weights = payload.tensors.filter((t) => !isOptimizerTensor(t.name));
  const moments = payload.tensors.filter((t) => isOptimizerTensor(t.name));
  const { tensors: _t, metricsSoFar: _m, metrics: _r, ...fields } = payload;
  const state = { ...fields, ...extraState };
  return new Map([
    [weightsFile(payload.config), writeSafetensors(weights, { format: 'pt' })],
    [
      CHECKPOINT_FILES.optimizer,
      writeSafetensors(moments, undefined, { fileName: CHECKPOINT_FILES.optimizer }),
    ],
    [CHECKPOINT_FILES.state, new TextEncoder().encode(JSON.stringify(state, null, 2))],
  ]);
}

/**
 * Reads checkpointToFiles' files back (`read` returns a file's bytes). Also reads the CLI's
 * earlier layout, whose trainer_state.json kept the counters at its top level and had no
 * identities. Returns the payload and the whole trainer_state.json (for the caller's own keys).
 */
export function checkpointFromFiles(
  read: (name: string) => Uint8Array,
  /** The model's config, for the earlier layout that did not store it. */
  modelConfig?: LlamaConfig,
): {
  payload: CheckpointPayload;
  state: Record<string, unknown>;
} {
  const state = JSON.parse(new TextDecoder().decode(read(CHECKPOINT_FILES.state))) as Record<
    string,
    unknown
  > &
    Partial<CheckpointPayload> & {
      numTokens?: number;
      promptCursor?: number;
      consecutiveSkips?: number;
    };
  const tensors = (file: string): CheckpointTensor[] =>
    [...parseSafetensors(read(file), file).tensors].map(([name, t]) => ({
      name,
      shape: t.shape,
      // A copy: the parsed views alias the file's bytes.
      data: t.data.slice(),
    }));
  const rng = state.rng ?? {
    'trainer.promptCursor': [state.promptCursor ?? NaN],
    'trainer.numTokens': [state.numTokens ?? NaN],
    'trainer.consecutiveSkips': [state.consecutiveSkips ?? NaN],
  };
  const config = state.config as Record<string, unknown>;
  const payload: CheckpointPayload = {
    runId: state.runId ?? '',
    runName: state.runName,
    step: state.step as number,
    optimizerStep: state.optimizerStep as number,
    tensors: [...tensors(weightsFile(config)), ...tensors(CHECKPOINT_FILES.optimizer)],
    rng,
    config,
    // Folders written before the adapter config was stored name it only in the run config.
    adapter: state.adapter ?? (config ? loraOptionsOf(config as unknown as Config) : null),
    modelConfig: (state.modelConfig ?? modelConfig) as LlamaConfig,
    modelIdentity: state.modelIdentity ?? { name: '', sha256: '' },
    referenceIdentity: state.referenceIdentity ?? null,
    tokenizerIdentity: state.tokenizerIdentity ?? null,
    metricsSoFar: null,
  };
  // The validation IndexedDB applies on save (storage/checkpoints.ts), so a folder and a stored
  // checkpoint are refused for the same reasons, with the same words. (The earlier layout, without
  // a model config of its own, kept the moments flat: payloadToSnapshot checks it by size.)
  const problem = state.modelConfig
    ? checkTensorSet(payload.modelConfig, payload.tensors, payload.adapter ?? null)
    : null;
  if (problem) throw new Error(`checkpoint at step ${payload.step}: ${problem}`);
  return { payload, state };
}
