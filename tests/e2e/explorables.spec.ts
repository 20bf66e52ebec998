// Learn's explorables on the built app, in Chromium on SwiftShader, after one tiny step: each widget
// starts from that step (the reward editor holds the step's rewards, the strip one row per
// completion), answers the keyboard (a reward handle's ↑, the surrogate handle's →, the KL handle's
// →) and a pointer drag (the surrogate plane), and axe-core finds nothing serious or critical in it
// at 1440×900 and 390×844, light and dark. With EXPLORABLE_SHOTS=1 a screenshot of each widget
// lands in test-results/screens/explorable-<widget>-<width>-<theme>.png (gitignored artifacts).
// Reduced motion is on, so the strip's columns are drawn at once and axe sees their final colours.
import { expect, test, type Page } from '@playwright/test';
import axe from 'axe-core';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 180_000;
// A small run, so a step takes seconds on WebGPU emulated by SwiftShader.
const TINY_RUN = 'perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1';
const WIDGETS = ['step-strip', 'advantage-explorable', 'surrogate-explorable', 'kl-explorable'];
// EXPLORABLE_SHOTS=1 also writes the screenshots (test-results/screens/, gitignored).
const SHOTS = !!process.env.EXPLORABLE_SHOTS;
const SIZES = [
  { width: 1440, height: 900 },
  { width: 390, height: 844 },
] as const;

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

/** axe-core's serious and critical violations inside the four widgets (one run for all). */
async function axeFindings(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axe.source);
  return page.evaluate(async (ids) => {
    const run = (window as unknown as { axe: typeof axe }).axe.run;
    const include = ids.map((id) => [`[data-testid="${id}"]`]);
    const result = await run({ include }, { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `[${v.impact}] ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, WIDGETS);
}

test('the explorables start from the step, move, and pass axe at both sizes and themes', async ({
  page,
}) => {
  test.setTimeout(600_000);
  const errors = watchErrors(page);
  const t0 = Date.now();
  await page.emulateMedia({ reducedMotion: 'reduce' });
  await page.goto(`/?${TINY_RUN}#train`);
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('status')).not.toHaveText('Running', { timeout: STEP_TIMEOUT });
  await page.getByTestId('nav-learn').click();
  await expect(page.getByTestId('learn-step')).toHaveAttribute('data-step', '1');
  console.log(`model load and one step: ${Date.now() - t0} ms`);

  // The strip: one row per completion of the group (G = 2).
  const strip = page.getByTestId('step-strip');
  await expect(strip).toContainText('Step 1, group 1');
  await expect(strip.locator('tbody tr')).toHaveCount(2);

  // The reward editor holds the step's rewards: the same as the rewards table's totals.
  const handles = page.getByTestId('reward-handle');
  await expect(handles).toHaveCount(2);
  const first = Number(await handles.first().getAttribute('aria-valuenow'));
  const readout = page.getByTestId('advantage-readout');
  const before = await readout.innerText();
  await handles.first().focus();
  await page.keyboard.press('ArrowUp');
  await expect(handles.first()).toHaveAttribute('aria-valuenow', String(Math.min(2, first + 0.1)));
  await expect(readout).not.toHaveText(before);
  await page.getByRole('radio', { name: 'none' }).check();
  await expect(page.getByRole('figure').filter({ hasText: 'no division' })).toHaveCount(1);

  // The surrogate handle: → moves ρ by 0.01; a click on the plane moves it there.
  const sHandle = page.getByTestId('surrogate-handle');
  const rho0 = Number(await sHandle.getAttribute('aria-valuenow'));
  await sHandle.focus();
  await page.keyboard.press('ArrowRight');
  await expect(sHandle).toHaveAttribute('aria-valuenow', String(Number((rho0 + 0.01).toFixed(2))));
  const plane = page.getByTestId('surrogate-explorable').locator('svg').first();
  await plane.scrollIntoViewIfNeeded();
  const box = (await plane.boundingBox())!;
  await page.mouse.move(box.x + box.width * 0.9, box.y + box.height * 0.2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.92, box.y + box.height * 0.15);
  await page.mouse.up();
  // Far right, upper half: ρ past 1 + ε_high with A > 0, so the clip holds the push at 0.
  expect(Number(await sHandle.getAttribute('aria-valuenow'))).toBeGreaterThan(1.5);
  await expect(page.getByTestId('surrogate-readout')).toContainText('clipped: no gradient');
  // A wider ε_high unclips it; SAPO's smooth gate never clips.
  const sReadout = page.getByTestId('surrogate-readout');
  const rhoNow = Number(await sHandle.getAttribute('aria-valuenow'));
  await page.getByTestId('surrogate-eps-high').fill(String(Math.ceil(rhoNow)));
  await expect(sReadout).not.toContainText('clipped');
  await page.getByTestId('surrogate-loss-type').selectOption('sapo');
  await expect(page.getByTestId('surrogate-explorable')).toContainText('SAPO: a smooth gate');

  // The KL handle: → moves the ratio by 0.01.
  const kHandle = page.getByTestId('kl-handle');
  const k0 = Number(await kHandle.getAttribute('aria-valuenow'));
  await kHandle.focus();
  await page.keyboard.press('ArrowRight');
  await expect(kHandle).toHaveAttribute('aria-valuenow', String(Number((k0 + 0.01).toFixed(2))));
  await expect(page.getByTestId('kl-readout')).toContainText('= true KL');

  console.log(`model, step and interactions: ${Date.now() - t0} ms`);

  const found: string[] = [];
  for (const size of SIZES) {
    await page.setViewportSize(size);
    for (const theme of ['light', 'dark'] as const) {
      const t1 = Date.now();
      await page.locator('#theme').selectOption(theme);
      await expect(page.locator('html')).toHaveAttribute('data-theme', theme);
      // Screenshots cost about a second each on SwiftShader: only when asked, to keep CI short.
      if (SHOTS)
        for (const id of WIDGETS)
          await page.getByTestId(id).screenshot({
            path: `test-results/screens/explorable-${id}-${size.width}-${theme}.png`,
            // The sticky header would cover the widget's top in an element shot.
            style: 'header, header .top { position: static !important; }',
          });
      const t2 = Date.now();
      found.push(...(await axeFindings(page)).map((f) => `${size.width} ${theme} ${f}`));
      console.log(`${size.width} ${theme}: shots ${t2 - t1} ms, axe ${Date.now() - t2} ms`);
    }
    if (size.width < 500) {
      const sideways = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(sideways, 'nothing scrolls sideways at 390 px').toBeLessThanOrEqual(0);
    }
  }
  expect(found, found.join('\n')).toEqual([]);
  expect(errors).toEqual([]);
});
