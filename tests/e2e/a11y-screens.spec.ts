// Every screen of the app, as axe-core and a reviewer see it, in Chromium on SwiftShader: the first
// visit's screen and the consent dialog of a shared link (no model), then, with the bundled model
// loaded and one step taken, every view of the nav (Train, with its options folded and unfolded,
// Inspect, Learn, Aha, Paper and any view added since), the share and discard dialogs, and
// Checkpoints with a saved checkpoint and a comparison, each at
// 1440×900 and 390×844 in the light and the dark theme. On each: axe-core (injected from the
// devDependency, nothing from a CDN) reports no violation of impact serious or critical, and at
// 390 px nothing scrolls sideways. A full-page screenshot of each lands in
// test-results/screens/<screen>-<width>-<theme>.png (the test artifacts, gitignored).
import { expect, test, type Page } from '@playwright/test';
import axe from 'axe-core';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 180_000;
// A small run, so a step takes seconds on WebGPU emulated by SwiftShader.
const TINY_RUN = 'perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1';
const SIZES = [
  { width: 1440, height: 900 },
  { width: 390, height: 844 },
] as const;
const THEMES = ['light', 'dark'] as const;
type Theme = (typeof THEMES)[number];
const SHOTS = 'test-results/screens';

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

interface Found {
  screen: string;
  id: string;
  impact: string;
  help: string;
  targets: string[];
  summary: string;
}

/** Two animation frames: layouts and charts that follow a resize or a theme change are drawn. */
async function settle(page: Page) {
  await page.evaluate(
    () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(null)))),
  );
}

/** axe-core's serious and critical violations on the page as it is now. */
async function axeViolations(page: Page, scope: string): Promise<Omit<Found, 'screen'>[]> {
  // Through the DevTools protocol (the page's CSP allows no inline script); once per document.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axe.source);
  return page.evaluate(async (scope) => {
    const run = (window as unknown as { axe: typeof axe }).axe.run;
    const result = await run(document.querySelector(scope)!, { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({
        id: v.id,
        impact: String(v.impact),
        help: v.help,
        targets: v.nodes.slice(0, 6).map((n) => n.target.join(' ')),
        summary: v.nodes[0]?.failureSummary ?? '',
      }));
  }, scope);
}

/**
 * The screen at both sizes in the current theme: a full-page screenshot, the sideways-scroll
 * check on the phone, and axe-core's findings (collected, so one run reports every screen).
 */
async function capture(page: Page, screen: string, theme: Theme, found: Found[], scope = 'html') {
  const start = Date.now();
  for (const size of SIZES) {
    await page.setViewportSize(size);
    // From the top, so the phone's sticky row is drawn where it belongs in the full-page shot.
    await page.evaluate(() => window.scrollTo(0, 0));
    await settle(page);
    await page.screenshot({
      path: `${SHOTS}/${screen}-${size.width}-${theme}.png`,
      fullPage: true,
    });
    if (size.width < 500) {
      const wide = await page.evaluate(() => {
        const client = document.documentElement.clientWidth;
        if (document.documentElement.scrollWidth <= client) return null;
        // The outermost elements that reach past the right edge, to name in the report.
        const past = [...document.querySelectorAll<HTMLElement>('body *')].filter(
          (el) => el.getBoundingClientRect().right > client + 0.5,
        );
        const outer = past.filter((el) => !past.includes(el.parentElement as HTMLElement));
        const name = (el: Element) =>
          el.tagName.toLowerCase() +
          (el.id ? `#${el.id}` : '') +
          [...el.classList].map((c) => `.${c}`).join('') +
          (el.getAttribute('data-testid') ? `[data-testid=${el.getAttribute('data-testid')}]` : '');
        return {
          scroll: document.documentElement.scrollWidth,
          targets: outer
            .slice(0, 6)
            .map(
              (el) =>
                `${name(el.parentElement!)} > ${name(el)} (${Math.round(el.getBoundingClientRect().right)} px)`,
            ),
        };
      });
      if (wide)
        found.push({
          screen: `${screen}-${size.width}-${theme}`,
          id: 'sideways-scroll',
          impact: 'serious',
          help: `the page is ${wide.scroll} px wide in a ${size.width} px viewport`,
          targets: wide.targets,
          summary: '',
        });
    }
    for (const v of await axeViolations(page, scope))
      found.push({ screen: `${screen}-${size.width}-${theme}`, ...v });
  }
  console.log(`${screen} (${theme}): both sizes in ${Date.now() - start} ms`);
}

function report(found: Found[]): string {
  return found
    .map(
      (f) =>
        `${f.screen}: [${f.impact}] ${f.id}: ${f.help}\n  ${f.targets.join('\n  ')}\n  ${f.summary.replace(/\n/g, '\n  ')}`,
    )
    .join('\n');
}

async function setTheme(page: Page, theme: Theme) {
  await page.locator('#theme').selectOption(theme);
  await expect(page.locator('html')).toHaveAttribute('data-theme', theme);
}

test('no model yet: the first screen and the consent dialog of a shared link', async ({ page }) => {
  test.setTimeout(300_000);
  const errors = watchErrors(page);
  const found: Found[] = [];
  for (const theme of THEMES) {
    // A fresh profile: the first screen, with its measured estimate.
    await page.goto('/#train');
    await setTheme(page, theme);
    const first = page.getByTestId('first-run');
    await expect(first).toBeVisible({ timeout: 60_000 });
    await expect(first.getByTestId('first-run-estimate')).toBeVisible({ timeout: 120_000 });
    await capture(page, 'first-run', theme, found);

    // A shared link carrying custom reward code asks first.
    const params = new URLSearchParams({
      rewards: 'format,custom:short',
      customRewards: JSON.stringify({
        short: 'function reward({ completion }) {\n  return completion.length < 50 ? 1 : 0;\n}',
      }),
    });
    await page.goto(`/?${params}#train`);
    const dialog = page.getByRole('dialog', { name: 'This link contains custom reward code' });
    await expect(dialog).toBeVisible();
    await expect(page.locator('html')).toHaveAttribute('data-theme', theme);
    await capture(page, 'consent-dialog', theme, found);
  }
  expect(found.length, report(found)).toBe(0);
  expect(errors).toEqual([]);
});

test('with a loaded model and one step: every view, both themes, both sizes', async ({ page }) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  const found: Found[] = [];
  await page.setViewportSize(SIZES[0]);
  await page.goto(`/?${TINY_RUN}#train`);
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('status')).toHaveText('Ready', { timeout: STEP_TIMEOUT });

  // Each view's content, rendered with step 1's data; a view added later (its nav link) is
  // walked too, once its first heading shows.
  const ready: Record<string, () => Promise<void>> = {
    train: () => expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '1'),
    inspect: () => expect(page.getByTestId('inspect-step')).toHaveAttribute('data-step', '1'),
    learn: () => expect(page.getByTestId('learn-step')).toHaveAttribute('data-step', '1'),
    aha: () => expect(page.getByTestId('aha-selected-step')).toHaveAttribute('data-step', '1'),
    paper: () => expect(page.getByRole('heading', { name: /The paper in brief/ })).toBeVisible(),
  };
  const nav = await page
    .getByRole('navigation', { name: 'Views' })
    .getByRole('link')
    .evaluateAll((els) => els.map((el) => el.getAttribute('data-testid')!.replace(/^nav-/, '')));
  expect(nav).toEqual(expect.arrayContaining([...Object.keys(ready), 'checkpoints']));
  // Checkpoints last, once a checkpoint is saved and a comparison run.
  const views = nav.filter((v) => v !== 'checkpoints');
  for (const theme of THEMES) {
    await page.getByTestId('nav-train').click();
    await setTheme(page, theme);
    for (const view of views) {
      await page.getByTestId(`nav-${view}`).click();
      await (
        ready[view] ?? (() => expect(page.locator('main h2:visible').first()).toBeVisible())
      )();
      await capture(page, view, theme, found);
    }

    // Train with every option group unfolded.
    await page.getByTestId('nav-train').click();
    const groups = page.locator('section[aria-labelledby="options-h"] details');
    await groups.evaluateAll((els) => els.forEach((d) => ((d as HTMLDetailsElement).open = true)));
    await capture(page, 'train-options', theme, found, 'section[aria-labelledby="options-h"]');
    await groups.evaluateAll(
      (els, i) => els.forEach((d, j) => ((d as HTMLDetailsElement).open = j === i)),
      0,
    );

    // The share dialog.
    await page.getByTestId('share').click();
    const share = page.getByRole('dialog', { name: 'Share this configuration' });
    await expect(share).toBeVisible();
    await capture(page, 'share-dialog', theme, found, '[role="dialog"]');
    await share.getByRole('button', { name: 'Close' }).click();
    await expect(share).toHaveCount(0);

    // Reset with the unsaved step asks first.
    await page.getByTestId('reset').click();
    const discard = page.getByRole('alertdialog', { name: 'Discard 1 step not saved?' });
    await expect(discard).toBeVisible();
    await capture(page, 'discard-dialog', theme, found, '[role="alertdialog"]');
    await discard.getByRole('button', { name: 'Cancel' }).click();
    await expect(discard).toHaveCount(0);
  }

  // Checkpoints, with one saved and a comparison run on the held-out prompt.
  await page.getByTestId('nav-checkpoints').click();
  await page.getByTestId('save-now').click();
  await expect(page.getByTestId('checkpoint-row')).toHaveCount(1, { timeout: 60_000 });
  await page.getByTestId('compare').click();
  await expect(page.getByTestId('compare-pair')).toHaveCount(1, { timeout: STEP_TIMEOUT });
  for (const theme of THEMES) {
    await setTheme(page, theme);
    await capture(page, 'checkpoints', theme, found);
  }

  expect(found.length, report(found)).toBe(0);
  expect(errors).toEqual([]);
});
