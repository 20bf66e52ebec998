// Learn mode's notes on what a run cannot show (server-rendered, no browser): with μ = 1 it says
// no token can be clipped and offers "See it with μ = 2"; with β = 0 it says no KL is computed and
// offers "See KL with β = 0.001"; the movement section prints each token's text (escaped, whitespace
// visible) beside its Δ log-prob and explains movement without a gradient by shared weights and
// Adam's momentum; the clip plot says what it is drawn for. The Paper view draws its two figures
// from the listed points and links the four papers.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import LearnView from '../../src/app/learn/LearnView.svelte';
import PaperBrief from '../../src/app/learn/PaperBrief.svelte';
import { AIME_PASS1, RESPONSE_LENGTH, PAPER_LINKS } from '../../src/app/learn/paper-figures';
import { computeAdvantages } from '../../src/grpo/advantages';
import { resolveConfig } from '../../src/grpo/config';
import type { StepReport } from '../../src/grpo/trainer';
import type { TrySession } from '../../src/app/lib/try-options';

const PIECES = [['<think>', ' 7', '\n'], ['<b>'], ['x'], [' y', 'z']];

function report(step = 7): StepReport {
  const rewards = [1, 0, 0, 1];
  const A = computeAdvantages(rewards, 4, 'group');
  return {
    step,
    skipped: null,
    metrics: { reward: 0.5, loss: 0, grad_norm: 0.1, learning_rate: 1e-6, entropy: 1 },
    groups: [
      {
        problem: { id: 'p', task: 't', question: 'q', reference: null, verifier: { kind: 'none' } },
        prompt: 'User: q. Assistant:',
        promptTokens: 5,
        completions: PIECES.map((pieces, i) => {
          const logp = pieces.map((_, t) => -0.5 - 0.25 * t);
          return {
            text: pieces.join(''),
            tokens: pieces.map((_, t) => 10 + t),
            pieces,
            truncated: false,
            reward: { total: rewards[i], perFunction: { format: rewards[i] }, errors: [] },
            advantage: A[i],
            reflects: false,
            logp,
            oldLogp: logp.slice(),
            refLogp: null,
            counted: logp.map(() => true),
            // Token 1 of completion 1 (' 7') moves most.
            logpAfter: logp.map(
              (lp, t) => lp + (i === 0 && t === 1 ? 0.5 : 0.01 * Math.sign(A[i])),
            ),
          };
        }),
      },
    ],
  };
}

const session: TrySession = {
  options: { draft: resolveConfig({}) as unknown as TrySession['options']['draft'] },
  training: {
    applied: { numIterations: 1, beta: 0 },
    step: 7,
    status: 'paused',
    reset: async () => {},
    stepOnce: async () => {},
  },
  model: { info: { label: 'tiny' } },
  busy: null,
};

/** The text of the element with this data-testid (tags dropped, whitespace collapsed). */
function paragraph(body: string, testid: string): string {
  const start = body.indexOf(`data-testid="${testid}"`);
  expect(start).toBeGreaterThan(-1);
  const end = body.indexOf('</p>', start);
  return body
    .slice(body.indexOf('>', start) + 1, end)
    .replace(/<[^>]*>/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

const base = { rewards: ['format'], numGenerations: 4, perStepPrompts: 1 };

describe('Learn notes', () => {
  it('μ = 1: says no token can be clipped and offers μ = 2; β = 0: says no KL and offers β = 0.001', () => {
    const config = resolveConfig(base);
    const { body } = render(LearnView, {
      props: { report: report(), config, history: [], session },
    });
    expect(body).toContain('data-testid="no-clip-note"');
    expect(body).toContain('No token can be clipped in this run.');
    expect(body).toContain('See it with μ = 2');
    expect(body).toContain('data-testid="no-kl-note"');
    expect(body).toContain('No KL is computed in this run.');
    expect(body).toContain('See KL with β = 0.001');
    expect(body).not.toContain('data-testid="clip-passes"');
  });

  it('without the page’s session the notes stay and the buttons are not offered', () => {
    const config = resolveConfig(base);
    const { body } = render(LearnView, { props: { report: report(), config, history: [] } });
    expect(body).toContain('No token can be clipped in this run.');
    expect(body).not.toContain('See it with μ = 2');
    expect(body).not.toContain('See KL with β = 0.001');
  });

  it('μ = 2: no such note, the passes explained instead', () => {
    const config = resolveConfig({ ...base, numIterations: 2 });
    const { body } = render(LearnView, {
      props: { report: report(), config, history: [], session },
    });
    expect(body).not.toContain('data-testid="no-clip-note"');
    expect(body).toContain('data-testid="clip-passes"');
    expect(paragraph(body, 'clip-passes')).toContain(
      'μ = numIterations = 2: 2 optimizer passes over each sampled batch',
    );
    expect(paragraph(body, 'clip-passes')).not.toContain('This step clipped no token');
    // A μ = 2 step that clipped nothing says why.
    const none = report();
    none.metrics['clip_ratio/region_mean'] = 0;
    const text = paragraph(
      render(LearnView, { props: { report: none, config, history: [] } }).body,
      'clip-passes',
    );
    expect(text).toContain('This step clipped no token');
    expect(text).toContain('(a larger learningRate moves them further)');
  });

  it('prints each token’s text beside its Δ, as text, and the largest moves first', () => {
    const config = resolveConfig(base);
    const { body } = render(LearnView, { props: { report: report(), config, history: [] } });
    const strip = [...body.matchAll(/data-testid="token-text"[^>]*>([^<]*)</g)].map((m) => m[1]);
    expect(strip).toEqual(['&lt;think>', '␣7', '↵', '&lt;b>', 'x', '␣y', 'z']);
    const table = [...body.matchAll(/data-testid="movement-token"[^>]*>([^<]*)</g)].map(
      (m) => m[1],
    );
    expect(table[0]).toBe('␣7');
    expect(table).toHaveLength(7);
    expect(body).toContain('+0.5000');
    expect(body).not.toContain('<b>');
  });

  it('explains movement without a gradient by shared weights and momentum, not normalisation', () => {
    const config = resolveConfig(base);
    const why = (step: number) =>
      paragraph(
        render(LearnView, { props: { report: report(step), config, history: [] } }).body,
        'zero-gradient-why',
      );
    const later = why(7);
    expect(later).toContain('same weights');
    expect(later).toContain('exp_avg');
    expect(later).toContain('carries the gradients of earlier optimizer steps');
    expect(later).not.toMatch(/normalis/i);
    const first = why(1);
    expect(first).toContain('no momentum from earlier steps yet');
    expect(first).not.toContain('carries the gradients of earlier optimizer steps');
  });

  it('the clip plot says what it is drawn for', () => {
    const config = resolveConfig(base);
    const { body } = render(LearnView, { props: { report: report(), config, history: [] } });
    expect(body).toContain('Drawn for |A| = 1');
    expect(body).toContain('completion #1 (A = 0.866)');
  });
});

describe('Paper figures', () => {
  it('draws the two curves from the listed points, says they are approximate, links the papers', () => {
    const { body } = render(PaperBrief);
    expect(body).toContain('data-testid="figure-aime"');
    expect(body).toContain('data-testid="figure-length"');
    // One marker per listed point on each curve.
    expect(body.match(/class="pt aime[^"]*"/g)).toHaveLength(AIME_PASS1.length);
    expect(body.match(/class="pt length[^"]*"/g)).toHaveLength(RESPONSE_LENGTH.length);
    expect(AIME_PASS1[0].y).toBe(0.156);
    expect(AIME_PASS1.at(-1)!.y).toBe(0.71);
    expect(body).toContain('approximate readings');
    expect(body).toContain('Figure 2');
    expect(body).toContain('Figure 3');
    expect(body).toContain('86.7%');
    for (const l of PAPER_LINKS) {
      expect(body).toContain(`href="https://arxiv.org/abs/${l.arxiv}"`);
    }
    expect(PAPER_LINKS.map((l) => l.arxiv)).toEqual([
      '2501.12948',
      '2402.03300',
      '2503.14476',
      '2503.20783',
    ]);
    expect(body.match(/rel="noopener"/g)!.length).toBeGreaterThanOrEqual(4);
    expect(body).toContain('Wait, wait. Wait. That’s an aha moment I can flag here.');
    expect(body).toContain('data-testid="aha-reflection"');
  });
});
