// The training store's notices (src/app/stores/training.svelte.ts) on the real worker API and Node
// WebGPU: a failed Step shows one error banner, not one for the worker's event and another for the
// rejected call; a failed Run shows one too (the run loop reports why it stopped); a new run
// dismisses the notice that a preset waits for one; Step and Run are told apart for the header's
// status (Ready after a Step, Paused only after a Run). No stubs: a tiny random Llama folder.
import 'fake-indexeddb/auto';
import type * as Comlink from 'comlink';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { Session } from '../../src/app/session.svelte';
import { filesSource } from '../../src/formats/model-source';
import { GrpoStorage } from '../../src/storage/index';
import type { TrainerEvent } from '../../src/worker/protocol';
import { createTrainerApi, type TrainerApi } from '../../src/worker/trainer-api';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';

describe('training notices', { timeout: 120_000 }, () => {
  it('one banner per failure; a new run clears the preset notice', async () => {
    const folder = await tinyHfFolder();
    const api = createTrainerApi({
      createEngine: testEngine,
      openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
      modelSource: () => filesSource(folder.blobs, 'tiny test model'),
    });
    const session = new Session(api as unknown as Comlink.Remote<TrainerApi>);
    // The worker's events reach the session as they do through Comlink on the page.
    api.setListener((e: TrainerEvent) =>
      (session as unknown as { onEvent(e: TrainerEvent): void }).onEvent(e),
    );
    session.options.draft.perStepPrompts = 1;
    session.options.draft.numGenerations = 2;
    session.options.draft.maxCompletionLength = 4;
    await session.model.previewModel({ kind: 'bundled' });
    await session.model.load();
    expect(session.banners).toEqual([]);
    expect(session.training.lastAction).toBeNull();

    session.options.usePreset('aha');
    expect(session.banners.map((b) => b.title)).toEqual(["The 'aha' preset is in the options"]);
    // Not the preset's own shape: keep the tiny one (the notice stays until a new run).
    session.options.draft.perStepPrompts = 1;
    session.options.draft.numGenerations = 2;
    session.options.draft.maxCompletionLength = 4;
    await session.training.reset();
    expect(session.banners).toEqual([]);

    // Every prompt longer than maxPromptLength: the step fails, with one banner.
    session.options.draft.maxPromptLength = 1;
    await session.training.stepOnce();
    expect(session.training.lastAction).toBe('step');
    const errors = () => session.banners.filter((b) => b.kind === 'error');
    expect(errors()).toHaveLength(1);
    expect(errors()[0].title).toBe('Training stopped');
    expect(errors()[0].message).toMatch(/maxPromptLength/);

    // Run fails the same way: its banner says why (the run loop reported nothing before).
    await session.training.run();
    expect(session.training.lastAction).toBe('run');
    expect(errors()).toHaveLength(2);
    expect(errors()[1].message).toBe(errors()[0].message);
  });
});
