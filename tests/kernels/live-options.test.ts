// Live options (Run.applyLiveOptions through the worker API, as the page calls it between steps) on
// Node WebGPU with a tiny random model: a new learning rate, sampling temperature, clip range and
// length of run take effect at the next step (its learning_rate is the new schedule's value there),
// a custom reward added mid-run scores that step (rewards/custom:len/mean), options that shape the
// run are refused by name, and a checkpoint saved after the change restores into exactly the same
// run: its config, its record of changes, and the next step's metrics bit for bit.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { resolveConfig, type Config, type ConfigInput } from '../../src/grpo/config';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { filesSource } from '../../src/formats/model-source';
import { learningRateAt, runSchedule } from '../../src/optim/schedule';
import { GrpoStorage } from '../../src/storage/index';
import { createTrainerApi } from '../../src/worker/trainer-api';
import { listen, stepReport } from '../support/worker-steps';
import type { RunState, UiStepReport } from '../../src/worker/protocol';
import { testEngine } from './harness';
import { tinyHfFolder } from '../support/tiny-hf-model';

// Cosine decay over 6 steps, so the schedule's value at the next step is not the peak itself.
const CONFIG: Partial<ConfigInput> = {
  task: 'countdown',
  taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
  rewards: ['format'],
  perStepPrompts: 2,
  numGenerations: 2,
  maxPromptLength: 200,
  maxCompletionLength: 4,
  learningRate: 1e-2,
  lrScheduler: 'cosine',
  beta: 0.04,
  steps: 4,
  saveSteps: 50,
  evalPrompts: 2,
};
const LEN = 'function reward({ completion }) { return completion.length / 10; }';

// Metrics that measure time, not the algorithm.
const algorithmic = (r: UiStepReport) =>
  Object.fromEntries(
    Object.entries(r.metrics).filter(([k]) => k !== 'step_time' && k !== 'tokens_per_second'),
  );

async function api() {
  const folder = await tinyHfFolder({ maxPositions: 128 });
  const storage = await GrpoStorage.open({ indexedDB: new IDBFactory(), storageManager: null });
  const trainer = createTrainerApi({
    createEngine: testEngine,
    sandboxFactory: () => nodeSandboxFactory(),
    openStorage: async () => storage,
    modelSource: () => filesSource(folder.blobs, 'tiny test model'),
  });
  return trainer;
}

describe('options applied in the middle of a run', { timeout: 600_000 }, () => {
  it('take effect from the next step, are recorded, and a checkpoint after them restores exactly', async () => {
    const trainer = await api();
    const events = listen(trainer);
    const loaded = await trainer.loadModel({ kind: 'bundled' }, CONFIG);
    const built = loaded.run.config;
    expect(loaded.run.liveOptions).toContain('beta');
    expect(loaded.run.liveChanges).toEqual([]);

    const first = await stepReport(trainer, events);
    expect(first.metrics.learning_rate).toBe(learningRateAt(0, runSchedule(built)));
    expect(first.metrics['rewards/custom:len/mean']).toBeUndefined();

    // Options that shape the run are refused by name, and nothing changes.
    await expect(trainer.applyOptions({ ...built, numGenerations: 4 })).rejects.toThrow(
      /numGenerations cannot change in the middle of a run: Reset/,
    );
    // steps down to the one step trained (the run is then finished) and back up again.
    await expect(trainer.applyOptions({ ...built, steps: 1 })).resolves.toMatchObject({ step: 1 });
    await expect(trainer.applyOptions({ ...built, steps: 4 })).resolves.toMatchObject({ step: 1 });

    const next: Config = resolveConfig({
      ...built,
      learningRate: 3e-3,
      temperature: 0.7,
      epsilon: 0.1,
      steps: 6,
      rewards: ['format', 'custom:len'],
      customRewards: { len: LEN },
      rewardWeights: [1, 0.5],
    });
    const state = await trainer.applyOptions(next);
    expect(state.config).toEqual(next);
    // In the order made, each from step 2 (the next step), keys in schema order within one apply.
    expect(state.liveChanges).toEqual([
      { step: 2, key: 'steps', from: 4, to: 1 },
      { step: 2, key: 'steps', from: 1, to: 4 },
      { step: 2, key: 'rewards', from: ['format'], to: ['format', 'custom:len'] },
      { step: 2, key: 'customRewards', from: {}, to: { len: LEN } },
      { step: 2, key: 'rewardWeights', from: [1], to: [1, 0.5] },
      { step: 2, key: 'temperature', from: 1, to: 0.7 },
      { step: 2, key: 'learningRate', from: 1e-2, to: 3e-3 },
      { step: 2, key: 'epsilon', from: 0.2, to: 0.1 },
      { step: 2, key: 'steps', from: 4, to: 6 },
    ]);

    const second = await stepReport(trainer, events);
    // The schedule goes on with the new peak over the new length: optimizer step 1 of 6, cosine.
    const expected = learningRateAt(1, runSchedule(next));
    expect(expected).not.toBe(learningRateAt(1, runSchedule(built)));
    expect(second.metrics.learning_rate).toBe(expected);
    // The custom reward scored every completion of this step: the mean of length / 10.
    const texts = second.groups.flatMap((g) => g.completions.map((c) => c.text));
    const mean = texts.reduce((s, t) => s + t.length / 10, 0) / texts.length;
    expect(second.metrics['rewards/custom:len/mean']).toBeCloseTo(mean, 12);
    for (const g of second.groups)
      for (const c of g.completions) {
        expect(c.reward.perFunction['custom:len']).toBeCloseTo(c.text.length / 10, 12);
        // Weights [1, 0.5]: the total follows the new weights.
        expect(c.reward.total).toBeCloseTo(
          (c.reward.perFunction.format ?? 0) + (0.5 * c.text.length) / 10,
          12,
        );
      }

    // Saved after the change: the checkpoint holds the config in force and the changes.
    const saved = await trainer.saveCheckpoint();
    expect(saved.step).toBe(2);
    const third = await stepReport(trainer, events);
    const restored = await trainer.restoreCheckpoint(saved.id, undefined, async () => true);
    expect(restored.step).toBe(2);
    expect(restored.config).toEqual(next);
    expect(restored.liveChanges).toEqual(state.liveChanges);
    const again = await stepReport(trainer, events);
    expect(algorithmic(again)).toEqual(algorithmic(third));
    expect(again.groups.map((g) => g.completions.map((c) => c.text))).toEqual(
      third.groups.map((g) => g.completions.map((c) => c.text)),
    );
  });

  it('asked for while Run trains, they apply between steps: from the next step on', async () => {
    const trainer = await api();
    const loaded = await trainer.loadModel({ kind: 'bundled' }, { ...CONFIG, steps: 3 });
    const next = resolveConfig({ ...loaded.run.config, learningRate: 3e-3, steps: 4 });
    const reports: UiStepReport[] = [];
    let applied: Promise<RunState> | null = null;
    trainer.setListener((e) => {
      if (e.type !== 'step') return;
      reports.push(e.report);
      // During step 1 (its report is out, its checkpoint and eval may follow): the call waits.
      if (e.report.step === 1) applied = trainer.applyOptions(next);
    });
    expect(await trainer.run()).toEqual({ step: 4, stopped: 'finished' });
    const state = await applied!;
    expect(state.step).toBe(1);
    expect(state.liveChanges).toEqual([
      { step: 2, key: 'learningRate', from: 1e-2, to: 3e-3 },
      { step: 2, key: 'steps', from: 3, to: 4 },
    ]);
    expect(reports.map((r) => r.metrics.learning_rate)).toEqual(
      [0, 1, 2, 3].map((k) => learningRateAt(k, runSchedule(k === 0 ? loaded.run.config : next))),
    );
  });

  it('beta changes live only while the run has its reference policy; steps not below those trained', async () => {
    const trainer = await api();
    const loaded = await trainer.loadModel({ kind: 'bundled' }, { ...CONFIG, beta: 0 });
    expect(loaded.run.liveOptions).not.toContain('beta');
    expect(loaded.run.liveOptions).toContain('learningRate');
    await expect(trainer.applyOptions({ ...loaded.run.config, beta: 0.04 })).rejects.toThrow(
      /^beta cannot change in the middle of a run: Reset to apply it\.$/,
    );
    await trainer.step();
    await expect(trainer.applyOptions({ ...loaded.run.config, steps: 0 })).rejects.toThrow(/steps/);
    await trainer.step();
    await expect(trainer.applyOptions({ ...loaded.run.config, steps: 1 })).rejects.toThrow(
      'steps (1) cannot be below the 2 steps already trained.',
    );
    expect((await trainer.applyOptions({ ...loaded.run.config, steps: 2 })).liveChanges).toEqual([
      { step: 3, key: 'steps', from: 4, to: 2 },
    ]);
  });
});
