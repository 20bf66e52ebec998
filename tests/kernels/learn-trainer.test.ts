// Learn mode against the trainer's own numbers: a real GRPO step of the tiny model (Node WebGPU,
// SwiftShader here), then every value Learn mode shows is recomputed from the StepReport with
// src/app/learn/derive.ts and compared with what the trainer reported.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import LearnView from '../../src/app/learn/LearnView.svelte';
import {
  allCompletions,
  logpMovement,
  meanKl,
  recomputeAdvantages,
  stepLoss,
} from '../../src/app/learn/derive';
import { passChecks } from '../../src/app/learn/checks';
import { makeTrainer } from '../support/tiny-trainer';

// The trainer reduces in f32 on the GPU (advantages uploaded as f32); derive.ts works in f64.
const LOSS_TOL = { atol: 1e-6, rtol: 1e-5 };
const KL_TOL = { atol: 1e-6, rtol: 1e-4 };

const within = (
  actual: number,
  expected: number,
  tol: { atol: number; rtol: number },
  what: string,
) =>
  expect(
    Math.abs(actual - expected),
    `${what}: recomputed ${actual}, trainer ${expected}`,
  ).toBeLessThanOrEqual(tol.atol + tol.rtol * Math.abs(expected));

describe('Learn mode reproduces the trainer', { timeout: 300_000 }, () => {
  it('dapo, μ = 1, β = 0: advantages, loss, clip fractions; the update moves toward A > 0', async () => {
    const trainer = await makeTrainer({}, undefined, true);
    const report = await trainer.trainStep();
    const config = trainer.config;
    expect(config.lossType).toBe('dapo');
    // Advantages recomputed from the rewards are the report's, bit for bit (same f64 code).
    const recomputed = Array.from(recomputeAdvantages(report, config));
    expect(recomputed).toEqual(allCompletions(report).map((c) => c.advantage));
    expect(recomputed.some((a) => a !== 0)).toBe(true);
    // μ = 1, β = 0: ρ = 1, so the loss is −Σ A·|o| / Σ|o|.
    const { loss, stats } = stepLoss(report, config, 'dapo');
    within(loss, report.metrics.loss, LOSS_TOL, 'loss');
    expect(loss).not.toBe(0);
    expect(stats.clipRatioRegion).toBe(report.metrics['clip_ratio/region_mean']);
    expect(stats.clipRatioLow).toBe(report.metrics['clip_ratio/low_mean']);
    expect(stats.clipRatioHigh).toBe(report.metrics['clip_ratio/high_mean']);
    const moved = logpMovement(allCompletions(report))!;
    expect(moved.weighted).toBeGreaterThan(0);
    // What the reader sees (the first group, and the step-wide values): every check in the view
    // agrees with the trainer.
    const { body } = render(LearnView, { props: { report, config, history: [] } });
    expect(body).toContain('✓ matches the trainer');
    expect(body).not.toContain('✗');
    trainer.destroy();
  });

  // bnpo is the type whose value depends on the micro-batching (a mean of micro-batch means);
  // the others are checked against hand values in learn-derive.test.ts. One case keeps this fast.
  it.each(['bnpo'] as const)(
    '%s with μ = 2, β = 0.04 and 2 micro-batches: loss, mean k3 and clip fractions equal the trainer’s',
    async (lossType) => {
      const trainer = await makeTrainer({
        lossType,
        numIterations: 2,
        beta: 0.04,
        gradientAccumulationSteps: 2,
      });
      // The second step: the policy has moved from the reference, so k3 is not 0.
      await trainer.trainStep();
      const report = await trainer.trainStep();
      const config = trainer.config;
      const { loss, stats } = stepLoss(report, config, lossType);
      // The report's log-probs are the first pass's: Learn recomputes the project's first_pass/*
      // figures (the logged loss, kl and clip ratios are TRL's row over both passes and every
      // micro-batch, docs/grpo.md §6; tests/kernels/trl-parity.test.ts checks those).
      const m = report.metrics;
      within(loss, m['first_pass/loss'], LOSS_TOL, `${lossType} loss`);
      within(stats.meanKl, m['first_pass/kl'], KL_TOL, 'kl (loss stats)');
      within(meanKl(allCompletions(report), config)!, m['first_pass/kl'], KL_TOL, 'kl');
      expect(m['first_pass/kl']).toBeGreaterThan(0);
      for (const key of ['low', 'high', 'region'] as const) {
        const mine = {
          low: stats.clipRatioLow,
          high: stats.clipRatioHigh,
          region: stats.clipRatioRegion,
        }[key];
        within(mine, m[`first_pass/clip_ratio/${key}_mean`], LOSS_TOL, `clip ${key}`);
      }
      // Every pass, not only the first: the report records each pass's numbers and the later
      // passes' log-probs, and Learn's check of each pass against itself holds (checks.ts).
      const passes = report.passes!;
      expect(passes).toHaveLength(2);
      expect(passes[0].loss).toBe(m['first_pass/loss']);
      expect(passes[0].clipRatioRegion).toBe(m['first_pass/clip_ratio/region_mean']);
      expect(passes[0].kl).toBe(m['first_pass/kl']);
      // The logged loss is the mean of the two passes' (docs/grpo.md §6).
      within((passes[0].loss + passes[1].loss) / 2, m.loss, LOSS_TOL, 'logged loss');
      expect(allCompletions(report).every((c) => c.laterPassLogp?.length === 1)).toBe(true);
      const checks = passChecks(report, config);
      expect(checks.map((c) => c.name)).toEqual(['pass 1 of 2', 'pass 2 of 2']);
      for (const pc of checks)
        for (const l of pc.lines) {
          expect(l.recomputed, `${pc.name} ${l.label}`).not.toBeNull();
          expect(l.ok, `${pc.name} ${l.label}: ${l.recomputed} vs ${l.trainer}`).toBe(true);
        }
      console.log(
        checks
          .map(
            (pc) =>
              `${pc.name}: ${pc.lines.map((l) => `${l.key} ${l.trainer}/${l.recomputed}`).join(', ')}`,
          )
          .join('; '),
      );
      trainer.destroy();
    },
  );
});
