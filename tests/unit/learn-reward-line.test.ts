// Learn's reward line lists each reward function's mean with a space before every '·': Svelte drops
// the leading whitespace of an {#each} block, which had printed '1.000· accuracy' (issue 35's
// typo list). Server-rendered LearnView on a one-group report with two rewards.
import { render } from 'svelte/server';
import { describe, expect, it } from 'vitest';
import LearnView from '../../src/app/learn/LearnView.svelte';
import { computeAdvantages } from '../../src/grpo/advantages';
import { resolveConfig } from '../../src/grpo/config';
import type { CompletionRecord, StepReport } from '../../src/grpo/trainer';

const config = resolveConfig({
  rewards: ['format', 'accuracy'],
  numGenerations: 2,
  perStepPrompts: 1,
});

function report(): StepReport {
  const rewards = [2, 1];
  const A = computeAdvantages(rewards, 2, 'group');
  const completions: CompletionRecord[] = rewards.map((r, i) => ({
    text: `<think>t</think><answer>${i}</answer>`,
    tokens: [10, 11],
    truncated: false,
    reward: { total: r, perFunction: { format: 1, accuracy: r - 1 }, errors: [] },
    advantage: A[i],
    reflects: false,
    logp: [-0.5, -0.75],
    oldLogp: [-0.5, -0.75],
    refLogp: null,
    counted: [true, true],
    logpAfter: null,
  }));
  return {
    step: 3,
    skipped: null,
    groups: [
      {
        problem: { id: 'p', task: 't', question: 'q', reference: null, verifier: { kind: 'none' } },
        prompt: 'User: q. Assistant:',
        promptTokens: 5,
        completions,
      },
    ],
    metrics: {
      reward: 1.5,
      'rewards/format/mean': 1,
      'rewards/accuracy/mean': 0.5,
      loss: 0,
      grad_norm: 0.25,
      learning_rate: 1e-6,
      entropy: 1.5,
    },
  };
}

describe("Learn's step reward line", () => {
  it('puts a space before each reward’s "·"', () => {
    const { body } = render(LearnView, { props: { report: report(), config, history: [] } });
    const text = body.replace(/<!--[^>]*-->/g, '').replace(/\s+/g, ' ');
    expect(text).toMatch(/totals\): 1\.500 · format: 1\.000 · accuracy: 0\.500\./);
    expect(text).not.toMatch(/\d·/);
  });
});
