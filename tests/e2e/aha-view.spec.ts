// The Aha view's reference and integrity in Chromium on the built app: a shared link brings a
// custom reward that pays for "wait" (allowed in the consent dialog), one tiny step runs, and the
// Aha view then draws the committed `npm run aha` seeds faint behind this run's curves (their SVG
// paths exist, three per chart), says the verdict waits (29 more steps), names the custom reward as
// buying reflection (scored in its sandbox on completions that differ only by a marker), lists the
// settings that differ from the aha preset, shows the reference's time and the first step's rates.
import { expect, test } from '@playwright/test';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 180_000;
const WAIT_REWARD =
  "function reward({ completion }) { return completion.includes('wait') ? 1 : 0; }";

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

test('the reference overlay is drawn and a reward paying for "wait" is named in the verdict', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  const params = new URLSearchParams({
    perStepPrompts: '1',
    numGenerations: '2',
    maxCompletionLength: '8',
    evalPrompts: '1',
    rewards: 'format,accuracy,custom:wait',
    customRewards: JSON.stringify({ wait: WAIT_REWARD }),
  });
  await page.goto(`/?${params}#train`);
  const dialog = page.getByRole('dialog', { name: 'This link contains custom reward code' });
  await dialog.getByRole('button', { name: 'Allow this code' }).click();
  await expect(page.getByLabel('use custom:wait')).toBeChecked();
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });

  // Before any step: the reference and its time, no verdict yet.
  await page.getByTestId('nav-aha').click();
  await expect(page.getByTestId('aha-expected')).toContainText(
    'reference: 38.7 min for 3 seeds on 2 CPU cores, SwiftShader',
  );
  await expect(page.getByTestId('aha-verdict')).toHaveCount(0);

  await page.getByTestId('nav-train').click();
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('status')).not.toHaveText('Running', { timeout: STEP_TIMEOUT });

  await page.getByTestId('nav-aha').click();
  // Three faint reference seeds behind each of the three charts, the run's line on top.
  for (const id of ['aha-chart-reflection', 'aha-chart-accuracy', 'aha-chart-length']) {
    const chart = page.getByTestId(id);
    const refs = chart.locator('path.reference');
    await expect(refs).toHaveCount(3);
    expect(await refs.evaluateAll((ps) => ps.map((p) => p.getAttribute('data-label')))).toEqual([
      'seed 1',
      'seed 2',
      'seed 3',
    ]);
    for (const d of await refs.evaluateAll((ps) => ps.map((p) => p.getAttribute('d') ?? '')))
      expect(d.split('L').length).toBeGreaterThan(50);
  }
  // The run's own line: one step so far (the reference adds no points of its own).
  await expect(page.getByTestId('aha-chart-reflection')).toHaveAttribute('data-points', '1');
  await expect(page.getByTestId('aha-chart-reflection')).toContainText('npm run aha (3 seeds)');

  const verdict = page.getByTestId('aha-verdict');
  await expect(verdict).toHaveText('Waiting: 29 more steps needed before a verdict (1 of 30).');
  const bought = page.getByTestId('aha-bought');
  await expect(bought).toContainText('A custom reward pays for reflection words: custom:wait', {
    timeout: 60_000,
  });
  await expect(bought).toContainText('scored on completions that differ only by the word');
  await expect(bought).toContainText('Rising reflection is then bought, not an aha.');
  const diffs = page.getByTestId('aha-differences');
  await expect(diffs.locator('li')).toContainText([
    'rewards: [format, accuracy, custom:wait] (preset [format, accuracy])',
    'customRewards: {wait} (preset {})',
  ]);
  await expect(diffs).toContainText('numGenerations: 2 (preset 16)');
  await expect(diffs).toContainText('maxCompletionLength: 8 (preset 80)');
  // The tiny run's steps are not the preset's: its step time does not carry over.
  await expect(page.getByTestId('aha-expected')).toContainText('differ), so its step time');
  // Base rates: the first step beside the reference's held-out numbers before and after.
  const base = page.getByTestId('aha-base-rates');
  await expect(base).toContainText('step 1 (start)');
  await expect(base).toContainText('reference, held-out, before training');
  await expect(base.locator('tr.ref-row').first()).toContainText('14.2%');
  // A phone's width: the panel (tables, long difference lines) does not scroll sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(page.getByTestId('aha-reference')).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  expect(errors).toEqual([]);
});
