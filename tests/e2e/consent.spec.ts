// Consent for custom reward code in the built app (vite preview, Chromium with WebGPU on
// SwiftShader). A shared link carrying custom reward code shows one dialog with the code as text:
// declining (Escape) keeps the rest of the config without the code, allowing adds it, the answer
// is remembered per code for the browser session, and the page stays responsive (it used to
// freeze in an effect_update_depth_exceeded loop). A checkpoint file whose config holds custom
// reward code asks on import; declined, the imported run restores and trains without it.
import { expect, test, type Page } from '@playwright/test';
import { readFileSync, writeFileSync } from 'node:fs';
import { watchErrors } from './support/watch-errors';

/** Steps on SwiftShader take seconds each; loading the model and compiling pipelines more. */
const STEP_TIMEOUT = 180_000;

// Markup in the code must show as text: were it rendered as HTML, the <img> would be an element.
const CODE = [
  '// Prefer short answers. <img src=x onerror="window.__pwned = 1">',
  'function reward({ completion }) {',
  '  return Math.max(0, 1 - completion.length / 200);',
  '}',
].join('\n');

function sharedUrl(code: string): string {
  const params = new URLSearchParams({
    steps: '7',
    rewards: 'format,custom:len',
    customRewards: JSON.stringify({ len: code }),
  });
  return `/?${params}#train`;
}

async function expectRewardsPanel(page: Page, custom: boolean) {
  await expect(page.getByLabel('use format')).toBeChecked();
  await expect(page.getByLabel('use accuracy')).not.toBeChecked();
  await expect(page.getByLabel('use custom:len')).toHaveCount(custom ? 1 : 0);
  // The rest of the shared configuration applies either way.
  await expect(page.locator('#opt-steps')).toHaveValue('7');
}

test('a shared link with custom reward code: the dialog shows it as text; Escape declines', async ({
  page,
}) => {
  const errors = watchErrors(page);
  await page.goto(sharedUrl(CODE));
  const dialog = page.getByRole('dialog', { name: 'This link contains custom reward code' });
  await expect(dialog).toBeVisible();
  await expect(dialog.getByTestId('consent-id')).toHaveText(['custom:len']);
  // The <pre>'s text is exactly the code (the line numbers are CSS, not text), and no markup ran.
  const pre = dialog.getByTestId('consent-code');
  expect(await pre.evaluate((el) => el.tagName)).toBe('PRE');
  expect(await pre.evaluate((el) => el.textContent)).toBe(CODE);
  expect(await pre.locator('img').count()).toBe(0);
  expect(
    await pre.locator('.ln').evaluateAll((els) => els.map((e) => e.getAttribute('data-n'))),
  ).toEqual(['1', '2', '3', '4']);
  expect(
    await pre
      .locator('.ln')
      .first()
      .evaluate((el) => getComputedStyle(el, '::before').content),
  ).toBe('"1"');
  expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
  await expect(dialog).toHaveAttribute('aria-modal', 'true');
  await expect(dialog).toHaveAccessibleDescription(/carries JavaScript that would run/);

  // The safe answer has the focus, and Tab / Shift+Tab stay inside the dialog.
  await expect(dialog.getByTestId('consent-decline')).toBeFocused();
  const inside = () => page.evaluate(() => !!document.activeElement?.closest('[role=dialog]'));
  for (const key of ['Tab', 'Tab', 'Tab', 'Tab', 'Shift+Tab', 'Shift+Tab', 'Shift+Tab']) {
    await page.keyboard.press(key);
    expect(await inside()).toBe(true);
  }

  await page.keyboard.press('Escape');
  await expect(dialog).toHaveCount(0);
  await expectRewardsPanel(page, false);
  await expect(
    page.getByTestId('banner').filter({ hasText: "The link's custom reward code was left out" }),
  ).toHaveCount(1);

  // Responsive: views switch and the page evaluates script.
  await page.getByTestId('nav-inspect').click();
  await expect(page.getByRole('heading', { name: 'Step inspector' })).toBeVisible();
  expect(await page.evaluate(() => 6 * 7)).toBe(42);

  // The same code from the same link in this session: the answer stands, no second dialog.
  await page.goto(sharedUrl(CODE));
  await expect(page.getByLabel('use format')).toBeChecked();
  await expect(page.getByTestId('consent-dialog')).toHaveCount(0);
  await expectRewardsPanel(page, false);
  expect(errors).toEqual([]);
});

test('allowing adds the custom reward; the same code does not ask again, another code does', async ({
  page,
}) => {
  const errors = watchErrors(page);
  await page.goto(sharedUrl(CODE));
  const dialog = page.getByRole('dialog', { name: 'This link contains custom reward code' });
  await expect(dialog).toBeVisible();
  await dialog.getByRole('button', { name: 'Allow this code' }).click();
  await expect(dialog).toHaveCount(0);
  await expectRewardsPanel(page, true);
  await expect(page.getByLabel('use custom:len')).toBeChecked();
  // The code editor (CodeMirror, one block per line) holds the code as text, no markup.
  await expect(page.getByTestId('editor-code-len')).toHaveAttribute('data-editor', 'codemirror');
  const editor = page.getByRole('textbox', { name: 'code of custom reward len' });
  expect(await editor.evaluate((el) => (el as HTMLElement).innerText)).toBe(CODE);
  expect(await editor.locator('img').count()).toBe(0);

  await page.reload();
  await expect(page.getByLabel('use custom:len')).toBeChecked();
  await expect(page.getByTestId('consent-dialog')).toHaveCount(0);

  // One character more is another code: it asks.
  const other = CODE + '\n// changed';
  await page.goto(sharedUrl(other));
  await expect(dialog).toBeVisible();
  expect(await dialog.getByTestId('consent-code').evaluate((el) => el.textContent)).toBe(other);
  await dialog.getByRole('button', { name: 'Leave it out' }).click();
  await expectRewardsPanel(page, false);
  expect(errors).toEqual([]);
});

test('a shared link with a line break in a reward id is refused with the reason', async ({
  page,
}) => {
  const errors = watchErrors(page);
  const params = new URLSearchParams({
    rewards: 'format,custom:a\nb',
    customRewards: JSON.stringify({ 'a\nb': CODE }),
  });
  await page.goto(`/?${params}#train`);
  await expect(
    page.getByTestId('banner').filter({ hasText: 'The shared link has an invalid configuration' }),
  ).toContainText(`reward id "a\\nb" contains a line break`);
  await expect(page.getByTestId('consent-dialog')).toHaveCount(0);
  await expect(page.getByLabel('use accuracy')).toBeChecked();

  // The rewards panel applies the same rule to a typed id.
  await page.getByLabel('New custom reward id').fill('say"hi');
  await page.getByRole('button', { name: 'Add custom JS reward' }).click();
  await expect(page.getByTestId('reward-id-error')).toContainText(
    'reward id "say\\"hi" contains a quote',
  );
  await expect(page.getByLabel('use custom:say"hi')).toHaveCount(0);
  expect(errors).toEqual([]);
});

/** The file layout of src/storage/transfer.ts: magic, u64 manifest length, manifest, body. */
function withManifest(file: Buffer, edit: (manifest: Record<string, unknown>) => void): Buffer {
  const length = Number(file.readBigUInt64LE(8));
  const manifest = JSON.parse(file.subarray(16, 16 + length).toString('utf8'));
  edit(manifest);
  const json = Buffer.from(JSON.stringify(manifest), 'utf8');
  const padded = Math.ceil(json.length / 8) * 8;
  const head = Buffer.alloc(16 + padded, 0x20);
  head.write('GRPOCKPT', 0, 'latin1');
  head.writeBigUInt64LE(BigInt(padded), 8);
  json.copy(head, 16);
  return Buffer.concat([head, file.subarray(16 + length)]);
}

test('an imported checkpoint with custom reward code asks; declined, it trains without it', async ({
  page,
}) => {
  test.setTimeout(900_000);
  const errors = watchErrors(page);
  await page.goto('/#train');
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });

  // A real checkpoint of the bundled model (step 1), exported to a file.
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', {
    timeout: STEP_TIMEOUT,
  });
  await page.getByTestId('nav-checkpoints').click();
  await page.getByTestId('save-now').click();
  const row = page.locator('[data-testid="checkpoint-row"][data-step="1"]');
  await expect(row).toHaveCount(1, { timeout: 60_000 });
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    row.getByRole('button', { name: 'Export' }).click(),
  ]);
  const exported = readFileSync(await download.path());

  // The same file, its config now carrying custom reward code (as a file from elsewhere could).
  const path = test.info().outputPath('with-code.grpockpt');
  writeFileSync(
    path,
    withManifest(exported, (m) => {
      const config = m.config as Record<string, unknown>;
      config.rewards = ['format', 'accuracy', 'custom:len'];
      config.rewardWeights = [1, 1, 1];
      config.customRewards = { len: CODE };
      m.run = { id: 'from-elsewhere', name: 'from elsewhere' };
    }),
  );

  await page.locator('input[type=file][accept=".grpockpt"]').setInputFiles(path);
  const dialog = page.getByRole('dialog', {
    name: 'This checkpoint file contains custom reward code',
  });
  await expect(dialog).toBeVisible();
  await expect(dialog).toContainText("The checkpoint file 'with-code.grpockpt'");
  await expect(dialog.getByTestId('consent-id')).toHaveText(['custom:len']);
  expect(await dialog.getByTestId('consent-code').evaluate((el) => el.textContent)).toBe(CODE);
  await dialog.getByRole('button', { name: 'Leave it out' }).click();
  await expect(dialog).toHaveCount(0);

  // Imported as it is; restoring it in this session leaves the code out without asking again.
  const imported = page.getByTestId('checkpoint-row').filter({ hasText: 'from elsewhere' });
  await expect(imported).toHaveCount(1, { timeout: 60_000 });
  await imported.getByTestId('restore').click();
  await expect(
    page.getByTestId('banner').filter({ hasText: 'Restored without its custom reward code' }),
  ).toContainText('Left out: custom:len.');
  await expect(page.getByTestId('consent-dialog')).toHaveCount(0);

  await page.getByTestId('nav-train').click();
  await expect(page.getByLabel('use custom:len')).toHaveCount(0);
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 2', {
    timeout: STEP_TIMEOUT,
  });
  // The step was scored with the built-ins only: the inspector's reward columns say which.
  await page.getByTestId('nav-inspect').click();
  const heads = page.getByTestId('group').first().locator('thead th');
  await expect(heads).toHaveText(['#', 'format', 'accuracy', 'total', 'advantage', 'completion']);
  expect(errors).toEqual([]);
});
