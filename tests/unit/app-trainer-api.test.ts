// The trainer worker's API (src/worker/trainer-api.ts) driven directly in Node: a tiny random Llama
// served as an in-memory Hugging Face folder, fake IndexedDB, custom rewards in worker_threads.
// Checks the memory plan before loading, events, steps (advantages per group sum to 0), a checkpoint
// round trip that continues the run bit for bit, a throwing custom reward, chat, compare, export.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { createTrainerApi } from '../../src/worker/trainer-api';
import type { TrainerEvent } from '../../src/worker/protocol';
import type { ConfigInput } from '../../src/grpo/config';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { filesSource } from '../../src/formats/model-source';
import { parameterCount } from '../../src/core/model-config';
import { GrpoStorage } from '../../src/storage/index';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';
import { stepReport, tinyRunConfig } from '../support/worker-steps';

// Advantages are computed in f64 (docs/grpo.md §2) and reported as such: a group's sum is ~0 up to
// the rounding of its mean.
const ADVANTAGE_SUM_TOL = 1e-9;

/** The worker API on the tiny model, in fresh fake IndexedDB, recording every event. */
async function tinyApi() {
  const folder = await tinyHfFolder();
  const events: TrainerEvent[] = [];
  const api = createTrainerApi({
    createEngine: testEngine,
    sandboxFactory: () => nodeSandboxFactory(),
    openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
    modelSource: () => filesSource(folder.blobs, 'tiny test model'),
  });
  api.setListener((e) => events.push(e));
  return { folder, events, api };
}

const runConfig = (overrides: Partial<ConfigInput> = {}) => tinyRunConfig(overrides);

describe('trainer worker API', { timeout: 600_000 }, () => {
  it('plans, loads, steps, checkpoints and continues a run exactly', async () => {
    const { folder, events, api } = await tinyApi();
    expect((await api.probeAdapter()).ok).toBe(true);

    const preview = await api.previewModel({ kind: 'bundled' }, runConfig());
    expect(preview.parameterCount).toBe(parameterCount(folder.config));
    expect(preview.plan.fits).toBe(true);
    expect(preview.plan.peakBytes).toBeGreaterThan(preview.parameterCount * 16);

    const { model, run } = await api.loadModel({ kind: 'bundled' }, runConfig());
    expect(model.config.hiddenSize).toBe(16);
    expect(run.step).toBe(0);
    expect(events.some((e) => e.type === 'load-progress')).toBe(true);

    const r1 = await stepReport(api, events);
    expect(r1.step).toBe(1);
    expect(r1.groups).toHaveLength(2);
    for (const g of r1.groups) {
      const sum = g.completions.reduce((s, c) => s + c.advantage, 0);
      expect(Math.abs(sum)).toBeLessThanOrEqual(ADVANTAGE_SUM_TOL);
      for (const c of g.completions) expect(c.pieces).toHaveLength(c.tokens.length);
      expect(g.prompt).toContain('Assistant:');
    }
    await api.step();
    const saved = await api.saveCheckpoint();
    expect(saved.step).toBe(2);
    expect(events.some((e) => e.type === 'checkpoint-saved')).toBe(true);
    const r3 = await stepReport(api, events);
    expect(r3.step).toBe(3);

    const listed = await api.listCheckpoints();
    expect(listed.map((c) => c.step)).toEqual([2]);
    const restored = await api.restoreCheckpoint(saved.id);
    expect(restored.step).toBe(2);
    expect(restored.history.map((h) => h.step)).toEqual([1, 2]);
    const again = await stepReport(api, events);
    expect(again.step).toBe(3);
    // Same weights, optimizer state and data order: the continued step is the same step.
    expect(again.metrics.loss).toBe(r3.metrics.loss);
    expect(again.metrics.grad_norm).toBe(r3.metrics.grad_norm);
    expect(again.groups[0].completions[0].text).toBe(r3.groups[0].completions[0].text);

    const reply = await api.chat('Using the numbers [3, 5, 7], create an equation that equals 15', {
      maxNewTokens: 3,
      temperature: 0,
      useTemplate: true,
    });
    expect(reply.prompt).toContain('create an equation that equals 15');
    expect(reply.tokens).toBeGreaterThan(0);

    const cmp = await api.compare(2);
    expect(cmp.step).toBe(3);
    expect(cmp.before.prompts).toBe(2);
    expect(cmp.after.prompts).toBe(2);

    const files = await api.exportModel('hf');
    expect(files.map((f) => f.name)).toContain('model.safetensors');
    expect((await api.storageInfo()).checkpointCount).toBe(1);
  });

  it('a custom reward that throws is reported per completion and training continues', async () => {
    const { events, api } = await tinyApi();
    await api.loadModel(
      { kind: 'bundled' },
      runConfig({
        rewards: ['format', 'custom:broken'],
        customRewards: { broken: "function reward() { throw new Error('no luck'); }" },
      }),
    );
    const r1 = await stepReport(api, events);
    const r2 = await stepReport(api, events);
    expect(r2.step).toBe(2);
    const errors = r1.groups.flatMap((g) => g.completions.flatMap((c) => c.reward.errors));
    expect(errors.length).toBe(6);
    expect(errors[0].reward).toBe('custom:broken');
    expect(errors[0].message).toContain('no luck');
    expect(r1.metrics.reward_error_frac).toBe(1);
    expect(events.filter((e) => e.type === 'step')).toHaveLength(2);
  });

  it('evaluates during training and loads the best evaluation at the end (loadBestModelAtEnd)', async () => {
    const { events, api } = await tinyApi();
    await api.loadModel(
      { kind: 'bundled' },
      runConfig({ steps: 3, evalSteps: 2, evalGenerations: 1, loadBestModelAtEnd: true }),
    );
    expect(await api.run()).toEqual({ step: 3, stopped: 'finished' });
    const evals = events.flatMap((e) => (e.type === 'eval' ? [e] : []));
    // Every evalSteps steps and after the last one.
    expect(evals.map((e) => e.record.step)).toEqual([2, 3]);
    for (const e of evals) {
      expect(e.record.metrics.eval_accuracy).toBeGreaterThanOrEqual(0);
      expect(e.record.metrics.eval_accuracy).toBeLessThanOrEqual(1);
      expect(e.record.metrics.eval_mean_length).toBeGreaterThan(0);
    }
    // The best is the first evaluation with the highest accuracy, and it is what gets loaded.
    const top = Math.max(...evals.map((e) => e.record.metrics.eval_accuracy));
    const bestStep = evals.find((e) => e.record.metrics.eval_accuracy === top)!.record.step;
    const loaded = events.flatMap((e) => (e.type === 'best-loaded' ? [e] : []));
    expect(loaded).toEqual([
      { type: 'best-loaded', best: { step: bestStep, evalAccuracy: top }, lastStep: 3 },
    ]);
    // An event order the page relies on: the last step's report, its evaluation, then the load.
    const order = events
      .filter((e) => e.type === 'step' || e.type === 'eval' || e.type === 'best-loaded')
      .map((e) => e.type);
    expect(order).toEqual(['step', 'step', 'eval', 'step', 'eval', 'best-loaded']);
  });

  it('saves a checkpoint every saveSteps steps and after the last one, stepped or run', async () => {
    const { events, api } = await tinyApi();
    await api.loadModel({ kind: 'bundled' }, runConfig({ steps: 3, saveSteps: 2 }));
    // One step at a time (the Step button), then Run to the end.
    expect((await api.step()).step).toBe(1);
    expect((await api.step()).step).toBe(2);
    expect(await api.run()).toEqual({ step: 3, stopped: 'finished' });
    const saved = events.flatMap((e) => (e.type === 'checkpoint-saved' ? [e] : []));
    // Step 2 by saveSteps, step 3 because it is the last: the final weights are always saved.
    expect(saved.map((e) => [e.checkpoint.step, e.automatic])).toEqual([
      [2, true],
      [3, true],
    ]);
    expect((await api.listCheckpoints()).map((c) => c.step).sort()).toEqual([2, 3]);
  });
});
