// SFT and a two-stage recipe save and resume exactly in the page, in Chromium with the app's real
// IndexedDB: the two-stage recipe (SFT 2 steps → GRPO 2 steps, a checkpoint every step) paused
// after timeline step 1 — inside the SFT stage — then the page RELOADED and the stored recipe
// resumed to the end, equals the same recipe run uninterrupted in the same page: each stage's last
// checkpoint has the same SHA-256 for every weight and AdamW moment, the same optimizer step, and
// the timelines have the same values (wall-clock metrics aside). (The pause inside the GRPO stage is
// recipe.spec.ts; the playground's full and LoRA runs are save-restore.spec.ts.) The same recipe
// with a QLoRA SFT stage (adapters on an NF4 base) and β > 0 in the GRPO stage, paused inside the
// GRPO stage: after the reload the GRPO stage's start (and frozen reference) is rebuilt from the
// SFT stage's adapter-only checkpoint, and must equal the merged weights one run hands on.
import { expect, test, type Page } from '@playwright/test';
import type { GrpoStage, Recipe, SftStage } from '../../src/recipes/recipe-spec';
import { TWO_STAGE } from '../support/two-stage-recipe';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 240_000;

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

interface Digest {
  step: number;
  optimizerStep: number;
  tensorSha256: Record<string, string>;
}
interface Hooks {
  recipeTimeline(): { step: number; stage: number; stageStep: number; metrics: object }[];
  recipeStageDigest(index: number): Promise<Digest | null>;
}

/** Both stages' newest checkpoints and the timeline of the recipe the view holds. */
async function outcome(page: Page) {
  const stages = await page.evaluate(async () => {
    const h = (window as unknown as { __grpoTest: Hooks }).__grpoTest;
    return [await h.recipeStageDigest(0), await h.recipeStageDigest(1)];
  });
  const timeline = await page.evaluate(() =>
    (window as unknown as { __grpoTest: Hooks }).__grpoTest.recipeTimeline(),
  );
  return { stages, timeline };
}

// Wall-clock metrics differ between any two runs; every other value must be equal.
const WALL_CLOCK = /time|per_second|elapsed|_ms$|_s$/;
const withoutClock = (rows: { metrics: object }[]) =>
  rows.map((r) => ({
    ...r,
    metrics: Object.fromEntries(Object.entries(r.metrics).filter(([k]) => !WALL_CLOCK.test(k))),
  }));

async function startPasted(page: Page, pauseAt: string, recipe: Recipe = TWO_STAGE) {
  await page.getByTestId('recipe-choice-paste').check();
  await page.getByTestId('recipe-json').fill(JSON.stringify(recipe, null, 2));
  await expect(page.getByTestId('recipe-json-ok')).toContainText('2 stages');
  await page.getByTestId('recipe-pause-at').fill(pauseAt);
  await page.getByTestId('recipe-start').click();
}

/** The page reloaded, the model loaded again and the stored recipe resumed to its end. */
async function reloadAndResume(page: Page) {
  await page.reload();
  await page.getByTestId('recipe-load-model').click();
  await expect(page.getByTestId('recipe-need-model')).toHaveCount(0, { timeout: STEP_TIMEOUT });
  await page.getByTestId('recipe-stored-run').getByTestId('recipe-resume-stored').click();
  await expect(page.getByTestId('recipe-status')).toHaveText('finished', {
    timeout: STEP_TIMEOUT,
  });
  return outcome(page);
}

/** The same recipe uninterrupted, in the same page (a new run of its own; its steps take seconds
 * each, so the status leaves 'finished' before it comes back to it). */
async function runStraight(page: Page, recipe: Recipe) {
  await startPasted(page, '', recipe);
  await expect(page.getByTestId('recipe-status')).not.toHaveText('finished');
  await expect(page.getByTestId('recipe-status')).toHaveText('finished', {
    timeout: STEP_TIMEOUT,
  });
  return outcome(page);
}

test('a recipe paused inside its SFT stage and resumed after a reload equals one uninterrupted run', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  await page.goto('/?test-hooks=1#recipes');
  await expect(page.getByTestId('recipe-need-model')).toBeVisible();
  await page.getByTestId('recipe-load-model').click();
  await expect(page.getByTestId('recipe-need-model')).toHaveCount(0, { timeout: STEP_TIMEOUT });

  // Paused after step 1: the SFT stage has trained (and checkpointed) its first step only.
  await startPasted(page, '1');
  await expect(page.getByTestId('recipe-status')).toHaveText('paused', { timeout: STEP_TIMEOUT });
  const atPause = await outcome(page);
  expect(atPause.timeline.map((r) => [r.step, r.stage, r.stageStep])).toEqual([[1, 0, 1]]);
  expect(atPause.stages[0]?.step).toBe(1);
  expect(atPause.stages[1]).toBeNull();

  // A reload, and the stored recipe resumed to its end in the new page's worker.
  const resumed = await reloadAndResume(page);

  const straight = await runStraight(page, TWO_STAGE);

  expect(straight.timeline.map((r) => [r.step, r.stage, r.stageStep])).toEqual([
    [1, 0, 1],
    [2, 0, 2],
    [3, 1, 1],
    [4, 1, 2],
  ]);
  expect(withoutClock(resumed.timeline)).toEqual(withoutClock(straight.timeline));
  for (const i of [0, 1]) {
    const [r, s] = [resumed.stages[i]!, straight.stages[i]!];
    expect(r.step).toBe(2);
    expect(r.optimizerStep).toBe(s.optimizerStep);
    expect(Object.keys(r.tensorSha256).some((n) => n.startsWith('optimizer.exp_avg.'))).toBe(true);
    expect(r.tensorSha256).toEqual(s.tensorSha256);
  }
  expect(errors).toEqual([]);
});

test('a recipe paused after its QLoRA SFT stage resumes after a reload from the adapter checkpoint, as one run', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  const [sft, rl] = TWO_STAGE.stages as [SftStage, GrpoStage];
  const recipe: Recipe = {
    ...TWO_STAGE,
    name: 'qlora-then-rl',
    stages: [
      { ...sft, options: { ...sft.options, usePeft: true, loraR: 4, dtype: 'nf4' } },
      { ...rl, options: { ...rl.options, beta: 0.04 } },
    ],
  };
  await page.goto('/?test-hooks=1#recipes');
  await page.getByTestId('recipe-load-model').click();
  await expect(page.getByTestId('recipe-need-model')).toHaveCount(0, { timeout: STEP_TIMEOUT });

  // Paused after step 3: the SFT stage is done (its checkpoints hold adapters only), and the
  // GRPO stage has trained one step.
  await startPasted(page, '3', recipe);
  await expect(page.getByTestId('recipe-stages')).toContainText(
    'training LoRA adapters (r 4) on a frozen base stored 4-bit NF4 (QLoRA)',
  );
  await expect(page.getByTestId('recipe-status')).toHaveText('paused', { timeout: STEP_TIMEOUT });
  const atPause = await outcome(page);
  expect(atPause.timeline.map((r) => [r.step, r.stage, r.stageStep])).toEqual([
    [1, 0, 1],
    [2, 0, 2],
    [3, 1, 1],
  ]);
  const sftTensors = Object.keys(atPause.stages[0]!.tensorSha256);
  expect(sftTensors.some((n) => n.endsWith('.lora_A.weight'))).toBe(true);
  expect(sftTensors.some((n) => n === 'model.embed_tokens.weight')).toBe(false);

  const resumed = await reloadAndResume(page);

  const straight = await runStraight(page, recipe);
  expect(withoutClock(resumed.timeline)).toEqual(withoutClock(straight.timeline));
  for (const i of [0, 1]) {
    expect(resumed.stages[i]!.optimizerStep).toBe(straight.stages[i]!.optimizerStep);
    expect(resumed.stages[i]!.tensorSha256).toEqual(straight.stages[i]!.tensorSha256);
  }
  expect(errors).toEqual([]);
});
