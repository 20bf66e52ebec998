// The checkpoint codec (src/train/checkpoint.ts) without a GPU: a trainer snapshot → payload → the
// files the CLI writes → payload → snapshot is the identity, bit for bit; the weights file is the
// one a Hugging Face export writes (a checkpoint folder loads as a model); the CLI's earlier
// trainer_state.json layout still reads; a checkpoint refuses another base model; a folder is
// validated by the same tensor-set check as a save to IndexedDB.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { checkTensorSet } from '../../src/storage/checkpoints';
import { GrpoStorage } from '../../src/storage/index';
import { parameterSpecs, numel, type LlamaConfig } from '../../src/core/model-config';
import {
  checkBaseModel,
  checkpointFromFiles,
  checkpointToFiles,
  payloadToSnapshot,
  snapshotToPayload,
} from '../../src/train/checkpoint';
import { resolveConfig } from '../../src/grpo/config';
import type { TrainerSnapshot } from '../../src/grpo/trainer';
import { exportHfFolder } from '../../src/export/hf-export';
import { writeSafetensors } from '../../src/formats/safetensors';
import { initLlamaWeights } from '../../src/model/init';
import { EXP_AVG_PREFIX, EXP_AVG_SQ_PREFIX } from '../../src/optim/adamw';

const modelConfig: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 8,
  intermediateSize: 16,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 4,
  vocabSize: 11,
  maxPositions: 32,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  attentionBias: true,
  bosTokenId: null,
  eosTokenIds: [0],
};
const config = resolveConfig({ steps: 9, seed: 3 });
const identity = { name: 'tiny', sha256: 'ab'.repeat(32) };

function snapshot(): TrainerSnapshot {
  const weights = initLlamaWeights(modelConfig, 2);
  const optimizer = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(modelConfig)) {
    const n = numel(spec.shape);
    // Distinct values, a negative zero and a subnormal: the round trip must keep every bit.
    const m = Float32Array.from({ length: n }, (_, i) => (i === 0 ? -0 : (i - n / 2) / 7));
    const v = Float32Array.from({ length: n }, (_, i) => (i === 1 ? 1e-40 : i / 3));
    optimizer.set(EXP_AVG_PREFIX + spec.name, m);
    optimizer.set(EXP_AVG_SQ_PREFIX + spec.name, v);
  }
  return {
    step: 6,
    numTokens: 1234,
    promptCursor: 24,
    consecutiveSkips: 1,
    optimizerStep: 5,
    weights,
    optimizer,
  };
}

const bits = (m: Map<string, Float32Array>) =>
  Object.fromEntries([...m].map(([k, v]) => [k, [...new Uint32Array(v.slice().buffer)]]));

describe('checkpoint codec', () => {
  it('a folder is validated as IndexedDB validates a save: the same problem, the same words', async () => {
    const payload = snapshotToPayload(snapshot(), {
      runId: 'run-1',
      config,
      modelConfig,
      modelIdentity: identity,
      referenceIdentity: identity,
      tokenizerIdentity: null,
    });
    // A stray tensor in the weights file (a hand-edited folder, another model's file).
    const stray = { name: 'model.extra.weight', shape: [2], data: new Float32Array(2) };
    const files = checkpointToFiles({ ...payload, tensors: [...payload.tensors, stray] });
    const expected = checkTensorSet(modelConfig, [...payload.tensors, stray]);
    expect(expected).toBe(
      "unexpected tensor 'model.extra.weight': neither a parameter of this model config nor its AdamW state",
    );
    expect(() => checkpointFromFiles((name) => files.get(name)!)).toThrow(
      `checkpoint at step 6: ${expected}`,
    );
    // IndexedDB refuses the same payload for the same reason.
    const storage = await GrpoStorage.open({ indexedDB: new IDBFactory(), storageManager: null });
    await expect(
      storage.saveCheckpoint({ ...payload, tensors: [...payload.tensors, stray] }),
    ).rejects.toThrow(expected!);
    storage.close();
  });

  it('snapshot → files → snapshot keeps every bit, and the weights file is the HF export', () => {
    const original = snapshot();
    const payload = snapshotToPayload(original, {
      runId: 'run-1',
      runName: 'a run',
      config,
      modelConfig,
      modelIdentity: identity,
      referenceIdentity: identity,
      tokenizerIdentity: null,
      metricsSoFar: [{ step: 6, loss: 0.5 }],
    });
    const files = checkpointToFiles(payload, { baseModel: '/models/tiny' });
    expect([...files.keys()].sort()).toEqual(
      ['model.safetensors', 'optimizer.safetensors', 'trainer_state.json'].sort(),
    );
    const hf = exportHfFolder({ config: modelConfig, tensors: original.weights });
    expect(files.get('model.safetensors')).toEqual(hf.get('model.safetensors'));

    const { payload: back, state } = checkpointFromFiles((name) => files.get(name)!);
    expect(state.baseModel).toBe('/models/tiny');
    expect(back.runId).toBe('run-1');
    expect(back.runName).toBe('a run');
    expect(back.step).toBe(6);
    expect(back.optimizerStep).toBe(5);
    expect(back.modelConfig).toEqual(modelConfig);
    expect(back.modelIdentity).toEqual(identity);
    expect(back.referenceIdentity).toEqual(identity);
    expect(resolveConfig(back.config)).toEqual(config);
    // The run folder's metrics.jsonl holds the history; the checkpoint files do not repeat it.
    expect(back.metricsSoFar).toBeNull();
    const restored = payloadToSnapshot(back);
    expect({ ...restored, weights: null, optimizer: null }).toEqual({
      ...original,
      weights: null,
      optimizer: null,
    });
    expect(bits(restored.weights)).toEqual(bits(original.weights));
    expect(bits(restored.optimizer)).toEqual(bits(original.optimizer));
  });

  it("reads the CLI's earlier layout (counters at the top level, flat moments, no model config)", () => {
    const original = snapshot();
    const files = new Map<string, Uint8Array>([
      [
        'model.safetensors',
        exportHfFolder({ config: modelConfig, tensors: original.weights }).get(
          'model.safetensors',
        )!,
      ],
      [
        'optimizer.safetensors',
        writeSafetensors(
          [...original.optimizer].map(([name, data]) => ({ name, shape: [data.length], data })),
        ),
      ],
      [
        'trainer_state.json',
        new TextEncoder().encode(
          JSON.stringify({
            step: 6,
            numTokens: 1234,
            promptCursor: 24,
            consecutiveSkips: 1,
            optimizerStep: 5,
            config,
            baseModel: '/models/tiny',
          }),
        ),
      ],
    ]);
    const { payload, state } = checkpointFromFiles((name) => files.get(name)!, modelConfig);
    expect(state.baseModel).toBe('/models/tiny');
    const restored = payloadToSnapshot(payload);
    expect(restored.numTokens).toBe(1234);
    expect(restored.promptCursor).toBe(24);
    expect(restored.consecutiveSkips).toBe(1);
    expect(restored.optimizerStep).toBe(5);
    expect(bits(restored.weights)).toEqual(bits(original.weights));
    expect(bits(restored.optimizer)).toEqual(bits(original.optimizer));
    // No identities were recorded then: the checkpoint is taken on trust.
    expect(() => checkBaseModel(payload, { name: 'other', sha256: 'cd'.repeat(32) })).not.toThrow();
  });

  it('refuses to restore onto other base weights', () => {
    const payload = { modelIdentity: identity, referenceIdentity: identity };
    expect(() => checkBaseModel(payload, identity)).not.toThrow();
    expect(() =>
      checkBaseModel(payload, { name: 'other', sha256: 'cd'.repeat(32) }, 'other model'),
    ).toThrow("This checkpoint was trained from 'tiny', not from the loaded model ('other model')");
  });

  it('refuses the same weights under another model config, naming what differs', () => {
    const payload = { modelIdentity: identity, referenceIdentity: identity, modelConfig };
    expect(() => checkBaseModel(payload, identity, 'tiny', { ...modelConfig })).not.toThrow();
    expect(() =>
      checkBaseModel(payload, identity, 'tiny (θ 5e5)', { ...modelConfig, ropeTheta: 500000 }),
    ).toThrow(
      "This checkpoint was trained on 'tiny' with another config than the loaded model's " +
        "('tiny (θ 5e5)'): ropeTheta 10000 (loaded: 500000). Load the model it was trained on, then restore.",
    );
  });
});
