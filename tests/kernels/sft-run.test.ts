// The SFT stage (src/train/sft.ts SftRun) end to end on Node WebGPU with a tiny random model: TRL's
// metrics per optimizer step (loss falls on a repeated tiny set, num_tokens counts every sequence
// token, epoch and learning rate follow the data and the schedule), the seeded per-epoch order,
// and exact resume: 4 steps in one go equal 2 steps, a checkpoint through the file codec, and 2
// more, bit for bit. LoRA (usePeft): the base stays frozen, the adapters' first gradient is the
// chain rule applied to the full fine-tune's gradient G (dB = s·G·Aᵀ, dA = 0 while B = 0), a
// checkpoint holds the adapters only and resumes exactly, and the stage's weights are merged.
import { describe, expect, it } from 'vitest';
import { checkpointFromFiles, checkpointToFiles } from '../../src/train/checkpoint';
import { epochOrder, SftRun, tokenizeSftDataset, type SftStepReport } from '../../src/train/sft';
import { resolveSftConfig } from '../../src/train/sft-config';
import { parseSftJsonl } from '../../src/train/sft-data';
import { loadTokenizer } from '../../src/formats/tokenizer';
import { initLlamaWeights } from '../../src/model/init';
import { tinyHfFolder, tokenizerFiles } from '../support/tiny-hf-model';
import { testEngine } from './harness';
import { EXP_AVG_PREFIX } from '../../src/optim/adamw';
import { loraAName, loraBName, loraScaling, projectionPath } from '../../src/core/lora';
import { CHECKPOINT_FILES } from '../../src/train/checkpoint';

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

  it('LoRA: base frozen; first gradient dB = s·G·Aᵀ of the full fine-tune, dA = 0; adapter-only checkpoint resumes exactly', async () => {
    // No clipping (the two runs' norms differ) and no decay: after one step AdamW's first moment
    // is (1 − β1)·g for every trained tensor, so the moments read back are the gradients, scaled.
    const common = {
      learning_rate: 1e-2,
      per_device_train_batch_size: 2,
      max_steps: 3,
      max_grad_norm: 0,
      lr_scheduler_type: 'constant',
      seed: 3,
    };
    const loraOptions = {
      ...common,
      use_peft: true,
      lora_r: 4,
      lora_alpha: 8,
      lora_target_modules: 'q_proj,down_proj',
    };
    const full = await setup(2, common);
    const lora = await setup(2, loraOptions);
    const fullRun = full.make();
    const loraRun = lora.make();
    const config = lora.modelConfig;
    const adapters0 = await loraRun.policy.readAdapters();
    const base0 = await loraRun.policy.readParameters();
    const fullStep = await fullRun.step();
    const loraStep = await loraRun.step();
    // B = 0: the adapted model is the base model, so the same loss.
    expect(loraStep.metrics.loss).toBeCloseTo(fullStep.metrics.loss, 5);
    const moments = (payload: Awaited<ReturnType<typeof loraRun.snapshot>>) =>
      new Map(
        payload.tensors
          .filter((t) => t.name.startsWith(EXP_AVG_PREFIX))
          .map((t) => [t.name.slice(EXP_AVG_PREFIX.length), t.data]),
      );
    const g = moments(await fullRun.snapshot());
    const loraPayload = await loraRun.snapshot();
    const m = moments(loraPayload);
    fullRun.destroy();
    // The checkpoint's trained tensors are the adapters, q_proj and down_proj of every layer.
    const trained = loraPayload.tensors.filter((t) => !t.name.startsWith('optimizer.'));
    expect(trained.map((t) => t.name)).toEqual(
      [...Array(config.numLayers).keys()].flatMap((l) =>
        ['self_attn.q_proj', 'mlp.down_proj'].flatMap((p) => [
          loraAName(`model.layers.${l}.${p}`),
          loraBName(`model.layers.${l}.${p}`),
        ]),
      ),
    );
    expect(checkpointToFiles(loraPayload).has(CHECKPOINT_FILES.adapters)).toBe(true);
    expect(checkpointToFiles(loraPayload).has(CHECKPOINT_FILES.weights)).toBe(false);
    const s = loraScaling({ r: 4, alpha: 8, useRslora: false });
    let sumSq = 0;
    for (let l = 0; l < config.numLayers; l++) {
      for (const projection of ['q_proj', 'down_proj'] as const) {
        const path = projectionPath(l, projection);
        const G = g.get(`${path}.weight`)!;
        const A = adapters0.get(loraAName(path))!;
        const dB = m.get(loraBName(path))!;
        const r = 4;
        const inDim = A.length / r;
        const outDim = G.length / inDim;
        let worst = 0;
        let scale = 0;
        for (let o = 0; o < outDim; o++) {
          for (let k = 0; k < r; k++) {
            let sum = 0;
            for (let i = 0; i < inDim; i++) sum += G[o * inDim + i] * A[k * inDim + i];
            const expected = s * sum;
            worst = Math.max(worst, Math.abs(dB[o * r + k] - expected));
            scale = Math.max(scale, Math.abs(expected));
            sumSq += (dB[o * r + k] / 0.1) ** 2;
          }
        }
        expect(scale, path).toBeGreaterThan(0);
        expect(worst, path).toBeLessThanOrEqual(1e-4 * scale);
        expect(m.get(loraAName(path))!.every((v) => v === 0)).toBe(true);
      }
    }
    // The gradient norm is the adapters' (pre-clip) norm.
    expect(loraStep.metrics.grad_norm).toBeCloseTo(Math.sqrt(sumSq), 3);
    // Two more steps: the base never moves; the merged weights differ where adapters are only.
    await loraRun.step();
    await loraRun.step();
    const base = await loraRun.policy.readParameters();
    for (const [name, w] of base0) expect(base.get(name), name).toEqual(w);
    const merged = await loraRun.readWeights();
    expect(merged.get('model.layers.0.self_attn.q_proj.weight')).not.toEqual(
      base0.get('model.layers.0.self_attn.q_proj.weight'),
    );
    expect(merged.get('model.layers.0.self_attn.k_proj.weight')).toEqual(
      base0.get('model.layers.0.self_attn.k_proj.weight'),
    );
    const expectedAdapters = await loraRun.policy.readAdapters();
    const history = loraRun.history.map((r) => r.metrics);
    loraRun.destroy();

    // Resume from the step-1 checkpoint (through the files): steps 2 and 3 again, bit for bit.
    const { payload } = checkpointFromFiles((name) => checkpointToFiles(loraPayload).get(name)!);
    const resumed = lora.make();
    resumed.restore(payload);
    await resumed.step();
    await resumed.step();
    // (The files keep no metrics history: the resumed run has steps 2 and 3.)
    expect(resumed.history.map((r) => r.metrics)).toEqual(history.slice(1));
    const adapters = await resumed.policy.readAdapters();
    for (const [name, a] of expectedAdapters) expect(adapters.get(name), name).toEqual(a);
    // A full fine-tune cannot continue an adapter checkpoint.
    const fullAgain = full.make();
    expect(() => fullAgain.restore(payload)).toThrow(/missing or misshapen/);
    fullAgain.destroy();
    resumed.destroy();
  });
});
