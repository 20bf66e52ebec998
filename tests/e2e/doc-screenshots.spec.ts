// The README's two screenshots, taken from the built app in Chromium on SwiftShader (issue 39):
// docs/images/playground.png (the Train view mid-run, three steps done, charts drawn) and
// docs/images/learn.png (the Learn view on a trained step), at a 1280-wide viewport in the light
// theme. Tracked files, so they are written only with UPDATE_DOC_SCREENSHOTS=1 (CI skips this):
//   npx vite build && UPDATE_DOC_SCREENSHOTS=1 flock /tmp/e2e.lock npx playwright test tests/e2e/doc-screenshots.spec.ts
import { expect, test } from '@playwright/test';
import { statSync } from 'node:fs';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 180_000;
// Small enough that a step takes seconds on SwiftShader, big enough that the charts have a group.
const RUN = 'perStepPrompts=1&numGenerations=4&maxCompletionLength=48&evalPrompts=1&steps=20';
const MAX_BYTES = 300 * 1024;

test.use({
  serviceWorkers: 'block',
  actionTimeout: 60_000,
  viewport: { width: 1280, height: 860 },
  colorScheme: 'light',
});

test('README screenshots: the playground mid-run and Learn', async ({ page }) => {
  test.skip(process.env.UPDATE_DOC_SCREENSHOTS !== '1', 'writes tracked files: opt in');
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  await page.goto(`/?${RUN}#train`);
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByTestId('run').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 3', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('status')).toHaveText('Training');
  await expect(page.getByTestId('charts')).toBeVisible();
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: 'docs/images/playground.png' });

  await page.getByTestId('pause').click();
  await expect(page.getByTestId('status')).not.toHaveText(/Training|Pausing/, {
    timeout: STEP_TIMEOUT,
  });
  await page.getByTestId('nav-learn').click();
  await expect(page.getByTestId('learn-step')).toBeVisible({ timeout: 60_000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: 'docs/images/learn.png' });

  for (const name of ['playground', 'learn'])
    expect(statSync(`docs/images/${name}.png`).size).toBeLessThan(MAX_BYTES);
  expect(errors).toEqual([]);
});
