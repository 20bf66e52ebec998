// LoRA in the browser, end to end, on the built app in Chromium (WebGPU on SwiftShader):
// 1. Before loading, the memory plan has its switches beside it (LoRA on/off and rank, dtype,
//    gradient checkpointing); each edits the same draft as the Trainer options form and the plan's
//    numbers follow at once (a 4-bit nf4 base below bf16, and refused by name without LoRA).
// 2. The bundled model trains with LoRA for 3 steps (the logged reward is not the same every step),
//    the adapter is exported as the Checkpoints view downloads it (a PEFT folder in a .zip), loaded
//    back through the model panel, and fixed completions get the same log-probs, bit for bit, as
//    before the export (scored in the worker through the update's kernels: ?test-hooks=1); the
//    merged export (a Hugging Face folder) loads as a model of its own and scores them within
//    MERGED_ATOL.
import { expect, test, type Page } from '@playwright/test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unzipStored } from './support/unzip';
import { watchErrors } from './support/watch-errors';

/** Merged weights vs base + adapters: f32 rounding of two orders of the same sums (log-probs). */
const MERGED_ATOL = 1e-4;

/** Steps on SwiftShader take seconds each; loading the model and compiling pipelines more. */
const STEP_TIMEOUT = 300_000;
// Small enough for SwiftShader, long enough (80 tokens, the model's intended length) for the
// bundled model to finish some answers, so rewards differ within a group and between steps.
const RUN = 'perStepPrompts=2&numGenerations=4&maxCompletionLength=80&evalPrompts=1&seed=3';

// Fixed prompt + completion token ids of the bundled model's vocabulary (449 ids, 128 positions):
// two rows of different lengths, scored teacher-forced.
const PROMPTS = [
  [1, 17, 40, 23, 61, 9],
  [1, 33, 8, 52],
];
const COMPLETIONS = [
  [70, 12, 95, 31, 44, 2],
  [101, 5, 64],
];

test.use({ serviceWorkers: 'block' });
test.describe.configure({ mode: 'serial' });

interface Hooks {
  history(): { step: number; metrics: Record<string, number> }[];
  logProbs(prompts: number[][], completions: number[][]): Promise<Float32Array[]>;
}

const logProbs = (page: Page) =>
  page.evaluate(
    async ([prompts, completions]) => {
      const hooks = (window as unknown as { __grpoTest: Hooks }).__grpoTest;
      return (await hooks.logProbs(prompts, completions)).map((row) => Array.from(row));
    },
    [PROMPTS, COMPLETIONS],
  );

const peakBytes = async (page: Page) =>
  Number(await page.getByTestId('memory-plan').getAttribute('data-peak-bytes'));

/** Waits until the plan's peak differs from `before` and returns it. */
async function planChanged(page: Page, before: number): Promise<number> {
  await expect.poll(() => peakBytes(page)).not.toBe(before);
  return peakBytes(page);
}

test('the memory plan shows its LoRA / dtype / checkpointing switches before loading, and follows them', async ({
  page,
}) => {
  const errors = watchErrors(page);
  await page.goto(`/?${RUN}#train`);
  const plan = page.getByTestId('memory-plan');
  await expect(plan).toContainText('fits', { timeout: 60_000 });
  await expect(page.getByTestId('model-loaded')).toHaveCount(0);
  const switches = page.getByTestId('memory-switches');
  await expect(switches).toBeVisible();
  const full = await peakBytes(page);
  expect(full).toBeGreaterThan(0);
  await expect(plan.getByTestId('memory-categories')).toContainText('AdamW moments');

  // LoRA on: only the adapters get gradients and AdamW moments, so the plan shrinks; the options
  // form shows the same draft.
  await expect(page.locator('#plan-loraR')).toBeDisabled();
  await page.locator('#plan-usePeft').check();
  const lora16 = await planChanged(page, full);
  expect(lora16).toBeLessThan(full);
  await expect(page.locator('#opt-usePeft')).toBeChecked();
  await expect(page.locator('#plan-loraR')).toBeEnabled();
  await expect(page.locator('#plan-loraR')).toHaveValue('16');

  // A smaller rank: smaller adapters. The form's field follows, and the form drives the switch.
  await page.locator('#plan-loraR').fill('4');
  const lora4 = await planChanged(page, lora16);
  expect(lora4).toBeLessThan(lora16);
  await page.getByText('LoRA (PEFT)', { exact: true }).click(); // unfold the form's group
  await expect(page.locator('#opt-loraR')).toHaveValue('4');
  await page.locator('#opt-usePeft').uncheck();
  await expect(page.locator('#plan-usePeft')).not.toBeChecked();
  expect(await planChanged(page, lora4)).toBe(full);
  await page.locator('#plan-usePeft').check();
  expect(await planChanged(page, full)).toBe(lora4);

  // Gradient checkpointing keeps one input per layer instead of every activation.
  await page.locator('#plan-gradientCheckpointing').check();
  const checkpointed = await planChanged(page, lora4);
  expect(checkpointed).toBeLessThan(lora4);
  await page.getByText('Memory', { exact: true }).click();
  await expect(page.locator('#opt-gradientCheckpointing')).toBeChecked();
  await page.locator('#plan-gradientCheckpointing').uncheck();
  expect(await planChanged(page, checkpointed)).toBe(lora4);

  // The frozen base weights in 16 bits take half the bytes of float32.
  const dtype = page.locator('#plan-dtype');
  await dtype.selectOption('float32');
  await expect.poll(() => peakBytes(page)).toBeGreaterThanOrEqual(lora4);
  const f32 = await peakBytes(page);
  await dtype.selectOption('bfloat16');
  const bf16 = await planChanged(page, f32);
  expect(bf16).toBeLessThan(f32);
  // 4-bit NF4 projections (QLoRA) take less again; without LoRA the page says why it cannot be.
  await dtype.selectOption('nf4');
  const nf4 = await planChanged(page, bf16);
  expect(nf4).toBeLessThan(bf16);
  await expect(page.getByTestId('nf4-needs-lora')).toHaveCount(0);
  await page.locator('#plan-usePeft').uncheck();
  await expect(page.getByTestId('nf4-needs-lora')).toContainText('needs usePeft (LoRA)');
  await page.locator('#plan-usePeft').check();
  await expect(page.getByTestId('nf4-needs-lora')).toHaveCount(0);
  expect(await peakBytes(page)).toBe(nf4);
  console.log(
    `plan peak bytes: full ${full}, LoRA r16 ${lora16}, r4 ${lora4}, r4 + checkpointing ${checkpointed}, r4 float32 ${f32}, r4 bfloat16 ${bf16}, r4 nf4 ${nf4}`,
  );
  expect(errors).toEqual([]);
});

test('LoRA trains 3 steps, the adapter exports and loads back with the same log-probs', async ({
  page,
}) => {
  test.setTimeout(1_800_000);
  const errors = watchErrors(page);
  const work = mkdtempSync(join(tmpdir(), 'lora-e2e-'));
  try {
    await page.goto(`/?test-hooks=1&${RUN}&usePeft=true&loraR=4&loraAlpha=8#train`);
    await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
    await expect(page.locator('#plan-usePeft')).toBeChecked();
    await page.getByTestId('load-model').click();
    await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
    const base = await logProbs(page);

    for (let step = 1; step <= 3; step++) {
      const started = Date.now();
      await page.getByTestId('step').click();
      await expect(page.getByTestId('step-counter')).toContainText(`step ${step}`, {
        timeout: STEP_TIMEOUT,
      });
      await expect(page.getByTestId('status')).toHaveText('Ready', { timeout: STEP_TIMEOUT });
      console.log(`LoRA step ${step}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    const history = await page.evaluate(() =>
      (window as unknown as { __grpoTest: Hooks }).__grpoTest.history(),
    );
    const rewards = history.map((r) => r.metrics.reward);
    console.log(`rewards by step: ${rewards.join(', ')}`);
    expect(history.map((r) => r.step)).toEqual([1, 2, 3]);
    expect(rewards.every((r) => Number.isFinite(r))).toBe(true);
    // The reward moves: not the same value at every step.
    expect(new Set(rewards).size).toBeGreaterThan(1);

    const trained = await logProbs(page);
    expect(trained.map((r) => r.length)).toEqual(COMPLETIONS.map((c) => c.length));
    expect(trained.flat().every((x) => Number.isFinite(x) && x < 0)).toBe(true);
    // The adapter moved away from its zero-B start (else the round trip below proves nothing).
    expect(trained).not.toEqual(base);

    // Export: the Checkpoints view's adapter button downloads a PEFT folder as a .zip.
    await page.getByTestId('nav-checkpoints').click();
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Adapter (PEFT, .zip)' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('grpo-step-3-adapter.zip');
    const entries = unzipStored(new Uint8Array(readFileSync(await download.path())));
    const paths: string[] = [];
    for (const [name, bytes] of entries) {
      const file = join(work, name.split('/').pop()!);
      writeFileSync(file, bytes);
      paths.push(file);
    }
    expect(paths.map((p) => p.split('/').pop()).sort()).toEqual([
      'adapter_config.json',
      'adapter_model.safetensors',
    ]);
    const adapterConfig = JSON.parse(
      new TextDecoder().decode(entries.get('grpo-step-3-adapter/adapter_config.json')),
    );
    expect(adapterConfig).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8 });

    // Import through the model panel: the 3 unsaved steps are discarded on purpose, and a new run
    // starts at step 0 from the adapter with its LoRA options in the form.
    await page.getByTestId('nav-train').click();
    await page.locator('#plan-usePeft').uncheck(); // the import sets it back from the adapter
    await page.getByTestId('adapter-input').setInputFiles(paths);
    const dialog = page.getByRole('alertdialog', { name: 'Discard 3 steps not saved?' });
    await expect(dialog).toContainText('Loading an adapter starts a new run from it');
    await dialog.getByRole('button', { name: 'Discard' }).click();
    await expect(page.getByTestId('step-counter')).toContainText('step 0', {
      timeout: STEP_TIMEOUT,
    });
    await expect(page.locator('#plan-usePeft')).toBeChecked();
    await expect(page.locator('#plan-loraR')).toHaveValue('4');
    await expect(page.getByTestId('banner')).toHaveCount(0);

    const reimported = await logProbs(page);
    console.log(`log-probs trained: ${JSON.stringify(trained)}; re-imported equal`);
    expect(reimported).toEqual(trained);

    // The merged export (W + s·B·A folded into the weights) loads as a plain model folder and
    // scores the same completions as the trained adapters. Not bit for bit: x·(W + s·BA)ᵀ and
    // x·Wᵀ + s·(x·Aᵀ)·Bᵀ round differently in f32; MERGED_ATOL bounds that (the adapters moved
    // the log-probs by far more: see the `not.toEqual(base)` above).
    const [merged] = await Promise.all([
      page.waitForEvent('download'),
      (async () => {
        await page.getByTestId('nav-checkpoints').click();
        await page.getByRole('button', { name: 'Merged model (HF, .zip)' }).click();
      })(),
    ]);
    const mergedDir = join(work, 'merged');
    mkdirSync(mergedDir);
    const mergedPaths: string[] = [];
    for (const [name, bytes] of unzipStored(new Uint8Array(readFileSync(await merged.path())))) {
      const file = join(mergedDir, name.split('/').pop()!);
      writeFileSync(file, bytes);
      mergedPaths.push(file);
    }
    expect(mergedPaths.map((p) => p.split('/').pop())).toContain('model.safetensors');
    await page.getByTestId('nav-train').click();
    await page.locator('#plan-usePeft').uncheck(); // the merged folder is a full model
    await page.locator('input[name="model-source"][value="files"]').check();
    await page
      .locator('input[type="file"][multiple]:not([webkitdirectory])')
      .first()
      .setInputFiles(mergedPaths);
    await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
    await page.getByTestId('load-model').click();
    // Picked as files (no folder): named after its config (src/app/lib/model-name.ts).
    await expect(page.getByTestId('model-loaded')).toContainText('LlamaForCausalLM (', {
      timeout: STEP_TIMEOUT,
    });
    const fromMerged = await logProbs(page);
    expect(fromMerged.map((r) => r.length)).toEqual(trained.map((r) => r.length));
    const worst = Math.max(...fromMerged.flat().map((x, i) => Math.abs(x - trained.flat()[i])));
    console.log(`merged export: max |Δ log-prob| ${worst.toExponential(2)}`);
    expect(worst).toBeLessThanOrEqual(MERGED_ATOL);
    expect(errors).toEqual([]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
