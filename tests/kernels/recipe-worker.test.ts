// Recipes in the trainer worker (src/worker/recipe-service.ts through trainer-api.ts) on Node WebGPU
// with the bundled model and fake IndexedDB: a two-stage recipe (SFT 2 steps → GRPO 2 steps)
// paused after timeline step 3 (runRecipe's pauseAfterStep) is stored as one run row (RecipeState
// on RunRecord.recipe, the stages' first steps, the timeline in the metrics store) with each
// stage's checkpoints under its own run id; a second worker on the same database (a reload) lists it as unfinished, resumes it
// from the GRPO stage's checkpoint at its step 1, trains only stage 2's step 2 (step 4), and ends
// with the same timeline as an uninterrupted run; so does a recipe resumed after a LoRA stage.
// While a recipe trains, the playground's Step is refused.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { BUNDLED_MODEL_DIR } from '../../src/cli/_session';
import { folderSource } from '../../src/formats/model-source';
import type { GrpoStage, Recipe, SftStage, TimelineRow } from '../../src/recipes/recipe-spec';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { GrpoStorage } from '../../src/storage/index';
import type { RecipeEvent } from '../../src/worker/recipe-service';
import { createTrainerApi } from '../../src/worker/trainer-api';
import { OVERSIZED, TWO_STAGE } from '../support/two-stage-recipe';
import { testEngine } from './harness';

/** A worker API on `idb` with the bundled model loaded, recording its recipe events. */
async function worker(idb: IDBFactory) {
  const api = createTrainerApi({
    createEngine: testEngine,
    sandboxFactory: () => nodeSandboxFactory(),
    openStorage: () => GrpoStorage.open({ indexedDB: idb }),
    modelSource: () => folderSource(BUNDLED_MODEL_DIR),
  });
  const events: RecipeEvent[] = [];
  api.setRecipeListener((e) => events.push(e));
  await api.loadModel({ kind: 'bundled' }, { perStepPrompts: 1, numGenerations: 2 });
  return { api, events };
}

const steps = (events: RecipeEvent[]) =>
  events.flatMap((e) => (e.type === 'recipe-step' ? [e.row] : []));
/** Without the wall-clock metrics (they differ run to run). */
const comparable = (rows: readonly TimelineRow[]) =>
  rows.map((r) => ({
    ...r,
    metrics: Object.fromEntries(
      Object.entries(r.metrics).filter(([k]) => k !== 'step_time' && k !== 'tokens_per_second'),
    ),
  }));

describe('recipe in the trainer worker', { timeout: 900_000 }, () => {
  it('pauses after step 3, resumes after a reload from the GRPO checkpoint, equals one run', async () => {
    const whole = await worker(new IDBFactory());
    await whole.api.startRecipe(TWO_STAGE);
    // While the recipe trains, the playground's Step waits for it.
    let refused: Promise<unknown> | null = null;
    whole.api.setRecipeListener((e) => {
      whole.events.push(e);
      refused ??= whole.api.step().then(
        () => 'stepped',
        (err: Error) => err.message,
      );
    });
    expect(await whole.api.runRecipe()).toEqual({ outcome: 'finished' });
    expect(await refused).toBe('A recipe is training (Recipes view): pause it first.');
    const wholeRows = steps(whole.events);
    expect(wholeRows.map((r) => [r.step, r.stage, r.stageStep])).toEqual([
      [1, 0, 1],
      [2, 0, 2],
      [3, 1, 1],
      [4, 1, 2],
    ]);
    expect(
      whole.events
        .filter((e) => e.type === 'recipe-stage-start')
        .map((e) => e.type === 'recipe-stage-start' && [e.name, e.steps, e.startStep]),
    ).toEqual([
      ['cold-start', 2, 0],
      ['rl', 2, 2],
    ]);

    const idb = new IDBFactory();
    const first = await worker(idb);
    const started = await first.api.startRecipe(TWO_STAGE);
    expect(await first.api.runRecipe({ pauseAfterStep: 3 })).toEqual({ outcome: 'paused' });
    expect(steps(first.events).map((r) => r.step)).toEqual([1, 2, 3]);
    expect(first.events.at(-1)).toEqual({
      type: 'recipe-status',
      runId: started.runId,
      status: 'paused',
    });

    // What is stored: one run row with the state, the stages, the timeline; stage checkpoints.
    const storage = await GrpoStorage.open({ indexedDB: idb });
    const record = await storage.getRun(started.runId);
    expect(record?.status).toBe('paused');
    expect(record?.recipe?.state.stageIndex).toBe(1);
    expect(record?.stages).toEqual([
      { name: 'cold-start', kind: 'sft', firstStep: 1 },
      { name: 'rl', kind: 'grpo', firstStep: 3 },
    ]);
    const history = await storage.getRunHistory(started.runId);
    expect(history?.rows.map((r) => r.step)).toEqual([1, 2, 3]);
    expect(history?.rows[0].mean_token_accuracy).toBe(wholeRows[0].metrics.mean_token_accuracy);
    const rl = await storage.listCheckpoints(`${started.runId}/1-rl`);
    expect(rl.map((c) => c.step)).toEqual([1]);
    // Two kept per stage (retention): the SFT stage saved at steps 1 and 2.
    const sft = await storage.listCheckpoints(`${started.runId}/0-cold-start`);
    expect(sft.map((c) => c.step).sort()).toEqual([1, 2]);
    storage.close();

    // A reload: a new worker on the same database.
    const second = await worker(idb);
    const listed = await second.api.listRecipeRuns();
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({
      runId: started.runId,
      recipeName: 'two-stage',
      stageIndex: 1,
      stageName: 'rl',
      stageCount: 2,
      lastStep: 3,
      finished: false,
      status: 'paused',
    });
    const resumed = await second.api.resumeRecipe(started.runId);
    expect(resumed.status).toBe('paused');
    expect(resumed.state.timeline.map((r) => r.step)).toEqual([1, 2, 3]);
    expect(await second.api.runRecipe()).toEqual({ outcome: 'finished' });
    // Only stage 2's step 2 trained after the reload, not its step 1 again.
    expect(steps(second.events).map((r) => [r.step, r.stage, r.stageStep])).toEqual([[4, 1, 2]]);
    const all = [...resumed.state.timeline, ...steps(second.events)];
    expect(comparable(all)).toEqual(comparable(wholeRows));

    const after = await GrpoStorage.open({ indexedDB: idb });
    const done = await after.getRun(started.runId);
    expect(done?.status).toBe('finished');
    expect(done?.recipe?.state.stageIndex).toBe(2);
    expect((await after.getRunHistory(started.runId))?.rows.map((r) => r.step)).toEqual([
      1, 2, 3, 4,
    ]);
    after.close();
    expect((await second.api.listRecipeRuns())[0].finished).toBe(true);
  });

  it('resumed after a reload past LoRA stages (SFT on an NF4 base, GRPO on a bf16 one): the next stage starts from their merged weights, as in one run', async () => {
    // The LoRA stages' stored checkpoints hold only adapters (RecipeRun.stageEndWeights merges
    // them onto each stage's start as the stage stored it: NF4 quantised, bf16 rounded). With
    // β > 0 they are stage 3's frozen reference, which its checkpoint names by identity: any other
    // start is refused, or shows in the KL.
    const [sft, rl] = TWO_STAGE.stages as [SftStage, GrpoStage];
    const recipe: Recipe = {
      name: 'lora-then-full',
      seed: 2,
      stages: [
        {
          ...sft,
          name: 'qlora-sft',
          data: { coldStart: { count: 4 } },
          options: { ...sft.options, usePeft: true, loraR: 4, dtype: 'nf4' },
        },
        {
          ...rl,
          name: 'lora',
          options: { ...rl.options, steps: 1, usePeft: true, loraR: 4, dtype: 'bfloat16' },
        },
        { ...rl, name: 'full', options: { ...rl.options, saveSteps: 10, beta: 0.04 } },
      ],
    };
    const whole = await worker(new IDBFactory());
    await whole.api.startRecipe(recipe);
    expect(await whole.api.runRecipe()).toEqual({ outcome: 'finished' });
    const idb = new IDBFactory();
    const first = await worker(idb);
    const started = await first.api.startRecipe(recipe);
    expect(await first.api.runRecipe({ pauseAfterStep: 3 })).toEqual({ outcome: 'paused' });
    const second = await worker(idb);
    const resumed = await second.api.resumeRecipe(started.runId);
    expect(resumed.state.stageIndex).toBe(2);
    expect(await second.api.runRecipe()).toEqual({ outcome: 'finished' });
    const all = [...resumed.state.timeline, ...steps(second.events)];
    expect(all.map((r) => [r.step, r.stage])).toEqual([
      [1, 0],
      [2, 1],
      [3, 2],
      [4, 2],
    ]);
    expect(comparable(all)).toEqual(comparable(steps(whole.events)));
  });

  it("a recipe's GRPO stage checkpoint continues in the playground; an SFT stage's is refused saying where it goes on", async () => {
    const { api } = await worker(new IDBFactory());
    const one = (stage: Recipe['stages'][number]): Recipe => ({
      name: 'one',
      seed: 1,
      stages: [stage],
    });
    await api.startRecipe(
      one({
        kind: 'sft',
        name: 'tune',
        data: { jsonl: JSON.stringify({ prompt: '1+1=', completion: ' 2' }) },
        options: { maxSteps: 1, usePeft: true, loraR: 2 },
      }),
    );
    expect(await api.runRecipe()).toEqual({ outcome: 'finished' });
    const [sft] = await api.listCheckpoints();
    const why =
      "This checkpoint is an SFT stage's (stage 'tune' of recipe 'one'): the playground continues GRPO runs";
    expect(await api.restoreProblem(sft.id)).toContain(why);
    await expect(api.restoreCheckpoint(sft.id)).rejects.toThrow(why);

    const rl = TWO_STAGE.stages[1] as GrpoStage;
    await api.startRecipe(one({ ...rl, options: { ...rl.options, steps: 1 } }));
    expect(await api.runRecipe()).toEqual({ outcome: 'finished' });
    const [grpo] = await api.listCheckpoints();
    expect(await api.restoreProblem(grpo.id)).toBeNull();
    const state = await api.restoreCheckpoint(grpo.id);
    expect(state.config.steps).toBe(1);
    expect('recipe' in state.config).toBe(false);
    // A run of its own: what it saves never becomes the recipe stage's latest checkpoint.
    expect(state.runId).not.toBe(grpo.runId);
    expect(state.runName).toContain('(continued)');
  });

  it('a stage that would not fit stops the recipe before it runs a stage, saying which and why', async () => {
    const { api, events } = await worker(new IDBFactory());
    // Planned before it starts (the Recipes view shows it under Start), as the preflight will.
    const planned = await api.planRecipe(OVERSIZED);
    expect(planned.plans.map((p) => [p.name, p.fits])).toEqual([
      ['cold-start', true],
      ['rl', false],
    ]);
    expect(planned.plans[1].message).toMatch(/^Does not fit: N = 256×64 = 16384 sequences/);
    expect(planned.budgetBytes).toBe(4 * 2 ** 30);
    expect((await api.planRecipe(TWO_STAGE)).plans.every((p) => p.fits)).toBe(true);
    await api.startRecipe(OVERSIZED);
    const ended = await api.runRecipe();
    expect(ended.outcome).toBe('error');
    expect(ended.message).toMatch(
      /^Stage 'rl' \(2 of 2\) would not fit on this GPU, so the recipe stops before running a stage: Does not fit: N = 256×64 = 16384 sequences/,
    );
    // The preflight's plans reached the page (its log); no stage started, no step trained.
    const plans = events.find((e) => e.type === 'recipe-plans');
    expect(plans?.type === 'recipe-plans' && plans.plans.map((p) => [p.name, p.fits])).toEqual([
      ['cold-start', true],
      ['rl', false],
    ]);
    expect(
      events.filter((e) => e.type === 'recipe-stage-start' || e.type === 'recipe-step'),
    ).toEqual([]);
  });

  it('refuses a bad recipe with parseRecipe’s message and an unknown run id', async () => {
    const { api } = await worker(new IDBFactory());
    await expect(
      api.startRecipe({ name: 'x', stages: [{ kind: 'dpo' }] } as never),
    ).rejects.toThrow('stage 1: "kind" must be one of sft, grpo, rejection-sample');
    await expect(api.resumeRecipe('nope')).rejects.toThrow("no stored recipe run 'nope'");
    expect(api.checkRecipe('r1').stages.map((s) => s.kind)).toEqual([
      'sft',
      'grpo',
      'rejection-sample',
      'sft',
      'grpo',
    ]);
  });
});
