// The teaching components rendered (Svelte server rendering, no browser): Learn mode says whether
// each recomputed value matches the trainer's and says so honestly when it does not, every deep-link
// section id exists, model output is escaped (never HTML), and the Aha panel and the paper brief
// show what they claim to.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import AhaPanel from '../../src/app/aha/AhaPanel.svelte';
import LearnView from '../../src/app/learn/LearnView.svelte';
import PaperBrief from '../../src/app/learn/PaperBrief.svelte';
import { computeAdvantages } from '../../src/grpo/advantages';
import { resolveConfig } from '../../src/grpo/config';
import type { CompletionRecord, StepReport } from '../../src/grpo/trainer';
import { R1_ZERO_TEMPLATE } from '../../src/tasks/prompt';

const HOSTILE = '<img src=x onerror=alert(1)>';

const config = resolveConfig({ rewards: ['format'], numGenerations: 4, perStepPrompts: 1 });

/** Group rewards [1, 0, 0, 1], lengths [3, 1, 1, 2], μ = 1 (ρ = 1), β = 0, dapo. */
function liveLikeReport(opts: { after?: boolean; lossOffset?: number } = {}): StepReport {
  const rewards = [1, 0, 0, 1];
  const lengths = [3, 1, 1, 2];
  const A = computeAdvantages(rewards, 4, 'group');
  const completions: CompletionRecord[] = rewards.map((r, i) => {
    const logp = Array.from({ length: lengths[i] }, (_, t) => -0.5 - 0.25 * t);
    return {
      text: i === 1 ? HOSTILE : `<think>step ${i}</think><answer>${i}</answer>`,
      tokens: logp.map((_, t) => 10 + t),
      truncated: false,
      reward: { total: r, perFunction: { format: r }, errors: [] },
      advantage: A[i],
      reflects: false,
      logp,
      oldLogp: logp.slice(),
      refLogp: null,
      counted: logp.map(() => true),
      logpAfter: opts.after ? logp.map((lp) => lp + 0.1 * Math.sign(A[i])) : null,
    };
  });
  // dapo at ρ = 1: −Σ A·|o| / Σ|o| = −(3a − a − a + 2a)/7 with a = A[0].
  const loss = (-3 * A[0]) / 7 + (opts.lossOffset ?? 0);
  return {
    step: 7,
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
      reward: 0.5,
      loss,
      grad_norm: 0.25,
      learning_rate: 1e-6,
      entropy: 1.5,
      'clip_ratio/low_mean': 0,
      'clip_ratio/high_mean': 0,
      'clip_ratio/region_mean': 0,
    },
  };
}

describe('LearnView', () => {
  it('shows the live values with their check against the trainer, and every section id', () => {
    const { body } = render(LearnView, {
      props: { report: liveLikeReport({ after: true }), config, history: [] },
    });
    for (const id of [
      'rewards',
      'advantages',
      'clipping',
      'kl',
      'update',
      'logprobs',
      'loss-types',
    ])
      expect(body).toContain(`id="${id}"`);
    // The advantage formula with this group's numbers: mean 0.5, unbiased std √(1/3).
    expect(body).toContain('mean = (1.00 + 0 + 0 + 1.00) / 4 = 0.5000');
    expect(body).toContain('= 0.5774');
    expect(body).toContain('✓ matches the trainer');
    expect(body).not.toContain('✗');
    expect(body).toContain('β = 0');
    expect(body).not.toContain('no log-probs after the update');
  });

  it('says so when a value does not match the trainer', () => {
    const { body } = render(LearnView, {
      props: { report: liveLikeReport({ lossOffset: 0.01 }), config, history: [] },
    });
    expect(body).toContain('✗ differs from the trainer');
  });

  it('explains a missing logpAfter instead of showing nothing', () => {
    const { body } = render(LearnView, {
      props: { report: liveLikeReport(), config, history: [] },
    });
    expect(body).toContain('no log-probs after the update');
    expect(body).toContain('recordLogpAfterUpdate');
  });

  it('renders model output as text, never as HTML', () => {
    const { body } = render(LearnView, {
      props: { report: liveLikeReport(), config, history: [] },
    });
    expect(body).not.toContain('<img src=x');
    expect(body).toContain('&lt;img src=x onerror=alert(1)>');
  });
});

describe('AhaPanel', () => {
  const report = liveLikeReport();
  report.groups[0].completions[0].text = '<think>7? Wait, recheck.</think><answer>7</answer>';
  report.groups[0].completions[0].reflects = true;
  // 32 steps: a verdict waits for 30 (src/app/aha/derive.ts MIN_STEPS).
  const history = Array.from({ length: 32 }, (_, i) => ({
    step: i + 1,
    metrics: {
      reflection_rate: i < 16 ? 0.1 : 0.5,
      'reflection/count_reflecting': i < 16 ? 2 : 10,
      'reflection/count_not_reflecting': i < 16 ? 18 : 10,
      'reflection/accuracy_reflecting': 0.8,
      'reflection/accuracy_not_reflecting': 0.3,
    },
  }));

  it('states the pair, marks reflection words and escapes completions', () => {
    const { body } = render(AhaPanel, { props: { history, reports: [report] } });
    expect(body).toContain('Both halves of the claim hold');
    const marked = [...body.matchAll(/<mark[^>]*>([^<]*)<\/mark>/g)].map((m) => m[1]);
    expect(marked).toEqual(['Wait', 'recheck']);
    expect(body).not.toContain('<img src=x');
  });

  it('an empty run asks for steps', () => {
    const { body } = render(AhaPanel, { props: { history: [], reports: [] } });
    expect(body).toContain('Run a few training steps');
  });
});

describe('PaperBrief', () => {
  it('quotes the template the trainer uses and the paper’s headline numbers', () => {
    const { body } = render(PaperBrief);
    const escaped = R1_ZERO_TEMPLATE.replace(/&/g, '&amp;').replace(/</g, '&lt;');
    expect(body).toContain(escaped);
    for (const n of ['15.6%', '71.0%', '86.7%', '2501.12948', '2503.20783', '2402.03300'])
      expect(body).toContain(n);
  });
});
