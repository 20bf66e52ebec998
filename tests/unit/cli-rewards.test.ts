// Reward failures as the command line reports them: a weighted total that is not finite is that
// reward's error (value 0), not an abort in the advantages; the step line names each failing
// reward and how many completions it failed on; a step with failures is printed whatever
// loggingSteps says.
import { describe, expect, it } from 'vitest';
import { rewardErrorSummary, stepLine, stepLogged } from '../../src/cli/_train';
import { computeAdvantages } from '../../src/grpo/advantages';
import { combineOutcomes, type CompletionReward } from '../../src/rewards/rewards';
import type { StepReport } from '../../src/grpo/trainer';

describe('a non-finite weighted total is a reward error', () => {
  it('a finite value times its weight overflowing', () => {
    const r = combineOutcomes(['format', 'custom:big'], [1, 10], [{ value: 1 }, { value: 1e308 }]);
    expect(r.total).toBe(1);
    expect(r.perFunction).toEqual({ format: 1, 'custom:big': 0 });
    expect(r.errors).toEqual([
      {
        reward: 'custom:big',
        kind: 'non-finite',
        message: 'returned 1e+308, which with weight 10 makes the weighted total Infinity',
      },
    ]);
  });

  it('two finite terms whose sum overflows: the second is the failure', () => {
    const r = combineOutcomes(['a', 'b'], [1, 1], [{ value: 1.5e308 }, { value: 1.5e308 }]);
    expect(r.total).toBe(1.5e308);
    expect(r.errors.map((e) => [e.reward, e.kind])).toEqual([['b', 'non-finite']]);
  });

  it('a reward returning Infinity or NaN, and the group still gets advantages', () => {
    const names = ['format', 'custom:x'];
    const rows = [Infinity, NaN, -Infinity, 1].map((v) =>
      combineOutcomes(names, [1, 1], [{ value: 1 }, { value: v }]),
    );
    expect(rows.map((r) => r.total)).toEqual([1, 1, 1, 2]);
    expect(rows.map((r) => r.errors.map((e) => e.kind))).toEqual([
      ['non-finite'],
      ['non-finite'],
      ['non-finite'],
      [],
    ]);
    const adv = computeAdvantages(
      rows.map((r) => r.total),
      4,
      'group',
    );
    expect([...adv].every(Number.isFinite)).toBe(true);
  });
});

function report(step: number, rewards: CompletionReward[][]): StepReport {
  return {
    step,
    metrics: { reward: 0.5, loss: 0.1, grad_norm: 1, step_time: 2 },
    skipped: null,
    groups: rewards.map((group, g) => ({
      problem: {
        id: `p${g}`,
        task: 't',
        question: 'q',
        reference: null,
        verifier: { kind: 'none' },
      },
      prompt: 'q',
      promptTokens: 1,
      completions: group.map((reward) => ({
        text: '',
        tokens: [],
        truncated: false,
        reward,
        advantage: 0,
        reflects: false,
        logp: [],
        oldLogp: [],
        refLogp: null,
        counted: [],
        logpAfter: null,
      })),
    })),
  };
}

const ok: CompletionReward = { total: 1, perFunction: { format: 1 }, errors: [] };
const threw: CompletionReward = {
  total: 0,
  perFunction: { 'custom:len': 0 },
  errors: [{ reward: 'custom:len', kind: 'threw', message: 'TypeError: x is undefined' }],
};
const infinite: CompletionReward = {
  total: 0,
  perFunction: { 'custom:len': 0, 'custom:big': 0 },
  errors: [
    { reward: 'custom:len', kind: 'threw', message: 'TypeError: x is undefined' },
    { reward: 'custom:big', kind: 'non-finite', message: 'returned Infinity' },
  ],
};

describe('the step line shows reward errors', () => {
  it('names each failing reward, how many completions it failed on and the first message', () => {
    const r = report(3, [
      [ok, threw],
      [infinite, ok],
    ]);
    expect(rewardErrorSummary(r)).toBe(
      'custom:len failed on 2/4 (threw: TypeError: x is undefined); ' +
        'custom:big failed on 1/4 (non-finite: returned Infinity)',
    );
    expect(stepLine(r, 10)).toMatch(
      /^step {2}3\/10 .* REWARD ERRORS: custom:len failed on 2\/4 \(threw: TypeError: x is undefined\); custom:big failed on 1\/4/,
    );
    expect(stepLine(report(3, [[ok, ok]]), 10)).not.toMatch(/ERRORS/);
  });

  it('loggingSteps thins the lines, except the last step and steps with failures', () => {
    const config = { loggingSteps: 5, steps: 12 };
    const logged = (step: number, rows: CompletionReward[]) =>
      stepLogged(report(step, [rows]), config);
    expect([1, 2, 5, 10, 11, 12].filter((s) => logged(s, [ok, ok]))).toEqual([5, 10, 12]);
    expect(logged(3, [ok, threw])).toBe(true);
  });
});
