// The memory plan follows the form before a model is loaded (Session.replan through the worker
// API's planMemory, src/app/session.svelte.ts and src/worker/trainer-api.ts): the model panel's
// LoRA / rank / dtype / checkpointing switches edit session.options.draft, and the previewed plan becomes
// the plan grpo's planRunMemory gives for that draft; quick changes end on the newest draft's plan;
// a draft that does not resolve keeps the last plan. The real worker API on Node WebGPU, no stubs.
import 'fake-indexeddb/auto';
import type * as Comlink from 'comlink';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { Session } from '../../src/app/session.svelte';
import { filesSource } from '../../src/formats/model-source';
import { resolveConfig } from '../../src/grpo/config';
import { planRunMemory } from '../../src/train/run';
import { GrpoStorage } from '../../src/storage/index';
import { createTrainerApi, type TrainerApi } from '../../src/worker/trainer-api';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';

async function tinySession() {
  const folder = await tinyHfFolder();
  const api = createTrainerApi({
    createEngine: testEngine,
    openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
    modelSource: () => filesSource(folder.blobs, 'tiny test model'),
  });
  const session = new Session(api as unknown as Comlink.Remote<TrainerApi>);
  await session.model.previewModel({ kind: 'bundled' });
  const engine = await testEngine();
  const { limits } = engine.device;
  /** The peak grpo's planner gives for the session's draft now, with the engine's kernels. */
  const expectedPeak = () =>
    planRunMemory(
      folder.config,
      resolveConfig(session.options.forWorker()),
      limits,
      undefined,
      undefined,
      engine.pipelines.tuning,
    ).peakBytes;
  return { session, expectedPeak };
}

describe('Session.replan', { timeout: 120_000 }, () => {
  it('gives the plan of the draft as the switches change it', async () => {
    const { session, expectedPeak } = await tinySession();
    const full = session.model.preview!.plan;
    expect(full.peakBytes).toBe(expectedPeak());

    session.options.draft.usePeft = true;
    session.options.draft.loraR = 2;
    await session.model.replan();
    const lora = session.model.preview!.plan;
    expect(lora.peakBytes).toBe(expectedPeak());
    expect(lora.peakBytes).toBeLessThan(full.peakBytes);
    expect(lora.byCategory.optimizer).toBeLessThan(full.byCategory.optimizer);

    session.options.draft.dtype = 'bfloat16';
    await session.model.replan();
    expect(session.model.preview!.plan.peakBytes).toBe(expectedPeak());
    expect(session.model.preview!.plan.byCategory.parameters).toBeLessThan(
      lora.byCategory.parameters,
    );

    session.options.draft.gradientCheckpointing = true;
    await session.model.replan();
    expect(session.model.preview!.plan.peakBytes).toBe(expectedPeak());
  });

  it('ends on the newest draft after quick changes; a draft that does not resolve keeps the plan', async () => {
    const { session, expectedPeak } = await tinySession();
    session.options.draft.usePeft = true;
    const first = session.model.replan();
    session.options.draft.usePeft = false;
    const second = session.model.replan();
    await Promise.all([second, first]);
    expect(session.model.preview!.plan.peakBytes).toBe(expectedPeak());

    const before = session.model.preview!.plan;
    session.options.draft.loraR = NaN;
    expect(session.options.configError).toMatch(/loraR/);
    await session.model.replan();
    expect(session.model.preview!.plan).toBe(before);
  });
});
