// Learn's explorables rendered (Svelte server rendering, no browser): each starts from the
// selected step's numbers (the reward editor from the group's rewards, the surrogate handle on the
// token with the largest |A|, the KL widget on the token with the largest k3, the step strip with
// each completion's reward, advantage and push), every draggable handle is a keyboard slider with
// its value, and model output is escaped text. Also the slider-key and pointer helpers of
// src/app/teach/plot.ts they share.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import AdvantageExplorable from '../../src/app/learn/explorables/AdvantageExplorable.svelte';
import KlExplorable from '../../src/app/learn/explorables/KlExplorable.svelte';
import StepStrip from '../../src/app/learn/explorables/StepStrip.svelte';
import SurrogateExplorable from '../../src/app/learn/explorables/SurrogateExplorable.svelte';
import { stepRewardTotals } from '../../src/app/learn/explorables/advantage-editor';
import { fmt, sliderKey, viewBoxPoint } from '../../src/app/teach/plot';
import { computeAdvantages } from '../../src/grpo/advantages';
import { resolveConfig } from '../../src/grpo/config';
import type { CompletionRecord, StepReport } from '../../src/grpo/trainer';

const HOSTILE = '<img src=x onerror=alert(1)>';
const config = resolveConfig({ rewards: ['format'], numGenerations: 4, perStepPrompts: 1 });

/** Group rewards [1, 0, 0, 1], lengths [3, 1, 1, 2], ρ = exp(0.1) on completion 1, β > 0. */
function report(): StepReport {
  const rewards = [1, 0, 0, 1];
  const lengths = [3, 1, 1, 2];
  const A = computeAdvantages(rewards, 4, 'group');
  const completions: CompletionRecord[] = rewards.map((r, i) => {
    const logp = Array.from({ length: lengths[i] }, (_, t) => Math.log(0.5) - 0.25 * t);
    return {
      text: i === 1 ? HOSTILE : `<think>step ${i}</think><answer>${i}</answer>`,
      tokens: logp.map((_, t) => 10 + t),
      truncated: false,
      reward: { total: r, perFunction: { format: r }, errors: [] },
      advantage: A[i],
      reflects: false,
      logp,
      oldLogp: logp.map((lp) => (i === 0 ? lp - 0.1 : lp)),
      // Token 0 of completion 3: π_θ = 0.5 against π_ref = 0.25 (the largest k3).
      refLogp: logp.map((lp, t) => (i === 3 && t === 0 ? Math.log(0.25) : lp)),
      counted: logp.map(() => true),
      logpAfter: null,
    };
  });
  return {
    step: 4,
    skipped: null,
    metrics: {},
    groups: [
      {
        problem: { id: 'p', task: 't', question: 'q', reference: null, verifier: { kind: 'none' } },
        prompt: 'q',
        promptTokens: 1,
        completions,
      },
    ] as StepReport['groups'],
  };
}

const a = 0.5 / (Math.sqrt(1 / 3) + 1e-4);

describe('explorables start from the selected step', () => {
  it('reward editor: the group rewards, the run scaling, its advantages', () => {
    const { body } = render(AdvantageExplorable, {
      props: {
        stepRewards: stepRewardTotals(report()),
        groupIndex: 0,
        groupSize: 4,
        scaleRewards: 'group',
      },
    });
    const handles = body.match(/role="slider"[^>]*aria-valuenow="[^"]*"/g) ?? [];
    expect(handles.map((h) => h.match(/aria-valuenow="([^"]*)"/)![1])).toEqual([
      '1',
      '0',
      '0',
      '1',
    ]);
    expect(body).toContain(`A = ${[a, -a, -a, a].map((v) => fmt(v, 3)).join(', ')}.`);
    expect(body).toMatch(/checked="" value="group"/);
    expect(body).not.toContain('GDPO');
  });

  it('surrogate: handle on the token with the largest |A|, ρ from the report', () => {
    const r = report();
    const { body } = render(SurrogateExplorable, {
      props: { completions: r.groups[0].completions, config },
    });
    // Completion 1 (A = +a) has ρ = exp(0.1) on each token: the first such token is the start.
    const rho = Math.exp(0.1);
    expect(body).toContain(`aria-valuenow="${rho}"`);
    expect(body).toContain(`ρ = ${rho.toFixed(2)}, A = ${a.toFixed(2)}`);
    // ρ = 1.105 < 1.2: not clipped, push = A·ρ; dapo weighs each of 7 tokens 1/7.
    expect(body).toContain(`push <strong>${(a * rho).toFixed(4)}</strong>`);
    expect(body).toContain(`w = ${(1 / 7).toFixed(4)}`);
    expect(body).toMatch(/<option value="dapo"[^>]*selected/);
    // Seven dots, one per counted token.
    expect(body.match(/class="dot/g)).toHaveLength(7);
  });

  it('KL: the token with the largest k3 and its ratio; ratio 1 without a reference', () => {
    const r = report();
    const { body } = render(KlExplorable, { props: { completions: r.groups[0].completions } });
    expect(body).toContain('aria-valuenow="2"');
    // ρ = 2, q = 0.25: k3 = 0.5 + ln 2 − 1, true KL = ½ ln(4/3) (kl-estimator tests).
    expect(body).toContain(`<strong>${(Math.LN2 - 0.5).toFixed(4)}</strong>`);
    expect(body).toContain(`true KL ${(0.5 * Math.log(4 / 3)).toFixed(4)}`);
    const noRef = r.groups[0].completions.map((c) => ({ ...c, refLogp: null }));
    const plain = render(KlExplorable, { props: { completions: noRef } }).body;
    expect(plain).toContain('aria-valuenow="1"');
    expect(plain).toContain('no reference (β = 0)');
  });

  it('step strip: reward, advantage and push per completion; model text escaped', () => {
    const { body } = render(StepStrip, { props: { report: report(), groupIndex: 0, config } });
    expect(body).toContain('Step 4, group 1');
    expect(body).not.toContain(HOSTILE);
    expect(body).toContain('&lt;img src=x onerror=alert(1)>');
    // dapo at μ = 1 for completion 2 (1 token, A = −a): push −a/7 (↓).
    expect(body).toMatch(new RegExp(`↓\\s*${(a / 7).toFixed(4)}`));
    expect(body).toMatch(new RegExp(`↑\\s*${((3 * a * Math.exp(0.1)) / 7).toFixed(4)}`));
  });
});

describe('slider keys and pointer positions (teach/plot.ts)', () => {
  it('arrow, page, home and end keys step and clamp; other keys do nothing', () => {
    expect(sliderKey('ArrowRight', 1, 0.01, 0, 3)).toBe(1.01);
    expect(sliderKey('ArrowDown', 0.3, 0.1, -2, 2)).toBe(0.2);
    expect(sliderKey('PageUp', 1.95, 0.01, 0, 2)).toBe(2);
    expect(sliderKey('Home', 1, 0.05, -3, 3)).toBe(-3);
    expect(sliderKey('End', 1, 0.05, -3, 3)).toBe(3);
    expect(sliderKey('a', 1, 0.05, -3, 3)).toBeNull();
  });

  it('a client position maps into viewBox units', () => {
    const box = { left: 10, top: 20, width: 640, height: 440 };
    expect(viewBoxPoint(box, 320, 220, 330, 240)).toEqual({ x: 160, y: 110 });
  });
});
