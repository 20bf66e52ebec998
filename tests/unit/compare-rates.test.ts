// Compare's rates from an evaluation report: counts out of the right number of trials (prompts
// for greedy, pass@k, cons@k and format; samples for sample accuracy and reflection), each with
// its Wilson interval, and the text the table shows.
import { describe, expect, it } from 'vitest';
import { compareRates, formatRate } from '../../src/app/lib/compare-rates';
import { wilsonInterval } from '../../src/core/wilson';
import type { EvalCompletion, EvalItem, EvalReport } from '../../src/train/evaluate';

const c = (correct: boolean | null, reflects = false): EvalCompletion => ({
  text: '<think>x</think><answer>1</answer>',
  correct,
  reflects,
  length: 5,
});

function item(greedy: EvalCompletion, samples: EvalCompletion[], pass: boolean, cons: boolean) {
  return {
    problem: { id: 'p', task: 't', question: 'q', reference: '1', verifier: { kind: 'none' } },
    prompt: 'q',
    greedy,
    samples,
    passAtK: pass,
    consAtK: cons,
  } as EvalItem;
}

// 4 prompts, k = 2: greedy right on 3, samples right 4 of 8 (one not checkable counts as not right), pass@2 on 3, cons@2 on 2,
// 2 of 8 samples reflect, the format rate 0.75 of the 4 greedy answers.
const REPORT = {
  prompts: 4,
  k: 2,
  metrics: { greedy_format_rate: 0.75 },
  items: [
    item(c(true), [c(true, true), c(true)], true, true),
    item(c(true), [c(true), c(false)], true, true),
    item(c(true), [c(false, true), c(true)], true, false),
    item(c(false), [c(false), c(null)], false, false),
  ],
} as unknown as EvalReport;

describe('compareRates', () => {
  it('counts each rate over its own trials, with the Wilson interval of the count', () => {
    const rates = compareRates(REPORT);
    const got = Object.fromEntries(rates.map((r) => [r.key, [r.successes, r.trials]]));
    expect(got).toEqual({
      greedy_accuracy: [3, 4],
      sample_accuracy: [4, 8],
      'pass@k': [3, 4],
      'cons@k': [2, 4],
      greedy_format_rate: [3, 4],
      reflection_rate: [2, 8],
    });
    for (const r of rates) {
      expect(r.rate).toBeCloseTo(r.successes / r.trials, 12);
      expect(r.interval).toEqual(wilsonInterval(r.successes, r.trials));
    }
    expect(rates.find((r) => r.key === 'pass@k')!.label).toBe('pass@2');
  });

  it('formats a rate with its interval', () => {
    const [greedy] = compareRates(REPORT);
    // 3/4: Wilson 95% [0.300642, 0.954413] (z²/n = 0.960365, centre 0.627527, half 0.326885).
    expect(greedy.interval.low).toBeCloseTo(0.300642, 5);
    expect(greedy.interval.high).toBeCloseTo(0.954413, 5);
    expect(formatRate(greedy)).toBe('75.0% (30.1–95.4%)');
  });

  it('without samples (k = 0) there is no sample rate, and reflection counts the greedy answers', () => {
    const greedyOnly = {
      ...REPORT,
      k: 0,
      items: REPORT.items.map((i) => ({ ...i, samples: [], passAtK: false, consAtK: false })),
    } as EvalReport;
    const keys = compareRates(greedyOnly).map((r) => [r.key, r.trials]);
    expect(keys).toEqual([
      ['greedy_accuracy', 4],
      ['greedy_format_rate', 4],
      ['reflection_rate', 4],
    ]);
  });
});
