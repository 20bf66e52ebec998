// The one stage interface (src/train/stage.ts TrainingStage) on Node WebGPU with a tiny random model:
// a GRPO Run and an SftRun are driven by the same function, which knows nothing but the interface
// (step, runUntil, save with the hook it passed, snapshot, restore, readWeights, history). For both,
// half the steps, a save through the hook, a fresh stage restored from the saved payload and the
// other half equal the uninterrupted run: each step's metrics, the history, and every weight, bit
// for bit. A stage refuses the other kind's checkpoint.
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/grpo/config';
import { mergeLoraWeights } from '../../src/export/peft-adapter';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import type { MetricsRow } from '../../src/core/metrics-row';
import { Run } from '../../src/train/run';
import { SftRun, tokenizeSftDataset } from '../../src/train/sft';
import { resolveSftConfig } from '../../src/train/sft-config';
import { parseSftJsonl } from '../../src/train/sft-data';
import type { StageHooks, StageStepResult, TrainingStage } from '../../src/train/stage';
import { loadTokenizer } from '../../src/formats/tokenizer';
import { initLlamaWeights } from '../../src/model/init';
import type { CheckpointPayload } from '../../src/storage/checkpoints';
import { tinyHfFolder, tokenizerFiles } from '../support/tiny-hf-model';
import { testEngine } from './harness';

type StageFactory = (hooks: StageHooks) => TrainingStage;

/** A metrics row without the wall-clock metrics (they differ run to run). */
const row = ({ step, metrics }: MetricsRow): MetricsRow => ({
  step,
  metrics: Object.fromEntries(
    Object.entries(metrics).filter(([k]) => k !== 'step_time' && k !== 'tokens_per_second'),
  ),
});
const result = (r: StageStepResult) => ({ ...row(r), skipped: r.skipped });

/**
 * Uninterrupted vs saved at half way and restored into a fresh stage, through TrainingStage only.
 * Returns the payload saved half way (for the cross-kind check).
 */
async function saveRestoreEqualsStraight(make: StageFactory): Promise<CheckpointPayload> {
  const heard: StageStepResult[] = [];
  const straight = make({ onStep: (r) => void heard.push(r) });
  const total = straight.totalSteps;
  expect(total).toBe(4);
  const rows: StageStepResult[] = [];
  while (!straight.finished) rows.push(await straight.step());
  expect(rows.map((r) => r.step)).toEqual([1, 2, 3, 4]);
  expect(rows.every((r) => r.skipped === null)).toBe(true);
  // Both loops report TRL's grad_norm: the updates were not empty (the GRPO rewards varied).
  expect(rows.filter((r) => r.metrics.grad_norm > 0)).toHaveLength(4);
  // onStep hears the very result step() returns, and the history keeps its rows.
  expect(heard).toEqual(rows);
  expect(straight.history.map(row)).toEqual(rows.map(row));
  const weights = await straight.readWeights();
  straight.destroy();

  const saved: { payload: CheckpointPayload; automatic: boolean }[] = [];
  const first = make({
    onCheckpoint: (payload, { automatic }) => void saved.push({ payload, automatic }),
  });
  expect(await first.runUntil(() => first.stepCount >= total / 2)).toBe('stopped');
  expect(first.stepCount).toBe(2);
  // No checkpoint was due (saveSteps is past the end); the caller's save reaches its hook.
  expect(saved).toEqual([]);
  await first.save(false);
  expect(saved.map((s) => [s.payload.step, s.automatic])).toEqual([[2, false]]);
  const { payload } = saved[0];
  // snapshot() is what save() handed over.
  const again = await first.snapshot();
  expect(again.step).toBe(2);
  expect(again.tensors.map((t) => [t.name, t.data])).toEqual(
    payload.tensors.map((t) => [t.name, t.data]),
  );
  first.destroy();

  const resumed = make({});
  resumed.restore(payload);
  expect(resumed.stepCount).toBe(2);
  // The default history is the one the checkpoint stored.
  expect(resumed.history.map(row)).toEqual(rows.slice(0, 2).map(row));
  const after: StageStepResult[] = [];
  while (!resumed.finished) after.push(await resumed.step());
  expect(after.map(result)).toEqual(rows.slice(2).map(result));
  expect(resumed.history.map((r) => r.step)).toEqual([1, 2, 3, 4]);
  const resumedWeights = await resumed.readWeights();
  expect([...resumedWeights.keys()]).toEqual([...weights.keys()]);
  for (const [name, w] of weights) expect(resumedWeights.get(name), name).toEqual(w);
  // Four steps of training moved the weights (the check above is not of an idle model).
  const start = initLlamaWeights((await tinyHfFolder()).config, 5);
  const moved = [...weights].some(([name, w]) => w.some((v, i) => v !== start.get(name)![i]));
  expect(moved).toBe(true);
  resumed.destroy();
  return payload;
}

/** The GRPO runs' shared options: tiny Countdown groups and a reward that varies across a group. */
const TINY_GRPO = {
  task: 'countdown',
  taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
  rewards: ['custom:len'],
  customRewards: {
    len: 'function reward({ completion }) { return completion.length / 10; }',
  },
  perStepPrompts: 2,
  numGenerations: 2,
  maxPromptLength: 120,
  maxCompletionLength: 4,
  learningRate: 1e-2,
  saveSteps: 50,
  seed: 11,
};

async function factories() {
  const engine = await testEngine();
  const { config: modelConfig } = await tinyHfFolder();
  const weights = initLlamaWeights(modelConfig, 5);
  const tokenizer = await loadTokenizer(tokenizerFiles);
  const grpo: StageFactory = (hooks) =>
    new Run({
      engine,
      runId: 'stage-grpo',
      modelIdentity: { name: 'tiny-random', sha256: '' },
      // β > 0, so the update, the moments and the reference all carry state a restore must
      // bring back.
      config: resolveConfig({ ...TINY_GRPO, lrScheduler: 'cosine', beta: 0.04, steps: 4 }),
      model: { config: modelConfig, weights, tokenizer },
      sandboxFactory: nodeSandboxFactory(),
      hooks,
    });
  const sftConfig = resolveSftConfig({
    learning_rate: 1e-2,
    per_device_train_batch_size: 2,
    max_steps: 4,
    warmup_steps: 1,
    save_steps: 50,
    seed: 7,
  });
  const { rows } = parseSftJsonl(
    [
      {
        prompt: 'Using the numbers [3, 5], create an equation that equals 8.',
        completion: ' <answer> 3 + 5 </answer>',
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
      .join('\n'),
  );
  const { examples } = tokenizeSftDataset(rows, tokenizer, sftConfig);
  expect(examples).toHaveLength(3);
  const sft: StageFactory = (hooks) =>
    new SftRun({
      engine,
      runId: 'stage-sft',
      config: sftConfig,
      model: { config: modelConfig, weights },
      examples,
      padTokenId: tokenizer.padTokenId,
      hooks,
    });
  return { grpo, sft };
}

const saved: Partial<Record<'grpo' | 'sft', CheckpointPayload>> = {};
let made: Awaited<ReturnType<typeof factories>> | null = null;
const make = async () => (made ??= await factories());

describe('TrainingStage', { timeout: 600_000 }, () => {
  it('GRPO Run: save half way, restore into a fresh run, finish = the uninterrupted run', async () => {
    saved.grpo = await saveRestoreEqualsStraight((await make()).grpo);
  });

  it('SftRun: save half way, restore into a fresh run, finish = the uninterrupted run', async () => {
    saved.sft = await saveRestoreEqualsStraight((await make()).sft);
  });

  it('a LoRA GRPO Run ends with its adapters merged into the weights it hands on', async () => {
    // readWeights is what a recipe stage ends with: the next stage's start, the comparison's
    // weights and the final model. The frozen base alone would drop the training.
    const engine = await testEngine();
    const { config: modelConfig } = await tinyHfFolder();
    const weights = initLlamaWeights(modelConfig, 5);
    const run = new Run({
      engine,
      runId: 'stage-grpo-lora',
      modelIdentity: { name: 'tiny-random', sha256: '' },
      config: resolveConfig({
        ...TINY_GRPO,
        steps: 1,
        usePeft: true,
        loraR: 2,
        loraAlpha: 4,
        loraTargetModules: ['q_proj', 'v_proj'],
      }),
      model: { config: modelConfig, weights, tokenizer: await loadTokenizer(tokenizerFiles) },
      sandboxFactory: nodeSandboxFactory(),
    });
    try {
      await run.step();
      const policy = run.trainer.policy;
      const base = await policy.readParameters();
      const adapters = await policy.readAdapters();
      const ended = await run.readWeights();
      const merged = mergeLoraWeights(modelConfig, base, { options: policy.lora!, adapters });
      expect([...ended.keys()]).toEqual([...merged.keys()]);
      for (const [name, w] of merged) expect(ended.get(name), name).toEqual(w);
      // The step moved the adapters (B starts at 0), so the merged projections differ from the
      // frozen base, which is the start unchanged.
      const q = 'model.layers.0.self_attn.q_proj.weight';
      expect(ended.get(q)).not.toEqual(base.get(q));
      expect(base.get(q)).toEqual(weights.get(q));
    } finally {
      run.destroy();
    }
  });

  it("a stage refuses the other kind's checkpoint", async () => {
    const { grpo, sft } = await make();
    expect(saved.grpo && saved.sft).toBeTruthy();
    const stages: [TrainingStage, CheckpointPayload, RegExp][] = [
      [grpo({}), saved.sft!, /'trainer\.numTokens'/],
      [sft({}), saved.grpo!, /not an SFT checkpoint/],
    ];
    for (const [stage, payload, message] of stages) {
      expect(() => stage.restore(payload)).toThrow(message);
      expect(stage.stepCount).toBe(0);
      stage.destroy();
    }
  });
});
