// The project's GRPO numbers against TRL's formulas (tests/support/trl-reference.ts, transcribed in
// plain f64 TypeScript from TRL's source, independent of the project's functions): advantages and reward metrics with
// unscorable rows and float32-equal groups under every scale_rewards, the loss and ∂loss/∂logp of
// every loss type with GA 1/2/4, and the loss metrics TRL logs for GA 1/2/4 and μ = 2
// (docs/grpo.md §1–§6). The GPU trainer path is checked the same way in
// tests/kernels/trl-parity.test.ts.
import { describe, expect, it } from 'vitest';
import { computeAdvantages } from '../../src/grpo/advantages';
import { combineOutcomes, rewardMetrics, rewardTotals } from '../../src/grpo/rewards';
import { accumulatedLossRef, loggedLossMetrics, microBatchMetrics } from '../../src/ref/grpo_loss';
import { optimizerStepsOf, runSchedule, learningRateAt } from '../../src/optim/schedule';
import { resolveConfig } from '../../src/grpo/config';
import { grpoConfigArgs } from '../../src/export/trl-export';
import { trlLog, trlMicroLoss, trlScore, type LossBatch } from '../support/trl-reference';

// ------------------------------------------------------------------------------------------
// Fixed inputs: B = 3 groups of G = 4, two reward functions.
// ------------------------------------------------------------------------------------------
const G = 4;
const WEIGHTS = [1, 0.5];
const PER_FUNC: (number | null)[][] = [
  // group 0: row 2 unscorable (both null), row 3 scored by one function only
  [1, 1],
  [0, 1],
  [null, null],
  [null, 1],
  // group 1: ordinary spread
  [1, 0],
  [0, 0],
  [1, 1],
  [0.25, 0],
  // group 2: equal in float32, not in f64 (0.1 + 0.2 ≠ 0.3): TRL's std is 0 there
  [0.1 + 0.2, null],
  [0.3, null],
  [0.3, null],
  [0.1 + 0.2, null],
];
const N = PER_FUNC.length;
const L = 5;

function projectRewards() {
  return PER_FUNC.map((row) =>
    combineOutcomes(
      ['f0', 'f1'],
      WEIGHTS,
      row.map((value) => ({ value })),
    ),
  );
}

/** Deterministic pseudo-random numbers in [0, 1). */
function lcg(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function lossBatch(adv: number[], seed: number, spread: number): LossBatch {
  const r = lcg(seed);
  const grid = (f: () => number) => Array.from({ length: N }, () => Array.from({ length: L }, f));
  const old = grid(() => -0.2 - 2 * r());
  const logp = old.map((row) => row.map((x) => x + spread * (r() - 0.5)));
  const ref = old.map((row) => row.map((x) => x + 0.3 * (r() - 0.5)));
  const entropy = grid(() => 0.5 + r());
  // Ragged lengths, one sequence fully masked (clamp and nanmin paths).
  const lengths = [5, 3, 1, 4, 0, 2, 5, 5, 3, 1, 4, 2];
  const mask = lengths.map((len) => Array.from({ length: L }, (_, t) => (t < len ? 1 : 0)));
  return { logp, old, ref, entropy, mask, adv };
}

const flat = (x: number[][]) => x.flat();
const closeTo = (a: number, b: number, what: string, tol = 1e-9) => {
  if (Number.isNaN(b)) return expect(a, what).toBeNaN();
  expect(Math.abs(a - b), `${what}: project ${a}, TRL ${b}`).toBeLessThanOrEqual(
    tol * (1 + Math.abs(b)),
  );
};

describe('advantages and reward metrics as TRL computes them', () => {
  for (const scale of ['group', 'batch', 'none'] as const) {
    it(`scale_rewards='${scale}': unscorable rows, float32-equal group`, () => {
      const trl = trlScore(PER_FUNC, WEIGHTS, G, scale);
      const results = projectRewards();
      const adv = computeAdvantages(rewardTotals(results), G, scale);
      // TRL works on float32 rewards: relative differences of ~1e-7 are its rounding.
      for (let i = 0; i < N; i++) closeTo(adv[i], trl.advantages[i], `A[${i}]`, 1e-6);
      expect(adv[2]).toBe(0); // unscorable
      expect(Array.from(adv.subarray(8))).toEqual([0, 0, 0, 0]); // float32-equal group
      const m = rewardMetrics(results, ['f0', 'f1'], G, scale);
      for (const [key, value] of Object.entries(trl.metrics)) closeTo(m[key], value, key, 1e-6);
    });
  }

  it('scale_rewards=batch: frac_reward_zero_std is the batch std test (0 here), not per group', () => {
    const m = rewardMetrics(projectRewards(), ['f0', 'f1'], G, 'batch');
    expect(m.frac_reward_zero_std).toBe(0);
    const g = rewardMetrics(projectRewards(), ['f0', 'f1'], G, 'group');
    expect(g.frac_reward_zero_std).toBe(4 / 12); // group 2 only
  });
});

describe('loss, ∂loss/∂logp and logged loss metrics as TRL computes them', () => {
  const adv = trlScore(PER_FUNC, WEIGHTS, G, 'group').advantages;
  const opts = { epsLow: 0.2, epsHigh: 0.28, beta: 0.04, maxLen: 7 };
  for (const GA of [1, 2, 4]) {
    for (const lossType of ['grpo', 'bnpo', 'dr_grpo', 'dapo'] as const) {
      it(`${lossType}, GA = ${GA}, μ = 2`, () => {
        // Pass 0 (μ = 1 style ratios near 1) and pass 1 (moved log-probs: clipping happens).
        const passes = [lossBatch(adv, 11, 0.05), lossBatch(adv, 11, 0.9)];
        const nm = N / GA;
        const appended: Record<string, number>[] = [];
        const projectMicro = [];
        for (const b of passes) {
          const numItems = b.mask.flat().reduce((s, v) => s + v, 0);
          let trlLoss = 0;
          const trlGrad: number[] = [];
          for (let m = 0; m < GA; m++) {
            const rows = <T>(x: T[]) => x.slice(m * nm, (m + 1) * nm);
            const micro: LossBatch = {
              logp: rows(b.logp),
              old: rows(b.old),
              ref: b.ref && rows(b.ref),
              entropy: rows(b.entropy),
              mask: rows(b.mask),
              adv: rows(b.adv),
            };
            const r = trlMicroLoss(micro, { lossType, GA, numItems, ...opts });
            trlLoss += r.loss;
            trlGrad.push(...flat(r.dLogp));
            appended.push(r.metrics);
          }
          const project = accumulatedLossRef(
            {
              logp: flat(b.logp),
              oldLogp: flat(b.old),
              refLogp: flat(b.ref!),
              advantages: b.adv,
              mask: flat(b.mask),
              N,
              L,
              lossType,
              epsilonLow: opts.epsLow,
              epsilonHigh: opts.epsHigh,
              beta: opts.beta,
              maxCompletionLength: opts.maxLen,
            },
            GA,
          );
          closeTo(project.loss, trlLoss, 'loss');
          for (let j = 0; j < N * L; j++) closeTo(project.dLogp[j], trlGrad[j], `dLogp[${j}]`);
          for (let m = 0; m < GA; m++) {
            const rows = (x: number[][]) => flat(x.slice(m * nm, (m + 1) * nm));
            projectMicro.push(
              microBatchMetrics({
                logp: rows(b.logp),
                oldLogp: rows(b.old),
                refLogp: rows(b.ref!),
                entropy: rows(b.entropy),
                advantages: b.adv.slice(m * nm, (m + 1) * nm),
                mask: rows(b.mask),
                N: nm,
                L,
                epsilonLow: opts.epsLow,
                epsilonHigh: opts.epsHigh,
                beta: opts.beta,
              }),
            );
          }
        }
        const trl = trlLog(appended);
        const mine = loggedLossMetrics(projectMicro, opts.beta);
        expect(Object.keys(mine).sort()).toEqual(Object.keys(trl).sort());
        for (const [key, value] of Object.entries(trl)) closeTo(mine[key], value, key);
        // The second pass clips: the logged clip ratios are not the first pass's zeros.
        expect(trl['clip_ratio/region_mean']).toBeGreaterThan(0);
      });
    }
  }
});

describe('steps and the learning-rate schedule with μ > 1', () => {
  it('runs the schedule over steps·μ optimizer steps, as TRL with max_steps = steps·μ', () => {
    const c = resolveConfig({ steps: 4, numIterations: 2, learningRate: 0.01 });
    expect(optimizerStepsOf(c)).toBe(8);
    const lrs = Array.from({ length: 8 }, (_, k) => learningRateAt(k, runSchedule(c)));
    // transformers' linear schedule, max_steps 8, no warmup: lr·(1 − k/8).
    lrs.forEach((lr, k) => expect(lr).toBeCloseTo(0.01 * (1 - k / 8), 15));
    const args = new Map(grpoConfigArgs(c));
    expect(args.get('max_steps')).toBe('8');
    expect(args.get('num_iterations')).toBe('2');
    expect(args.get('num_generations_eval')).toBe(String(c.evalGenerations));
  });

  it('warmupRatio is a fraction of the optimizer steps', () => {
    const c = resolveConfig({ steps: 10, numIterations: 3, warmupRatio: 0.1 });
    expect(runSchedule(c).warmupSteps).toBe(3); // ceil(0.1 · 30)
  });

  it('accepts TRL’s boolean scale_rewards: true → group, false → none', () => {
    expect(resolveConfig({ scaleRewards: true as never }).scaleRewards).toBe('group');
    expect(resolveConfig({ scaleRewards: false as never }).scaleRewards).toBe('none');
  });
});
