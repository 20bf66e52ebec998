// A multi-stage recipe in the page (issue #27), in Chromium on SwiftShader with the app's real
// IndexedDB: the Recipes view shows the built-in recipes with their stages, refuses a pasted recipe
// with parseRecipe's message, runs a pasted two-stage recipe (SFT 2 steps → GRPO 2 steps) on the
// bundled model and pauses after timeline step 3 (the first GRPO step); after a RELOAD the stored
// recipe is offered for resume, and resuming trains only stage 2's step 2 (timeline step 4), from
// the GRPO stage's checkpoint: steps 1–3 come back from storage unchanged, the timeline shows
// steps 1–4 with the stage boundary after step 2, and at 390 px nothing scrolls sideways; axe-core
// finds no serious or critical violation in the view (light and dark).
import { expect, test, type Page } from '@playwright/test';
import axe from 'axe-core';
import { watchErrors } from './support/watch-errors';
import { OVERSIZED, TWO_STAGE } from '../support/two-stage-recipe';
import { loadBundledModel } from './support/bundled-model';

const STEP_TIMEOUT = 180_000;

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

/** [step, stage, stageStep] of every timeline row in the table. */
async function timeline(page: Page) {
  return page
    .getByTestId('recipe-row')
    .evaluateAll((rows) =>
      rows.map((r) => [
        Number(r.getAttribute('data-step')),
        Number(r.getAttribute('data-stage')),
        Number(r.getAttribute('data-stage-step')),
      ]),
    );
}

/** axe-core's serious and critical violations in the Recipes view (injected from the devDependency). */
async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axe.source);
  return page.evaluate(async () => {
    const run = (window as unknown as { axe: typeof axe }).axe.run;
    const result = await run('main', { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
}

async function markers(page: Page) {
  return page
    .getByTestId('recipe-chart-loss')
    .getByTestId('chart-marker')
    .evaluateAll((ls) =>
      ls.map((l) => [Number(l.getAttribute('data-x')), l.getAttribute('data-label')]),
    );
}

test('a two-stage recipe pauses after step 3, resumes after a reload from its GRPO checkpoint', async ({
  page,
}) => {
  test.setTimeout(420_000);
  const errors = watchErrors(page);
  await page.goto('/');
  await loadBundledModel(page);
  await page.getByTestId('nav-recipes').click();

  // The built-in recipes with their stages.
  const choose = page.getByRole('group', { name: 'Recipe' });
  await expect(choose.getByText('R1-Zero', { exact: true })).toBeVisible();
  await expect(choose.getByText('Distillation', { exact: true })).toBeVisible();
  await expect(choose.getByText('Pure RL', { exact: false })).toBeVisible();
  await expect(choose.getByText('teacher-samples', { exact: true })).toBeVisible();

  // A pasted recipe is checked as it is typed.
  await page.getByTestId('recipe-choice-paste').check();
  await page.getByTestId('recipe-json').fill('{"name": "x", "stages": [{"kind": "dpo"}]}');
  await expect(page.getByTestId('recipe-json-error')).toContainText(
    'stage 1: "kind" must be one of sft, grpo, rejection-sample',
  );
  await expect(page.getByTestId('recipe-start')).toBeDisabled();
  // A recipe whose GRPO stage would not fit is known before Start: its plan says why, and Start
  // waits for a smaller one.
  await page.getByTestId('recipe-json').fill(JSON.stringify(OVERSIZED));
  await expect(page.getByTestId('recipe-plan')).toHaveAttribute('data-fits', 'false');
  await expect(page.getByTestId('recipe-plan')).toContainText(
    "Stage 'rl' would not fit on this GPU: Does not fit: N = 256×64 = 16384 sequences",
  );
  await expect(page.getByTestId('recipe-start')).toBeDisabled();
  await page.getByTestId('recipe-json').fill(JSON.stringify(TWO_STAGE, null, 2));
  await expect(page.getByTestId('recipe-json-ok')).toContainText('2 stages');
  await expect(page.getByTestId('recipe-plan')).toHaveAttribute('data-fits', 'true');
  await expect(page.getByTestId('recipe-plan')).toContainText(
    /^memory plans at peak \(budget [\d.]+ GiB\): 'cold-start' [\d.]+ MiB, 'rl' [\d.]+ MiB: every stage planned so far fits\.$/,
  );
  await expect(page.getByTestId('recipe-start')).toBeEnabled();
  // Its GRPO stage samples one prompt a step: "1 prompt", not "1 prompts".
  await expect(page.getByTestId('recipe-json-ok')).toContainText(
    'aha preset, 4 completions × 1 prompt)',
  );

  await page.getByTestId('recipe-pause-at').fill('3');
  await page.getByTestId('recipe-start').click();
  await expect(page.getByTestId('recipe-status')).toHaveText('paused', { timeout: STEP_TIMEOUT });
  expect(await timeline(page)).toEqual([
    [1, 0, 1],
    [2, 0, 2],
    [3, 1, 1],
  ]);
  await expect(page.getByTestId('recipe-checkpoint')).toHaveText('last checkpoint: rl step 1');
  expect(await markers(page)).toEqual([
    [0.5, 'cold-start'],
    [2.5, 'rl'],
  ]);
  const stage = (name: string) =>
    page.locator(`[data-testid="recipe-stage"][data-stage="${name}"]`);
  await expect(stage('cold-start')).toHaveAttribute('data-state', 'done');
  await expect(stage('rl')).toHaveAttribute('data-state', 'current');
  await expect(stage('rl')).toHaveAttribute('data-done', '1');
  const lossOf = (step: number) =>
    page
      .locator(`[data-testid="recipe-row"][data-step="${step}"]`)
      .getByTestId('recipe-row-loss')
      .textContent();
  const loss3 = await lossOf(3);
  expect(Number(loss3)).not.toBeNaN();
  // Each stage's checkpoints are in the Checkpoints view's list already, with no Refresh.
  await page.getByTestId('nav-checkpoints').click();
  const rows = page.getByTestId('checkpoint-row');
  await expect(rows.filter({ hasText: '· cold-start' })).toHaveCount(2);
  await expect(rows.filter({ hasText: '· rl' })).toHaveCount(1);
  await page.getByTestId('nav-recipes').click();

  // Reload: the stored recipe is offered for resume.
  // The address keeps #recipes: the view loads the model itself.
  await page.reload();
  await expect(page.getByTestId('recipe-need-model')).toBeVisible();
  await page.getByTestId('recipe-load-model').click();
  await expect(page.getByTestId('recipe-need-model')).toHaveCount(0, { timeout: STEP_TIMEOUT });
  const stored = page.getByTestId('recipe-stored-run');
  await expect(stored).toHaveCount(1);
  await expect(stored).toContainText('stage 2 of 2 (rl), step 3');
  await stored.getByTestId('recipe-resume-stored').click();
  await expect(page.getByTestId('recipe-status')).toHaveText('finished', {
    timeout: STEP_TIMEOUT,
  });
  expect(await timeline(page)).toEqual([
    [1, 0, 1],
    [2, 0, 2],
    [3, 1, 1],
    [4, 1, 2],
  ]);
  // Only stage 2's step 2 was trained in this page; step 3 is the stored one.
  const trained = await page
    .getByTestId('recipe-log')
    .locator('li[data-kind="step"]')
    .evaluateAll((li) => li.map((l) => Number(l.getAttribute('data-step'))));
  expect(trained).toEqual([4]);
  // The recipe's preflight plans (on the resume too) and each stage's start line, as npm run
  // recipe prints them.
  await expect(page.getByTestId('recipe-log')).toContainText(
    /memory plans at peak \(budget [\d.]+ GiB\): 'rl' [\d.]+ (KiB|MiB)/,
  );
  await expect(page.getByTestId('recipe-log')).toContainText(
    /stage 2 'rl' \(grpo\) starts after step 2: 2 steps; memory plan [\d.]+ (KiB|MiB) at peak/,
  );
  expect(await lossOf(3)).toBe(loss3);
  expect(await markers(page)).toEqual([
    [0.5, 'cold-start'],
    [2.5, 'rl'],
  ]);
  // One loss line per stage, broken at the boundary: the first (SFT's) has its two steps.
  await expect(page.getByTestId('recipe-chart-loss')).toHaveAttribute('data-points', '2');
  await expect(page.getByTestId('recipe-chart-loss').locator('.legend')).toContainText(
    /cold-start \(sft\).*rl \(grpo\)/,
  );
  await expect(stage('rl')).toHaveAttribute('data-state', 'done');
  await expect(page.getByTestId('recipe-stored-run')).toHaveCount(0);

  // For a reviewer (test artifacts, gitignored), then a phone: no sideways scroll.
  await page.screenshot({ path: 'test-results/screens/recipes-1440.png', fullPage: true });
  expect(await axeViolations(page)).toEqual([]);
  await page.setViewportSize({ width: 390, height: 844 });
  await expect
    .poll(() =>
      page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      ),
    )
    .toBeLessThanOrEqual(0);
  await page.screenshot({ path: 'test-results/screens/recipes-390.png', fullPage: true });
  expect(await axeViolations(page)).toEqual([]);
  await page.locator('#theme').selectOption('dark');
  await page.screenshot({ path: 'test-results/screens/recipes-390-dark.png', fullPage: true });
  expect(await axeViolations(page)).toEqual([]);

  // A GRPO stage's checkpoint goes on in the playground as a GRPO run of its own ("… (continued)",
  // a new run id, so what it saves never becomes the stage's checkpoint), and trains its next step.
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.getByTestId('nav-checkpoints').click();
  const rlStep1 = rows.filter({ hasText: '· rl' }).and(page.locator('[data-step="1"]'));
  await expect(rlStep1).toHaveCount(1);
  await rlStep1.getByTestId('restore').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', {
    timeout: STEP_TIMEOUT,
  });
  await page.getByTestId('nav-train').click();
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 2', { timeout: STEP_TIMEOUT });
  // Its step is saved (saveSteps 1) under the continued run; the stage's two checkpoints are as
  // the recipe left them.
  await page.getByTestId('nav-checkpoints').click();
  const continuedRows = rows.filter({ hasText: '· rl (continued)' });
  await expect(continuedRows).toHaveCount(1, { timeout: STEP_TIMEOUT });
  await expect(continuedRows).toHaveAttribute('data-step', '2');
  await expect(rows.filter({ hasText: '· rl' })).toHaveCount(3);
  await expect(page.getByTestId('run-name').filter({ hasText: '· rl (continued)' })).toHaveCount(1);
  expect(errors).toEqual([]);
});

test('a rejection-sample stage shows its samples as text; an uploaded JSONL trains one SFT stage', async ({
  page,
}) => {
  test.setTimeout(300_000);
  const errors = watchErrors(page);
  await page.goto('/?test-hooks=1#recipes');
  await page.getByTestId('recipe-load-model').click();
  await expect(page.getByTestId('recipe-need-model')).toHaveCount(0, { timeout: STEP_TIMEOUT });

  await page.getByTestId('recipe-choice-paste').check();
  await page.getByTestId('recipe-json').fill(
    JSON.stringify({
      name: 'samples-only',
      seed: 2,
      stages: [
        {
          kind: 'rejection-sample',
          name: 'samples',
          prompts: 2,
          options: { k: 2, maxCompletionLength: 48 },
        },
      ],
    }),
  );
  await page.getByTestId('recipe-start').click();
  await expect(page.getByTestId('recipe-status')).toHaveText('finished', { timeout: STEP_TIMEOUT });
  const report = page.getByTestId('rejection-report');
  await expect(report).toHaveAttribute('data-stage', 'samples');
  await expect(report.getByTestId('rejection-sample')).toHaveCount(4);
  await expect(report.getByTestId('rejection-prompt')).toHaveCount(2);
  const kept = await report.locator('[data-testid="rejection-sample"][data-kept="true"]').count();
  await expect(report.getByTestId('rejection-yield')).toContainText(`Kept ${kept} of 4 samples`);
  // Every rejected sample names its reasons; completions are text in a <pre>, no markup of theirs.
  for (const li of await report
    .locator('[data-testid="rejection-sample"][data-kept="false"]')
    .all())
    await expect(li.locator('.row')).toContainText(/wrong|answer|format|cut off|duplicate/);
  expect(await report.locator('pre *').count()).toBe(0);
  expect(await axeViolations(page)).toEqual([]);

  // SFT on an uploaded JSONL: one stage, one step of two examples.
  await page.getByTestId('recipe-choice-sft').check();
  await page.getByTestId('recipe-sft-file').setInputFiles({
    name: 'tiny.jsonl',
    mimeType: 'application/jsonl',
    buffer: Buffer.from(
      '{"prompt": "Using the numbers [3, 4], create an equation that equals 12.", "completion": " <answer>3*4</answer>"}\n' +
        '{"prompt": "Using the numbers [2, 5], create an equation that equals 7.", "completion": " <answer>2+5</answer>"}\n',
    ),
  });
  await expect(page.getByTestId('recipe-sft-ok')).toContainText('2 examples');
  await page.getByTestId('recipe-start').click();
  await expect(page.getByTestId('recipe-run')).toContainText('SFT on tiny.jsonl');
  await expect(page.getByTestId('recipe-status')).toHaveText('finished', { timeout: STEP_TIMEOUT });
  expect(await timeline(page)).toEqual([[1, 0, 1]]);
  await expect(page.getByTestId('recipe-chart-loss')).toHaveAttribute('data-points', '1');

  // The same upload with LoRA on a 4-bit NF4 base (QLoRA): the stage says so, and its stored
  // checkpoint holds the adapters (and their moments), not the base.
  await page.getByTestId('recipe-sft-lora').check();
  await page.getByTestId('recipe-sft-lora-r').fill('4');
  await page.getByTestId('recipe-sft-dtype').selectOption('nf4');
  await expect(page.getByTestId('recipe-sft-ok')).toContainText(
    'training LoRA adapters (r 4) on a frozen base stored 4-bit NF4 (QLoRA)',
  );
  expect(await axeViolations(page)).toEqual([]);
  await page.getByTestId('recipe-start').click();
  await expect(page.getByTestId('recipe-status')).not.toHaveText('finished');
  await expect(page.getByTestId('recipe-status')).toHaveText('finished', { timeout: STEP_TIMEOUT });
  expect(await timeline(page)).toEqual([[1, 0, 1]]);
  const stored = await page.evaluate(async () => {
    const hooks = (
      window as unknown as {
        __grpoTest: {
          recipeStageDigest(i: number): Promise<{ tensorSha256: Record<string, string> } | null>;
        };
      }
    ).__grpoTest;
    return Object.keys((await hooks.recipeStageDigest(0))?.tensorSha256 ?? {});
  });
  expect(
    stored.filter((n) => !n.startsWith('optimizer.')).every((n) => /\.lora_[AB]\.weight$/.test(n)),
  ).toBe(true);
  expect(stored).toContain('model.layers.0.self_attn.q_proj.lora_B.weight');
  expect(stored).toContain('optimizer.exp_avg.model.layers.0.self_attn.q_proj.lora_B.weight');

  // The playground continues GRPO runs: an SFT stage's checkpoint is refused there, saying where
  // it goes on, before anything is loaded or discarded.
  await page.getByTestId('nav-checkpoints').click();
  const sftRow = page.getByTestId('checkpoint-row').filter({ hasText: 'SFT on tiny.jsonl' });
  await sftRow.first().getByTestId('restore').click();
  const banner = page.getByTestId('banner').filter({ hasText: 'could not be restored' });
  await expect(banner).toContainText("an SFT stage's");
  await expect(banner).toContainText('the playground continues GRPO runs');
  expect(errors).toEqual([]);
});
