// The GRPO trainer end to end on Node WebGPU with a tiny random model: it learns a simple reward,
// is deterministic for a seed, and guards against non-finite updates.
import { describe, expect, it } from 'vitest';
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import type { RewardFunction } from '../../src/grpo/rewards';
import { GrpoTrainer, TrainingDivergedError, type StepReport } from '../../src/grpo/trainer';
import type { LlamaConfig } from '../../src/model/config';
import { initLlamaWeights } from '../../src/model/init';
import type { Problem, Task } from '../../src/tasks/types';
import { CharTokenizer } from '../support/char-tokenizer';
import { testEngine } from './harness';

const tokenizer = new CharTokenizer('abcdefgh?');

// Prompts are one of a few short strings; nothing to verify (the reward below looks at the text).
const echoTask: Task = {
  name: 'echo',
  description: 'short fixed prompts for trainer tests',
  generate(seed: number, count: number): Problem[] {
    return Array.from({ length: count }, (_, i) => ({
      id: `echo-${seed}-${i}`,
      task: 'echo',
      question: ['ab?', 'cd?', 'efg?', 'h?'][(i + seed) % 4],
      reference: null,
      verifier: { kind: 'none' },
    }));
  },
  formatPrompt: (problem) => ({ kind: 'text', text: problem.question }),
  verify: () => null,
};

const modelConfig: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
  vocabSize: tokenizer.vocabSize,
  maxPositions: 64,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  attentionBias: false,
  bosTokenId: null,
  eosTokenIds: [0],
};

/** 1 when the completion starts with 'a': a token the random model picks ~1/10 of the time. */
const startsWithA: RewardFunction = {
  name: 'custom:starts_with_a',
  compute: ({ completion }) => (completion.startsWith('a') ? 1 : 0),
};

function config(overrides: Partial<ConfigInput> = {}) {
  return resolveConfig({
    rewards: ['custom:starts_with_a'],
    customRewards: {
      starts_with_a:
        "function reward({ completion }) { return completion.startsWith('a') ? 1 : 0; }",
    },
    perStepPrompts: 4,
    numGenerations: 8,
    maxCompletionLength: 3,
    maxPromptLength: 8,
    temperature: 1,
    learningRate: 2e-2,
    lrScheduler: 'constant',
    steps: 30,
    seed: 7,
    ...overrides,
  });
}

async function makeTrainer(
  overrides: Partial<ConfigInput> = {},
  reward: RewardFunction = startsWithA,
  recordLogpAfterUpdate = false,
) {
  const engine = await testEngine();
  return new GrpoTrainer({
    engine,
    config: config(overrides),
    modelConfig,
    weights: initLlamaWeights(modelConfig, 1),
    tokenizer,
    task: echoTask,
    rewardFunctions: [reward],
    recordLogpAfterUpdate,
  });
}

// Metrics that measure time, not the algorithm.
const TIMING = new Set(['step_time', 'tokens_per_second']);
const algorithmic = (r: StepReport) =>
  Object.fromEntries(Object.entries(r.metrics).filter(([k]) => !TIMING.has(k)));

describe('GrpoTrainer', { timeout: 600_000 }, () => {
  it('learns a simple reward: mean reward rises by ≥ 0.4 within 25 steps', async () => {
    const trainer = await makeTrainer();
    const rewards: number[] = [];
    for (let s = 0; s < 25; s++) rewards.push((await trainer.trainStep()).metrics.reward);
    // The first step samples before any update: the random model's own rate of 'a'.
    const start = rewards[0];
    const end = (rewards[22] + rewards[23] + rewards[24]) / 3;
    // Printed for the record; the assertion is the margin.
    console.log(`reward: first step ${start.toFixed(3)}, last three steps ${end.toFixed(3)}`);
    expect(start).toBeLessThan(0.35);
    expect(end - start).toBeGreaterThanOrEqual(0.4);
    trainer.destroy();
  });

  it('reports TRL metrics, and advantages that sum to 0 within each group', async () => {
    const trainer = await makeTrainer({}, startsWithA, true);
    const report = await trainer.trainStep();
    for (const key of [
      'reward',
      'reward_std',
      'frac_reward_zero_std',
      'completions/mean_length',
      'entropy',
      'loss',
      'grad_norm',
      'learning_rate',
      'clip_ratio/region_mean',
      'num_tokens',
    ]) {
      expect(Number.isFinite(report.metrics[key]), key).toBe(true);
    }
    expect(report.metrics.learning_rate).toBe(2e-2);
    expect(report.groups).toHaveLength(4);
    for (const group of report.groups) {
      expect(group.completions).toHaveLength(8);
      const sum = group.completions.reduce((s, c) => s + c.advantage, 0);
      expect(Math.abs(sum)).toBeLessThan(1e-9);
      for (const c of group.completions) {
        expect(c.reward.total).toBe(c.text.startsWith('a') ? 1 : 0);
        // μ = 1: the old log-probs are the current ones, so every ratio is exactly 1.
        expect(c.oldLogp).toEqual(c.logp);
        expect(c.logp.every((lp) => lp <= 0 && Number.isFinite(lp))).toBe(true);
      }
    }
    // The update moves probability toward completions with positive advantage: Σ A·Δlogp > 0.
    let moved = 0;
    for (const c of report.groups.flatMap((g) => g.completions)) {
      expect(c.logpAfter).toHaveLength(c.logp.length);
      c.logp.forEach((lp, t) => (moved += c.advantage * (c.logpAfter![t] - lp)));
    }
    expect(moved).toBeGreaterThan(0);
    trainer.destroy();
  });

  it('is deterministic: the same seed and config give identical metrics', async () => {
    const runs: Record<string, number>[][] = [];
    for (let r = 0; r < 2; r++) {
      const trainer = await makeTrainer({ numIterations: 2, beta: 0.04 });
      const metrics = [];
      for (let s = 0; s < 2; s++) metrics.push(algorithmic(await trainer.trainStep()));
      runs.push(metrics);
      trainer.destroy();
    }
    expect(runs[1]).toEqual(runs[0]);
    expect(runs[0][1].kl).toBeGreaterThan(0);
  });

  it('skips non-finite updates, keeps the last good weights, and stops after 3 in a row', async () => {
    // Once `explode` is set, rewards of ±3e38 overflow the advantages (and so the loss and the
    // gradient) to non-finite values: the update must be skipped on the GPU.
    let explode = false;
    const exploding: RewardFunction = {
      name: 'custom:starts_with_a',
      compute: ({ completion }) =>
        explode
          ? completion.charCodeAt(0) % 2
            ? 3e38
            : -3e38
          : completion.startsWith('a')
            ? 1
            : 0,
    };
    const trainer = await makeTrainer({ scaleRewards: 'none' }, exploding);
    const first = await trainer.trainStep();
    expect(first.skipped).toBeNull();
    const afterGood = await trainer.policy.readParameters();
    explode = true;
    const second = await trainer.trainStep();
    expect(second.skipped).toMatch(/loss|grad_norm/);
    expect(await trainer.policy.readParameters()).toEqual(afterGood);
    expect((await trainer.trainStep()).skipped).not.toBeNull();
    await expect(trainer.trainStep()).rejects.toThrow(TrainingDivergedError);
    expect(await trainer.policy.readParameters()).toEqual(afterGood);
    trainer.destroy();
  });
});
