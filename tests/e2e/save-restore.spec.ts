// Nothing a user trains is lost, in Chromium with the real IndexedDB, on the bundled model, for each
// playground run kind: LoRA on an f32 base (a LoRA checkpoint could not be saved in the browser
// before: "unexpected tensor '…lora_A.weight'"), a full fine-tune, LoRA on a bf16 base:
// 1. Step 1, 2 → Save → Step 3 → Save: the uninterrupted run's step-3 checkpoint. Reload (nothing
//    unsaved, so the page leaves without asking), load the model, Restore the step-2 checkpoint in the
//    fresh worker, Step, Save: its trained tensors, AdamW moments (SHA-256 of each stored tensor) and
//    metrics rows equal the uninterrupted run's bit for bit.
// 2. A checkpoint of another model (the exported file with another base identity, imported) is
//    refused with both models' names before any discard question, although steps are unsaved.
// 3. With a trained step unsaved, leaving the page asks (the browser's beforeunload dialog).
import { expect, test, type Page } from '@playwright/test';
import { readFileSync, writeFileSync } from 'node:fs';
import { decodeCheckpointFile, encodeCheckpointFile } from '../../src/storage/transfer';
import { loadBundledModel } from './support/bundled-model';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 300_000;
const BASE =
  'perStepPrompts=1&numGenerations=2&maxCompletionLength=24&evalPrompts=1&seed=5&saveSteps=100';
const LORA = '&usePeft=true&loraR=2&loraAlpha=4';
const RUN = BASE + LORA;
/** The run kinds of the parity matrix the page runs (SFT and recipes: recipe-parity.spec.ts). */
const KINDS = [
  { kind: 'LoRA on an f32 base', query: BASE + LORA, lora: true },
  { kind: 'full fine-tune', query: BASE, lora: false },
  { kind: 'LoRA on a bf16 base', query: BASE + LORA + '&dtype=bfloat16', lora: true },
];

test.use({ serviceWorkers: 'block' });

interface Digest {
  step: number;
  optimizerStep: number;
  adapter: { r: number; alpha: number } | null;
  tensorSha256: Record<string, string>;
  metricsSoFar: Record<string, number>[] | null;
}

const digest = (page: Page) =>
  page.evaluate(
    () =>
      (
        window as unknown as { __grpoTest: { lastCheckpointDigest(): Promise<Digest> } }
      ).__grpoTest.lastCheckpointDigest() as Promise<Digest>,
  );

// Wall-clock metrics differ between any two runs; every other value must be equal.
const WALL_CLOCK = /time|per_second|elapsed|_ms$|_s$/;
const rowsWithoutClock = (rows: Record<string, number>[] | null) =>
  (rows ?? []).map((r) =>
    Object.fromEntries(Object.entries(r).filter(([k]) => !WALL_CLOCK.test(k))),
  );

async function step(page: Page, expected: number) {
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText(`step ${expected}`, {
    timeout: STEP_TIMEOUT,
  });
  await expect(page.getByTestId('status')).toHaveText('Ready', { timeout: STEP_TIMEOUT });
}

/** The step of the newest checkpoint this page saved, or null before its first save. */
const lastSavedStep = (page: Page) =>
  digest(page).then(
    (d) => d.step,
    () => null,
  );

/**
 * Save now in the Checkpoints view, then back to Train; resolves once the new row is listed and
 * the page holds the new checkpoint as its newest save. The row count alone is not enough: after a
 * reload the list may still be filling in when the count is taken, so an earlier run's row at the
 * same step could satisfy it before the save has ended (a clean-clone CI run failed that way).
 */
async function save(page: Page, atStep: number) {
  await page.getByTestId('nav-checkpoints').click();
  const rows = page.locator(`[data-testid="checkpoint-row"][data-step="${atStep}"]`);
  const before = await rows.count();
  const previous = await lastSavedStep(page);
  await page.getByTestId('save-now').click();
  await expect(rows).toHaveCount(before + 1, { timeout: 60_000 });
  // Each save here is at a later step than the page's previous one (or its first).
  expect(previous === null || previous < atStep).toBe(true);
  await expect.poll(() => lastSavedStep(page), { timeout: 60_000 }).toBe(atStep);
  await page.getByTestId('nav-train').click();
}

for (const { kind, query, lora } of KINDS)
  test(`${kind}: saves, survives a reload, restores and trains on as if never stopped`, async ({
    page,
  }) => {
    test.setTimeout(1_200_000);
    const errors = watchErrors(page);
    await page.goto(`/?test-hooks=1&${query}#train`);
    await loadBundledModel(page);

    await step(page, 1);
    await step(page, 2);
    await save(page, 2);
    const atTwo = await digest(page);
    expect(atTwo.step).toBe(2);
    const names = Object.keys(atTwo.tensorSha256);
    expect(names.length).toBeGreaterThan(0);
    if (lora) {
      expect(atTwo.adapter).toMatchObject({ r: 2, alpha: 4 });
      expect(names.every((n) => n.includes('lora_A') || n.includes('lora_B'))).toBe(true);
    } else {
      expect(atTwo.adapter).toBeNull();
      expect(names).toContain('model.embed_tokens.weight');
    }
    expect(names.some((n) => n.startsWith('optimizer.exp_avg_sq.'))).toBe(true);
    await step(page, 3);
    await save(page, 3);
    const straight = await digest(page);

    // A reload with nothing unsaved leaves without a question (no dialog listener needed: Playwright
    // would dismiss one, and the test below shows it is asked when it should be).
    await page.reload();
    await loadBundledModel(page);
    await page.getByTestId('nav-checkpoints').click();
    await page
      .locator('[data-testid="checkpoint-row"][data-step="2"] [data-testid="restore"]')
      .click();
    await expect(page.getByTestId('step-counter')).toContainText('step 2', {
      timeout: STEP_TIMEOUT,
    });
    await page.getByTestId('nav-train').click();
    await step(page, 3);
    await save(page, 3);
    const resumed = await digest(page);

    expect(resumed.step).toBe(3);
    expect(resumed.optimizerStep).toBe(straight.optimizerStep);
    expect(resumed.tensorSha256).toEqual(straight.tensorSha256);
    expect(resumed.metricsSoFar?.map((r) => r.step)).toEqual([1, 2, 3]);
    expect(rowsWithoutClock(resumed.metricsSoFar)).toEqual(rowsWithoutClock(straight.metricsSoFar));
    expect(errors).toEqual([]);
  });

test('a checkpoint of another model is refused by name before any question; leaving asks', async ({
  page,
}) => {
  test.setTimeout(900_000);
  await page.goto(`/?test-hooks=1&${RUN}#train`);
  await loadBundledModel(page);
  await step(page, 1);
  await save(page, 1);

  // The same checkpoint exported, its base model renamed and re-hashed: another model's checkpoint.
  await page.getByTestId('nav-checkpoints').click();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Export' }).first().click(),
  ]);
  const file = decodeCheckpointFile(new Uint8Array(readFileSync(await download.path())), 'x');
  const manifest = file.manifest as Record<string, unknown>;
  const other = { name: 'SmolLM2-135M', sha256: 'f'.repeat(64) };
  manifest.modelIdentity = other;
  manifest.referenceIdentity = other;
  manifest.run = { id: 'other-run', name: 'other model run' };
  const foreign = test.info().outputPath('foreign.grpockpt');
  writeFileSync(foreign, encodeCheckpointFile(manifest, file.safetensors));
  await page.locator('input[type=file][accept=".grpockpt"]').setInputFiles(foreign);
  const foreignRow = page
    .getByTestId('checkpoint-row')
    .filter({ hasText: 'other model run' })
    .first();
  await expect(foreignRow).toBeVisible({ timeout: 60_000 });

  await page.getByTestId('nav-train').click();
  await step(page, 2); // one unsaved step: Restore would ask to discard it, if it got that far
  await page.getByTestId('nav-checkpoints').click();
  await foreignRow.getByTestId('restore').click();
  const banner = page.getByTestId('banner').filter({ hasText: 'could not be restored' });
  await expect(banner).toContainText("'SmolLM2-135M'");
  await expect(banner).toContainText("'tiny-reasoner (bundled)'");
  await expect(page.getByTestId('discard-dialog')).toHaveCount(0);
  await expect(page.getByTestId('step-counter')).toContainText('step 2');

  // Leaving with step 2 unsaved: the browser asks. Dismissing keeps the page and its run.
  const asked = page.waitForEvent('dialog');
  await page.close({ runBeforeUnload: true });
  const dialog = await asked;
  expect(dialog.type()).toBe('beforeunload');
  await dialog.dismiss();
  expect(page.isClosed()).toBe(false);
  await expect(page.getByTestId('step-counter')).toContainText('step 2');
});
