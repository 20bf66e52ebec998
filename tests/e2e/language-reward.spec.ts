// The language_consistency reward in the Rewards panel, in the built app: listed with the other
// built-ins, its help line and a target-script select with an accessible name; a shared link's
// languageScript, reward list and weights show in it; the chosen script stays when the reward is
// switched off and on; at 390 px the panel does not scroll the page sideways.
import { expect, test } from '@playwright/test';
import { watchErrors } from './support/watch-errors';

test.use({ serviceWorkers: 'block' });

test('language_consistency: listed with its help and target script, shared by link', async ({
  page,
}) => {
  const errors = watchErrors(page);
  await page.setViewportSize({ width: 390, height: 844 });
  const params = new URLSearchParams({
    rewards: 'accuracy,language_consistency',
    rewardWeights: '1,0.5',
    languageScript: 'Han',
  });
  await page.goto(`/?${params}#train`);
  const use = page.getByLabel('use language_consistency');
  await expect(use).toBeChecked();
  await expect(page.getByLabel('use format')).not.toBeChecked();
  await expect(page.getByLabel('weight of language_consistency')).toHaveValue('0.5');
  await expect(
    page.getByText('The share of the <think> words written in the target script'),
  ).toBeVisible();
  const script = page.getByLabel('target script of language_consistency');
  await expect(script).toHaveValue('Han');
  expect(await script.locator('option').allTextContents()).toContain('Cyrillic');
  await script.selectOption('Cyrillic');
  await expect(script).toHaveValue('Cyrillic');
  // Unchecking and checking keeps the chosen script; the page does not scroll sideways.
  await use.uncheck();
  await use.check();
  await expect(script).toHaveValue('Cyrillic');
  expect(
    await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    ),
  ).toBeLessThanOrEqual(0);
  expect(errors).toEqual([]);
});
