// Learn mode on the built app, in Chromium on SwiftShader: after one tiny step with μ = 1 Inspect's
// Clipped mode and Learn say no token can be clipped and the movement table prints each token's decoded text beside its Δ;
// "See it with μ = 2" asks before discarding the unsaved step, sets numIterations = 2 in the options,
// starts a fresh run and takes its step, whose Learn page explains the passes and sets each pass's
// trainer values beside the same values recomputed from that pass's log-probs, every ✓ between two
// printed numbers that agree. The Paper view draws both figures, links the four papers and shows
// the R1 paper's three findings beside the recipe comparison's.
import { existsSync, readFileSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 180_000;
const FINDINGS_FILE = 'docs/recipe/findings.json';
// A small run, so a step takes seconds on WebGPU emulated by SwiftShader.
const TINY_RUN = 'perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1';

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

test('μ = 1 note, token text, one click to μ = 2, and the Paper figures', async ({ page }) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}#train`);
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('status')).not.toHaveText('Running', { timeout: STEP_TIMEOUT });

  // Inspect's Clipped mode says the same, with the same button.
  await page.getByTestId('nav-inspect').click();
  await page.getByRole('radio', { name: 'Clipped' }).check();
  await expect(page.getByTestId('inspect-no-clip')).toContainText('no token can be clipped');
  await expect(page.getByTestId('inspect-try-mu2')).toBeEnabled();

  // Learn on step 1 of a μ = 1 run: the note, and token text in the movement table.
  await page.getByTestId('nav-learn').click();
  await expect(page.getByTestId('learn-step')).toHaveAttribute('data-step', '1');
  await expect(page.getByTestId('no-clip-note')).toBeVisible();
  await expect(page.getByTestId('no-clip-note')).toContainText('No token can be clipped');
  await expect(page.getByTestId('no-kl-note')).toBeVisible();
  const tokens = page.getByTestId('movement-token');
  expect(await tokens.count()).toBeGreaterThan(0);
  const texts = await tokens.allInnerTexts();
  console.log(`movement tokens: ${JSON.stringify(texts)}`);
  // Decoded text, not the "#id" fallback of a report without pieces.
  for (const t of texts) {
    expect(t.length).toBeGreaterThan(0);
    expect(t).not.toMatch(/^#\d+$/);
  }
  await expect(page.getByTestId('clip-drawn-for')).toContainText('Drawn for |A| = 1');
  await expect(page.getByTestId('update-checks').getByTestId('check-pass')).toHaveCount(0);
  await expect(page.getByTestId('update-checks').getByTestId('check-verdict').first()).toHaveText(
    '✓ matches the trainer',
  );

  // The μ = 2 run samples 4 completions of up to 48 tokens, so that its group's rewards differ
  // (8-token completions never finish the format: every advantage would be 0 and every check a
  // trivial 0 = 0). The options wait for the Reset the μ = 2 button makes.
  await page.getByTestId('nav-train').click();
  await page.locator('#opt-numGenerations').fill('4');
  await page.locator('#opt-maxCompletionLength').fill('48');
  await page.getByTestId('nav-learn').click();
  // One click to μ = 2: the unsaved step is asked about, then a fresh run takes its step.
  await page.getByTestId('try-mu2').click();
  await expect(page.getByTestId('discard-dialog')).toHaveAttribute('data-action', 'reset');
  await page.getByTestId('discard-confirm').click();
  await expect(page.getByTestId('clip-passes')).toBeVisible({ timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('clip-passes')).toContainText('μ = numIterations = 2');
  await expect(page.getByTestId('learn-step')).toHaveAttribute('data-step', '1');
  await expect(page.getByTestId('no-clip-note')).toHaveCount(0);
  await expect(page.locator('#opt-numIterations')).toHaveValue('2');
  // The trainer's clip ratios of that step, as percentages (averaged over the two passes).
  await expect(page.getByTestId('clip-trainer')).toContainText(
    /clipped\s+low \d+\.\d%, high \d+\.\d%, any \d+\.\d%/,
  );
  console.log(`μ = 2 step: ${await page.getByTestId('clip-trainer').innerText()}`);
  // Like with like: each pass's trainer value beside the same value recomputed from that pass's
  // log-probs, the pass named, and every ✓ between two printed numbers that agree within the
  // stated tolerance, 10⁻⁵ + 10⁻⁴·|trainer| (plus the print's rounding).
  const checks = page.getByTestId('update-checks').getByTestId('check-line');
  await expect(checks).toHaveCount(4); // loss and clip ratio of pass 1 and of pass 2
  const printed = (s: string) =>
    s.endsWith('%') ? Number(s.slice(0, -1).replace('−', '-')) / 100 : Number(s.replace('−', '-'));
  for (let i = 0; i < 4; i++) {
    const row = checks.nth(i);
    const pass = await row.getAttribute('data-pass');
    await expect(row.getByTestId('check-pass')).toHaveText(`pass ${pass} of 2`);
    const trainer = printed(await row.getByTestId('check-trainer').innerText());
    const recomputed = printed(await row.getByTestId('check-recomputed').innerText());
    const verdict = await row.getByTestId('check-verdict').innerText();
    console.log(`μ = 2 check: ${await row.innerText()}`);
    expect(verdict).toBe('✓ matches the trainer');
    const slack = (await row.getAttribute('data-key')) === 'clip' ? 5e-5 : 1e-6;
    expect(Math.abs(trainer - recomputed)).toBeLessThanOrEqual(
      1e-5 + 1e-4 * Math.abs(trainer) + slack,
    );
  }
  // Real numbers, not 0 = 0: the group's rewards differed, so the passes' losses are not 0.
  const values = await page
    .getByTestId('update-checks')
    .getByTestId('check-trainer')
    .allInnerTexts();
  expect(
    values.map(printed).some((v) => v !== 0),
    `pass values ${values}`,
  ).toBe(true);
  await expect(page.getByTestId('logged-note')).toContainText('mean of the 2 passes');
  await expect(page.getByTestId('loss-note')).toHaveCount(0);
  // Inspect's Clipped marks at μ = 2 are the tokens pass 2 clipped, checked against that pass.
  await page.getByTestId('nav-inspect').click();
  await page.getByRole('radio', { name: 'Clipped' }).check();
  await expect(page.getByTestId('inspect-clip-pass')).toContainText('pass 2 of 2');
  await expect(page.getByTestId('inspect-clip-verdict')).toHaveText('✓ matches');
  await page.getByTestId('nav-learn').click();

  // The Paper view: both figures, the transcript's reflection, the four links.
  await page.getByTestId('nav-paper').click();
  await expect(page.getByTestId('figure-aime')).toBeVisible();
  await expect(page.getByTestId('figure-length')).toBeVisible();
  await expect(page.getByTestId('aha-reflection')).toContainText('aha moment I can flag here');
  // The paper's three findings beside this playground's comparison (measured, or said not to be).
  const findings = page.getByTestId('finding-row');
  await expect(findings).toHaveCount(3);
  await expect(findings.nth(0)).toContainText('RL alone teaches reasoning');
  await expect(findings.nth(1)).toContainText('A cold start helps RL');
  await expect(findings.nth(2)).toContainText('Table 6');
  // The committed comparison (docs/recipe/findings.json) is what the page shows, verdict by verdict.
  const committed = existsSync(FINDINGS_FILE)
    ? (JSON.parse(readFileSync(FINDINGS_FILE, 'utf8')) as { findings: { verdict: string }[] })
    : null;
  if (committed) {
    await expect(page.getByTestId('findings-source')).toContainText('npm run recipe -- --compare');
    await expect(page.getByTestId('finding-verdict')).toHaveText(
      committed.findings.map((f) => f.verdict),
    );
  } else {
    await expect(page.getByTestId('findings-not-run')).toContainText('Not measured yet.');
    await expect(page.getByTestId('finding-verdict')).toHaveText(Array(3).fill('not measured yet'));
  }
  for (const id of ['2501.12948', '2402.03300', '2503.14476', '2503.20783']) {
    const link = page.locator(`a[href="https://arxiv.org/abs/${id}"]`);
    await expect(link).toHaveCount(1);
    await expect(link).toHaveAttribute('rel', 'noopener');
  }
  // A phone's width: neither page scrolls sideways (tables and formulas scroll in their own box).
  await page.setViewportSize({ width: 390, height: 844 });
  const sideways = () =>
    page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
  expect(await sideways()).toBeLessThanOrEqual(0);
  if (process.env.LEARN_SHOTS)
    await page.screenshot({ path: 'test-results/learn-paper-390.png', fullPage: true });
  await page.getByTestId('nav-learn').click();
  await expect(page.getByTestId('clip-passes')).toBeVisible();
  expect(await sideways()).toBeLessThanOrEqual(0);
  if (process.env.LEARN_SHOTS)
    await page.screenshot({ path: 'test-results/learn-learn-390.png', fullPage: true });
  expect(errors).toEqual([]);
});
