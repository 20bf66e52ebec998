// The Paper view's findings (src/app/learn/RecipeComparison.svelte, inside PaperBrief): the three
// findings of the R1 paper beside the committed `npm run recipe -- --compare` result. Before the
// comparison has run it says so and shows no numbers; with a report it shows each finding's
// measured sentences and verdict, finding 2's per-seed table and the two plots.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import PaperBrief from '../../src/app/learn/PaperBrief.svelte';
import RecipeComparison from '../../src/app/learn/RecipeComparison.svelte';
import {
  FINDINGS,
  FINDINGS_DEFAULTS,
  judgeFindings,
  type FindingsReport,
} from '../../src/recipes/recipe-findings';
import { armEval as arm } from '../support/arm-eval';

function fixture(): FindingsReport {
  const perSeed = [1, 2].map((seed) => ({
    seed,
    seconds: 60,
    arms: {
      r1Zero: arm(100 + seed, 150),
      coldStart: arm(60),
      coldStartRl: arm(120, 160),
      studentRl: arm(20),
      studentDistill: arm(70),
      studentDistillRl: arm(75),
    },
    stepsToReach: { r1Zero: 41, coldStartRl: null },
    teacherSamples: { sampled: 512, kept: 240 },
    stageSeconds: {},
    sftSteps: { coldStart: 16, distill: 30 },
    curves: { r1Zero: [0.2, 0.3, 0.5], coldStartRl: [0.4, 0.5, 0.6], studentRl: [0.1] },
  }));
  const base = arm(35, 28);
  const studentBase = arm(10, 5);
  return {
    version: 1,
    command: 'npm run recipe -- --compare',
    durationSeconds: 5400,
    machine: { cpu: 'x', cores: 2, adapter: 'google swiftshader' },
    promptSet: 'report',
    heldOutPrompts: 200,
    samplesPerPrompt: 1,
    seeds: [1, 2],
    options: FINDINGS_DEFAULTS,
    base,
    studentBase,
    perSeed,
    findings: judgeFindings({ base, studentBase }, perSeed),
  };
}

describe('Paper view: the R1 paper’s three findings', () => {
  it('before the comparison has run: says so, lists the three findings, shows no numbers', () => {
    const { body } = render(RecipeComparison, { props: { report: null } });
    expect(body).toContain('On this playground’s models: the paper’s three findings');
    expect(body).toContain('Not measured yet.');
    expect(body.replace(/\s+/g, ' ')).toContain('(about 94 minutes on a 2-core CPU)');
    expect(body.match(/data-testid="finding-row"/g)).toHaveLength(3);
    for (const f of FINDINGS) expect(body).toContain(f.title);
    expect(body).toContain('Table 6');
    expect(body).toContain('early unstable cold start phase of RL');
    expect(body.match(/not measured yet/g)).toHaveLength(3);
    expect(body).not.toContain('<svg');
    expect(body).not.toContain('%)');
  });

  it('with a report: each finding’s measured sentences and verdict, finding 2 per seed, the plots', () => {
    const report = fixture();
    const { body } = render(RecipeComparison, { props: { report } });
    expect(body).not.toContain('Not measured yet.');
    expect(body.replace(/\s+/g, ' ')).toContain(
      '(90 min on 2 CPU cores): seeds 1, 2, 95 GRPO steps',
    );
    const verdicts = [...body.matchAll(/data-testid="finding-verdict"[^>]*><strong>([^<]+)</g)].map(
      (m) => m[1],
    );
    expect(verdicts).toEqual(report.findings.map((f) => f.verdict));
    expect(verdicts).toEqual(['reproduced', 'inconclusive', 'reproduced']);
    for (const f of report.findings)
      for (const c of [...f.comparisons, ...f.also])
        expect(body).toContain(c.text.replace(/&/g, '&amp;'));
    // Finding 2: 50.5% → 60.0% accuracy on seed 1, steps to 40% 41 → not reached.
    expect(body).toContain('50.5% → 60.0%');
    expect(body).toContain('step 41 → not reached');
    expect(body.match(/<svg /g)).toHaveLength(2);
    expect(body).toContain('cold start → GRPO, seed 2');
  });

  it('sits in the Paper view', () => {
    const { body } = render(PaperBrief);
    expect(body).toContain('On this playground’s models: the paper’s three findings');
    expect(body.match(/data-testid="finding-row"/g)).toHaveLength(3);
  });
});
