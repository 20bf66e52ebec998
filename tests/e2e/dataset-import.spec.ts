// The page's dataset importer (issue 36) in Chromium on the built app, no model needed: task
// 'jsonl', then files as downloaded from the Hub picked in the Task & data panel. MATH-500's two
// Parquet shards (tests/fixtures/datasets) are recognised as the MATH layout with its column
// mapping shown in selects, the checker the layout wants set, and a preview of the problems;
// mapping the answer role to another column re-reads the files; GSM8K's CSV shows its final
// answers ("#### 18" → 18); a malformed CSV is refused with a message naming the file and line.
// The Recipes view's SFT stage takes the same files: GSM8K's Parquet becomes 50 examples.
import { expect, test } from '@playwright/test';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { watchErrors } from './support/watch-errors';

const DIR = 'tests/fixtures/datasets';

test.use({ serviceWorkers: 'block' });

test('Hub files import with their layout, a column mapping and a preview', async ({ page }) => {
  const errors = watchErrors(page);
  await page.goto('/#train');
  await page.locator('#task-select').selectOption('jsonl');
  const input = page.getByTestId('dataset-input');
  const layout = page.getByTestId('dataset-layout');
  const rows = page.getByTestId('dataset-preview').locator('tbody tr');

  const shards = join(DIR, 'math500-test-50');
  await input.setInputFiles(readdirSync(shards).map((f) => join(shards, f)));
  await expect(layout).toHaveText('parquet · 50 rows · layout math');
  await expect(page.locator('#map-prompt')).toHaveValue('problem');
  await expect(page.locator('#map-answer')).toHaveValue('answer');
  await expect(page.locator('#task-checker')).not.toHaveValue('numeric');
  await expect(rows).toHaveCount(3);
  await expect(rows.first()).toContainText('Convert the point $(0,3)$');
  await expect(rows.first().locator('td').nth(2)).toHaveText('\\left( 3, \\frac{\\pi}{2} \\right)');
  await expect(page.getByText('Import a dataset first.')).toHaveCount(0);

  // The answer from the solution column instead: its last \boxed{}, the same answers here.
  await page.locator('#map-answer').selectOption('solution');
  await expect(layout).toHaveText('parquet · 50 rows · layout custom');
  await expect(page.locator('#map-answer')).toHaveValue('solution');
  await expect(rows.nth(1).locator('td').nth(2)).toHaveText('p - q');

  await input.setInputFiles(join(DIR, 'gsm8k-test-50.csv'));
  await expect(layout).toHaveText('csv · 50 rows · layout gsm8k');
  await expect(page.locator('#map-prompt')).toHaveValue('question');
  await expect(rows.first()).toContainText('Janet’s ducks lay 16 eggs per day');
  await expect(rows.first().locator('td').nth(2)).toHaveText('18');

  await input.setInputFiles({
    name: 'bad.csv',
    mimeType: 'text/csv',
    buffer: Buffer.from('question,answer\n"never closed,1\n'),
  });
  await expect(
    page.getByText('bad.csv: line 2, field 1: a quoted field is never closed'),
  ).toBeVisible();

  await page.goto('/#recipes');
  await page.getByTestId('recipe-choice-sft').check();
  await page.getByTestId('recipe-sft-file').setInputFiles(join(DIR, 'gsm8k-test-50.parquet'));
  await expect(page.getByTestId('recipe-sft-ok')).toContainText('50 examples');
  expect(errors).toEqual([]);
});
