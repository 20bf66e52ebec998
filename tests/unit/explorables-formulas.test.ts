// The formulas behind Learn's explorables (src/app/learn/explorables/*.ts), each checked against
// values worked by hand from docs/grpo.md: the clipped surrogate and its gradient with ε_low,
// ε_high and δ, CISPO and SAPO (§3, §5) and the loss types' token weights (§4); the advantages of
// an edited reward group under group / batch / no scaling (§2); the k3 estimator against the true
// KL of a two-outcome distribution (§3); and the step strip's per-completion push (§5).
import { describe, expect, it } from 'vitest';
import {
  curve,
  groupTokenWeights,
  startPoint,
  stepPoints,
  tokenPoint,
  type SurrogateParams,
} from '../../src/app/learn/explorables/surrogate';
import { clampReward, editedAdvantages } from '../../src/app/learn/explorables/advantage-editor';
import { k3, klDivergence, klPoint, klStart } from '../../src/app/learn/explorables/kl-estimator';
import { stepStrip } from '../../src/app/learn/explorables/step-strip';
import { computeAdvantages } from '../../src/grpo/advantages';
import type { CompletionRecord, StepReport } from '../../src/grpo/trainer';

const clip = (over: Partial<SurrogateParams> = {}): SurrogateParams => ({
  lossType: 'dapo',
  epsLow: 0.2,
  epsHigh: 0.2,
  delta: null,
  sapoPos: 1,
  sapoNeg: 1.05,
  ...over,
});

describe('surrogate explorable (docs/grpo.md §3, §5)', () => {
  it('A > 0: follows ρ·A, then flat past 1 + ε_high with no gradient', () => {
    expect(tokenPoint(0.5, 1, clip())).toEqual({ objective: 0.5, push: 0.5, clipped: false });
    expect(tokenPoint(1.5, 1, clip())).toEqual({ objective: 1.2, push: 0, clipped: true });
    // ε_high = 0.28 (DAPO's clip-higher) lets ρ = 1.25 still be pushed.
    expect(tokenPoint(1.25, 1, clip({ epsHigh: 0.28 }))).toEqual({
      objective: 1.25,
      push: 1.25,
      clipped: false,
    });
    expect(tokenPoint(1.25, 2, clip())).toEqual({ objective: 2.4, push: 0, clipped: true });
  });

  it('A < 0: flat below 1 − ε_low, unbounded above 1 + ε_high unless δ caps it', () => {
    const low = tokenPoint(0.5, -1, clip());
    expect(low.objective).toBeCloseTo(-0.8, 12);
    expect(low.push).toBe(0);
    expect(low.clipped).toBe(true);
    expect(tokenPoint(2, -1, clip())).toEqual({ objective: -2, push: -2, clipped: false });
    // δ = 1.4: min(min(ρ, δ)·A, clip(ρ)·A) = min(−1.4, −1.2) = −1.4, no gradient past δ.
    expect(tokenPoint(2, -1, clip({ delta: 1.4 }))).toEqual({
      objective: -1.4,
      push: 0,
      clipped: true,
    });
    // Below δ the capped branch is ρ itself.
    expect(tokenPoint(1.3, -1, clip({ delta: 1.4 }))).toEqual({
      objective: -1.3,
      push: -1.3,
      clipped: false,
    });
  });

  it('SAPO: at ρ = 1 the push is A, the value A·(4/τ)·σ(0)', () => {
    const pos = tokenPoint(1, 1, clip({ lossType: 'sapo' }));
    expect(pos.objective).toBeCloseTo(2, 12);
    expect(pos.push).toBeCloseTo(1, 12);
    const neg = tokenPoint(1, -1, clip({ lossType: 'sapo' }));
    expect(neg.objective).toBeCloseTo(-2 / 1.05, 12);
    expect(neg.push).toBeCloseTo(-1, 12);
    // Smooth: at ρ = 2, A = 1, τ = 1: push = 4σ(1)(1 − σ(1))·2.
    const s = 1 / (1 + Math.exp(-1));
    expect(tokenPoint(2, 1, clip({ lossType: 'sapo' })).push).toBeCloseTo(8 * s * (1 - s), 12);
  });

  it('CISPO: the push is min(ρ, ε_high)·A; no value without log π', () => {
    expect(tokenPoint(2, 1, clip({ lossType: 'cispo', epsHigh: 5 }))).toEqual({
      objective: null,
      push: 2,
      clipped: false,
    });
    expect(tokenPoint(6, 1, clip({ lossType: 'cispo', epsHigh: 5 }))).toEqual({
      objective: null,
      push: 5,
      clipped: true,
    });
  });

  it('the curve holds the kinks and is sorted', () => {
    const pts = curve(1, clip({ delta: 1.5 }), 0.5, 2, 7);
    const xs = pts.map((p) => p.rho);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    for (const k of [0.8, 1.2, 1.5]) expect(xs).toContain(k);
    const at = (x: number) => pts.find((p) => p.rho === x)!;
    expect(at(1.2).objective).toBeCloseTo(1.2, 12);
    expect(at(2).objective).toBeCloseTo(1.2, 12);
    expect(at(0.5).push).toBe(0.5);
  });

  it('the loss types weigh a token of a 3-, 1-, 1- and 2-token group as §4 says', () => {
    const c = (n: number) =>
      ({ counted: Array.from({ length: n }, () => true) }) as CompletionRecord;
    const group = [c(3), c(1), c(1), c(2)];
    const w = (lt: SurrogateParams['lossType']) => groupTokenWeights(group, lt, 8);
    expect(w('grpo')).toEqual([1 / 12, 1 / 4, 1 / 4, 1 / 8]);
    expect(w('dapo')).toEqual([1 / 7, 1 / 7, 1 / 7, 1 / 7]);
    expect(w('bnpo')).toEqual([1 / 7, 1 / 7, 1 / 7, 1 / 7]);
    expect(w('dr_grpo')).toEqual([1 / 32, 1 / 32, 1 / 32, 1 / 32]);
    expect(w('sapo')).toEqual(w('grpo'));
  });

  it('starts on the step token with the largest |A|, its ratio from the report', () => {
    const rec = (a: number, logp: number[], old: number[]) =>
      ({ advantage: a, logp, oldLogp: old, counted: logp.map(() => true) }) as CompletionRecord;
    const pts = stepPoints([rec(0.5, [-1], [-1]), rec(-1.5, [-1, -0.5], [-1.2, -0.5])]);
    expect(pts).toHaveLength(3);
    expect(pts[1].rho).toBeCloseTo(Math.exp(0.2), 12);
    expect(startPoint(pts)).toEqual({ rho: pts[1].rho, advantage: -1.5 });
    expect(startPoint([{ rho: 1, advantage: 0, completion: 0 }])).toEqual({
      rho: 1,
      advantage: 1,
    });
  });
});

describe('reward-group explorable (docs/grpo.md §2)', () => {
  const step = [1, 0, 0, 1, 1, 1, 1, 1];

  it("'group': (r − mean) / (std + 1e-4) with the unbiased std", () => {
    const t = editedAdvantages(step, 0, [1, 0, 0, 1], 'group');
    const s = Math.sqrt(1 / 3); // Σ(r − 0.5)² = 1, / (G − 1) = 3
    expect(t.mean).toBe(0.5);
    expect(t.groupStd).toBeCloseTo(s, 14);
    expect(t.denominator).toBeCloseTo(s + 1e-4, 14);
    const a = 0.5 / (s + 1e-4);
    t.advantages.forEach((v, i) => expect(v).toBeCloseTo([a, -a, -a, a][i], 12));
  });

  it("'batch' divides by the std of all N rewards with the edit in place; 'none' by 1", () => {
    // All eight: [2, 0, 0, 0, 1, 1, 1, 1], mean 0.75, Σ(r − 0.75)² = 3.5, std = √(3.5/7) = √0.5.
    const t = editedAdvantages(step, 0, [2, 0, 0, 0], 'batch');
    expect(t.batchStd).toBeCloseTo(Math.SQRT1_2, 14);
    const d = Math.SQRT1_2 + 1e-4;
    t.advantages.forEach((v, i) =>
      expect(v).toBeCloseTo([1.5 / d, -0.5 / d, -0.5 / d, -0.5 / d][i], 12),
    );
    expect(editedAdvantages(step, 0, [2, 0, 0, 0], 'none').advantages).toEqual([
      1.5, -0.5, -0.5, -0.5,
    ]);
    // Editing the second group leaves the first group's advantages where 'group' puts them.
    const second = editedAdvantages(step, 1, [0, 1, 1, 1], 'group');
    expect(second.advantages[0]).toBeCloseTo(-0.75 / (0.5 + 1e-4), 12);
  });

  it('a group equal in float32 has advantages exactly 0, as the trainer gives', () => {
    const t = editedAdvantages([0, 0, 0, 0], 0, [0.1 + 0.2, 0.3, 0.3, 0.3], 'group');
    expect(t.allEqual).toBe(true);
    expect(t.advantages).toEqual([0, 0, 0, 0]);
    // Same numbers as the trainer's own call on the same rewards.
    const r = [0.5, 0.25, 1, 0];
    expect(editedAdvantages([0, 0, 0, 0], 0, r, 'group').advantages).toEqual(
      Array.from(computeAdvantages(r, 4, 'group')),
    );
  });

  it('typed rewards are clamped and rounded', () => {
    expect(clampReward(0.123)).toBe(0.12);
    expect(clampReward(7)).toBe(2);
    expect(clampReward(NaN)).toBe(0);
  });
});

describe('KL explorable (docs/grpo.md §3)', () => {
  it('k3 = exp(x) − x − 1', () => {
    expect(k3(0)).toBe(0);
    expect(k3(1)).toBeCloseTo(Math.E - 2, 14);
    expect(k3(-1)).toBeCloseTo(Math.exp(-1), 14);
  });

  it('ρ = 2, q = 0.25: k3 per outcome, and E[k3] equals the true KL', () => {
    const k = klPoint(2, 0.25);
    expect(k.p).toBe(0.5);
    expect(k.k3Sampled).toBeCloseTo(0.5 + Math.LN2 - 1, 14);
    expect(k.k3Other).toBeCloseTo(0.5 - Math.log(1.5), 14);
    expect(k.k1Sampled).toBeCloseTo(Math.LN2, 14);
    expect(k.trueKl).toBeCloseTo(0.5 * Math.log(4 / 3), 14);
    expect(k.expectedK3).toBeCloseTo(k.trueKl, 14);
  });

  it('unbiased at every ratio; zero at ρ = 1; k1 goes negative where k3 does not', () => {
    for (const rho of [0.1, 0.5, 0.9, 1.5, 3])
      expect(klPoint(rho, 0.3).expectedK3).toBeCloseTo(klPoint(rho, 0.3).trueKl, 12);
    expect(klPoint(1, 0.3)).toMatchObject({ k3Sampled: 0, trueKl: 0, k1Sampled: 0 });
    const low = klPoint(0.5, 0.3);
    expect(low.k1Sampled).toBeLessThan(0);
    expect(low.k3Sampled).toBeGreaterThan(0);
    expect(klDivergence([1, 0], [0.5, 0.5])).toBeCloseTo(Math.LN2, 14);
  });

  it('starts from the step: the token with the largest k3, or ratio 1 without a reference', () => {
    const withRef = klStart([
      {
        logp: [Math.log(0.2), Math.log(0.5)],
        refLogp: [Math.log(0.2), Math.log(0.25)],
        counted: [true, true],
      },
    ]);
    expect(withRef.fromReference).toBe(true);
    expect(withRef.q).toBeCloseTo(0.25, 12);
    expect(withRef.rho).toBeCloseTo(2, 12);
    expect(klStart([{ logp: [Math.log(0.4)], refLogp: null, counted: [true] }])).toEqual({
      q: 0.4,
      rho: 1,
      fromReference: false,
    });
  });
});

describe('step strip (docs/grpo.md §5)', () => {
  /** Group rewards [1, 0, 0, 1], lengths [3, 1, 1, 2], μ = 1 (ρ = 1), β = 0. */
  function report(): StepReport {
    const rewards = [1, 0, 0, 1];
    const lengths = [3, 1, 1, 2];
    const A = computeAdvantages(rewards, 4, 'group');
    const completions: CompletionRecord[] = rewards.map((r, i) => {
      const logp = Array.from({ length: lengths[i] }, (_, t) => -0.5 - 0.25 * t);
      return {
        text: `c${i}`,
        tokens: logp.map((_, t) => 10 + t),
        truncated: false,
        reward: { total: r, perFunction: { format: r }, errors: [] },
        advantage: A[i],
        reflects: false,
        logp,
        oldLogp: logp.slice(),
        refLogp: null,
        counted: logp.map(() => true),
        logpAfter: logp.map((lp) => lp + 0.1 * Math.sign(A[i])),
      };
    });
    const problem = {
      id: 'p',
      task: 't',
      question: 'q',
      reference: null,
      verifier: { kind: 'none' },
    };
    return {
      step: 3,
      skipped: null,
      metrics: {},
      groups: [{ problem, prompt: 'q', promptTokens: 1, completions }] as StepReport['groups'],
    };
  }
  const base = { epsilon: 0.2, epsilonHigh: 0.2, beta: 0, maxCompletionLength: 8 } as const;

  it('dapo pushes each completion by A·|o| / Σ|o|; grpo by A / N', () => {
    const a = 0.5 / (Math.sqrt(1 / 3) + 1e-4);
    const dapo = stepStrip(report(), 0, { ...base, lossType: 'dapo' });
    [3 * a, -a, -a, 2 * a].forEach((v, i) => expect(dapo[i].push).toBeCloseTo(v / 7, 12));
    const grpo = stepStrip(report(), 0, { ...base, lossType: 'grpo' });
    [a, -a, -a, a].forEach((v, i) => expect(grpo[i].push).toBeCloseTo(v / 4, 12));
    expect(dapo.map((r) => r.reward)).toEqual([1, 0, 0, 1]);
    dapo.forEach((r) => expect(r.moved).toBeCloseTo(0.1 * Math.sign(r.advantage), 12));
    expect(stepStrip(report(), 5, { ...base, lossType: 'dapo' })).toEqual([]);
  });
});
