// The trainer worker's 'phase' events (src/worker/step-progress.ts wired in trainer-api.ts), on a
// real step of a tiny random Llama on Node WebGPU: the page's progress line sees sampling count its
// tokens, then rewards, the reference (β > 0), forward + backward and the optimizer of each of the
// μ passes, the re-scoring of the updated policy, the automatic checkpoint, and nothing after.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { createTrainerApi } from '../../src/worker/trainer-api';
import type { PhaseProgress, TrainerEvent } from '../../src/worker/protocol';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { filesSource } from '../../src/formats/model-source';
import { GrpoStorage } from '../../src/storage/index';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';

describe('trainer worker step phases', { timeout: 600_000 }, () => {
  it('streams each phase of a step in order, then nothing between steps', async () => {
    const folder = await tinyHfFolder();
    const events: TrainerEvent[] = [];
    const api = createTrainerApi({
      createEngine: testEngine,
      sandboxFactory: () => nodeSandboxFactory(),
      openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
      modelSource: () => filesSource(folder.blobs, 'tiny test model'),
    });
    api.setListener((e) => events.push(e));
    await api.loadModel(
      { kind: 'bundled' },
      {
        task: 'countdown',
        taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
        perStepPrompts: 1,
        numGenerations: 2,
        maxPromptLength: 100,
        maxCompletionLength: 4,
        numIterations: 2,
        beta: 0.04,
        steps: 10,
        saveSteps: 1,
        evalPrompts: 1,
      },
    );
    events.length = 0;
    await api.step();
    const phases = events
      .filter((e): e is Extract<TrainerEvent, { type: 'phase' }> => e.type === 'phase')
      .map((e) => e.progress);
    const names = (ps: (PhaseProgress | null)[]) =>
      ps.map((p) => (p ? p.phase : 'idle')).filter((n, i, a) => i === 0 || a[i - 1] !== n);
    expect(names(phases)).toEqual([
      'sampling',
      'rewards',
      'reference',
      'backward',
      'optimizer',
      'backward',
      'optimizer',
      'rescoring',
      'checkpoint',
      'idle',
    ]);
    for (const p of phases) if (p) expect(p.step).toBe(1);
    const sampled = phases.filter((p) => p?.phase === 'sampling').map((p) => p!.done);
    expect(sampled[0]).toBe(0);
    expect(sampled.every((d, i) => i === 0 || d! > sampled[i - 1]!)).toBe(true);
    expect(sampled.at(-1)).toBeLessThanOrEqual(4);
    expect(phases.filter((p) => p?.phase === 'optimizer').map((p) => p!.done)).toEqual([1, 2]);
    // The step event comes before its checkpoint's phase; the status after everything.
    const order = events.map((e) => (e.type === 'phase' ? (e.progress?.phase ?? 'idle') : e.type));
    expect(order.indexOf('step')).toBeLessThan(order.indexOf('checkpoint'));
    expect(order.at(-1)).toBe('status');
  });
});
