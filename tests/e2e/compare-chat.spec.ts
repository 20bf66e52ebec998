// Compare and chat as a user checks them, in Chromium on SwiftShader with the bundled model:
// Compare runs on the number of held-out prompts chosen, states n and k, and gives every rate
// its count and 95% Wilson interval (the numbers shown are checked against core/wilson.ts); each
// greedy answer side by side is marked right or wrong next to the reference. Chat: Enter sends and
// the input clears at once, Shift+Enter is a new line, a countdown problem's reply is scored by
// the task's verifier, free text is not, and a long unbroken line wraps inside the log.
import { expect, test, type Page } from '@playwright/test';
import { wilsonInterval } from '../../src/core/wilson';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 180_000;
const TINY_RUN = 'perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=4';

test.use({ serviceWorkers: 'block' });
test.describe.configure({ mode: 'serial' });

async function loadBundledModel(page: Page) {
  await page.goto(`/?${TINY_RUN}#train`);
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByTestId('nav-checkpoints').click();
}

const pct = (x: number) => `${(100 * x).toFixed(1)}`;

test('Compare states n and k, an interval for each rate, and marks every answer', async ({
  page,
}) => {
  test.setTimeout(600_000);
  const errors = watchErrors(page);
  await loadBundledModel(page);
  const select = page.getByLabel('Held-out prompts', { exact: true });
  // evalPrompts = 4: at most 4, 4 by default (COMPARE_PROMPTS is 8).
  await expect(select.locator('option')).toHaveText(['1', '2', '4']);
  await expect(select).toHaveValue('4');
  await select.selectOption('2');
  await page.getByTestId('compare').click();
  await expect(page.getByTestId('compare-summary')).toContainText(
    'n = 2 held-out prompts, k = 2 samples each (4 samples)',
    { timeout: STEP_TIMEOUT },
  );
  // Every rate: its trials (per prompt 2, per sample 4), count, and the Wilson interval of it.
  const expectedTrials: Record<string, number> = {
    greedy_accuracy: 2,
    sample_accuracy: 4,
    'pass@k': 2,
    'cons@k': 2,
    greedy_format_rate: 2,
    reflection_rate: 4,
  };
  for (const [key, trials] of Object.entries(expectedTrials)) {
    const row = page.getByTestId(`rate-${key}`);
    await expect(row.locator('th')).toContainText(`/ ${trials}`);
    for (const cell of await row.locator('td').all()) {
      const text = (await cell.textContent()) ?? '';
      const m = /([\d.]+)% \(([\d.]+)–([\d.]+)%\)\s*(\d+)\/(\d+)/.exec(text);
      expect(m, `${key}: ${text}`).not.toBeNull();
      const [, rate, low, high, k, n] = m!;
      expect(Number(n)).toBe(trials);
      const w = wilsonInterval(Number(k), Number(n));
      expect(rate).toBe(pct(Number(k) / Number(n)));
      expect(low).toBe(pct(w.low));
      expect(high).toBe(pct(w.high));
    }
  }
  // Side by side: both prompts, each answer marked against the reference.
  await page.getByText('Greedy answers side by side').click();
  const pairs = page.getByTestId('compare-pair');
  await expect(pairs).toHaveCount(2);
  for (const pair of await pairs.all()) {
    await expect(pair.getByTestId('compare-reference')).toHaveText(/\S/);
    await expect(pair.getByTestId('mark-base')).toHaveText(/^base (✓ right|✗ wrong)$/);
    await expect(pair.getByTestId('mark-now')).toHaveText(/^now (✓ right|✗ wrong)$/);
  }
  expect(errors).toEqual([]);
});

test('Chat: Enter sends and clears, task prompts are scored, long lines wrap', async ({ page }) => {
  test.setTimeout(600_000);
  const errors = watchErrors(page);
  await loadBundledModel(page);
  const input = page.locator('#chat-in');
  const log = page.getByTestId('chat-log');

  // Shift+Enter is a new line, not a send.
  await input.fill('Using the numbers [3, 5, 7],');
  await input.press('Shift+Enter');
  await input.pressSequentially('create an equation that equals 15');
  await expect(input).toHaveValue(
    'Using the numbers [3, 5, 7],\ncreate an equation that equals 15',
  );
  await expect(page.getByTestId('chat-reply')).toHaveCount(0);
  await input.press('Enter');
  await expect(input).toHaveValue('');
  await expect(page.getByTestId('chat-reply')).toHaveCount(1, { timeout: STEP_TIMEOUT });
  // Scored by the countdown verifier: right or wrong, with the answer it read.
  const score = page.getByTestId('chat-score');
  await expect(score).toHaveCount(1);
  await expect(score).toHaveText(/^(✓ right|✗ wrong) by the task's verifier — answer: /);

  // Free text is not scored; a long unbroken line wraps inside the log (sent without the
  // template, so it fits the tiny model's 128 positions).
  await page.getByLabel("wrap in the run's prompt template").uncheck();
  await input.fill('x'.repeat(90));
  await input.press('Enter');
  await expect(input).toHaveValue('');
  await expect(page.getByTestId('chat-reply')).toHaveCount(2, { timeout: STEP_TIMEOUT });
  await expect(score).toHaveCount(1);
  const overflow = await log.evaluate((el) => el.scrollWidth - el.clientWidth);
  expect(overflow).toBeLessThanOrEqual(0);
  expect(errors).toEqual([]);
});
