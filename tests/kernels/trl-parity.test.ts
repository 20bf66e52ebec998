// The GPU trainer path against TRL's formulas (tests/support/trl-reference.ts): one GRPO update of
// the tiny model through PolicyObjective with μ = 2 and GA 1/2/4 (grpo, bnpo, dapo, dr_grpo and the
// objective variants) on a fixed batch (ragged lengths,
// a fully masked sequence, β > 0, a narrow clip range so the second pass clips), compared with
// TRL's loss, ∂loss/∂logp and logged metrics computed from the update's own per-pass log-probs
// and entropies; then whole trainer steps for the learning-rate schedule with μ > 1 and the
// reward and completions/* metrics with unscorable completions (docs/grpo.md §1–§6).
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { PolicyObjective } from '../../src/grpo/policy-objective';
import type { RewardFunction } from '../../src/rewards/rewards';
import { GRPO_LOSS_OUT, GrpoLossKernel } from '../../src/kernels/grpo-loss';
import { packBatch } from '../../src/model/batch';
import { initLlamaWeights } from '../../src/model/init';
import { GpuLlama } from '../../src/model/llama';
import { GpuAdamW } from '../../src/optim/adamw';
import { config, makeTrainer, modelConfig } from '../support/tiny-trainer';
import { highEntropyMaskRef } from '../../src/ref/grpo_loss';
import {
  trlCompletionMetrics,
  trlLog,
  trlMicroLoss,
  trlScore,
  trlScoreNormalizeThenSum,
  type LossBatch,
} from '../support/trl-reference';
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
  // The objective variants of docs/grpo.md §3, §5 ride along: GSPO, two-sided clipping, the
  // entropy bonus (whose policy_loss / entropy_coef metrics the row then carries).
  interface Case {
    GA: number;
    lossType: 'grpo' | 'bnpo' | 'dr_grpo' | 'dapo' | 'cispo' | 'sapo';
    isLevel?: 'token' | 'sequence';
    delta?: number | null;
    entropyCoef?: number;
    topEntropyQuantile?: number;
  }
  const cases: Case[] = [
    { GA: 1, lossType: 'grpo' },
    { GA: 2, lossType: 'bnpo' },
    { GA: 4, lossType: 'dapo' },
    // dr_grpo divides by B·maxCompletionLength (a constant), per micro-batch, then by GA.
    { GA: 2, lossType: 'dr_grpo' },
  ];
  const variantCases: Case[] = [
    { GA: 2, lossType: 'grpo', isLevel: 'sequence', entropyCoef: 0.05 },
    { GA: 1, lossType: 'dapo', delta: 1.1, entropyCoef: -0.02 },
    { GA: 2, lossType: 'dapo', isLevel: 'sequence', topEntropyQuantile: 0.5 },
    { GA: 1, lossType: 'grpo', topEntropyQuantile: 0.2 },
    { GA: 2, lossType: 'cispo', entropyCoef: 0.05 },
    { GA: 2, lossType: 'sapo', isLevel: 'sequence' },
  ];
  const check = async ({ GA, lossType, isLevel, delta, entropyCoef, topEntropyQuantile }: Case) => {
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
      importanceSamplingLevel: isLevel ?? 'token',
      delta: delta ?? null,
      entropyCoef: entropyCoef ?? 0,
      topEntropyQuantile: topEntropyQuantile ?? 1,
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
          isLevel: cfg.importanceSamplingLevel,
          delta: cfg.delta,
          entropyCoef: cfg.entropyCoef,
          topEntropyQuantile: cfg.topEntropyQuantile,
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
          // The trainer's GPU mask is checked against this reference in grpo-loss.test.ts.
          entropyMask: uploadStorageBuffer(
            engine.device,
            Float32Array.from(
              highEntropyMaskRef(micro.entropy.flat(), micro.mask.flat(), cfg.topEntropyQuantile),
            ),
          ),
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
            importanceSamplingLevel: cfg.importanceSamplingLevel,
            delta: cfg.delta,
            entropyMask: cfg.topEntropyQuantile < 1 ? bufs.entropyMask : null,
          }),
        );
        const dLogp = await readF32(engine.device, bufs.dLogp, nm * L);
        for (const buf of Object.values(bufs)) buf.destroy();
        const scale = lossType === 'dapo' || lossType === 'cispo' ? 1 : 1 / GA;
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
      const rtol = key === 'loss' || key === 'policy_loss' ? LOSS_RTOL : 1e-9;
      close(update.metrics[key], value, rtol, key, 1e-7);
    }
    // The second pass moved the policy: the logged clip ratios are not the first pass's zeros.
    // (cispo logs cispo_clip_ratio instead, sapo no clip ratio: docs/grpo.md §6.)
    if (lossType === 'cispo') expect(update.metrics.cispo_clip_ratio).toBeGreaterThan(0);
    else if (lossType !== 'sapo')
      expect(update.metrics['clip_ratio/region_mean']).toBeGreaterThan(0);
    expect(update.metrics.learning_rate).toBe(5e-2);
    policy.destroy();
    reference.destroy();
    optimizer.destroy();
  };
  it.each(cases)('GA = $GA, $lossType, μ = 2, β = 0.04', check);
  it.each(variantCases)(
    'GA = $GA, $lossType, μ = 2, β = 0.04, importance_sampling_level $isLevel, delta $delta, entropy_coef $entropyCoef, top_entropy_quantile $topEntropyQuantile',
    check,
  );
});

// The entropy bonus's gradient reaches the weights (docs/grpo.md §5): with every advantage 0 and
// β = 0 the only gradient is entropyCoef · ∂H/∂θ, so the second pass (after one optimizer step)
// sees a higher mean entropy for entropyCoef > 0 and a lower one for entropyCoef < 0.
describe('entropy_coef moves the policy', { timeout: 600_000 }, () => {
  it.each([1, -1])('entropyCoef %d: the mean entropy moves with its sign', async (coef) => {
    const engine = await testEngine();
    const cfg = config({
      perStepPrompts: 1,
      numGenerations: 4,
      numIterations: 2,
      beta: 0,
      lossType: 'dapo',
      learningRate: 1e-5,
      // The random model is near uniform (H ≈ ln V, where every move lowers H); a low
      // temperature sharpens the softmax so the entropy can move both ways.
      temperature: 0.05,
      entropyCoef: coef,
    });
    const weights = initLlamaWeights(modelConfig, 5);
    const policy = GpuLlama.load(engine, modelConfig, weights);
    const optimizer = new GpuAdamW(engine, policy, {
      beta1: cfg.adamBeta1,
      beta2: cfg.adamBeta2,
      eps: cfg.adamEpsilon,
      weightDecay: cfg.weightDecay,
      maxGradNorm: cfg.maxGradNorm,
    });
    const objective = new PolicyObjective(engine, policy, null, optimizer);
    const completions = [
      [1, 2, 3],
      [4, 5],
      [6, 7, 1],
      [2, 2],
    ];
    const batch = packBatch(
      completions.map(() => [1, 2, 9]),
      completions,
      { padId: 0 },
    );
    const sampling = completions.map((c) => new Float32Array(c.length).fill(-Math.log(10)));
    const update = await objective.update(cfg, batch, new Float64Array(4), sampling, 1e-5);
    expect(update.skipped).toBeNull();
    const meanH = (h: Float32Array) => {
      let s = 0;
      let c = 0;
      batch.mask.forEach((m, j) => {
        if (m === 0) return;
        s += h[j];
        c++;
      });
      return s / c;
    };
    const [before, after] = update.passes.map((p) => meanH(p.entropy));
    expect(Math.sign(after - before)).toBe(Math.sign(coef));
    expect(Math.abs(after - before)).toBeGreaterThan(1e-4);
    // The logged loss is the policy loss (0 here: A = 0) minus coef · the mean entropy.
    close(update.passes[0].loss, -coef * before, 1e-5, 'pass 0 loss', 1e-6);
    expect(update.metrics.policy_loss).toBe(0);
    expect(update.metrics.entropy_coef).toBe(coef);
    policy.destroy();
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
    // completions/*: TRL's formulas over the generated ids as TRL holds them, (N, maxLen) with
    // filler after the first EOS (id 0 here).
    const maxLen = trainer.config.maxCompletionLength;
    const rows = all.map((c) => [
      ...c.tokens,
      ...new Array<number>(maxLen - c.tokens.length).fill(5),
    ]);
    expect(all.every((c) => c.truncated === !c.tokens.includes(0))).toBe(true);
    for (const [key, value] of Object.entries(trlCompletionMetrics(rows, 0))) {
      close(report.metrics[key], value, 1e-7, key, 1e-12);
    }
    trainer.destroy();
  });

  it("multiObjectiveAggregation 'normalize_then_sum': the trainer's advantages are TRL's GDPO", async () => {
    // Two functions, one of them not applicable to some completions.
    const partial: RewardFunction = {
      name: 'custom:partial',
      compute: ({ completion }) =>
        completion.startsWith('a') ? 1 : completion.startsWith('b') ? 0 : null,
    };
    const length: RewardFunction = {
      name: 'custom:length',
      compute: ({ completion }) => completion.length / 10,
    };
    const trainer = await makeTrainer(
      {
        rewards: ['custom:partial', 'custom:length'],
        customRewards: {
          partial: 'function reward() { return null; }',
          length: 'function reward() { return 0; }',
        },
        rewardWeights: [1, 0.5],
        multiObjectiveAggregation: 'normalize_then_sum',
      },
      [partial, length],
    );
    const report = await trainer.trainStep();
    const all = report.groups.flatMap((g) => g.completions);
    const perFunc = all.map((c) => [
      c.reward.perFunction['custom:partial'],
      c.reward.perFunction['custom:length'],
    ]);
    const trl = trlScoreNormalizeThenSum(perFunc, [1, 0.5], 8);
    all.forEach((c, i) => close(c.advantage, trl.advantages[i], 1e-5, `A[${i}]`, 1e-6));
    expect(all.some((c) => Math.abs(c.advantage) > 0.1)).toBe(true);
    expect(report.metrics.frac_reward_zero_std).toBe(trl.fracRewardZeroStd);
    trainer.destroy();
  });
});
