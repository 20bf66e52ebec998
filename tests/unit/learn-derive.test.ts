// Learn mode's derivations (src/app/learn/derive.ts) on hand-built step reports, against values
// worked out by hand from docs/grpo.md §1–4.
import { describe, expect, it } from 'vitest';
import {
  advantageWalk,
  clippedObjective,
  clipSide,
  compareLossTypes,
  k3,
  logpMovement,
  matches,
  meanKl,
  rewardRows,
  stepLoss,
  tokenTerms,
  type LearnConfig,
} from '../../src/app/learn/derive';
import type { CompletionRecord, StepReport } from '../../src/grpo/trainer';

// Hand values are short rational expressions: only f64 rounding separates them from the code's.
const HAND_TOL = 1e-12;

const close = (actual: number, expected: number, what = '') =>
  expect(Math.abs(actual - expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
    HAND_TOL,
  );

const base: LearnConfig = {
  rewards: ['format', 'accuracy'],
  rewardWeights: [0.5, 2],
  scaleRewards: 'group',
  epsilon: 0.2,
  epsilonHigh: 0.2,
  beta: 0,
  lossType: 'dapo',
  numIterations: 1,
  maxCompletionLength: 8,
  gradientAccumulationSteps: 1,
};

/** A completion whose every token has log-prob `logp` and ratio exp(logRatio[t]) (default 1). */
function completion(
  advantage: number,
  length: number,
  opts: {
    logRatio?: number[];
    ref?: number[];
    after?: number[];
    counted?: boolean[];
    perFunction?: Record<string, number | null>;
    total?: number;
  } = {},
): CompletionRecord {
  const logp = Array.from({ length }, (_, t) => -1 - 0.1 * t);
  return {
    text: 'x'.repeat(length),
    tokens: Array.from({ length }, (_, t) => t + 1),
    truncated: false,
    reward: { total: opts.total ?? 0, perFunction: opts.perFunction ?? {}, errors: [] },
    advantage,
    reflects: false,
    logp,
    oldLogp: logp.map((lp, t) => lp - (opts.logRatio?.[t] ?? 0)),
    refLogp: opts.ref ? logp.map((lp, t) => lp + opts.ref![t]) : null,
    counted: opts.counted ?? logp.map(() => true),
    logpAfter: opts.after ? logp.map((lp, t) => lp + opts.after![t]) : null,
  };
}

function report(groups: CompletionRecord[][], metrics: Record<string, number> = {}): StepReport {
  return {
    step: 1,
    metrics,
    skipped: null,
    groups: groups.map((completions, b) => ({
      problem: {
        id: `p${b}`,
        task: 't',
        question: 'q',
        reference: null,
        verifier: { kind: 'none' },
      },
      prompt: 'q',
      promptTokens: 1,
      completions,
    })),
  };
}

describe('rewards', () => {
  it('recomputes Σ w·r with not-applicable counted as 0 and keeps errors with their function', () => {
    const c0 = completion(0, 1, { perFunction: { format: 1, accuracy: 1 }, total: 2.5 });
    const c1 = completion(0, 1, { perFunction: { format: 1, accuracy: null }, total: 0.5 });
    const c2 = completion(0, 1, { perFunction: { format: 0, accuracy: 0 }, total: 0 });
    c2.reward.errors.push({ reward: 'accuracy', kind: 'threw', message: 'Error: boom' });
    const rows = rewardRows(report([[c0, c1, c2]]).groups[0], base);
    expect(rows.map((r) => r.recomputed)).toEqual([2.5, 0.5, 0]);
    expect(rows.map((r) => r.total)).toEqual([2.5, 0.5, 0]);
    expect(rows[0].cells.map((c) => c.contribution)).toEqual([0.5, 2]);
    expect(rows[1].cells[1]).toMatchObject({ value: null, contribution: 0, weight: 2 });
    expect(rows[2].cells[1].error?.message).toBe('Error: boom');
    expect(rows[2].cells[0].error).toBeNull();
  });

  it('weights default to 1 when the config gives none', () => {
    const c = completion(0, 1, { perFunction: { format: 1, accuracy: 1 }, total: 2 });
    const rows = rewardRows(report([[c, c]]).groups[0], { ...base, rewardWeights: [] });
    expect(rows[0].recomputed).toBe(2);
  });
});

describe('advantages', () => {
  // Group 0 rewards [1, 0, 0, 1]: mean 1/2, unbiased var = 4·(1/4)/3 = 1/3.
  // Group 1 rewards [2, 2, 2, 2]: all equal → A = 0 exactly.
  const sd = Math.sqrt(1 / 3);
  const a = 0.5 / (sd + 1e-4);
  const r = report([
    [1, 0, 0, 1].map((t, i) => completion([a, -a, -a, a][i], 1, { total: t })),
    [2, 2, 2, 2].map((t) => completion(0, 1, { total: t })),
  ]);

  it('group scaling: mean, unbiased std, (r − mean)/(std + 1e-4), equal to the report', () => {
    const w = advantageWalk(r, 0, base);
    close(w.mean, 0.5, 'mean');
    close(w.groupStd, sd, 'std');
    close(w.denominator, sd + 1e-4, 'denominator');
    w.rows.forEach((row, i) => {
      close(row.advantage, [a, -a, -a, a][i], `A${i}`);
      close(row.centered, [0.5, -0.5, -0.5, 0.5][i], `centered${i}`);
      expect(row.advantage).toBe(row.reported);
    });
    close(w.sum, 0, 'sum');
    expect(w.allEqual).toBe(false);
  });

  it('a group of equal rewards has no signal', () => {
    const w = advantageWalk(r, 1, base);
    expect(w.allEqual).toBe(true);
    expect(w.rows.map((x) => x.advantage)).toEqual([0, 0, 0, 0]);
  });

  it("batch scaling divides by the std of all N rewards; 'none' only centres", () => {
    // All eight rewards [1,0,0,1,2,2,2,2]: mean 1.25, Σd² = 2·0.0625 + 2·1.5625 + 4·0.5625 = 5.5.
    const batchSd = Math.sqrt(5.5 / 7);
    const wb = advantageWalk(r, 0, { scaleRewards: 'batch' });
    close(wb.batchStd, batchSd, 'batch std');
    close(wb.rows[0].advantage, 0.5 / (batchSd + 1e-4), 'batch A0');
    const wn = advantageWalk(r, 0, { scaleRewards: 'none' });
    expect(wn.denominator).toBe(1);
    expect(wn.rows.map((x) => x.advantage)).toEqual([0.5, -0.5, -0.5, 0.5]);
  });
});

describe('ratio, clip and KL per token', () => {
  it('clipped objective and clip side on the four cases of the min', () => {
    close(clippedObjective(1.5, 1, 0.2, 0.2), 1.2, 'A>0 above: clipped');
    expect(clipSide(1.5, 1, 0.2, 0.2)).toBe('high');
    close(clippedObjective(0.5, -1, 0.2, 0.2), -0.8, 'A<0 below: clipped');
    expect(clipSide(0.5, -1, 0.2, 0.2)).toBe('low');
    close(clippedObjective(0.5, 1, 0.2, 0.2), 0.5, 'A>0 below: not clipped');
    expect(clipSide(0.5, 1, 0.2, 0.2)).toBeNull();
    close(clippedObjective(1.5, -1, 0.2, 0.2), -1.5, 'A<0 above: not clipped');
    expect(clipSide(1.5, -1, 0.2, 0.2)).toBeNull();
    // Asymmetric DAPO "clip-higher": 1.25 is inside [0.8, 1.28].
    expect(clipSide(1.25, 1, 0.2, 0.28)).toBeNull();
  });

  it('k3 is exp(x) − x − 1: 0 at x = 0, 1 − ln 2 at x = ln 2', () => {
    expect(k3(0)).toBe(0);
    close(k3(Math.LN2), 1 - Math.LN2, 'k3(ln 2)');
  });

  it('tokenTerms: ratio, surrogate, k3 and ℓ = −surrogate + β·kl', () => {
    const c = completion(1, 2, {
      logRatio: [Math.log(1.5), 0],
      ref: [Math.LN2, 0],
      after: [0.25, -0.5],
    });
    const terms = tokenTerms(c, { ...base, beta: 0.1 });
    close(terms[0].ratio, 1.5, 'ρ0');
    expect(terms[0].clip).toBe('high');
    close(terms[0].surrogate, 1.2, 'surrogate0');
    close(terms[0].kl!, 1 - Math.LN2, 'kl0');
    close(terms[0].loss, -1.2 + 0.1 * (1 - Math.LN2), 'ℓ0');
    close(terms[1].loss, -1, 'ℓ1');
    close(terms[0].delta!, 0.25, 'Δ0');
    close(terms[1].delta!, -0.5, 'Δ1');
    expect(tokenTerms(c, base)[0].kl).toBeNull();
  });

  it('mean k3 over counted tokens only; null when β = 0', () => {
    const c = completion(1, 3, { ref: [Math.LN2, 0, 5], counted: [true, true, false] });
    close(meanKl([c], { beta: 0.1 })!, (1 - Math.LN2) / 2, 'mean kl');
    expect(meanKl([c], { beta: 0 })).toBeNull();
  });
});

describe('loss types on one group (hand-checked)', () => {
  // c0: A = +1, 2 tokens; c1: A = −1, 4 tokens; ρ = 1, β = 0 → ℓ = −A per token.
  const group = [completion(1, 2), completion(-1, 4)];
  const values = Object.fromEntries(compareLossTypes(group, base).map((v) => [v.lossType, v]));

  it('grpo averages per sequence: (1/2)(−2/2 + 4/4) = 0', () => close(values.grpo.loss, 0, 'grpo'));
  it('bnpo and dapo average per token: (−2 + 4)/6 = 1/3', () => {
    close(values.bnpo.loss, 1 / 3, 'bnpo');
    close(values.dapo.loss, 1 / 3, 'dapo');
  });
  it('dr_grpo divides by N·maxCompletionLength: 2/(2·8) = 1/8', () =>
    close(values.dr_grpo.loss, 1 / 8, 'dr_grpo'));

  it('token and sequence weights show the length bias', () => {
    expect(values.grpo.tokenWeight).toEqual([1 / 4, 1 / 8]);
    expect(values.grpo.sequenceWeight).toEqual([1 / 2, 1 / 2]);
    expect(values.bnpo.tokenWeight).toEqual([1 / 6, 1 / 6]);
    close(values.bnpo.sequenceWeight[1], 4 / 6, 'bnpo seq weight');
    expect(values.dr_grpo.tokenWeight).toEqual([1 / 16, 1 / 16]);
  });
});

describe('the step loss the trainer way (micro-batches)', () => {
  // Group 0 = micro-batch 0: as above. Group 1 = micro-batch 1: c2 A = 0.5 with ρ = 1.5 (clipped
  // high: surrogate 0.6), c3 A = −0.5, ρ = 1. 8 active tokens in all.
  const r = report([
    [completion(1, 2), completion(-1, 4)],
    [completion(0.5, 1, { logRatio: [Math.log(1.5)] }), completion(-0.5, 1)],
  ]);
  const cfg = (lossType: LearnConfig['lossType'], GA: number) => ({
    ...base,
    lossType,
    gradientAccumulationSteps: GA,
  });

  it('bnpo averages the micro-batch means: (1/3 + (−0.6 + 0.5)/2)/2', () => {
    close(stepLoss(r, cfg('bnpo', 2), 'bnpo').loss, (1 / 3 - 0.05) / 2, 'bnpo GA=2');
    close(stepLoss(r, cfg('bnpo', 1), 'bnpo').loss, (2 - 0.1) / 8, 'bnpo GA=1');
  });

  it('dapo divides by the whole batch’s tokens at any accumulation', () => {
    close(stepLoss(r, cfg('dapo', 2), 'dapo').loss, (2 - 0.1) / 8, 'dapo GA=2');
    close(stepLoss(r, cfg('dapo', 1), 'dapo').loss, (2 - 0.1) / 8, 'dapo GA=1');
  });

  it('grpo and dr_grpo', () => {
    // grpo: micro 0 → 0; micro 1 → (1/2)(−0.6 + 0.5) = −0.05; averaged over 2.
    close(stepLoss(r, cfg('grpo', 2), 'grpo').loss, -0.025, 'grpo');
    // dr_grpo: micro 0 → 2/(2·8); micro 1 → −0.1/(2·8); averaged.
    close(stepLoss(r, cfg('dr_grpo', 2), 'dr_grpo').loss, (2 / 16 - 0.1 / 16) / 2, 'dr_grpo');
  });

  it('clip fractions are token-weighted over the batch: 1 of 8 tokens clipped high', () => {
    const { stats } = stepLoss(r, cfg('dapo', 2), 'dapo');
    close(stats.clipRatioHigh, 1 / 8, 'high');
    close(stats.clipRatioRegion, 1 / 8, 'region');
    expect(stats.clipRatioLow).toBe(0);
    expect(stats.activeTokens).toBe(8);
  });

  it('rejects an accumulation that does not divide N', () => {
    expect(() => stepLoss(r, cfg('dapo', 3), 'dapo')).toThrow(/divide/);
  });
});

describe('how the log-probs moved', () => {
  it('Σ A·Δ, per-sign means and the aligned share', () => {
    const cs = [
      completion(1, 2, { after: [0.2, 0.4] }),
      completion(-1, 2, { after: [-0.1, 0.1] }),
      completion(0, 1, { after: [0.3] }),
    ];
    const m = logpMovement(cs)!;
    close(m.weighted, 0.6 - 0, 'Σ A·Δ');
    close(m.meanDeltaPositive, 0.3, 'mean Δ for A > 0');
    close(m.meanDeltaNegative, 0, 'mean Δ for A < 0');
    // Aligned: 0.2, 0.4 (A > 0), −0.1 (A < 0) → 3 of 4 signed tokens.
    close(m.alignedFraction, 3 / 4, 'aligned');
    expect(m.tokens).toBe(5);
    close(m.perCompletion[0].meanDelta, 0.3, 'c0 mean Δ');
  });

  it('null without logpAfter', () => {
    expect(logpMovement([completion(1, 2)])).toBeNull();
  });
});

describe('matches', () => {
  it('absolute near 0, relative elsewhere', () => {
    expect(matches(1e-6, 0)).toBe(true);
    expect(matches(1e-3, 0)).toBe(false);
    expect(matches(100.005, 100)).toBe(true);
    expect(matches(100.5, 100)).toBe(false);
  });
});
