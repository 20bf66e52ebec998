// The GRPO trainer end to end on Node WebGPU with a tiny random model: it learns a simple reward,
// is deterministic for a seed, and guards against non-finite updates.
import { describe, expect, it, vi } from 'vitest';
import {
  createCustomRewards,
  customRewardResolver,
  disposeCustomRewards,
} from '../../src/rewards/custom-reward';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { createRewardFunctions, type RewardFunction } from '../../src/rewards/rewards';
import { TrainingDivergedError } from '../../src/grpo/trainer';
import { algorithmic, echoTask, makeTrainer, startsWithA } from '../support/tiny-trainer';
import { testEngine } from './harness';

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
    // Once `explode` is set, rewards of ±1e38 overflow the gradient (its squared norm) to
    // non-finite values: the update must be skipped on the GPU. (At ±3e38 a mixed group's
    // advantages leave float32 and the reward guard fails the reward before any update.)
    let explode = false;
    const exploding: RewardFunction = {
      name: 'custom:starts_with_a',
      compute: ({ completion }) =>
        explode
          ? completion.charCodeAt(0) % 2
            ? 1e38
            : -1e38
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
    const stop = trainer.trainStep();
    await expect(stop).rejects.toThrow(TrainingDivergedError);
    // A good step came first: the step size is the likely cause, and the message says so.
    await expect(stop).rejects.toThrow(/kept at the last good step\. Lower learningRate/);
    expect(await trainer.policy.readParameters()).toEqual(afterGood);
    trainer.destroy();
  });

  it('a run none of whose updates was ever finite points at the starting weights, not the learning rate', async () => {
    const exploding: RewardFunction = {
      name: 'custom:overflow',
      compute: ({ completion }) => (completion.charCodeAt(0) % 2 ? 3e38 : -3e38),
    };
    const trainer = await makeTrainer({ scaleRewards: 'none' }, exploding);
    expect((await trainer.trainStep()).skipped).not.toBeNull();
    expect((await trainer.trainStep()).skipped).not.toBeNull();
    const stop = trainer.trainStep();
    await expect(stop).rejects.toThrow(TrainingDivergedError);
    await expect(stop).rejects.toThrow(/no update of this run has been finite.*starting weights/);
    trainer.destroy();
  });

  it('an update that throws midway frees its GPU buffers: live bytes return to where they were', async () => {
    const engine = await testEngine();
    const trainer = await makeTrainer({ beta: 0 });
    // One good step first: the model's activations, gradients and AdamW moments are allocated
    // once and kept, as they are on every later step.
    expect((await trainer.trainStep()).skipped).toBeNull();
    // The model's workspace grows with the batch's width; everything else must come back.
    const stepBytes = () => engine.memory.liveBytes - trainer.policy.workspaceBytes;
    const before = stepBytes();
    const buffersBefore = engine.memory.liveBuffers;
    // The first backward of the next update throws, after the update allocated its buffers.
    const backward = vi.spyOn(trainer.policy, 'backward').mockImplementationOnce(() => {
      throw new Error('injected failure mid-update');
    });
    await expect(trainer.trainStep()).rejects.toThrow('injected failure mid-update');
    expect(backward).toHaveBeenCalledTimes(1);
    expect(stepBytes()).toBe(before);
    expect(engine.memory.liveBuffers).toBe(buffersBefore);
    // The trainer still works afterwards.
    backward.mockRestore();
    expect((await trainer.trainStep()).skipped).toBeNull();
    expect(stepBytes()).toBe(before);
    trainer.destroy();
  });

  it('custom rewards that throw, hang or return NaN: each error is in the step report, training goes on', async () => {
    const customRewards = {
      good: "function reward({ completion }) { return completion.startsWith('a') ? 1 : 0; }",
      throws: "function reward() { throw new Error('boom'); }",
      hangs: 'function reward() { while (true) {} }',
      nan: 'function reward() { return NaN; }',
    };
    const overrides = {
      rewards: Object.keys(customRewards).map((id) => `custom:${id}`),
      customRewards,
      rewardTimeoutMs: 200,
      perStepPrompts: 2,
      numGenerations: 2,
    };
    const custom = createCustomRewards(customRewards, {
      timeoutMs: 200,
      sandboxFactory: nodeSandboxFactory(),
    });
    const fns = createRewardFunctions(overrides.rewards, echoTask, customRewardResolver(custom));
    const trainer = await makeTrainer(overrides, fns);
    for (let step = 1; step <= 2; step++) {
      const report = await trainer.trainStep();
      expect(report.step).toBe(step);
      expect(report.skipped).toBeNull();
      expect(Number.isFinite(report.metrics.loss)).toBe(true);
      expect(report.metrics.reward_error_frac).toBe(1);
      for (const c of report.groups.flatMap((g) => g.completions)) {
        const kinds = Object.fromEntries(c.reward.errors.map((e) => [e.reward, e.kind]));
        expect(kinds).toEqual({
          'custom:throws': 'threw',
          'custom:hangs': 'timeout',
          'custom:nan': 'non-finite',
        });
        expect(c.reward.errors.find((e) => e.reward === 'custom:throws')?.message).toMatch(/boom/);
        expect(c.reward.perFunction['custom:good']).toBe(c.text.startsWith('a') ? 1 : 0);
        expect(c.reward.total).toBe(c.text.startsWith('a') ? 1 : 0);
      }
    }
    disposeCustomRewards(fns);
    trainer.destroy();
  });

  it('a supervised cold-start step lowers the cross-entropy of its completions', async () => {
    const trainer = await makeTrainer({ learningRate: 1e-2 });
    const examples = echoTask.generate(0, 4).map((problem) => ({ problem, completion: 'abc' }));
    const losses: number[] = [];
    for (let s = 0; s < 6; s++) {
      const result = await trainer.supervisedStep(examples);
      expect(result.skipped).toBeNull();
      expect(result.tokens).toBe(4 * 4); // 'abc' + EOS per example
      losses.push(result.loss);
    }
    // A random model starts near ln(V) = ln 10 ≈ 2.3 nats per token.
    expect(losses[0]).toBeGreaterThan(2);
    expect(losses[5]).toBeLessThan(0.5 * losses[0]);
    trainer.destroy();
  });
});
