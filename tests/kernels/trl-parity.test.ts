// The GPU trainer path against TRL's formulas (tests/support/trl-reference.ts): one GRPO update of
// the tiny model through PolicyObjective with μ = 2 and GA 1/2/4 on a fixed batch (ragged lengths,
// a fully masked sequence, β > 0, a narrow clip range so the second pass clips), compared with
// TRL's loss, ∂loss/∂logp and logged metrics computed from the update's own per-pass log-probs
// and entropies; then whole trainer steps for the learning-rate schedule with μ > 1 and the
// reward metrics with unscorable completions (docs/grpo.md §1–§6).
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { PolicyObjective } from '../../src/grpo/policy-objective';
import type { RewardFunction } from '../../src/grpo/rewards';
import { GRPO_LOSS_OUT, GrpoLossKernel } from '../../src/kernels/grpo-loss';
import { packBatch } from '../../src/model/batch';
import { initLlamaWeights } from '../../src/model/init';
import { GpuLlama } from '../../src/model/llama';
import { GpuAdamW } from '../../src/optim/adamw';
import { config, makeTrainer, modelConfig } from '../support/tiny-trainer';
import { trlLog, trlMicroLoss, trlScore, type LossBatch } from '../support/trl-reference';
import { seededUniform, testEngine } from './harness';

// The GPU loss is an f32 reduction; the metrics are computed from the same f32 log-probs.
const LOSS_RTOL = 2e-5;
const GRAD_ATOL = 1e-7;

const close = (a: number, b: number, rtol: number, what: string, atol = 0) => {
  if (Number.isNaN(b)) return expect(a, what).toBeNaN();
  expect(Math.abs(a - b), `${what}: project ${a}, TRL ${b}`).toBeLessThanOrEqual(
    atol + rtol * Math.abs(b),
  );
};

describe('GPU update = TRL', { timeout: 600_000 }, () => {
  const cases = [
    { GA: 1, lossType: 'grpo' },
    { GA: 2, lossType: 'bnpo' },
    { GA: 4, lossType: 'dapo' },
  ] as const;
  it.each(cases)('GA = $GA, $lossType, μ = 2, β = 0.04', async ({ GA, lossType }) => {
    const engine = await testEngine();
    const cfg = config({
      perStepPrompts: 2,
      numGenerations: 4,
      numIterations: 2,
      gradientAccumulationSteps: GA,
      beta: 0.04,
      epsilon: 0.05,
      lossType,
      learningRate: 5e-2,
    });
    const weights = initLlamaWeights(modelConfig, 3);
    const policy = GpuLlama.load(engine, modelConfig, weights);
    const reference = GpuLlama.load(engine, modelConfig, weights);
    const optimizer = new GpuAdamW(engine, policy, {
      beta1: cfg.adamBeta1,
      beta2: cfg.adamBeta2,
      eps: cfg.adamEpsilon,
      weightDecay: cfg.weightDecay,
      maxGradNorm: cfg.maxGradNorm,
    });
    const objective = new PolicyObjective(engine, policy, reference, optimizer);
    const N = 8;
    const prompts = Array.from({ length: N }, (_, i) => [1 + (i % 3), 2, 9]);
    const completions = [[1, 2, 3], [4, 5], [6], [1, 1, 2], [2, 3], [3, 4, 5], [7], [8, 1]];
    // Sequence 5 fully masked (a truncated completion under maskTruncatedCompletions).
    const batch = packBatch(prompts, completions, {
      padId: 0,
      maskedOut: completions.map((_, i) => i === 5),
    });
    const L = batch.L;
    // Sampling log-probs near the random model's (about −log 10): ratios spread around 1.
    const noise = seededUniform(N * L, 17, -0.4, 0.4);
    const sampling = completions.map((c, i) =>
      Float32Array.from(c, (_, t) => -Math.log(10) + noise[i * L + t]),
    );
    const advantages = Float64Array.from([1.2, -0.4, 0, -0.8, 0.5, -0.5, 0.9, -0.9]);
    const update = await objective.update(cfg, batch, advantages, sampling, 5e-2);
    expect(update.skipped).toBeNull();
    expect(update.passes).toHaveLength(2);

    const grid = (a: ArrayLike<number>) =>
      Array.from({ length: N }, (_, i) => Array.from({ length: L }, (_, t) => a[i * L + t]));
    const oldFlat = new Float32Array(N * L);
    sampling.forEach((s, i) => oldFlat.set(s, i * L));
    const advF32 = Array.from(Float32Array.from(advantages));
    const numItems = batch.mask.reduce((s, m) => s + m, 0);
    const nm = N / GA;
    const appended: Record<string, number>[] = [];
    const passLosses: number[] = [];
    const kernel = new GrpoLossKernel(engine.device, engine.pipelines);
    await kernel.prepare();
    for (const pass of update.passes) {
      const b: LossBatch = {
        logp: grid(pass.logp),
        old: grid(oldFlat),
        ref: grid(update.refLogp!),
        entropy: grid(pass.entropy),
        mask: grid(batch.mask),
        adv: advF32,
      };
      let loss = 0;
      for (let m = 0; m < GA; m++) {
        const rows = <T>(x: T[]) => x.slice(m * nm, (m + 1) * nm);
        const micro: LossBatch = {
          logp: rows(b.logp),
          old: rows(b.old),
          ref: rows(b.ref!),
          entropy: rows(b.entropy),
          mask: rows(b.mask),
          adv: rows(b.adv),
        };
        const trl = trlMicroLoss(micro, {
          lossType,
          GA,
          numItems,
          epsLow: cfg.epsilon,
          epsHigh: cfg.epsilonHigh,
          beta: cfg.beta,
          maxLen: cfg.maxCompletionLength,
        });
        loss += trl.loss;
        appended.push(trl.metrics);
        // ∂loss/∂logp from the trainer's loss kernel on this micro-batch, scaled as the trainer
        // scales it before the backward (1/GA except for dapo), against TRL's autograd formula.
        const up = (x: number[][]) =>
          uploadStorageBuffer(engine.device, Float32Array.from(x.flat()));
        const bufs = {
          logp: up(micro.logp),
          oldLogp: up(micro.old),
          refLogp: up(micro.ref!),
          advantages: uploadStorageBuffer(engine.device, Float32Array.from(micro.adv)),
          mask: up(micro.mask),
          dLogp: createStorageBuffer(engine.device, nm * L * 4),
          out: createStorageBuffer(engine.device, GRPO_LOSS_OUT.length * 4),
        };
        await engine.run((enc) =>
          kernel.encode(enc, {
            ...bufs,
            N: nm,
            L,
            lossType,
            epsilonLow: cfg.epsilon,
            epsilonHigh: cfg.epsilonHigh,
            beta: cfg.beta,
            maxCompletionLength: cfg.maxCompletionLength,
            activeTokensInBatch: numItems,
          }),
        );
        const dLogp = await readF32(engine.device, bufs.dLogp, nm * L);
        for (const buf of Object.values(bufs)) buf.destroy();
        const scale = lossType === 'dapo' ? 1 : 1 / GA;
        trl.dLogp
          .flat()
          .forEach((g, j) => close(dLogp[j] * scale, g, LOSS_RTOL, `dLogp ${j}`, GRAD_ATOL));
      }
      passLosses.push(loss);
    }
    update.passes.forEach((p, k) =>
      close(p.loss, passLosses[k], LOSS_RTOL, `pass ${k} loss`, 1e-7),
    );
    // TRL's row for the μ = 2 optimizer steps (logging_steps = μ): mean loss, the rest averaged
    // over all μ·GA micro-batches.
    const row = { ...trlLog(appended), loss: (passLosses[0] + passLosses[1]) / 2 };
    for (const [key, value] of Object.entries(row)) {
      close(update.metrics[key], value, key === 'loss' ? LOSS_RTOL : 1e-9, key, 1e-7);
    }
    // The second pass moved the policy: the logged clip ratios are not the first pass's zeros.
    expect(update.metrics['clip_ratio/region_mean']).toBeGreaterThan(0);
    expect(update.metrics.learning_rate).toBe(5e-2);
    policy.destroy();
    reference.destroy();
    optimizer.destroy();
  });
});

describe('trainer steps = TRL', { timeout: 600_000 }, () => {
  it('μ = 2, steps 4, linear: every optimizer step has its rate from a schedule of 8 steps', async () => {
    const trainer = await makeTrainer({
      steps: 4,
      numIterations: 2,
      lrScheduler: 'linear',
      learningRate: 0.01,
      perStepPrompts: 2,
      numGenerations: 2,
    });
    const logged: number[] = [];
    for (let s = 0; s < 4; s++) logged.push((await trainer.trainStep()).metrics.learning_rate);
    // TRL, max_steps = 8, logging_steps = 2: the rate of the last optimizer step of each row,
    // 0.01·(1 − k/8) for k = 1, 3, 5, 7 (the old schedule over 4 steps logged 0.01, 0.005, 0, 0).
    [1, 3, 5, 7].forEach((k, s) => expect(logged[s]).toBeCloseTo(0.01 * (1 - k / 8), 15));
    trainer.destroy();
  });

  it('unscorable completions: advantage 0, left out of the group statistics and of reward/reward_std', async () => {
    // Scores 1 for 'a…', 0 for 'b…', null (not applicable) otherwise: many unscorable rows.
    const partial: RewardFunction = {
      name: 'custom:partial',
      compute: ({ completion }) =>
        completion.startsWith('a') ? 1 : completion.startsWith('b') ? 0 : null,
    };
    const trainer = await makeTrainer(
      {
        rewards: ['custom:partial'],
        customRewards: { partial: 'function reward() { return null; }' },
        scaleRewards: 'batch',
      },
      partial,
    );
    const report = await trainer.trainStep();
    const all = report.groups.flatMap((g) => g.completions);
    const perFunc = all.map((c) => [c.reward.perFunction['custom:partial']]);
    expect(perFunc.some(([v]) => v === null)).toBe(true);
    const trl = trlScore(perFunc, [1], 8, 'batch');
    all.forEach((c, i) => {
      close(c.advantage, trl.advantages[i], 1e-6, `A[${i}]`, 1e-9);
      if (perFunc[i][0] === null) expect(c.advantage).toBe(0);
    });
    for (const [key, value] of Object.entries(trl.metrics)) {
      close(report.metrics[key.replace('/f0/', '/custom:partial/')], value, 1e-6, key, 1e-12);
    }
    for (const key of [
      'completions/min_terminated_length',
      'completions/max_terminated_length',
      'clip_ratio/low_min',
      'clip_ratio/high_max',
    ]) {
      expect(key in report.metrics, key).toBe(true);
    }
    trainer.destroy();
  });
});
