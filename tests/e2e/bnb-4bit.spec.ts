// Issue 37 in the page: a bitsandbytes 4-bit (NF4, double-quantised) Hugging Face folder as
// transformers saves one (tests/fixtures/bnb4bit/make_bnb_folder.py: packed uint8 codes, absmax,
// quant_map, nested statistics and quant_state entries) is picked, loads as a 4-bit base without
// being widened, trains two LoRA steps, and its merged export is a BF16 folder (dequantised base
// + B·A, as PEFT's merge); a GPTQ folder is refused with the method's name before any weight is read.
import { readFileSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { parseSafetensorsHeader } from '../../src/formats/safetensors';
import { unzipStored } from './support/unzip';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 120_000;
const NF4_FOLDER = 'tests/fixtures/bnb4bit/nf4-nested';
const GPTQ_FOLDER = 'tests/fixtures/bnb4bit/gptq';
// dtype 'auto' keeps the checkpoint's 4-bit base (float32 or bfloat16 would dequantise it); the
// byte-level test tokenizer spells a Countdown prompt in ~550 tokens.
const TINY_RUN =
  'test-hooks=1&perStepPrompts=1&numGenerations=2&maxCompletionLength=4&maxPromptLength=640&evalPrompts=1&usePeft=true&loraR=2&loraAlpha=4&dtype=auto';

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

test('a bitsandbytes 4-bit folder trains two LoRA steps and exports a BF16 merged model; GPTQ is refused by name', async ({
  page,
}) => {
  test.setTimeout(300_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}#train`);
  await page.getByRole('radio', { name: 'Local folder' }).check();
  const folderInput = page.locator('input[type="file"][webkitdirectory]');

  // Another quantisation method: refused when loading, with its name and what does load.
  await folderInput.setInputFiles(GPTQ_FOLDER);
  await expect(page.getByTestId('model-name')).toHaveText('gptq', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  const refusal = page.getByRole('alert').filter({ hasText: /gptq/i });
  await expect(refusal).toBeVisible({ timeout: STEP_TIMEOUT });
  await expect(refusal).toContainText(/bitsandbytes/i);

  await folderInput.setInputFiles(NF4_FOLDER);
  await expect(page.getByTestId('model-name')).toHaveText('nf4-nested', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toContainText('nf4-nested', {
    timeout: STEP_TIMEOUT,
  });

  for (const n of [1, 2]) {
    await page.getByTestId('step').click();
    await expect(page.getByTestId('step-counter')).toContainText(`step ${n}`, {
      timeout: STEP_TIMEOUT,
    });
  }
  const history = (await page.evaluate(() =>
    (globalThis as unknown as { __grpoTest: { history: () => unknown } }).__grpoTest.history(),
  )) as { metrics: Record<string, number> }[];
  expect(history).toHaveLength(2);
  for (const row of history) expect(Number.isFinite(row.metrics.loss)).toBe(true);

  await page.getByTestId('nav-checkpoints').click();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Merged model (HF, .zip)' }).click(),
  ]);
  const entries = unzipStored(new Uint8Array(readFileSync(await download.path())));
  const name = (suffix: string) => [...entries.keys()].find((n) => n.endsWith(suffix))!;
  const config = JSON.parse(new TextDecoder().decode(entries.get(name('/config.json'))));
  expect(config.torch_dtype).toBe('bfloat16');
  // The merged folder is a plain model: no quantisation config for transformers to apply.
  expect(config.quantization_config).toBeUndefined();
  const header = parseSafetensorsHeader(
    entries.get(name('/model.safetensors'))!,
    'model.safetensors',
  );
  const projections = [...header.entries].filter(([n]) => n.endsWith('_proj.weight'));
  expect(projections.length).toBe(7);
  for (const [, entry] of projections) expect(entry.dtype).toBe('BF16');
  expect(errors).toEqual([]);
});
