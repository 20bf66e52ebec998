// Exact resume through both stores of the checkpoint codec (src/train/checkpoint.ts): N steps
// straight equal N/2 steps, a checkpoint saved (to IndexedDB as the browser does, or as the CLI's
// files), a fresh trainer restored from it, and N/2 more steps — same metrics, same weights, bit
// for bit.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import {
  checkpointFromFiles,
  checkpointToFiles,
  payloadToSnapshot,
  snapshotToPayload,
  weightsIdentity,
} from '../../src/train/checkpoint';
import { initLlamaWeights } from '../../src/model/init';
import { GrpoStorage } from '../../src/storage/index';
import { algorithmic, config, makeTrainer, modelConfig } from '../support/tiny-trainer';

const STEPS = 4;
// μ = 2 and β > 0 so that the optimizer state, the old log-probs and the reference all matter.
const OVERRIDES = {
  steps: STEPS,
  numIterations: 2,
  beta: 0.04,
  perStepPrompts: 2,
  numGenerations: 4,
};

/** The run that never stopped (trained once, for both stores). */
let straightRun: Promise<{ metrics: unknown[]; weights: Map<string, Float32Array> }> | null = null;
function straight() {
  straightRun ??= (async () => {
    const trainer = await makeTrainer(OVERRIDES);
    const metrics = [];
    for (let s = 0; s < STEPS; s++) metrics.push(algorithmic(await trainer.trainStep()));
    const weights = await trainer.policy.readParameters();
    trainer.destroy();
    return { metrics, weights };
  })();
  return straightRun;
}

describe('resume from a checkpoint', { timeout: 600_000 }, () => {
  it('from IndexedDB continues exactly: metrics and weights equal a run that never stopped', async () => {
    const { metrics: straightMetrics, weights: straightWeights } = await straight();

    const storage = await GrpoStorage.open({ indexedDB: new IDBFactory(), storageManager: null });
    const first = await makeTrainer(OVERRIDES);
    const resumedMetrics = [];
    for (let s = 0; s < STEPS / 2; s++) resumedMetrics.push(algorithmic(await first.trainStep()));
    const initial = initLlamaWeights(modelConfig, 1);
    await storage.saveCheckpoint(
      snapshotToPayload(await first.snapshot(), {
        runId: 'resume',
        config: config(OVERRIDES),
        modelConfig,
        modelIdentity: await weightsIdentity('tiny-random', initial),
        referenceIdentity: await weightsIdentity('tiny-random', initial),
        tokenizerIdentity: null,
      }),
    );
    first.destroy();

    // A new trainer (new GPU buffers, built from the initial weights, i.e. the reference policy).
    const loaded = await storage.loadLatestCheckpoint('resume');
    expect(loaded?.step).toBe(STEPS / 2);
    const second = await makeTrainer(OVERRIDES);
    second.restore(payloadToSnapshot(loaded!));
    for (let s = STEPS / 2; s < STEPS; s++)
      resumedMetrics.push(algorithmic(await second.trainStep()));
    expect(resumedMetrics).toEqual(straightMetrics);
    expect(await second.policy.readParameters()).toEqual(straightWeights);
    second.destroy();
  });

  it("from the CLI's checkpoint files continues exactly as well", async () => {
    const { metrics: straightMetrics, weights: straightWeights } = await straight();
    const first = await makeTrainer(OVERRIDES);
    const resumedMetrics = [];
    for (let s = 0; s < STEPS / 2; s++) resumedMetrics.push(algorithmic(await first.trainStep()));
    const initial = await weightsIdentity('tiny-random', initLlamaWeights(modelConfig, 1));
    const files = checkpointToFiles(
      snapshotToPayload(await first.snapshot(), {
        runId: 'resume',
        config: config(OVERRIDES),
        modelConfig,
        modelIdentity: initial,
        referenceIdentity: initial,
        tokenizerIdentity: null,
      }),
    );
    first.destroy();

    const { payload } = checkpointFromFiles((name) => files.get(name)!);
    expect(payload.step).toBe(STEPS / 2);
    const second = await makeTrainer(OVERRIDES);
    second.restore(payloadToSnapshot(payload));
    for (let s = STEPS / 2; s < STEPS; s++)
      resumedMetrics.push(algorithmic(await second.trainStep()));
    expect(resumedMetrics).toEqual(straightMetrics);
    expect(await second.policy.readParameters()).toEqual(straightWeights);
    second.destroy();
  });
});
