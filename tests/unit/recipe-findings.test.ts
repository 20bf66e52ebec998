// The findings comparison's decision rule (src/recipes/recipe-findings.ts, docs/recipe/protocol.md):
// a finding is "reproduced" only when its direction holds on every seed and the pooled 95% Wilson
// intervals separate; "not reproduced" when they separate the other way or no seed goes the paper's
// way; "inconclusive" otherwise. Also the steps-to-reach count and the recipe that trains the arms.
import { describe, expect, it } from 'vitest';
import {
  compareArms,
  FINDINGS,
  FINDINGS_DEFAULTS,
  findingsRecipe,
  findingVerdict,
  judgeFindings,
  projectedSeconds,
  QUICK,
  STAGE,
  stepsToReach,
} from '../../src/recipes/recipe-findings';
import { wilsonInterval } from '../../src/core/wilson';
import { armEval as arm } from '../support/arm-eval';

const c = { better: 'coldStartRl', worse: 'r1Zero', metric: 'accuracy' } as const;
const n = (hits: number, total = 200) => ({ hits, n: total });

describe('compareArms (the decision rule)', () => {
  it('reproduced: higher on every seed and the pooled intervals separate', () => {
    const v = compareArms(c, [n(110), n(100), n(120)], [n(60), n(70), n(50)], {
      better: 'A',
      worse: 'B',
    });
    expect(v.verdict).toBe('reproduced');
    expect(v.seedsAgreeing).toBe(3);
    expect(v.pooled.better).toMatchObject({ hits: 330, n: 600 });
    expect(v.pooled.better.low).toBeCloseTo(wilsonInterval(330, 600).low, 12);
    expect(v.pooled.better.low).toBeGreaterThan(v.pooled.worse.high);
    expect(v.text).toBe(
      'Reproduced: higher on every seed (3 of 3) and the pooled 95% intervals separate. ' +
        `A 55.0% (${(100 * wilsonInterval(330, 600).low).toFixed(1)}%–${(100 * wilsonInterval(330, 600).high).toFixed(1)}%) ` +
        `vs B 30.0% (${(100 * wilsonInterval(180, 600).low).toFixed(1)}%–${(100 * wilsonInterval(180, 600).high).toFixed(1)}%) accuracy, pooled over 3 seeds.`,
    );
  });

  it('inconclusive: the pooled intervals separate but one seed disagrees', () => {
    const v = compareArms(c, [n(150), n(150), n(40)], [n(60), n(60), n(50)]);
    expect(v.pooled.better.low).toBeGreaterThan(v.pooled.worse.high);
    expect(v.verdict).toBe('inconclusive');
    expect(v.text).toMatch(/^Inconclusive: higher on 2 of 3 seeds only\. /);
  });

  it('inconclusive: every seed agrees but the pooled intervals overlap', () => {
    const v = compareArms(c, [n(36), n(35), n(34)], [n(33), n(32), n(31)]);
    expect(v.seedsAgreeing).toBe(3);
    expect(v.verdict).toBe('inconclusive');
    expect(v.text).toMatch(
      /^Inconclusive: higher on every seed \(3 of 3\) but the pooled 95% intervals overlap\. /,
    );
  });

  it('not reproduced: the pooled intervals separate the other way, or no seed agrees', () => {
    const other = compareArms(c, [n(40), n(60), n(50)], [n(100), n(50), n(110)]);
    expect(other.verdict).toBe('not reproduced');
    expect(other.text).toMatch(
      /^Not reproduced: the pooled 95% intervals separate the other way \(higher on 1 of 3 seeds\)\. /,
    );
    // Ties count as not higher: a seed must go the paper's way.
    const none = compareArms(c, [n(30), n(31), n(30)], [n(30), n(33), n(32)]);
    expect(none.verdict).toBe('not reproduced');
    expect(none.text).toMatch(/^Not reproduced: higher on no seed \(0 of 3\)\. /);
  });

  it('an arm measured once (a base model) is compared with every seed and pooled once', () => {
    const v = compareArms(
      { better: 'r1Zero', worse: 'base', metric: 'accuracy' },
      [n(100), n(110), n(30)],
      [n(35)],
    );
    expect(v.seeds).toBe(3);
    expect(v.seedsAgreeing).toBe(2);
    expect(v.pooled.worse).toMatchObject({ hits: 35, n: 200 });
    expect(v.verdict).toBe('inconclusive');
  });
});

describe('findings', () => {
  it('a finding is reproduced only when all its comparisons are', () => {
    const r = { verdict: 'reproduced' as const };
    expect(findingVerdict([r, r])).toBe('reproduced');
    expect(findingVerdict([r, { verdict: 'inconclusive' }])).toBe('inconclusive');
    expect(findingVerdict([{ verdict: 'inconclusive' }, { verdict: 'not reproduced' }])).toBe(
      'not reproduced',
    );
  });

  it('judges the three findings from measured arms', () => {
    const seed = (s: number) => ({
      seed: s,
      seconds: 1,
      arms: {
        r1Zero: arm(100 + s, 150),
        coldStartRl: arm(101 + s, 160),
        studentRl: arm(30, 20),
        studentDistill: arm(80, 100),
        studentDistillRl: arm(90, 120),
      },
      stepsToReach: { r1Zero: 40, coldStartRl: 10 },
      teacherSamples: { sampled: 512, kept: 250 },
      sftSteps: { coldStart: 16, distill: 30 },
      stageSeconds: {},
      curves: {},
    });
    const findings = judgeFindings({ base: arm(35, 28), studentBase: arm(20, 10) }, [
      seed(1),
      seed(2),
      seed(3),
    ]);
    expect(findings.map((f) => [f.id, f.verdict])).toEqual([
      ['rl-alone', 'reproduced'],
      ['cold-start', 'inconclusive'],
      ['distillation', 'reproduced'],
    ]);
    expect(findings[0].comparisons.map((x) => x.metric)).toEqual(['accuracy', 'reflection']);
    expect(findings[2].also[0].text).toMatch(
      /student: distilled, then GRPO 45\.0% .* vs student: distilled from the teacher 40\.0% /,
    );
    expect(findings.map((f) => f.title)).toEqual(FINDINGS.map((f) => f.title));
  });
});

describe('stepsToReach', () => {
  it('is the first step whose moving mean of training accuracy reaches the threshold', () => {
    expect(stepsToReach([0.5, 0.1, 0.1], 0.4, 10)).toBe(1);
    // Window 2: (0.3 + 0.5) / 2 = 0.4 at step 3.
    expect(stepsToReach([0.1, 0.3, 0.5, 0], 0.4, 2)).toBe(3);
    expect(stepsToReach([0.1, 0.2, 0.3], 0.4, 2)).toBeNull();
    expect(stepsToReach([NaN, 0.45], 0.4, 2)).toBe(2);
  });
});

describe('findingsRecipe', () => {
  it('one recipe per seed: the teacher, its samples, the student arms, the cold start', () => {
    const r = findingsRecipe(7);
    expect(r.seed).toBe(7);
    expect(r.stages.map((s) => [s.name, s.kind, s.from])).toEqual([
      [STAGE.teacher, 'grpo', 'base'],
      [STAGE.teacherSamples, 'rejection-sample', STAGE.teacher],
      [STAGE.studentSft, 'sft', 'model:tiny-student'],
      [STAGE.studentSftRl, 'grpo', 'previous'],
      [STAGE.studentRl, 'grpo', 'model:tiny-student'],
      [STAGE.coldStart, 'sft', 'base'],
      [STAGE.coldStartRl, 'grpo', 'previous'],
    ]);
    // Equal GRPO steps wherever RL is compared.
    const steps = (name: string) =>
      (r.stages.find((s) => s.name === name) as { options: { steps: number } }).options.steps;
    expect(steps(STAGE.teacher)).toBe(FINDINGS_DEFAULTS.reasonerSteps);
    expect(steps(STAGE.coldStartRl)).toBe(FINDINGS_DEFAULTS.reasonerSteps);
    expect(steps(STAGE.studentRl)).toBe(FINDINGS_DEFAULTS.studentSteps);
    expect(steps(STAGE.studentSftRl)).toBe(FINDINGS_DEFAULTS.studentSteps);
  });
});

describe('projectedSeconds', () => {
  it("is protocol.md's time budget: ~95 minutes for 3 seeds with the report options", () => {
    // Per seed: 95 × (7.65 + 7.9) + 16 × 2.6 + 512 × 65/512 + 30 × 2.2 + 2 × 30 × 3 + 3 × 18.
    const perSeed = 95 * 15.55 + 16 * 2.6 + 65 + 30 * 2.2 + 180 + 54;
    expect(projectedSeconds(FINDINGS_DEFAULTS, 3)).toBeCloseTo(3 * perSeed + 18, 6);
    expect(projectedSeconds(FINDINGS_DEFAULTS, 3) / 60).toBeCloseTo(94.5, 0);
    // --quick: a few minutes of work (2 steps an arm, 8 prompts).
    expect(projectedSeconds({ ...FINDINGS_DEFAULTS, ...QUICK }, 1, 8) / 60).toBeLessThan(2);
  });
});
