// The trainer worker's restoreCheckpoint (src/worker/trainer-api.ts) and custom reward code from
// storage: the code runs only when the page's consent callback allows it; declined or not asked,
// the weights restore and the run is scored without it. Before, a stored config's code ran on the
// next step with no question. Same tiny model and fake IndexedDB as app-trainer-api.test.ts.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { createTrainerApi } from '../../src/worker/trainer-api';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { filesSource } from '../../src/formats/model-source';
import { GrpoStorage } from '../../src/storage/index';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';
import { listen, stepReport } from '../support/worker-steps';

const CODE = 'function reward({ completion }) { return completion.length / 100; }';

async function savedRunWithCode() {
  const folder = await tinyHfFolder();
  const api = createTrainerApi({
    createEngine: testEngine,
    sandboxFactory: () => nodeSandboxFactory(),
    openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
    modelSource: () => filesSource(folder.blobs, 'tiny test model'),
  });
  const events = listen(api);
  await api.loadModel(
    { kind: 'bundled' },
    {
      task: 'countdown',
      taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
      perStepPrompts: 1,
      numGenerations: 2,
      maxPromptLength: 100,
      maxCompletionLength: 3,
      steps: 10,
      saveSteps: 100,
      evalPrompts: 0,
      rewards: ['format', 'accuracy', 'custom:len'],
      customRewards: { len: CODE },
    },
  );
  const first = await stepReport(api, events);
  expect(Object.keys(first.groups[0].completions[0].reward.perFunction)).toEqual([
    'format',
    'accuracy',
    'custom:len',
  ]);
  const saved = await api.saveCheckpoint();
  return { api, saved, events };
}

const rewardsOfNextStep = async ({
  api,
  events,
}: Pick<Awaited<ReturnType<typeof savedRunWithCode>>, 'api' | 'events'>) =>
  Object.keys((await stepReport(api, events)).groups[0].completions[0].reward.perFunction);

describe('restoreCheckpoint and custom reward code', { timeout: 600_000 }, () => {
  it('asks the consent callback with the code; declined, it restores and trains without it', async () => {
    const { api, saved, events } = await savedRunWithCode();
    const asked: Record<string, string>[] = [];
    const restored = await api.restoreCheckpoint(saved.id, undefined, (code) => {
      asked.push(code);
      return false;
    });
    expect(asked).toEqual([{ len: CODE }]);
    expect(restored.step).toBe(1);
    expect(restored.config.rewards).toEqual(['format', 'accuracy']);
    expect(restored.config.rewardWeights).toEqual([1, 1]);
    expect(restored.config.customRewards).toEqual({});
    expect(await rewardsOfNextStep({ api, events })).toEqual(['format', 'accuracy']);
  });

  it('without a consent callback the code is left out', async () => {
    const { api, saved, events } = await savedRunWithCode();
    const restored = await api.restoreCheckpoint(saved.id);
    expect(restored.config.customRewards).toEqual({});
    expect(await rewardsOfNextStep({ api, events })).toEqual(['format', 'accuracy']);
  });

  it('allowed, the code runs as before', async () => {
    const { api, saved, events } = await savedRunWithCode();
    const restored = await api.restoreCheckpoint(saved.id, undefined, async () => true);
    expect(restored.config.customRewards).toEqual({ len: CODE });
    expect(await rewardsOfNextStep({ api, events })).toEqual(['format', 'accuracy', 'custom:len']);
  });
});
