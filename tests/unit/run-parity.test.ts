// One training loop for both front ends: the same config trained through the worker API
// (createTrainerApi, checkpoints in fake IndexedDB) and through the command line's path
// (src/cli/_train.ts trainFolder, checkpoints as folders on disk) saves checkpoints at the same
// steps (the last one included) with bit-identical weights, optimizer moments and counters, logs the
// same metrics, reports the same phases of each step through the Run's onProgress (the worker's
// 'phase' events, the command line's status line), and plans memory the same way, with the
// gradient-accumulation micro-batch and the prompt capped at the model's positions.
import 'fake-indexeddb/auto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { loadModel } from '../../src/cli/_session';
import { readCheckpointFolder, trainFolder } from '../../src/cli/_train';
import { payloadToSnapshot, weightsIdentity } from '../../src/train/checkpoint';
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { filesSource } from '../../src/formats/model-source';
import { deviceMemoryLimits, planMemory } from '../../src/model/memory-plan';
import { GrpoStorage } from '../../src/storage/index';
import type { PhaseProgress } from '../../src/grpo/step-progress';
import type { TrainerEvent } from '../../src/worker/protocol';
import { createTrainerApi } from '../../src/worker/trainer-api';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';

// 2 prompts × 2 completions in micro-batches of 2 (gradientAccumulationSteps 2); prompts allowed up
// to 200 tokens on a model with 128 positions (the plan caps them at 128); saveSteps 2 of 3 steps.
// The random model never earns the format reward; a length reward (custom code, in worker_threads
// on both paths) varies within groups, so the updates move the weights.
const CONFIG: Partial<ConfigInput> = {
  task: 'countdown',
  rewards: ['format', 'custom:long'],
  customRewards: { long: 'function reward({ completion }) { return completion.length / 10; }' },
  taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
  perStepPrompts: 2,
  numGenerations: 2,
  gradientAccumulationSteps: 2,
  maxPromptLength: 200,
  maxCompletionLength: 4,
  learningRate: 1e-2,
  lrScheduler: 'constant',
  steps: 3,
  saveSteps: 2,
  evalPrompts: 2,
};
const MAX_POSITIONS = 128;

describe('one Run for the worker and the command line', { timeout: 600_000 }, () => {
  it('same checkpoints (steps, final step included, weights) and the same memory plan', async () => {
    const folder = await tinyHfFolder({ maxPositions: MAX_POSITIONS });
    const engine = await testEngine();

    // The browser's path: the worker API, checkpoints in IndexedDB.
    const storage = await GrpoStorage.open({ indexedDB: new IDBFactory() });
    const events: TrainerEvent[] = [];
    const api = createTrainerApi({
      createEngine: testEngine,
      sandboxFactory: () => nodeSandboxFactory(),
      openStorage: async () => storage,
      modelSource: () => filesSource(folder.blobs, 'tiny test model'),
    });
    api.setListener((e) => events.push(e));
    const loaded = await api.loadModel({ kind: 'bundled' }, CONFIG);
    expect(await api.run()).toEqual({ step: 3, stopped: 'finished' });
    const browserIds = events.flatMap((e) => (e.type === 'checkpoint-saved' ? [e] : []));
    const browser = await Promise.all(
      browserIds.map(async (e) => storage.loadCheckpoint(e.checkpoint.id)),
    );
    const browserLosses = events.flatMap((e) => (e.type === 'step' ? [e.report.metrics.loss] : []));

    // The command line's path: the same model as a folder on disk, checkpoints as folders.
    const work = mkdtempSync(join(tmpdir(), 'grpo-parity-'));
    const model = await loadModel(folder.writeTo(join(work, 'model')));
    const lines: string[] = [];
    const cliPhases: (PhaseProgress | null)[] = [];
    const cli = await trainFolder({
      progress: (p) => cliPhases.push(p),
      engine,
      model,
      identity: await weightsIdentity(model.folder, model.hf.tensors),
      config: resolveConfig(CONFIG),
      runDir: join(work, 'run'),
      log: (line) => lines.push(line),
    });
    const onDisk = cli.checkpoints.map((dir) => readCheckpointFolder(dir).payload);

    // Saved at saveSteps and at the last step, by both.
    expect(browser.map((c) => c.step)).toEqual([2, 3]);
    expect(onDisk.map((c) => c.step)).toEqual([2, 3]);
    for (let i = 0; i < 2; i++) {
      const a = payloadToSnapshot(browser[i]);
      const b = payloadToSnapshot(onDisk[i]);
      expect(b.step).toBe(a.step);
      expect(b.optimizerStep).toBe(a.optimizerStep);
      expect(b.numTokens).toBe(a.numTokens);
      expect(b.promptCursor).toBe(a.promptCursor);
      expect([...b.weights.keys()].sort()).toEqual([...a.weights.keys()].sort());
      for (const [name, data] of a.weights) expect(b.weights.get(name)).toEqual(data);
      expect([...b.optimizer.keys()].sort()).toEqual([...a.optimizer.keys()].sort());
      for (const [name, data] of a.optimizer) expect(b.optimizer.get(name)).toEqual(data);
    }
    // The two checkpoints differ (the steps moved the weights), so equal weights mean something.
    const embed = 'model.embed_tokens.weight';
    expect(payloadToSnapshot(browser[1]).weights.get(embed)).not.toEqual(
      payloadToSnapshot(browser[0]).weights.get(embed),
    );
    const cliLosses = lines
      .filter((l) => l.startsWith('step '))
      .map((l) => Number(/loss (\S+)/.exec(l)![1]));
    expect(cliLosses).toEqual(browserLosses.map((x) => Number(x.toFixed(4))));

    // The same phases, in order, from the one Run (the worker also re-scores the updated policy for
    // the Learn view): per step sampling counts its tokens as they are submitted (the prefill's
    // first, then the other 3 in one submission: 0, 1, 4 of 4), then rewards, forward + backward
    // and the optimizer, the checkpoint at steps 2 and 3, and null once the step is over.
    const browserPhases = events.flatMap((e) => (e.type === 'phase' ? [e.progress] : []));
    const notRescoring = (p: PhaseProgress | null) => p?.phase !== 'rescoring';
    expect(cliPhases.filter(notRescoring)).toEqual(browserPhases.filter(notRescoring));
    const named = cliPhases.map((p) =>
      p === null ? 'idle' : `${p.step} ${p.phase}${p.done === null ? '' : ` ${p.done}/${p.total}`}`,
    );
    const sampling = (step: number) => [0, 1, 4].map((k) => `${step} sampling ${k}/4`);
    const update = (step: number) => [
      `${step} rewards`,
      `${step} backward 1/1`,
      `${step} optimizer 1/1`,
    ];
    expect(named).toEqual([
      ...sampling(1),
      ...update(1),
      'idle',
      ...sampling(2),
      ...update(2),
      '2 checkpoint',
      'idle',
      ...sampling(3),
      ...update(3),
      '3 checkpoint',
      'idle',
    ]);

    // One memory plan, with the micro-batch of gradient accumulation and the position cap.
    const limits = engine.device.limits;
    const expected = planMemory(
      {
        config: folder.config,
        numPrompts: 2,
        groupSize: 2,
        promptLength: MAX_POSITIONS,
        completionLength: 4,
        beta: resolveConfig(CONFIG).beta,
        microBatch: 2,
        // The kernels the engine runs (SwiftShader: the emulation path, no GPU partials).
        kernels: engine.pipelines.tuning,
      },
      deviceMemoryLimits(limits, limits.maxBufferSize * 4),
    );
    expect(cli.plan.input.microBatch).toBe(2);
    expect(cli.plan.input.promptLength).toBe(MAX_POSITIONS);
    expect(cli.plan.peakBytes).toBe(expected.peakBytes);
    expect(cli.plan.byCategory).toEqual(expected.byCategory);
    expect(loaded.run.plan.peakBytes).toBe(cli.plan.peakBytes);
    expect(loaded.run.plan.byCategory).toEqual(cli.plan.byCategory);
    expect(loaded.run.plan.budgetBytes).toBe(cli.plan.limits.totalBudget);
  });
});
