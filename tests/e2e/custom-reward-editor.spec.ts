// The custom reward editor on real data, in the built app (vite preview, Chromium with WebGPU on
// SwiftShader, the app's CSP): one training step of the bundled model, then a custom reward typed
// into the CodeMirror editor (a lazily loaded chunk of its own, line numbers, JavaScript
// highlighting; Tab leaves it). "Try it" scores every completion of that step: each shown score
// equals what the reward computes on the shown text, the format column equals rewards.ts's
// formatOk on it, and the total is their weighted sum. An edited and an added sample are scored
// after the next try; the wide dialog edits the same code and closes on Escape.
import { expect, test, type Locator, type Page } from '@playwright/test';
import { extractAnswer, formatOk } from '../../src/rewards/rewards';

/** Steps on SwiftShader take seconds each; loading the model and compiling pipelines more. */
const STEP_TIMEOUT = 180_000;
const REWARD = 'const reward = ({ completion }) => completion.length;';

// No service worker: it precaches every chunk, the editor's included, and a request it answers
// never reaches page.route, so the blocked-chunk test would race the worker's install.
test.use({ serviceWorkers: 'block' });

async function numberAttr(cell: Locator): Promise<number | null> {
  const v = await cell.getAttribute('data-value');
  return v === null || v === 'null' ? null : Number(v);
}

/** The editor's text: CodeMirror renders one block per line. */
async function editorText(editor: Locator): Promise<string> {
  return editor.evaluate((el) =>
    el instanceof HTMLTextAreaElement ? el.value : (el as HTMLElement).innerText,
  );
}

async function takeOneStep(page: Page) {
  await page.goto('/#train');
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', {
    timeout: STEP_TIMEOUT,
  });
}

test('a custom reward typed into CodeMirror, tried on the last step and on edited samples', async ({
  page,
}) => {
  test.setTimeout(600_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const scripts: string[] = [];
  page.on('response', (r) => {
    if (r.request().resourceType() === 'script') scripts.push(new URL(r.url()).pathname);
  });

  await takeOneStep(page);
  // The editor's chunk is not part of the page until a custom reward is shown.
  expect(scripts.filter((s) => /\/code-editor-[^/]*\.js$/.test(s))).toEqual([]);

  await page.getByLabel('New custom reward id').fill('len');
  await page.getByRole('button', { name: 'Add custom JS reward' }).click();
  await expect(page.getByLabel('use custom:len')).toBeChecked();
  await expect(page.getByTestId('editor-code-len')).toHaveAttribute('data-editor', 'codemirror', {
    timeout: 30_000,
  });
  expect(scripts.filter((s) => /\/code-editor-[^/]*\.js$/.test(s))).toHaveLength(1);

  const editor = page.getByRole('textbox', { name: 'code of custom reward len' });
  await expect(editor).toHaveAttribute('contenteditable', 'true');
  await expect(editor).toHaveAccessibleDescription(/Tab moves to the next control/);
  // Line numbers 1..5 for the five-line example, and highlighted tokens.
  const host = page.getByTestId('editor-code-len');
  await expect(host.locator('.cm-lineNumbers .cm-gutterElement:visible')).toHaveText([
    '1',
    '2',
    '3',
    '4',
    '5',
  ]);
  expect(await editor.locator('.cm-line span[class]').count()).toBeGreaterThan(5);

  // Typed with the keyboard: select all, type the new code.
  await editor.click();
  await page.keyboard.press('ControlOrMeta+a');
  await page.keyboard.type(REWARD);
  expect(await editorText(editor)).toBe(REWARD);
  // Tab leaves the editor (no indent-with-Tab), and the code is unchanged.
  await page.keyboard.press('Tab');
  expect(await page.evaluate(() => !!document.activeElement?.closest('.cm-editor'))).toBe(false);
  expect(await editorText(editor)).toBe(REWARD);

  await page.getByTestId('try-len').click();
  const results = page.getByTestId('try-results-len');
  const groups = results.getByTestId('try-group');
  await expect(groups.first()).toBeVisible({ timeout: 60_000 });
  // The playground's defaults: 2 prompts, 4 completions each, every one of them shown.
  await expect(groups).toHaveCount(2);
  for (const g of await groups.all()) await expect(g.getByTestId('try-row')).toHaveCount(4);
  await expect(results).toContainText('Step 1: 8 completions');
  await expect(groups.first().locator('th')).toHaveText([
    'completion',
    'custom:len',
    'format',
    'accuracy',
    'total',
  ]);

  const formatOn = await page.getByLabel('use format').isChecked();
  const accuracyOn = await page.getByLabel('use accuracy').isChecked();
  const rows = await results.getByTestId('try-row').all();
  expect(rows).toHaveLength(8);
  for (const row of rows) {
    const text = await row.getByTestId('try-completion').evaluate((el) => el.textContent ?? '');
    const score = row.getByTestId('try-score');
    await expect(score).toHaveAttribute('data-state', 'value');
    expect(await numberAttr(score)).toBe(text.length);
    await expect(score).toHaveText(String(text.length));
    const format = await numberAttr(row.getByTestId('try-format'));
    expect(format).toBe(formatOk(text) ? 1 : 0);
    const accuracy = await numberAttr(row.getByTestId('try-accuracy'));
    expect([0, 1]).toContain(accuracy);
    if (extractAnswer(text) === null) expect(accuracy).toBe(0);
    // Weights 1 (the default) over the rewards that are on.
    expect(await numberAttr(row.getByTestId('try-total'))).toBe(
      text.length + (formatOn ? format! : 0) + (accuracyOn ? accuracy! : 0),
    );
  }

  // Samples: the first one edited is stale until the next try; an added one is scored too.
  const samples = results.getByTestId('try-samples');
  const first = samples.getByRole('textbox', { name: 'sample completion 1 for custom:len' });
  const before = await first.inputValue();
  await expect(samples.getByTestId('try-score').first()).toHaveAttribute(
    'data-value',
    String(before.length),
  );
  const edited = ' <think>x</think> <answer>12345</answer>';
  await first.fill(edited);
  await expect(samples.getByTestId('try-score').first()).toHaveAttribute('data-state', 'stale');
  await results.getByRole('button', { name: 'Add a sample' }).click();
  await samples
    .getByRole('textbox', { name: 'sample completion 3 for custom:len' })
    .fill('hello world');
  await page.getByTestId('try-len').click();
  const sampleScores = samples.getByTestId('try-score');
  await expect(sampleScores).toHaveCount(3);
  await expect(sampleScores.nth(0)).toHaveAttribute('data-value', String(edited.length));
  await expect(sampleScores.nth(2)).toHaveAttribute('data-value', '11');
  await expect(samples.getByTestId('try-format').nth(0)).toHaveAttribute('data-value', '1');
  await expect(samples.getByTestId('try-format').nth(2)).toHaveAttribute('data-value', '0');

  // The wide dialog: the same code, the problem fields documented; Escape closes it.
  await page.getByTestId('widen-len').click();
  const dialog = page.getByRole('dialog', { name: 'Custom reward custom:len' });
  await expect(dialog).toBeVisible();
  const wideEditor = dialog.getByRole('textbox', { name: 'code of custom reward len' });
  await expect(dialog.getByTestId('editor-code-len')).toHaveAttribute('data-editor', 'codemirror');
  expect(await editorText(wideEditor)).toBe(REWARD);
  const docs = dialog.getByTestId('reward-docs');
  for (const field of [
    'problem.question',
    'problem.reference',
    'problem.verifier',
    'problem.columns',
    'prompt',
  ])
    await expect(docs).toContainText(field);
  const shownProblem = JSON.parse(
    (await docs.getByTestId('sample-problem').textContent()) ?? 'null',
  );
  expect(shownProblem.task).toBe('countdown');
  expect(shownProblem.verifier.kind).toBe('countdown');
  await page.keyboard.press('Escape');
  await expect(dialog).toHaveCount(0);
  expect(await editorText(editor)).toBe(REWARD);

  expect(pageErrors).toEqual([]);
});

test('when the editor chunk does not load, the textarea stays and works', async ({ page }) => {
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.route(/\/code-editor-[^/]*\.js$/, (route) => route.abort());
  await page.goto('/#train');
  await page.getByLabel('New custom reward id').fill('len');
  await page.getByRole('button', { name: 'Add custom JS reward' }).click();
  const editor = page.getByRole('textbox', { name: 'code of custom reward len' });
  await expect(editor).toHaveJSProperty('tagName', 'TEXTAREA');
  await editor.fill(REWARD);
  await page.getByTestId('try-len').click();
  // Before any step: the hand-written samples only, scored by the code in the textarea.
  const samples = page.getByTestId('try-results-len').getByTestId('try-samples');
  const texts = await samples
    .getByRole('textbox')
    .evaluateAll((els) => els.map((e) => (e as HTMLTextAreaElement).value));
  expect(texts).toHaveLength(2);
  await expect(samples.getByTestId('try-score')).toHaveCount(2, { timeout: 30_000 });
  for (const [i, t] of texts.entries())
    await expect(samples.getByTestId('try-score').nth(i)).toHaveAttribute(
      'data-value',
      String(t.length),
    );
  await expect(page.getByTestId('try-results-len').getByTestId('try-group')).toHaveCount(0);
  await expect(page.getByTestId('editor-code-len')).toHaveAttribute('data-editor', 'text');
  expect(pageErrors).toEqual([]);
});

test('text typed over a selection while the editor loads replaces the selection', async ({
  page,
}) => {
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  // The editor's chunk is held back until the plain field has the focus and its text is selected,
  // so the editor takes over between the selection and the typing (as a slow network can make it).
  let releaseChunk = () => {};
  const chunkHeld = new Promise<void>((resolve) => (releaseChunk = resolve));
  await page.route(/\/code-editor-[^/]*\.js$/, async (route) => {
    await chunkHeld;
    await route.continue();
  });
  await page.goto('/#train');
  await page.getByLabel('New custom reward id').fill('len');
  await page.getByRole('button', { name: 'Add custom JS reward' }).click();
  const field = page.getByRole('textbox', { name: 'code of custom reward len' });
  await expect(field).toHaveJSProperty('tagName', 'TEXTAREA');
  const template = await field.inputValue();
  expect(template.length).toBeGreaterThan(0);
  await field.focus();
  await field.evaluate((el) => (el as HTMLTextAreaElement).select());
  releaseChunk();
  await expect(page.getByTestId('editor-code-len')).toHaveAttribute('data-editor', 'codemirror', {
    timeout: 30_000,
  });
  const editor = page.getByRole('textbox', { name: 'code of custom reward len' });
  await expect(editor).toBeFocused();
  await page.keyboard.insertText(REWARD);
  expect(await editorText(editor)).toBe(REWARD);

  await page.getByTestId('try-len').click();
  const samples = page.getByTestId('try-results-len').getByTestId('try-samples');
  await expect(samples.getByTestId('try-score')).toHaveCount(2, { timeout: 30_000 });
  const texts = await samples
    .getByRole('textbox')
    .evaluateAll((els) => els.map((e) => (e as HTMLTextAreaElement).value));
  for (const [i, t] of texts.entries())
    await expect(samples.getByTestId('try-score').nth(i)).toHaveAttribute(
      'data-value',
      String(t.length),
    );
  expect(pageErrors).toEqual([]);
});
