// The first visit as a new user sees it, in Chromium on SwiftShader: a fresh profile opens on a
// first screen with one action; before the click it shows how long a step will take here (timed
// on the device); the action loads the bundled model and completes a step with the playground's
// defaults, whose measured time is within 3× of the estimate shown before the click. The tour
// that follows is keyboard-driven (focus in the popover, Escape closes it, focus returns); the
// software-emulation warning sits beside Step; a returning visitor and a shared link never see
// the first screen.
import { expect, test } from '@playwright/test';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 300_000;

test.use({ serviceWorkers: 'block' });
test.describe.configure({ mode: 'serial' });

test('the first screen loads the bundled model and steps; its estimate is within 3×', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  await page.goto('/#train');
  const first = page.getByTestId('first-run');
  await expect(first).toBeVisible({ timeout: 60_000 });
  await expect(first.getByRole('heading', { level: 2 })).toContainText('GRPO');
  // One action on the first screen.
  await expect(first.getByRole('button')).toHaveText([
    'Skip the introduction',
    'Load the bundled model and take a step',
  ]);
  // The emulation warning is beside Step, in the header.
  await expect(
    page.getByRole('group', { name: 'Training controls' }).getByTestId('emulation-warning'),
  ).toBeVisible();

  // The estimate before the click: a measured range around a central value.
  const estimate = first.getByTestId('first-run-estimate');
  await expect(estimate).toBeVisible({ timeout: 60_000 });
  const ms = Number(await estimate.getAttribute('data-ms'));
  const low = Number(await estimate.getAttribute('data-low'));
  const high = Number(await estimate.getAttribute('data-high'));
  expect(ms).toBeGreaterThan(0);
  expect(low).toBeLessThan(ms);
  expect(high).toBeGreaterThan(ms);
  await expect(estimate).toContainText('should take');
  const timing = await estimate.getAttribute('data-timing');

  await first.getByTestId('first-run-go').click();
  const measuredEl = first.getByTestId('first-run-measured');
  await expect(measuredEl).toBeVisible({ timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('step-counter')).toContainText('step 1');
  await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '1');
  const measured = Number(await measuredEl.getAttribute('data-ms'));
  console.log(
    `first-run: estimated ${ms} ms (range ${low}–${high}), measured step 1 ${measured} ms, ` +
      `ratio ${(measured / ms).toFixed(2)}; warm-up ${timing}`,
  );
  expect(measured / ms).toBeGreaterThan(1 / 3);
  expect(measured / ms).toBeLessThan(3);

  // The tour: focus moves into it, Next walks the stops, Escape closes and gives focus back.
  const start = first.getByTestId('tour-start');
  await start.click();
  const tour = page.getByRole('dialog', { name: '1. Sample' });
  await expect(tour).toBeFocused();
  await expect(page.locator('.tour-target')).toHaveAttribute('data-testid', 'nav-inspect');
  // Back is disabled at the first stop: Tab reaches Next.
  await page.keyboard.press('Tab');
  await expect(page.getByTestId('tour-next')).toBeFocused();
  await page.keyboard.press('Enter');
  await expect(page.getByRole('dialog', { name: '2. Reward' })).toBeVisible();
  await expect(page.locator('.tour-target')).toHaveAttribute('data-testid', 'chart-reward');
  await page.getByTestId('tour-next').click();
  await expect(page.getByRole('dialog', { name: '3. Advantage' })).toBeVisible();
  await page.getByTestId('tour-next').click();
  await expect(page.getByRole('dialog', { name: '4. Update' })).toBeVisible();
  await page.keyboard.press('Escape');
  await expect(page.getByTestId('tour')).toHaveCount(0);
  await expect(page.locator('.tour-target')).toHaveCount(0);
  await expect(start).toBeFocused();

  // A returning visitor: no first screen.
  await page.reload();
  await expect(page.getByTestId('load-model')).toBeVisible({ timeout: 60_000 });
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await expect(page.getByTestId('first-run')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('a shared link opens on its config, without the first screen', async ({ page }) => {
  await page.goto('/?numGenerations=2#train');
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await expect(page.getByTestId('first-run')).toHaveCount(0);
});
