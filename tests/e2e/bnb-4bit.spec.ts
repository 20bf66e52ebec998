// Issue 37 in the page: a bitsandbytes 4-bit (NF4, double-quantised) Hugging Face folder as
// transformers saves one (tests/fixtures/bnb4bit/make_bnb_folder.py: packed uint8 codes, absmax,
// quant_map, nested statistics and quant_state entries) is picked, loads as a 4-bit base without
// being widened, trains two LoRA steps, and its merged export is a BF16 folder (dequantised base
// + B·A, as PEFT's merge); a GPTQ folder is refused with the method's name before any weight is read.
// In the Recipes view a stage that would fully fine-tune the 4-bit model is refused, and a LoRA
// stage trains on it as stored (its base stays NF4).
import { readFileSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { parseSafetensorsHeader } from '../../src/formats/safetensors';
import { BNB_NF4_PEAK_BYTES, BNB_RUN_OPTIONS } from './support/bnb-plan';
import { pickLocalFolder, readHistory, takeSteps } from './support/local-folder';
import { unzipStored } from './support/unzip';
import { watchErrors } from './support/watch-errors';

const STEP_TIMEOUT = 120_000;
const NF4_FOLDER = 'tests/fixtures/bnb4bit/nf4-nested';
const GPTQ_FOLDER = 'tests/fixtures/bnb4bit/gptq';
// No dtype: the default (float32) keeps the checkpoint's 4-bit base, as transformers keeps a
// bnb-4bit model 4-bit whatever torch_dtype says. The byte-level test tokenizer spells a Countdown
// prompt in ~550 tokens.
const TINY_RUN = `test-hooks=1&${Object.entries(BNB_RUN_OPTIONS)
  .map(([k, v]) => `${k}=${v}`)
  .join('&')}`;

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

test('a bitsandbytes 4-bit folder trains two LoRA steps and exports a BF16 merged model; GPTQ is refused by name; a full recipe stage on it too', async ({
  page,
}) => {
  test.setTimeout(300_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}#train`);

  // Another quantisation method: refused when loading, with its name and what does load.
  await pickLocalFolder(page, GPTQ_FOLDER, 'gptq');
  await page.getByTestId('load-model').click();
  const refusal = page.getByRole('alert').filter({ hasText: /gptq/i });
  await expect(refusal).toBeVisible({ timeout: STEP_TIMEOUT });
  await expect(refusal).toContainText(/bitsandbytes/i);

  // The plan counts the 4-bit base before any weight is read (config.json's quantization_config):
  // the unit-level plan's number (tests/unit/nf4-base.test.ts checks it against planRunMemory; a
  // dequantised float32 base would plan more).
  await pickLocalFolder(page, NF4_FOLDER, 'nf4-nested');
  const nf4Peak = BNB_NF4_PEAK_BYTES;
  const plan = page.getByTestId('memory-plan');
  await expect(plan).toHaveAttribute('data-peak-bytes', String(nf4Peak), { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toContainText('nf4-nested', {
    timeout: STEP_TIMEOUT,
  });
  await expect(page.getByTestId('model-stored')).toHaveText('4-bit (bitsandbytes NF4) checkpoint');
  // The run built on the loaded weights plans the same 4-bit base.
  await expect(plan).toHaveAttribute('data-peak-bytes', String(nf4Peak));
  await takeSteps(page, 2);
  const history = await readHistory(page);
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

  // Recipes on the 4-bit model: a stage that would fully fine-tune it is refused before it
  // starts, naming the stage and the way out; the SFT form starts with LoRA on.
  await page.getByTestId('nav-recipes').click();
  await page.getByTestId('recipe-choice-paste').check();
  const fullStage = {
    name: 'full-rl',
    stages: [{ kind: 'grpo', name: 'rl', options: { steps: 1, numGenerations: 2 } }],
  };
  await page.getByTestId('recipe-json').fill(JSON.stringify(fullStage));
  await expect(page.getByTestId('recipe-json-ok')).toContainText('1 stage');
  await page.getByTestId('recipe-start').click();
  const refused = page.getByRole('alert').filter({ hasText: "Stage 'rl' would fully fine-tune" });
  await expect(refused).toBeVisible({ timeout: STEP_TIMEOUT });
  await expect(refused).toContainText('a 4-bit (NF4) quantised checkpoint');
  await expect(refused).toContainText('Turn LoRA (usePeft) on');
  await expect(page.getByTestId('recipe-row')).toHaveCount(0); // nothing trained
  // A LoRA stage trains on the file's 4-bit codes: the recipe streams the loaded model into the
  // stage as stored (it used to widen it to f32 first, and the stage stored that copy).
  const loraStage = {
    name: 'qlora-sft',
    stages: [
      {
        kind: 'sft',
        name: 'tune',
        data: { jsonl: JSON.stringify({ prompt: '1+1=', completion: '2' }) },
        options: { maxSteps: 1, usePeft: true, loraR: 2, loraAlpha: 4 },
      },
    ],
  };
  await page.getByTestId('recipe-json').fill(JSON.stringify(loraStage));
  await expect(page.getByTestId('recipe-plan')).toHaveAttribute('data-fits', 'true');
  await page.getByTestId('recipe-start').click();
  await expect(page.getByTestId('recipe-status')).toHaveText('finished', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('recipe-log')).toContainText(
    /stage 1 'tune' \(sft\) starts after step 0: 1 steps; memory plan [\d.]+ (KiB|MiB) at peak, base stored as nf4/,
  );
  await page.getByTestId('recipe-choice-sft').check();
  await expect(page.getByTestId('recipe-sft-lora')).toBeChecked();
  await page.getByTestId('recipe-sft-lora').uncheck();
  await expect(page.getByTestId('recipe-sft-needs-lora')).toContainText(
    'a full fine-tune cannot train it',
  );
  expect(errors).toEqual([]);
});
