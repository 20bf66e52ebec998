// The worker side of the first-run screen and of the chat box, driven directly in Node on a tiny
// random Llama: estimateStep times this device (the warm-up's own numbers, scaled by
// grpo/step-estimate.ts exactly as it states) before any weight is loaded, and leaves no GPU
// buffer behind; a chat message that is a countdown problem gets the countdown verifier's
// verdict on the reply's answer, free text gets none.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { createTrainerApi } from '../../src/worker/trainer-api';
import type { ConfigInput } from '../../src/grpo/config';
import { resolveConfig } from '../../src/grpo/config';
import { estimateStep } from '../../src/grpo/step-estimate';
import { extractAnswer } from '../../src/rewards/rewards';
import { verifyCountdown } from '../../src/tasks/verify';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { filesSource } from '../../src/formats/model-source';
import { GrpoStorage } from '../../src/storage/index';
import type { Engine } from '../../src/engine/engine';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';

const CONFIG: Partial<ConfigInput> = {
  task: 'countdown',
  taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
  perStepPrompts: 2,
  numGenerations: 2,
  maxPromptLength: 40,
  maxCompletionLength: 4,
  steps: 10,
  saveSteps: 100,
  evalPrompts: 2,
};

async function tinyApi() {
  const folder = await tinyHfFolder();
  let engine: Engine | null = null;
  const api = createTrainerApi({
    createEngine: async () => (engine = await testEngine()),
    sandboxFactory: () => nodeSandboxFactory(),
    openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
    modelSource: () => filesSource(folder.blobs, 'tiny test model'),
  });
  return { api, engine: () => engine! };
}

describe('trainer worker API: first run and chat', { timeout: 600_000 }, () => {
  it('estimates a step from a warm-up on the device, before loading, and frees what it made', async () => {
    const { api, engine } = await tinyApi();
    expect((await api.probeAdapter()).ok).toBe(true);
    const liveBefore = engine().memory.liveBytes;
    const { timing, estimate } = await api.estimateStep({ kind: 'bundled' }, CONFIG);
    expect(engine().memory.liveBytes).toBe(liveBefore);
    expect(timing.sampling.rows).toBe(4);
    expect(timing.sampling.promptTokens).toBe(40);
    expect(timing.sampling.compileMs).toBeGreaterThan(0);
    expect(timing.sampling.tokenMs).toBeGreaterThan(0);
    expect(timing.sampling.tokens).toBe(24);
    expect(timing.blockMs).toBeGreaterThan(0);
    expect(estimate).toEqual(estimateStep(timing, resolveConfig(CONFIG)));
    expect(estimate.firstMs).toBeGreaterThan(estimate.ms);
    // Nothing was loaded: the page's Load is still to come.
    expect(api.status().model).toBeNull();
  });

  it('scores a chat reply with the task verifier when the message is a task problem', async () => {
    const { api } = await tinyApi();
    await api.loadModel({ kind: 'bundled' }, CONFIG);
    const opts = { maxNewTokens: 6, temperature: 0, useTemplate: true };
    const reply = await api.chat(
      'Using the numbers [3, 5, 7], create an equation that equals 15',
      opts,
    );
    const answer = extractAnswer(reply.text);
    expect(reply.score).toEqual({
      answer,
      correct: answer === null ? false : verifyCountdown(answer, [3, 5, 7], 15).ok,
      reference: null,
    });
    const free = await api.chat('hello there', opts);
    expect(free.score).toBeUndefined();
  });
});
