// The SFT stage (src/train/sft.ts SftRun) end to end on Node WebGPU with a tiny random model: TRL's
// metrics per optimizer step (loss falls on a repeated tiny set, num_tokens counts every sequence
// token, epoch and learning rate follow the data and the schedule), the seeded per-epoch order,
// and exact resume: 4 steps in one go equal 2 steps, a checkpoint through the file codec, and 2
// more, bit for bit.
import { describe, expect, it } from 'vitest';
import { checkpointFromFiles, checkpointToFiles } from '../../src/train/checkpoint';
import { epochOrder, SftRun, tokenizeSftDataset, type SftStepReport } from '../../src/train/sft';
import { resolveSftConfig } from '../../src/train/sft-config';
import { parseSftJsonl } from '../../src/train/sft-data';
import { loadTokenizer } from '../../src/formats/tokenizer';
import { initLlamaWeights } from '../../src/model/init';
import { tinyHfFolder, tokenizerFiles } from '../support/tiny-hf-model';
import { testEngine } from './harness';

const DATA = [
  {
    prompt: 'Using the numbers [3, 5], create an equation that equals 8.',
    completion: ' <think> 3 + 5 = 8 </think> <answer> 3 + 5 </answer>',
  },
  {
    prompt: 'Using the numbers [2, 4], create an equation that equals 8.',
    completion: ' <answer> 2 * 4 </answer>',
  },
  {
    prompt: 'Using the numbers [7, 1], create an equation that equals 6.',
    completion: ' <think> 7 - 1 = 6 </think>',
  },
]
  .map((r) => JSON.stringify(r))
  .join('\n');

async function setup(rows: number, options: Record<string, unknown>) {
  const engine = await testEngine();
  const { config: modelConfig } = await tinyHfFolder();
  const weights = initLlamaWeights(modelConfig, 5);
  const tokenizer = await loadTokenizer(tokenizerFiles);
  const config = resolveSftConfig(options);
  const parsed = parseSftJsonl(DATA.split('\n').slice(0, rows).join('\n'));
  expect(parsed.issues).toEqual([]);
  const { examples, dropped } = tokenizeSftDataset(parsed.rows, tokenizer, config);
  expect(dropped).toEqual([]);
  const make = () =>
    new SftRun({
      engine,
      runId: 'sft-test',
      config,
      model: { config: modelConfig, weights },
      examples,
      padTokenId: tokenizer.padTokenId,
    });
  return { make, examples, modelConfig };
}

describe('SftRun', { timeout: 600_000 }, () => {
  it('TRL metrics per step; the loss falls on a repeated tiny set', async () => {
    const { make, examples } = await setup(2, {
      learning_rate: 1e-2,
      per_device_train_batch_size: 2,
      max_steps: 6,
      lr_scheduler_type: 'constant',
    });
    const run = make();
    const reports: SftStepReport[] = [];
    while (!run.finished) reports.push(await run.step());
    const tokensPerStep = examples.reduce((s, e) => s + e.tokens, 0);
    reports.forEach((r, i) => {
      expect(Object.keys(r.metrics).sort()).toEqual(
        ['epoch', 'grad_norm', 'learning_rate', 'loss', 'mean_token_accuracy', 'num_tokens'].sort(),
      );
      for (const v of Object.values(r.metrics)) expect(Number.isFinite(v)).toBe(true);
      expect(r.skipped).toBeNull();
      expect(r.metrics.num_tokens).toBe(tokensPerStep * (i + 1));
      expect(r.metrics.epoch).toBe(i + 1); // the whole set each step
      expect(r.metrics.learning_rate).toBe(1e-2);
      expect(r.metrics.mean_token_accuracy).toBeGreaterThanOrEqual(0);
      expect(r.metrics.mean_token_accuracy).toBeLessThanOrEqual(1);
    });
    const losses = reports.map((r) => r.metrics.loss);
    console.log(`SFT losses: ${losses.map((l) => l.toFixed(4)).join(' ')}`);
    expect(losses[5]).toBeLessThan(losses[0] - 0.5);
    expect(reports[5].metrics.mean_token_accuracy).toBeGreaterThan(
      reports[0].metrics.mean_token_accuracy,
    );
    run.destroy();
  });

  it('the epoch order is a seeded permutation, new each epoch', () => {
    const a = epochOrder(42, 0, 10);
    expect([...a].sort((x, y) => x - y)).toEqual([...Array(10).keys()]);
    expect(epochOrder(42, 0, 10)).toEqual(a);
    expect(epochOrder(42, 1, 10)).not.toEqual(a);
    expect(epochOrder(43, 0, 10)).not.toEqual(a);
  });

  it('resume is exact: 4 steps = 2 steps, checkpoint files, restore, 2 steps (bit for bit)', async () => {
    // 3 examples, 2 per step: steps take 2, 1 (end of epoch 0), 2, 1 examples; a linear schedule
    // with warmup, so the learning rate of each step depends on the restored optimizer step.
    const options = {
      learning_rate: 1e-2,
      per_device_train_batch_size: 2,
      max_steps: 4,
      warmup_steps: 1,
      weight_decay: 0.1,
      seed: 7,
    };
    const { make } = await setup(3, options);
    const straight = make();
    const rows: SftStepReport[] = [];
    for (let s = 0; s < 4; s++) rows.push(await straight.step());
    expect(rows.map((r) => r.metrics.epoch)).toEqual([2 / 3, 1, 1 + 2 / 3, 2]);
    // transformers' linear warmup then decay: 0, lr, lr·2/3, lr/3.
    [0, 1e-2, 1e-2 * (2 / 3), 1e-2 / 3].forEach((lr, i) =>
      expect(rows[i].metrics.learning_rate).toBeCloseTo(lr, 12),
    );
    const expected = await straight.policy.readParameters();
    straight.destroy();

    const first = make();
    await first.step();
    await first.step();
    const files = checkpointToFiles(await first.snapshot());
    first.destroy();
    const { payload } = checkpointFromFiles((name) => files.get(name)!);
    const resumed = make();
    resumed.restore(payload);
    expect(resumed.stepCount).toBe(2);
    const after = [await resumed.step(), await resumed.step()];
    expect(after.map((r) => r.metrics)).toEqual(rows.slice(2).map((r) => r.metrics));
    const weights = await resumed.policy.readParameters();
    for (const [name, w] of expected) expect(weights.get(name), name).toEqual(w);
    // Other data is refused.
    const other = await setup(2, options);
    const wrong = other.make();
    expect(() => wrong.restore(payload)).toThrow(/other data/);
    wrong.destroy();
    resumed.destroy();
  });
});
