// The training controls as a user drives them, in Chromium on the built app: Step is the first
// control a keyboard reaches; S takes a step; Reset with unsaved steps asks first and Cancel keeps
// the run (its step and its metrics); Pause shows its pending state at once (well before the step
// under way ends) and the step's phase is shown while it runs, uncut at 1440 px; on a phone the
// controls stay at the top and nothing scrolls sideways.
import { expect, test } from '@playwright/test';
import { loadBundledModel } from './support/bundled-model';

const STEP_TIMEOUT = 180_000;
// A small run, so a step takes seconds on WebGPU emulated by SwiftShader.
const TINY_RUN = 'perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1';
/** How soon after the click the pending "Pausing" state must show (the brief's bound). */
const PAUSE_FEEDBACK_MS = 200;

test.use({ serviceWorkers: 'block' });
test.describe.configure({ mode: 'serial' });

test('Step is within 5 Tab presses of a fresh page, and says why it waits', async ({ page }) => {
  await page.goto(`/?${TINY_RUN}#train`);
  await expect(page.getByRole('heading', { name: 'GRPO Playground' })).toBeVisible();
  let presses = 0;
  for (; presses < 5; presses++) {
    await page.keyboard.press('Tab');
    if (await page.getByTestId('step').evaluate((el) => el === document.activeElement)) break;
  }
  expect(presses + 1).toBeLessThanOrEqual(5);
  const step = page.getByTestId('step');
  await expect(step).toBeFocused();
  // Focusable but not active before a model is loaded; the tooltip says why.
  await expect(step).toBeDisabled();
  await expect(step).toHaveAttribute('title', /Load a model first/);
  await expect(step).toHaveAttribute('aria-keyshortcuts', 'S');
  await page.getByRole('group', { name: 'Training controls' }).locator('summary').click();
  await expect(page.getByTestId('shortcut-help')).toContainText('Run / Pause');
});

test('S steps; Reset with unsaved steps asks and Cancel keeps the run; Pause answers at once', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(`/?${TINY_RUN}#train`);
  await loadBundledModel(page);

  // The shortcut, with the focus on the page (not in a field).
  await page.locator('body').click({ position: { x: 5, y: 300 } });
  await page.keyboard.press('s');
  await expect(page.getByTestId('step-counter')).toContainText('step 1', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('status')).toHaveText('Ready');
  // In a text field S is a letter, not a step.
  await page.locator('#opt-temperature').focus();
  await expect(page.locator('#opt-temperature')).toBeFocused();
  await page.keyboard.press('s');
  await page.locator('body').click({ position: { x: 5, y: 300 } });
  await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '1');
  await expect(page.getByTestId('status')).toHaveText('Ready');
  await expect(page.getByTestId('unsaved')).toContainText('1 unsaved step');

  // Reset would lose step 1: it asks, and Cancel (or Escape) keeps everything.
  await page.getByTestId('reset').click();
  const dialog = page.getByRole('alertdialog', { name: 'Discard 1 step not saved?' });
  await expect(dialog).toBeVisible();
  await expect(dialog).toContainText('step 1');
  await expect(dialog.getByRole('button', { name: 'Cancel' })).toBeFocused();
  // Focus stays in the dialog: Tab from the last button wraps to the first.
  await page.keyboard.press('Tab');
  await expect(dialog.getByRole('button', { name: 'Save a checkpoint first' })).toBeFocused();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toHaveCount(0);
  await expect(page.getByTestId('step-counter')).toContainText('step 1');
  await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '1');
  await page.getByTestId('reset').click();
  await expect(dialog).toBeVisible();
  await page.keyboard.press('Escape');
  await expect(dialog).toHaveCount(0);
  await expect(page.getByTestId('step-counter')).toContainText('step 1');
  await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '1');

  // An option changed mid-run that shapes the run is named as waiting for a Reset (a live one,
  // such as temperature, would apply at the next step: live-options.spec.ts).
  await page.locator('#opt-maxCompletionLength').fill('12');
  await expect(page.getByTestId('step-pending')).toContainText('pending: Reset to apply');
  await expect(page.getByTestId('step-pending')).toContainText('maxCompletionLength');

  // Run, then Pause: the pending state shows within the bound, long before the step ends.
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.getByTestId('run').click();
  const pause = page.getByTestId('pause');
  await expect(pause).toBeEnabled({ timeout: 60_000 });
  // The step's phase and its clock are on screen while it runs.
  await expect(page.getByTestId('step-activity')).toBeVisible({ timeout: 60_000 });
  await expect(page.getByTestId('step-phase')).toHaveText(
    /sampling \d+\/8 tokens|scoring rewards|forward \+ backward|optimizer step|scoring the updated policy|reference log-probs|saving the checkpoint/,
  );
  // At 1440 px the status line is whole: the status, the emulation warning and the step's phase
  // are neither cut nor ellipsized (the header's tools sit on the views row, not beside them; the
  // pending notes give way first by design, their whole text in their title).
  const cut = await page.getByTestId('action-bar').evaluate((bar) => {
    const line = bar.querySelector('.state')!.getBoundingClientRect();
    return [...bar.querySelectorAll<HTMLElement>('.state > :not(.pending, .pending-live)')]
      .filter((el) => {
        const r = el.getBoundingClientRect();
        return r.right > line.right + 0.5 || el.scrollWidth > el.clientWidth + 0.5;
      })
      .map((el) => el.textContent);
  });
  expect(cut).toEqual([]);
  await page.evaluate(() => {
    const w = window as unknown as { __pause: { clicked: number; shown: number } };
    w.__pause = { clicked: NaN, shown: NaN };
    const status = document.querySelector('[data-testid="status"]')!;
    document
      .querySelector('[data-testid="pause"]')!
      .addEventListener('click', () => (w.__pause.clicked = performance.now()), { capture: true });
    new MutationObserver(() => {
      if (Number.isNaN(w.__pause.shown) && status.textContent?.includes('Pausing after this step'))
        w.__pause.shown = performance.now();
    }).observe(status, { childList: true, characterData: true, subtree: true });
  });
  await pause.click();
  const timing = await page.evaluate(
    () => (window as unknown as { __pause: { clicked: number; shown: number } }).__pause,
  );
  await expect
    .poll(() =>
      page.evaluate(() => (window as unknown as { __pause: { shown: number } }).__pause.shown),
    )
    .not.toBeNaN();
  const shown = await page.evaluate(
    () => (window as unknown as { __pause: { shown: number } }).__pause.shown,
  );
  const delay = shown - timing.clicked;
  console.log(`Pause: pending state shown ${delay.toFixed(1)} ms after the click`);
  expect(delay).toBeGreaterThanOrEqual(0);
  expect(delay).toBeLessThan(PAUSE_FEEDBACK_MS);
  await expect(page.getByTestId('pause')).toHaveText('Pausing…');
  await expect(page.getByTestId('status')).toHaveText('Paused', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('run')).toBeEnabled();
  await expect(page.getByTestId('step-activity')).toHaveCount(0);

  // Discard goes on: a new run at step 0 with the changed option applied.
  const done = Number(
    (await page.getByTestId('step-counter').textContent())?.match(/step (\d+)/)?.[1],
  );
  expect(done).toBeGreaterThanOrEqual(2);
  await page.getByTestId('reset').click();
  await page
    .getByRole('alertdialog', { name: `Discard ${done} steps not saved?` })
    .getByRole('button', { name: 'Discard' })
    .click();
  await expect(page.getByTestId('step-counter')).toContainText('step 0', { timeout: 60_000 });
  await expect(page.getByTestId('step-pending')).toHaveCount(0);
  expect(pageErrors).toEqual([]);
});

test('on a phone the controls are at the top, stay there, and nothing scrolls sideways', async ({
  page,
}) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`/?${TINY_RUN}#train`);
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  const step = page.getByTestId('step');
  await expect(step).toBeInViewport();
  const width = () =>
    page.evaluate(() => {
      const s = document.scrollingElement!;
      return { scroll: s.scrollWidth, client: s.clientWidth };
    });
  let w = await width();
  expect(w.scroll).toBeLessThanOrEqual(w.client);
  // Scrolled down to the charts, the actions are still on screen.
  await page.evaluate(() => window.scrollTo(0, document.scrollingElement!.scrollHeight));
  await expect(step).toBeInViewport();
  await expect(page.getByTestId('reset')).toBeInViewport();
  w = await width();
  expect(w.scroll).toBeLessThanOrEqual(w.client);
});
