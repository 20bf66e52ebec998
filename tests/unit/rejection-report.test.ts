// The Recipes view's rejection report (src/app/components/RejectionReport.svelte), server-rendered:
// the yield and the reasons in words, the per-prompt counts, every sample kept or rejected with its
// reasons, and model text as text: markup in a completion is escaped, never HTML.
import { render } from 'svelte/server';
import { describe, expect, it } from 'vitest';
import RejectionReport from '../../src/app/components/RejectionReport.svelte';
import type { RejectionSamplingReport } from '../../src/recipes/rejection-sampling';

const report: RejectionSamplingReport = {
  samples: [
    {
      problemId: 'cd-1',
      prompt: 'p1',
      completion: '<think>3*4=12</think><answer>3*4</answer>',
      length: 20,
      kept: true,
      reasons: [],
    },
    {
      problemId: 'cd-1',
      prompt: 'p1',
      completion: '<img src=x onerror=alert(1)> no answer',
      length: 48,
      kept: false,
      reasons: ['no-answer', 'truncated'],
    },
    {
      problemId: 'cd-2',
      prompt: 'p2',
      completion: '<answer>5</answer>',
      length: 6,
      kept: false,
      reasons: ['wrong'],
    },
  ],
  perPrompt: [
    { problemId: 'cd-1', sampled: 2, kept: 1 },
    { problemId: 'cd-2', sampled: 1, kept: 0 },
  ],
  sampled: 3,
  kept: 1,
  yield: 1 / 3,
  reasons: {
    wrong: 1,
    'no-answer': 1,
    unverifiable: 0,
    format: 0,
    truncated: 1,
    'too-short': 0,
    'too-long': 0,
    language: 0,
    duplicate: 0,
  },
};

describe('RejectionReport', () => {
  it('shows the yield, the reasons, per-prompt counts and the samples as text', () => {
    const { body } = render(RejectionReport, { props: { name: 'teacher-samples', report } });
    const text = body.replace(/<!--[^]*?-->/g, '');
    expect(text).toContain('Kept <b>1</b> of <b>3</b> samples (yield 33.3%)');
    expect(text).toContain('wrong answer 1, no &lt;answer> 1, cut off (no EOS) 1');
    expect(text.match(/data-testid="rejection-prompt"/g)).toHaveLength(2);
    expect(
      [...text.matchAll(/data-testid="rejection-sample" data-kept="(true|false)"/g)].map(
        (m) => m[1],
      ),
    ).toEqual(['true', 'false', 'false']);
    expect(text).toContain('no &lt;answer>, cut off (no EOS)');
    // The completion's markup is text: escaped, no element made of it.
    expect(text).toContain('&lt;img src=x onerror=alert(1)> no answer');
    expect(text).not.toContain('<img');
    expect(text).toContain('&lt;think>3*4=12&lt;/think>&lt;answer>3*4&lt;/answer>');
  });
});
