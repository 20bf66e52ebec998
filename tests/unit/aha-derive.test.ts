// The Aha panel's derivations (src/app/aha/derive.ts): metric keys, pooled windows, the verdict
// on the pair (reflection rises AND reflecting completions are right more often), examples and
// marker highlighting.
import { describe, expect, it } from 'vitest';
import {
  AHA_METRICS,
  AHA_WINDOW,
  ahaVerdict,
  examples,
  highlightMarkers,
  MIN_STEPS,
  reportsByStep,
  seriesOf,
  windowStats,
} from '../../src/app/aha/derive';
import type { MetricsRow } from '../../src/worker/types';
import { reflectionMetrics, reflectionSummary } from '../../src/rewards/reflection';
import type { CompletionRecord, StepReport } from '../../src/grpo/trainer';

const TOL = 1e-12;

/** A step where `yes` of `n` completions reflect, with the given accuracies. */
function row(step: number, yes: number, n: number, accYes: number, accNo: number): MetricsRow {
  return {
    step,
    metrics: {
      reflection_rate: yes / n,
      'reflection/count_reflecting': yes,
      'reflection/count_not_reflecting': n - yes,
      'reflection/accuracy_reflecting': yes ? accYes : NaN,
      'reflection/accuracy_not_reflecting': n - yes ? accNo : NaN,
      'reflection/mean_length_reflecting': yes ? 40 : NaN,
      'reflection/mean_length_not_reflecting': n - yes ? 20 : NaN,
    },
  };
}

describe('metric keys', () => {
  it('are the keys reflectionMetrics writes (plus the two docs/grpo.md §6 ones)', () => {
    const written = Object.keys(
      reflectionMetrics(reflectionSummary([{ completion: 'wait', correct: true, length: 1 }])),
    );
    const read = Object.values(AHA_METRICS).filter(
      (k) => k !== 'completions/mean_length' && k !== 'accuracy',
    );
    expect(read.sort()).toEqual(written.sort());
  });
});

describe('windows and the verdict', () => {
  it('pools counts and count-weighted accuracies', () => {
    const w = windowStats([row(1, 1, 4, 1, 0), row(2, 3, 4, 0, 1)]);
    expect(w.countReflecting).toBe(4);
    expect(w.rate).toBe(0.5);
    // Reflecting: (1·1 + 0·3)/4; not: (0·3 + 1·1)/4.
    expect(Math.abs(w.accuracyReflecting - 0.25)).toBeLessThan(TOL);
    expect(Math.abs(w.accuracyNotReflecting - 0.25)).toBeLessThan(TOL);
    expect(w.lengthReflecting).toBe(40);
  });

  it('a step with no reflecting completion (NaN accuracy) does not poison the pool', () => {
    const w = windowStats([row(1, 0, 8, 0, 0.5), row(2, 2, 8, 1, 0.5)]);
    expect(w.accuracyReflecting).toBe(1);
    expect(w.rate).toBe(2 / 16);
  });

  it('the pair: rate rises and reflecting completions are right more often', () => {
    const h = [
      ...Array.from({ length: 10 }, (_, i) => row(i + 1, 1, 16, 0.2, 0.2)),
      ...Array.from({ length: 10 }, (_, i) => row(i + 11, 8, 16, 0.75, 0.25)),
    ];
    const v = ahaVerdict(h, 5, 4);
    expect(v.status).toBe('pair');
    expect(v.early.steps).toBe(5);
    expect(v.late.firstStep).toBe(16);
    expect(v.baseRate).toBe(1 / 16);
  });

  it('rising reflection with no accuracy gain is only half the claim', () => {
    const h = Array.from({ length: 8 }, (_, i) => row(i + 1, i < 4 ? 1 : 8, 16, 0.3, 0.3));
    const v = ahaVerdict(h, AHA_WINDOW, 4);
    expect(v.status).toBe('rise-only');
    expect(v.reflectingMoreAccurate).toBe(false);
  });

  it('flat reflection, no accuracy reward, too few completions or too few steps', () => {
    const flat = Array.from({ length: 8 }, (_, i) => row(i + 1, 4, 16, 0.9, 0.1));
    const short = (h: MetricsRow[]) => ahaVerdict(h, AHA_WINDOW, 4);
    expect(short(flat).status).toBe('accuracy-only');
    const noAcc = Array.from({ length: 8 }, (_, i) => row(i + 1, i, 16, NaN, NaN));
    expect(short(noAcc).reflectingMoreAccurate).toBeNull();
    expect(short(noAcc).status).toBe('rise-only');
    // Late window has 2 reflecting completions in all: below MIN_COUNT.
    const few = Array.from({ length: 4 }, (_, i) => row(i + 1, i < 2 ? 0 : 1, 16, 1, 0));
    expect(short(few).reflectingMoreAccurate).toBeNull();
    expect(short(flat.slice(0, 3)).status).toBe('too-early');
    const none = Array.from({ length: 6 }, (_, i) => ({ step: i + 1, metrics: { loss: 0 } }));
    expect(short(none).status).toBe('no-data');
    // By default a verdict waits for MIN_STEPS (30) steps: 29 rows of a clear pair still wait.
    expect(MIN_STEPS).toBe(30);
    const pair = Array.from({ length: 30 }, (_, i) => row(i + 1, i < 15 ? 1 : 8, 16, 0.75, 0.25));
    expect(ahaVerdict(pair.slice(0, 29)).status).toBe('too-early');
    expect(ahaVerdict(pair).status).toBe('pair');
  });

  it('series keep gaps for missing values', () => {
    const s = seriesOf(
      [row(1, 0, 4, 0, 0), { step: 2, metrics: {} }],
      AHA_METRICS.accuracyReflecting,
    );
    expect(s.map((p) => p.x)).toEqual([1, 2]);
    expect(s.every((p) => Number.isNaN(p.y))).toBe(true);
  });
});

function completion(text: string, accuracy: number | null, reflects: boolean): CompletionRecord {
  return {
    text,
    tokens: [...text].map((_, i) => i),
    truncated: false,
    reward: { total: accuracy ?? 0, perFunction: { accuracy }, errors: [] },
    advantage: 0,
    reflects,
    logp: [],
    oldLogp: [],
    refLogp: null,
    counted: [],
    logpAfter: null,
  };
}

function report(step: number, completions: CompletionRecord[]): StepReport {
  return {
    step,
    metrics: {},
    skipped: null,
    groups: [
      {
        problem: { id: 'p', task: 't', question: 'q', reference: null, verifier: { kind: 'none' } },
        prompt: 'q',
        promptTokens: 1,
        completions,
      },
    ],
  };
}

describe('examples', () => {
  const r = report(3, [
    completion('<think>wait, 3+4</think><answer>7</answer>', 1, true),
    completion('<think>3+4</think><answer>8</answer>', 0, false),
    completion('no verdict', null, false),
  ]);

  it('filter by reflection and correctness', () => {
    expect(examples(r).length).toBe(3);
    expect(examples(r, 'reflecting').map((e) => e.index)).toEqual([0]);
    expect(examples(r, 'not-reflecting').map((e) => e.index)).toEqual([1, 2]);
    expect(examples(r, 'correct').map((e) => e.index)).toEqual([0]);
    expect(examples(r, 'wrong').map((e) => e.index)).toEqual([1]);
    expect(examples(r)[2].correct).toBeNull();
    expect(examples(r)[0].length).toBe(r.groups[0].completions[0].text.length);
  });

  it('reports by step: sorted, the last report of a step wins', () => {
    const again = report(3, [completion('x', 0, false)]);
    const out = reportsByStep([report(5, []), r, report(1, []), again]);
    expect(out.map((x) => x.step)).toEqual([1, 3, 5]);
    expect(out[1]).toBe(again);
  });
});

describe('marker highlighting', () => {
  it('cuts the text into plain and marker segments that join back to it', () => {
    const text = 'Hmm. Wait, let me recheck: <b>7</b>. Awaiting nothing; try  again';
    const segs = highlightMarkers(text);
    expect(segs.map((s) => s.text).join('')).toBe(text);
    expect(segs.filter((s) => s.marker).map((s) => s.text)).toEqual([
      'Wait',
      'recheck',
      'try  again',
    ]);
  });

  it('task markers add to the defaults; no markers, one plain segment', () => {
    expect(highlightMarkers('backtrack here', ['backtrack']).filter((s) => s.marker)).toHaveLength(
      1,
    );
    expect(highlightMarkers('plain')).toEqual([{ text: 'plain', marker: false }]);
    expect(highlightMarkers('')).toEqual([]);
  });
});
