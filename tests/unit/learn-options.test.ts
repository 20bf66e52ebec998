// The Learn entries of the sampling and objective options the options form links to: each option's
// OPTION_TOPIC is the Learn section that explains it (rendered with Svelte's server renderer), and
// that section names the run's own setting when it is on.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import LearnView from '../../src/app/learn/LearnView.svelte';
import { OPTION_TOPIC, optionView } from '../../src/app/lib/options';
import { computeAdvantages } from '../../src/grpo/advantages';
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import type { CompletionRecord, StepReport } from '../../src/grpo/trainer';

/** One group of 4 completions, format rewards [1, 0, 0, 1] (accuracy the opposite), μ = 1. */
function report(): StepReport {
  const rewards = [1, 0, 0, 1];
  const A = computeAdvantages(rewards, 4, 'group');
  const completions: CompletionRecord[] = rewards.map((r, i) => {
    const logp = [-0.5, -0.75].slice(0, 1 + (i % 2));
    return {
      text: `<answer>${i}</answer>`,
      tokens: logp.map((_, t) => 10 + t),
      truncated: false,
      reward: { total: r, perFunction: { format: r, accuracy: 1 - r }, errors: [] },
      advantage: A[i],
      reflects: false,
      logp,
      oldLogp: logp.slice(),
      refLogp: null,
      counted: logp.map(() => true),
      logpAfter: null,
    };
  });
  return {
    step: 1,
    skipped: null,
    groups: [
      {
        problem: { id: 'p', task: 't', question: 'q', reference: null, verifier: { kind: 'none' } },
        prompt: 'User: q. Assistant:',
        promptTokens: 5,
        completions,
      },
    ],
    metrics: { reward: 0.5, loss: -0.02, policy_loss: 0.01, grad_norm: 0.25, entropy: 1.5 },
  };
}

/** The text of section `id` of the rendered page (up to the next section), spaces collapsed. */
function section(body: string, id: string): string {
  const start = body.indexOf(`<section id="${id}"`);
  expect(start, `section ${id}`).toBeGreaterThanOrEqual(0);
  const end = body.indexOf('<section', start + 1);
  return body.slice(start, end < 0 ? undefined : end).replace(/\s+/g, ' ');
}

const page = (overrides: Partial<ConfigInput>) => {
  const config = resolveConfig({ rewards: ['format'], numGenerations: 4, ...overrides });
  return render(LearnView, { props: { report: report(), config, history: [] } }).body;
};

describe('Learn entries of the options', () => {
  const cases: Array<[keyof typeof OPTION_TOPIC, string, string]> = [
    ['minP', 'group', '<code>minP</code>'],
    ['repetitionPenalty', 'group', '<code>repetitionPenalty</code>'],
    ['entropyCoef', 'update', '<code>entropyCoef</code>'],
    ['topEntropyQuantile', 'clipping', '<code>topEntropyQuantile</code>'],
    ['multiObjectiveAggregation', 'rewards', "multiObjectiveAggregation: 'normalize_then_sum'"],
  ];
  it.each(cases)('%s links to #%s, which explains it', (key, id, text) => {
    expect(OPTION_TOPIC[key]).toBe(id);
    expect(optionView(key).topic).toBe(id);
    expect(section(page({}), id)).toContain(text);
  });

  it('the repetition penalty is in the options form with its one-line explanation', () => {
    const view = optionView('repetitionPenalty');
    expect(view.trl).toBe('repetition_penalty');
    expect(view.help).toMatch(/prompt or completion.*divided by it.*1 = off/);
    expect(resolveConfig({}).repetitionPenalty).toBe(1);
  });

  it("names the run's own settings when they are on, and nothing when they are off", () => {
    const on = page({
      minP: 0.1,
      repetitionPenalty: 1.3,
      entropyCoef: 0.05,
      rewards: ['format', 'accuracy'],
      multiObjectiveAggregation: 'normalize_then_sum',
    });
    expect(section(on, 'group')).toContain(
      'This run samples with minP = 0.1 and repetitionPenalty = 1.3.',
    );
    expect(section(on, 'update')).toContain('This run uses c = 0.0500');
    expect(section(on, 'update')).toContain('the policy loss alone is 0.010000');
    expect(section(on, 'rewards')).toContain('This run does so');
    const off = page({});
    expect(off).not.toContain('This run samples with');
    expect(off).not.toContain('This run uses c =');
    expect(off).not.toContain('This run does so');
  });
});
