// Every kind of playground run saves and resumes through the trainer worker's one checkpoint path
// (src/worker/trainer-api.ts → src/train/checkpoint.ts → src/storage/checkpoints.ts), on fake
// IndexedDB: full fine-tune, LoRA on an f32, a bf16 and an NF4 base each train 2 steps, save,
// and a FRESH worker (same database) loads the model, restores and trains step 3; its weights, AdamW
// moments and metrics rows equal an uninterrupted 3-step run's bit for bit. Also: a checkpoint of
// another model is refused by restoreProblem, naming both models, before anything is loaded.
// (Before the fix a LoRA save failed: "unexpected tensor '…lora_A.weight': neither a parameter …".)
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it, vi } from 'vitest';
import { createTrainerApi } from '../../src/worker/trainer-api';
import type { ConfigInput } from '../../src/grpo/config';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { filesSource } from '../../src/formats/model-source';
import { GrpoStorage } from '../../src/storage/index';
import type { CheckpointTensor } from '../../src/storage/checkpoints';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';
import { listen, stepReport, tinyRunConfig } from '../support/worker-steps';

type Folder = Awaited<ReturnType<typeof tinyHfFolder>>;

/** A worker API over `indexedDB` (shared between "tabs" of one test) on the tiny model. */
function workerOn(indexedDB: IDBFactory, folder: Folder, label = 'tiny test model') {
  return createTrainerApi({
    createEngine: testEngine,
    sandboxFactory: () => nodeSandboxFactory(),
    openStorage: () => GrpoStorage.open({ indexedDB }),
    modelSource: () => filesSource(folder.blobs, label),
  });
}

const runConfig = (overrides: Partial<ConfigInput>) => tinyRunConfig({ seed: 11, ...overrides });

// Wall-clock metrics differ between any two runs; everything else must not.
const WALL_CLOCK = /time|per_second|elapsed|_ms$|_s$/;
const comparable = (rows: readonly { step: number; metrics: Record<string, number> }[]) =>
  rows.map((r) => ({
    step: r.step,
    metrics: Object.fromEntries(Object.entries(r.metrics).filter(([k]) => !WALL_CLOCK.test(k))),
  }));

const byName = (tensors: CheckpointTensor[]) =>
  new Map(tensors.map((t) => [t.name, Array.from(t.data)]));

const KINDS: [string, Partial<ConfigInput>][] = [
  ['full fine-tune (f32)', {}],
  ['LoRA on an f32 base', { usePeft: true, loraR: 2, loraAlpha: 4 }],
  ['LoRA on a bf16 base', { usePeft: true, loraR: 2, loraAlpha: 4, dtype: 'bfloat16' }],
  // QLoRA (issue #37): the base quantised at load, nested scales; the fresh worker quantises the
  // same weights again, so only the adapters and their moments need saving.
  [
    'LoRA on an nf4 base',
    { usePeft: true, loraR: 2, loraAlpha: 4, dtype: 'nf4', useBnbNestedQuant: true },
  ],
];

describe('every playground run kind saves and resumes exactly', { timeout: 900_000 }, () => {
  it.each(KINDS)(
    '%s: 2 steps, save, fresh worker restores, step 3 = uninterrupted',
    async (_k, o) => {
      const folder = await tinyHfFolder();
      const config = runConfig(o);

      // Uninterrupted: 3 steps, then a checkpoint to read its tensors.
      const straightDb = new IDBFactory();
      const straight = workerOn(straightDb, folder);
      await straight.loadModel({ kind: 'bundled' }, config);
      for (let i = 0; i < 3; i++) await straight.step();
      const straightSaved = await straight.saveCheckpoint();
      const straightCkpt = await (
        await GrpoStorage.open({ indexedDB: straightDb })
      ).loadCheckpoint(straightSaved.id);

      // Interrupted: 2 steps, save; a fresh worker on the same database restores and trains on.
      const db = new IDBFactory();
      const first = workerOn(db, folder);
      await first.loadModel({ kind: 'bundled' }, config);
      await first.step();
      await first.step();
      const saved = await first.saveCheckpoint();
      expect(saved.step).toBe(2);

      const second = workerOn(db, folder);
      const events = listen(second);
      await second.loadModel({ kind: 'bundled' }, config);
      expect(await second.restoreProblem(saved.id)).toBeNull();
      const restored = await second.restoreCheckpoint(saved.id);
      expect(restored.step).toBe(2);
      expect(restored.config.usePeft).toBe(config.usePeft ?? false);
      const third = await stepReport(second, events);
      expect(third.step).toBe(3);
      const resumedSaved = await second.saveCheckpoint();
      const resumedCkpt = await (
        await GrpoStorage.open({ indexedDB: db })
      ).loadCheckpoint(resumedSaved.id);

      // The stored tensors: adapters only (and their moments) for LoRA, every parameter otherwise.
      const names = resumedCkpt.tensors.map((t) => t.name);
      if (config.usePeft) {
        expect(names.every((n) => n.includes('lora_'))).toBe(true);
        expect(resumedCkpt.adapter).toMatchObject({ r: 2, alpha: 4 });
      } else {
        expect(names).toContain('model.embed_tokens.weight');
        expect(resumedCkpt.adapter).toBeNull();
      }
      expect(names.some((n) => n.startsWith('optimizer.exp_avg_sq.'))).toBe(true);
      expect(byName(resumedCkpt.tensors)).toEqual(byName(straightCkpt.tensors));
      expect(resumedCkpt.optimizerStep).toBe(straightCkpt.optimizerStep);
      expect(
        comparable(resumedCkpt.metricsSoFar!.map(({ step, ...m }) => ({ step, metrics: m }))),
      ).toEqual(
        comparable(straightCkpt.metricsSoFar!.map(({ step, ...m }) => ({ step, metrics: m }))),
      );
      expect(resumedCkpt.metricsSoFar!.map((r) => r.step)).toEqual([1, 2, 3]);

      // The worker wrote the run's history as the steps ended (the page writes none): the two
      // workers' rows are one history, and step 3's row is the resumed run's.
      const stored = await GrpoStorage.open({ indexedDB: db });
      await vi.waitFor(async () =>
        expect((await stored.getMetrics(saved.runId)).map((r) => r.step)).toEqual([1, 2, 3]),
      );
      const rows = await stored.getMetrics(saved.runId);
      expect(rows[2].loss).toBe(third.metrics.loss);
    },
  );

  it('a checkpoint of another model is refused by name before anything is loaded', async () => {
    const folder = await tinyHfFolder();
    const other = await tinyHfFolder({ intermediateSize: 48 });
    const db = new IDBFactory();
    const a = workerOn(db, folder, 'model A');
    // A URL choice keeps the source's label (the bundled one is always 'tiny-reasoner (bundled)').
    await a.loadModel({ kind: 'url', url: 'a' }, runConfig({ usePeft: true, loraR: 2 }));
    await a.step();
    const saved = await a.saveCheckpoint();
    const b = workerOn(db, other, 'model B');
    await b.loadModel({ kind: 'url', url: 'b' }, runConfig({}));
    const problem = await b.restoreProblem(saved.id);
    expect(problem).toContain("'model A'");
    expect(problem).toContain("'model B'");
    await expect(b.restoreCheckpoint(saved.id)).rejects.toThrow(/model A/);
  });
});
