// The project's GRPO numbers against TRL's formulas (tests/support/trl-reference.ts, transcribed in
// plain f64 TypeScript from TRL's source, independent of the project's functions): advantages and reward metrics with
// unscorable rows and float32-equal groups under every scale_rewards, the loss and ∂loss/∂logp of
// every loss type with GA 1/2/4, and the loss metrics TRL logs for GA 1/2/4 and μ = 2
// (docs/grpo.md §1–§6). The GPU trainer path is checked the same way in
// tests/kernels/trl-parity.test.ts.
import { describe, expect, it } from 'vitest';
import { computeAdvantages } from '../../src/grpo/advantages';
import { combineOutcomes, rewardTotals } from '../../src/rewards/rewards';
import { rewardMetrics, stepAdvantages } from '../../src/grpo/step-rewards';
import { normalizeThenSumAdvantages } from '../../src/grpo/advantages';
import { accumulatedLossRef, highEntropyMaskRef } from '../../src/ref/grpo_loss';
import {
  entropyBonus,
  loggedLossMetrics,
  microBatchMetrics,
  policyLossMetric,
} from '../../src/grpo/loss-metrics';
import { optimizerStepsOf, runSchedule, learningRateAt } from '../../src/optim/schedule';
import { resolveConfig } from '../../src/grpo/config';
import { grpoConfigArgs } from '../../src/export/trl-export';
import { completionMetrics } from '../../src/grpo/completion-metrics';
import { collectCompletions } from '../../src/model/sampler';
import {
  trlCompletionMetrics,
  trlLog,
  trlMicroLoss,
  trlScore,
  trlScoreNormalizeThenSum,
  type LossBatch,
} from '../support/trl-reference';

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

// GSPO and two-sided clipping (docs/grpo.md §3) against TRL's `_compute_loss` with
// importance_sampling_level='sequence' and delta. Each sequence's log-probs are shifted by a
// per-sequence amount so whole sequences clip (GSPO) and some ratios pass δ.
describe('importance_sampling_level and delta as TRL computes them', () => {
  const adv = trlScore(PER_FUNC, WEIGHTS, G, 'group').advantages;
  const opts = { epsLow: 0.2, epsHigh: 0.28, beta: 0.04, maxLen: 7 };
  const shifted = (seed: number, spread: number): LossBatch => {
    const b = lossBatch(adv, seed, spread);
    const shift = [0.5, -0.4, 0.1, -0.6, 0.3, 0.45, -0.3, 0.05, 0.6, -0.5, 0.2, -0.1];
    return { ...b, logp: b.logp.map((row, i) => row.map((x) => x + shift[i])) };
  };
  const cases = [
    { isLevel: 'sequence' as const, delta: null },
    { isLevel: 'token' as const, delta: 1.4 },
    { isLevel: 'sequence' as const, delta: 1.4 },
  ];
  for (const c of cases) {
    for (const GA of [1, 2]) {
      for (const lossType of ['grpo', 'dapo', 'bnpo', 'dr_grpo'] as const) {
        it(`${c.isLevel}, delta ${c.delta}, ${lossType}, GA = ${GA}, μ = 2`, () => {
          const passes = [lossBatch(adv, 13, 0.05), shifted(13, 0.9)];
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
              const r = trlMicroLoss(micro, { lossType, GA, numItems, ...opts, ...c });
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
                importanceSamplingLevel: c.isLevel,
                delta: c.delta,
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
                  importanceSamplingLevel: c.isLevel,
                  delta: c.delta,
                }),
              );
            }
          }
          const trl = trlLog(appended);
          const mine = loggedLossMetrics(projectMicro, opts.beta);
          expect(Object.keys(mine).sort()).toEqual(Object.keys(trl).sort());
          for (const [key, value] of Object.entries(trl)) closeTo(mine[key], value, key);
          expect(trl['clip_ratio/region_mean']).toBeGreaterThan(0);
        });
      }
    }
  }

  it('delta changes the loss where A < 0 and ρ > δ; GSPO with μ = 1 ratios is the token loss', () => {
    const b = shifted(13, 0.9);
    const inputs = {
      logp: flat(b.logp),
      oldLogp: flat(b.old),
      refLogp: null,
      advantages: b.adv,
      mask: flat(b.mask),
      N,
      L,
      lossType: 'grpo' as const,
      epsilonLow: 0.2,
      epsilonHigh: 0.28,
      beta: 0,
      maxCompletionLength: 7,
    };
    const off = accumulatedLossRef(inputs, 1).loss;
    expect(accumulatedLossRef({ ...inputs, delta: 1.4 }, 1).loss).not.toBeCloseTo(off, 6);
    // Ratios all 1 (old = logp): every level and δ give the same loss and gradient, bit for bit.
    const same = { ...inputs, oldLogp: inputs.logp };
    const tok = accumulatedLossRef(same, 1);
    const seq = accumulatedLossRef({ ...same, importanceSamplingLevel: 'sequence', delta: 4 }, 1);
    expect(seq.loss).toBe(tok.loss);
    expect(Array.from(seq.dLogp)).toEqual(Array.from(tok.dLogp));
  });
});

// The static entropy bonus (docs/grpo.md §5) against TRL's `_compute_loss` with entropy_coef:
// the step's loss, ∂loss/∂entropy per token, and the logged policy_loss / entropy_coef.
describe('entropy_coef as TRL computes it', () => {
  const adv = trlScore(PER_FUNC, WEIGHTS, G, 'group').advantages;
  const opts = { epsLow: 0.2, epsHigh: 0.28, beta: 0.04, maxLen: 7, entropyCoef: 0.03 };
  for (const GA of [1, 2, 4]) {
    for (const lossType of ['grpo', 'bnpo', 'dr_grpo', 'dapo'] as const) {
      it(`${lossType}, GA = ${GA}, μ = 2`, () => {
        const passes = [lossBatch(adv, 17, 0.05), lossBatch(adv, 17, 0.9)];
        const nm = N / GA;
        const appended: Record<string, number>[] = [];
        let projectPolicyLoss = 0;
        let projectLossSum = 0;
        for (const b of passes) {
          const numItems = b.mask.flat().reduce((s, v) => s + v, 0);
          let trlLoss = 0;
          const trlDEntropy: number[] = [];
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
            trlDEntropy.push(...flat(r.dEntropy));
            appended.push(r.metrics);
          }
          const policy = accumulatedLossRef(
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
          const bonus = entropyBonus({
            entropy: flat(b.entropy),
            mask: flat(b.mask),
            N,
            L,
            GA,
            lossType,
            entropyCoef: opts.entropyCoef,
          });
          closeTo(policy.loss + bonus.term, trlLoss, 'loss');
          for (let j = 0; j < N * L; j++)
            closeTo(bonus.gradEntropy[j], trlDEntropy[j], `∂loss/∂H[${j}]`);
          projectPolicyLoss += policyLossMetric(policy.loss, lossType, GA) / passes.length;
          projectLossSum += policy.loss + bonus.term;
          expect(bonus.term).toBeLessThan(0);
        }
        const trl = trlLog(appended);
        closeTo(projectPolicyLoss, trl.policy_loss, 'policy_loss');
        expect(trl.entropy_coef).toBe(opts.entropyCoef);
        expect(Number.isFinite(projectLossSum)).toBe(true);
      });
    }
  }

  it('the bonus is −coef · the mean token entropy for dapo over the whole batch', () => {
    // Two sequences, mask [1, 1, 0 | 1, 0, 0], entropies [1, 2, 9 | 3, 9, 9]: mean H = 2, GA = 1.
    const r = entropyBonus({
      entropy: [1, 2, 9, 3, 9, 9],
      mask: [1, 1, 0, 1, 0, 0],
      N: 2,
      L: 3,
      GA: 1,
      lossType: 'dapo',
      entropyCoef: 0.5,
    });
    expect(r.term).toBeCloseTo(-1, 15);
    expect(Array.from(r.gradEntropy)).toEqual([-0.5 / 3, -0.5 / 3, 0, -0.5 / 3, 0, 0]);
    // GA = 2, grpo: micro-batch means 1.5 and 3, each / GA: −0.5 · (1.5 + 3) / 2 = −1.125.
    const g = entropyBonus({
      entropy: [1, 2, 9, 3, 9, 9],
      mask: [1, 1, 0, 1, 0, 0],
      N: 2,
      L: 3,
      GA: 2,
      lossType: 'grpo',
      entropyCoef: 0.5,
    });
    expect(g.term).toBeCloseTo(-1.125, 15);
  });
});

// top_entropy_quantile (docs/grpo.md §3) against TRL's get_high_entropy_mask + _compute_loss: the
// quantile is per micro-batch over its counted tokens, the mask multiplies the policy term only.
describe('top_entropy_quantile as TRL computes it', () => {
  const adv = trlScore(PER_FUNC, WEIGHTS, G, 'group').advantages;
  const opts = { epsLow: 0.2, epsHigh: 0.28, beta: 0.04, maxLen: 7 };
  // float32 entropies, as TRL holds them.
  const batchF32 = (seed: number, spread: number): LossBatch => {
    const b = lossBatch(adv, seed, spread);
    return { ...b, entropy: b.entropy.map((row) => row.map((x) => Math.fround(x))) };
  };
  for (const rho of [0, 0.2, 0.5]) {
    for (const isLevel of ['token', 'sequence'] as const) {
      for (const GA of [1, 2]) {
        for (const lossType of ['grpo', 'dapo', 'dr_grpo'] as const) {
          it(`ρ = ${rho}, ${isLevel}, ${lossType}, GA = ${GA}`, () => {
            const b = batchF32(19, 0.9);
            const nm = N / GA;
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
              const r = trlMicroLoss(micro, {
                lossType,
                GA,
                numItems,
                ...opts,
                isLevel,
                topEntropyQuantile: rho,
              });
              trlLoss += r.loss;
              trlGrad.push(...flat(r.dLogp));
            }
            const inputs = {
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
              importanceSamplingLevel: isLevel,
              topEntropyQuantile: rho,
              entropy: flat(b.entropy),
            };
            const project = accumulatedLossRef(inputs, GA);
            closeTo(project.loss, trlLoss, 'loss');
            for (let j = 0; j < N * L; j++) closeTo(project.dLogp[j], trlGrad[j], `dLogp[${j}]`);
            // The mask changes the loss (ρ = 1 would be the plain loss).
            const all = accumulatedLossRef({ ...inputs, topEntropyQuantile: 1 }, GA);
            expect(Math.abs(project.loss - all.loss)).toBeGreaterThan(1e-6);
          });
        }
      }
    }
  }

  it('hand-worked quantiles: torch.quantile with a float32 rank', () => {
    const h = [3, 1, 5, 2, 4, 9];
    const mask = [1, 1, 1, 1, 1, 0]; // the 9 is padding
    // ρ = 0.25: q = 0.75, rank 3 exactly: threshold s[3] = 4 → keep 4 and 5.
    expect(Array.from(highEntropyMaskRef(h, mask, 0.25))).toEqual([0, 0, 1, 0, 1, 0]);
    // ρ = 0.2: q = float32(0.8), rank 3.2000000477: threshold 4 + 0.2·(5 − 4) = 4.2 → keep 5.
    expect(Array.from(highEntropyMaskRef(h, mask, 0.2))).toEqual([0, 0, 1, 0, 0, 0]);
    // ρ = 0: the maximum only; ρ = 1: every counted token.
    expect(Array.from(highEntropyMaskRef(h, mask, 0))).toEqual([0, 0, 1, 0, 0, 0]);
    expect(Array.from(highEntropyMaskRef(h, mask, 1))).toEqual([1, 1, 1, 1, 1, 0]);
    // Ties at the threshold are kept (≥); nothing counted keeps nothing.
    expect(Array.from(highEntropyMaskRef([2, 2, 1, 2], [1, 1, 1, 1], 0.5))).toEqual([1, 1, 0, 1]);
    expect(Array.from(highEntropyMaskRef([1, 2], [0, 0], 0.5))).toEqual([0, 0]);
  });

  it('ρ = 1 is the plain loss, bit for bit', () => {
    const b = batchF32(19, 0.9);
    const inputs = {
      logp: flat(b.logp),
      oldLogp: flat(b.old),
      refLogp: flat(b.ref!),
      advantages: b.adv,
      mask: flat(b.mask),
      N,
      L,
      lossType: 'dapo' as const,
      epsilonLow: 0.2,
      epsilonHigh: 0.28,
      beta: 0.04,
      maxCompletionLength: 7,
    };
    const plain = accumulatedLossRef(inputs, 2);
    const one = accumulatedLossRef(
      { ...inputs, topEntropyQuantile: 1, entropy: flat(b.entropy) },
      2,
    );
    expect(one.loss).toBe(plain.loss);
    expect(Array.from(one.dLogp)).toEqual(Array.from(plain.dLogp));
  });
});

// loss_type 'cispo' and 'sapo' (docs/grpo.md §3) against TRL's `_compute_loss`: loss, ∂loss/∂logp,
// and the logged metrics (cispo_clip_ratio for cispo, no clip ratios for sapo).
describe("loss_type 'cispo' and 'sapo' as TRL computes them", () => {
  const adv = trlScore(PER_FUNC, WEIGHTS, G, 'group').advantages;
  const shifted = (seed: number, spread: number): LossBatch => {
    const b = lossBatch(adv, seed, spread);
    const shift = [0.5, -0.4, 0.1, -0.6, 0.3, 0.45, -0.3, 0.05, 0.6, -0.5, 0.2, -0.1];
    return { ...b, logp: b.logp.map((row, i) => row.map((x) => x + shift[i])) };
  };
  const cases = [
    // cispo with ε_high as MiniMax-M1/ScaleRL use it (a ratio cap, here 1.3), sapo TRL's defaults
    // and custom temperatures.
    { lossType: 'cispo' as const, epsHigh: 1.3, sapoPos: 1, sapoNeg: 1.05 },
    { lossType: 'sapo' as const, epsHigh: 0.28, sapoPos: 1, sapoNeg: 1.05 },
    { lossType: 'sapo' as const, epsHigh: 0.28, sapoPos: 2, sapoNeg: 0.5 },
  ];
  for (const c of cases) {
    for (const isLevel of ['token', 'sequence'] as const) {
      for (const GA of [1, 2, 4]) {
        it(`${c.lossType} τ ${c.sapoPos}/${c.sapoNeg}, ${isLevel}, GA = ${GA}, μ = 2`, () => {
          const opts = { epsLow: 0.2, epsHigh: c.epsHigh, beta: 0.04, maxLen: 7 };
          const passes = [lossBatch(adv, 23, 0.05), shifted(23, 0.9)];
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
              const r = trlMicroLoss(micro, {
                lossType: c.lossType,
                GA,
                numItems,
                ...opts,
                isLevel,
                sapoPos: c.sapoPos,
                sapoNeg: c.sapoNeg,
              });
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
                lossType: c.lossType,
                epsilonLow: opts.epsLow,
                epsilonHigh: opts.epsHigh,
                beta: opts.beta,
                maxCompletionLength: opts.maxLen,
                importanceSamplingLevel: isLevel,
                sapoTemperaturePos: c.sapoPos,
                sapoTemperatureNeg: c.sapoNeg,
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
                  importanceSamplingLevel: isLevel,
                  lossType: c.lossType,
                }),
              );
            }
          }
          const trl = trlLog(appended);
          const mine = loggedLossMetrics(projectMicro, opts.beta, c.lossType);
          expect(Object.keys(mine).sort()).toEqual(Object.keys(trl).sort());
          for (const [key, value] of Object.entries(trl)) closeTo(mine[key], value, key);
          if (c.lossType === 'cispo') expect(trl.cispo_clip_ratio).toBeGreaterThan(0);
        });
      }
    }
  }
});

// multi_objective_aggregation='normalize_then_sum' (GDPO, docs/grpo.md §2) against TRL's code.
describe("multi_objective_aggregation 'normalize_then_sum' as TRL computes it", () => {
  it('advantages and frac_reward_zero_std: unscorable rows, a function scoring one row of a group', () => {
    const trl = trlScoreNormalizeThenSum(PER_FUNC, WEIGHTS, G);
    const results = projectRewards();
    for (const scale of ['group', 'batch', 'none'] as const) {
      // scale_rewards plays no part here, as in TRL.
      const a = stepAdvantages(results, ['f0', 'f1'], WEIGHTS, G, scale, 'normalize_then_sum');
      a.forEach((x, i) => closeTo(x, trl.advantages[i], `A[${i}]`, 1e-5));
    }
    const m = rewardMetrics(results, ['f0', 'f1'], G, 'group', { weights: WEIGHTS });
    expect(m.frac_reward_zero_std).toBe(trl.fracRewardZeroStd);
    expect(trl.advantages[2]).toBe(0); // the unscorable row
    // Differs from sum_then_normalize on these rewards.
    const sum = stepAdvantages(results, ['f0', 'f1'], WEIGHTS, G, 'group');
    expect(Math.max(...Array.from(sum, (x, i) => Math.abs(x - trl.advantages[i])))).toBeGreaterThan(
      0.1,
    );
  });

  it('hand-worked: two functions on one group of 4', () => {
    // f0 = [1, 0, 0, 1] (mean ½, std 0.57735), f1 = [0, 0, 1, 1] (same), weights [1, 1]:
    // ñ0 = ±0.866 (÷ std + 1e-4), ñ1 likewise; sums [0, −1.7318, 0, 1.7318] · (1/(0.57735 + 1e-4))/…
    const per = [
      [1, 0],
      [0, 0],
      [0, 1],
      [1, 1],
    ];
    const z = 0.5 / (Math.sqrt(1 / 3) + 1e-4);
    const sums = [0, -2 * z, 0, 2 * z];
    const std = Math.sqrt((2 * (2 * z) ** 2) / 3);
    const expected = sums.map((r) => r / (std + 1e-4));
    const r = normalizeThenSumAdvantages(per, [1, 1], 4);
    r.advantages.forEach((x, i) => expect(x).toBeCloseTo(expected[i], 12));
    expect(r.zeroStd).toBe(false);
    const t = trlScoreNormalizeThenSum(per, [1, 1], 4);
    t.advantages.forEach((x, i) => expect(x).toBeCloseTo(expected[i], 5));
  });

  it('all rewards equal: every advantage 0 and frac_reward_zero_std 1', () => {
    const per = [
      [1, null],
      [1, null],
      [0.5, 0.5],
      [0.5, 0.5],
    ];
    const r = normalizeThenSumAdvantages(per, [1, 2], 2);
    expect(Array.from(r.advantages)).toEqual([0, 0, 0, 0]);
    expect(r.zeroStd).toBe(true);
    expect(trlScoreNormalizeThenSum(per, [1, 2], 2).fracRewardZeroStd).toBe(1);
  });
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

describe('completions/* metrics as TRL computes them', () => {
  const EOS = 2;
  /** The project's metrics from raw (N, L) sampler output: cut at the first EOS, then counted. */
  function projectMetrics(rows: number[][]) {
    const N = rows.length;
    const L = rows[0].length;
    const stepMajor = Array.from({ length: L * N }, (_, k) => rows[k % N][Math.floor(k / N)]);
    const sampled = collectCompletions(stepMajor, new Float32Array(L * N), N, L, new Set([EOS]));
    return completionMetrics(
      sampled.completions.map((c) => c.length),
      sampled.finished,
    );
  }
  const cases: Array<[string, number[][], Record<string, number>]> = [
    [
      'mixed: EOS first, mid-row with tokens drawn after it, at the last column, and truncated rows',
      [
        [2, 9, 9, 9, 9, 9],
        [5, 6, 2, 7, 2, 8],
        [5, 6, 7, 8, 9, 2],
        [5, 6, 7, 8, 9, 4],
        [3, 3, 3, 3, 3, 3],
        [4, 2, 0, 0, 0, 0],
      ],
      {
        // lengths 1, 3, 6, 6, 6, 2; terminated rows 0, 1, 2, 5 → 1, 3, 6, 2
        'completions/mean_length': 24 / 6,
        'completions/min_length': 1,
        'completions/max_length': 6,
        'completions/clipped_ratio': 2 / 6,
        'completions/mean_terminated_length': 12 / 4,
        'completions/min_terminated_length': 1,
        'completions/max_terminated_length': 6,
      },
    ],
    [
      'all truncated: TRL logs 0 for every terminated-length statistic',
      [
        [5, 6, 7, 8],
        [1, 1, 1, 1],
        [9, 3, 4, 0],
      ],
      {
        'completions/mean_length': 4,
        'completions/min_length': 4,
        'completions/max_length': 4,
        'completions/clipped_ratio': 1,
        'completions/mean_terminated_length': 0,
        'completions/min_terminated_length': 0,
        'completions/max_terminated_length': 0,
      },
    ],
    [
      'all terminated, a non-integer mean (8/3)',
      [
        [4, 2, 5],
        [4, 4, 2],
        [5, 4, 2],
      ],
      {
        'completions/mean_length': 8 / 3,
        'completions/min_length': 2,
        'completions/max_length': 3,
        'completions/clipped_ratio': 0,
        'completions/mean_terminated_length': 8 / 3,
        'completions/min_terminated_length': 2,
        'completions/max_terminated_length': 3,
      },
    ],
  ];
  for (const [name, rows, handWorked] of cases) {
    it(name, () => {
      const trl = trlCompletionMetrics(rows, EOS);
      const project = projectMetrics(rows);
      expect(Object.keys(project).sort()).toEqual(Object.keys(trl).sort());
      for (const key of Object.keys(trl)) {
        // TRL's means are float32; the project's f64 (|Δ| ≤ half an f32 ulp).
        closeTo(project[key], trl[key], key, 1e-7);
        closeTo(project[key], handWorked[key], `${key} (by hand)`, 1e-12);
      }
    });
  }
});
