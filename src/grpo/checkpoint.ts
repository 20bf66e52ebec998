// Trainer snapshots ⇄ storage checkpoints (src/storage). A checkpoint holds the policy weights in
// Hugging Face names, the AdamW moments, the optimizer step, and the trainer's counters; sampling
// needs no RNG state because its draws are keyed by (seed, step). Restoring into a trainer built
// with the run's initial weights (the frozen reference) continues the run exactly.
import { EXP_AVG_PREFIX, EXP_AVG_SQ_PREFIX } from '../optim/adamw';
import type { Config } from './config';
import type { TrainerSnapshot } from './trainer';
import { numel, parameterSpecs, type LlamaConfig } from '../core/model-config';
import type { CheckpointPayload, CheckpointTensor } from '../storage/checkpoints';
import type { Identity, MetricsRow } from '../storage/db';

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
  metricsSoFar?: MetricsRow[];
}

export function snapshotToPayload(
  snapshot: TrainerSnapshot,
  ctx: CheckpointContext,
): CheckpointPayload {
  const tensors: CheckpointTensor[] = [];
  const specs = parameterSpecs(ctx.modelConfig);
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
    },
    config: ctx.config as unknown as Record<string, unknown>,
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
  for (const spec of parameterSpecs(payload.modelConfig)) {
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
