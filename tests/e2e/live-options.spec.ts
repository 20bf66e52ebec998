// Options changed in the middle of a run, in Chromium on the built app: after one step of the
// bundled model, a new learning rate in the options is announced as applying at the next step (not
// "Reset to apply"); Step applies it with no Reset dialog, and step 2's learning_rate metric is the
// new value (the playground's constant schedule); the run controls list the change from step 2.
// Then a custom reward added in the Rewards panel is scored at the next step: step 3's metrics have
// rewards/custom:len/mean, which step 2's do not. An option that shapes the run (numGenerations)
// still waits for a Reset, and Step goes on without it. During Run, a change waits for Apply and
// then applies from the step after the one under way.
import { expect, test, type Page } from '@playwright/test';
import { loadBundledModel } from './support/bundled-model';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 180_000;
// A small run, so a step takes seconds on WebGPU emulated by SwiftShader; the test hook exposes the
// metrics history the charts get (lib/test-hooks.ts).
const TINY_RUN =
  'test-hooks=1&perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1';
const REWARD = 'const reward = ({ completion }) => completion.length;';

test.use({ serviceWorkers: 'block' });

type Row = { step: number; metrics: Record<string, number> };
const history = (page: Page) =>
  page.evaluate(() =>
    (globalThis as unknown as { __grpoTest: { history(): Row[] } }).__grpoTest.history(),
  );

async function stepTo(page: Page, step: number) {
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText(`step ${step}`, {
    timeout: STEP_TIMEOUT,
  });
  await expect(page.getByTestId('status')).toHaveText('Ready', { timeout: STEP_TIMEOUT });
}

/** Sets a number option, opening its folded group first. */
async function setOption(page: Page, key: string, value: string) {
  const input = page.locator(`#opt-${key}`);
  await input.evaluate((el) => {
    const details = el.closest('details');
    if (details) details.open = true;
  });
  await input.fill(value);
}

test('a new learning rate and a custom reward apply at the next step, with no Reset', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}#train`);
  await loadBundledModel(page);
  await stepTo(page, 1);
  const before = (await history(page))[0].metrics.learning_rate;
  expect(before).toBe(2e-4);

  // A live option: announced for the next step, not as waiting for a Reset.
  await setOption(page, 'learningRate', '0.001');
  await expect(page.getByTestId('step-pending-live')).toContainText('learningRate');
  await expect(page.getByTestId('step-pending')).toHaveCount(0);
  await expect(page.getByTestId('pending-live')).toContainText('from step 2 on');

  await stepTo(page, 2);
  await expect(page.getByRole('alertdialog')).toHaveCount(0);
  const afterLr = await history(page);
  expect(afterLr.map((r) => r.step)).toEqual([1, 2]);
  expect(afterLr[1].metrics.learning_rate).toBe(0.001);
  await expect(page.getByTestId('step-pending-live')).toHaveCount(0);
  const changes = page.getByTestId('live-changes');
  await expect(changes.locator('li')).toHaveText(['from step 2: learningRate 0.0002 → 0.001']);

  // An option that shapes the run waits for a Reset; Step goes on without it.
  await setOption(page, 'numGenerations', '4');
  await expect(page.getByTestId('step-pending')).toContainText('numGenerations');

  // A custom reward added mid-run: listed in rewards (its checkbox on) with the user's code.
  await page.getByLabel('New custom reward id').fill('len');
  await page.getByRole('button', { name: 'Add custom JS reward' }).click();
  await expect(page.getByLabel('use custom:len')).toBeChecked();
  const editor = page.getByRole('textbox', { name: 'code of custom reward len' });
  await expect(page.getByTestId('editor-code-len')).toHaveAttribute('data-editor', 'codemirror', {
    timeout: 30_000,
  });
  await editor.click();
  await page.keyboard.press('ControlOrMeta+a');
  await page.keyboard.type(REWARD);
  await expect(page.getByTestId('step-pending-live')).toContainText('rewards');

  await stepTo(page, 3);
  await expect(page.getByRole('alertdialog')).toHaveCount(0);
  const rows = await history(page);
  expect(rows.map((r) => r.step)).toEqual([1, 2, 3]);
  expect(rows[1].metrics['rewards/custom:len/mean']).toBeUndefined();
  const lenMean = rows[2].metrics['rewards/custom:len/mean'];
  // completion.length of every completion: the mean is at least the shortest possible text (0)
  // and a whole number over 2 completions' sum / 2 (each length is an integer).
  expect(Number.isFinite(lenMean)).toBe(true);
  expect(lenMean).toBeGreaterThanOrEqual(0);
  expect(Number.isInteger(lenMean * 2)).toBe(true);
  expect(rows[2].metrics.learning_rate).toBe(0.001);
  await expect(changes.locator('li')).toHaveText([
    'from step 2: learningRate 0.0002 → 0.001',
    'from step 3: rewards [format, accuracy] → [format, accuracy, custom:len]; customRewards +len; rewardWeights [1, 1] → [1, 1, 1]',
  ]);
  // numGenerations still waits for a Reset.
  await expect(page.getByTestId('step-pending')).toContainText('numGenerations');
  expect(errors).toEqual([]);
});

test('during Run, a changed learning rate waits for Apply, then the run uses it from its next step', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}#train`);
  await loadBundledModel(page);
  await page.getByTestId('run').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', {
    timeout: STEP_TIMEOUT,
  });
  await expect(page.getByTestId('status')).toHaveText('Training');

  // Changed while running: said so, and nothing reaches the run until Apply.
  await setOption(page, 'learningRate', '0.001');
  await expect(page.getByTestId('step-pending-live')).toHaveText('changed: learningRate');
  await expect(page.getByTestId('apply-live')).toHaveText('Apply');
  await expect(page.getByTestId('pending-live')).toContainText('Apply to this run');
  await expect(page.getByTestId('live-changes')).toHaveCount(0);
  await page.screenshot({ path: 'test-results/screens/apply-live-1280.png' });
  await page.getByTestId('apply-live').click({ timeout: 30_000 });
  const change = page.getByTestId('live-changes').locator('li');
  await expect(change).toHaveText(/^from step \d+: learningRate 0\.0002 → 0\.001$/, {
    timeout: STEP_TIMEOUT,
  });
  await expect(page.getByTestId('apply-live')).toHaveCount(0);
  await expect(page.getByTestId('step-pending-live')).toHaveCount(0);
  const from = Number(/from step (\d+)/.exec((await change.textContent()) ?? '')![1]);
  expect(from).toBeGreaterThanOrEqual(2);

  // The run goes on: once the first step with the new rate is done, pause and read the history.
  await expect
    .poll(async () => (await history(page)).length, { timeout: 2 * STEP_TIMEOUT })
    .toBeGreaterThanOrEqual(from);
  await page.getByTestId('pause').click();
  await expect(page.getByTestId('status')).toHaveText('Paused', { timeout: STEP_TIMEOUT });
  const rows = await history(page);
  expect(rows.length).toBeGreaterThanOrEqual(from);
  for (const r of rows) expect(r.metrics.learning_rate).toBe(r.step < from ? 2e-4 : 0.001);
  expect(errors).toEqual([]);
});
