// Learn mode's token text and its "what this run can show" decisions (src/app/learn/derive.ts §6),
// and the one-click "see it with μ = 2 / β = 0.001" helper (src/app/lib/try-options.ts) on a
// stand-in session that records what the real Session's reset and step would be asked to do.
import { describe, expect, it } from 'vitest';
import {
  computesKl,
  largestMoves,
  tokenTexts,
  visiblePiece,
  zeroGradientReasons,
  type CompletionWithPieces,
} from '../../src/app/learn/derive';
import { resolveDraft } from '../../src/grpo/config';
import { canTry, tryLabel, tryOptions, type TrySession } from '../../src/app/lib/try-options';

function completion(
  advantage: number,
  after: number[],
  pieces?: string[],
  counted?: boolean[],
): CompletionWithPieces {
  const logp = after.map((_, t) => -1 - 0.25 * t);
  return {
    text: (pieces ?? []).join(''),
    tokens: after.map((_, t) => 100 + t),
    truncated: false,
    reward: { total: 0, perFunction: {}, errors: [] },
    advantage,
    reflects: false,
    logp,
    oldLogp: logp.slice(),
    refLogp: null,
    counted: counted ?? after.map(() => true),
    logpAfter: logp.map((lp, t) => lp + after[t]),
    pieces,
  };
}

describe('token text', () => {
  it('makes whitespace and control characters visible and keeps other text as it is', () => {
    expect(visiblePiece(' the')).toBe('␣the');
    expect(visiblePiece('\n\n')).toBe('↵↵');
    expect(visiblePiece('\t')).toBe('⇥');
    expect(visiblePiece('a\r\n')).toBe('a␍↵');
    expect(visiblePiece('\u0000')).toBe('\\u{00}');
    expect(visiblePiece('\u001b[')).toBe('\\u{1b}[');
    expect(visiblePiece('\u00a0x')).toBe('⍽x');
    expect(visiblePiece('')).toBe('∅');
    // Text stays text: the view escapes it (the HTML-escaping test is in learn-view.test.ts).
    expect(visiblePiece('<b>')).toBe('<b>');
    expect(visiblePiece('√é')).toBe('√é');
  });

  it('uses the decoded pieces when the report has them, else the token id', () => {
    expect(tokenTexts(completion(1, [0, 0], [' 4', '\n']))).toEqual(['␣4', '↵']);
    expect(tokenTexts(completion(1, [0, 0]))).toEqual(['#100', '#101']);
    // A short pieces array (never sent by the worker, but a stored report could be odd).
    expect(tokenTexts(completion(1, [0, 0], ['x']))).toEqual(['x', '#101']);
  });

  it('lists the counted tokens that moved most, with their text, largest |Δ| first', () => {
    const a = completion(0.5, [0.1, -0.3, 0.02], ['<think>', ' 7', '</think>']);
    const b = completion(-0.5, [-0.2, 0.3, 0.9], ['x', ' y', 'z'], [true, true, false]);
    const rows = largestMoves([a, b], 3);
    expect(rows.map((r) => [r.index, r.t, r.text])).toEqual([
      [0, 1, '␣7'],
      [1, 1, '␣y'], // |0.3| ties with a's token 1: a comes first in the trainer's order
      [1, 0, 'x'],
    ]);
    expect(rows[0].delta).toBeCloseTo(-0.3, 12);
    expect(rows[0].advantage).toBe(0.5);
    expect(rows[2].delta).toBeCloseTo(-0.2, 12);
    // b's last token (Δ 0.9) is not counted in the loss, so it is not listed.
    expect(largestMoves([a, b], 10)).toHaveLength(5);
    expect(largestMoves([{ ...a, logpAfter: null }], 3)).toEqual([]);
  });
});

describe('what the run can show', () => {
  it('computes KL only with β > 0', () => {
    expect(computesKl({ beta: 0 })).toBe(false);
    expect(computesKl({ beta: 0.001 })).toBe(true);
  });

  it('names momentum only once Adam has an earlier gradient, and decay only with weightDecay', () => {
    const opts = { numIterations: 1, adamBeta1: 0.9, weightDecay: 0 };
    expect(zeroGradientReasons({ ...opts, priorOptimizerSteps: 0 })).toEqual(['shared']);
    expect(zeroGradientReasons({ ...opts, priorOptimizerSteps: 3 })).toEqual([
      'shared',
      'momentum',
    ]);
    // μ = 2 on the first step: the second pass carries the first pass's exp_avg.
    expect(zeroGradientReasons({ ...opts, numIterations: 2, priorOptimizerSteps: 0 })).toEqual([
      'shared',
      'momentum',
    ]);
    expect(zeroGradientReasons({ ...opts, adamBeta1: 0, priorOptimizerSteps: 3 })).toEqual([
      'shared',
    ]);
    expect(zeroGradientReasons({ ...opts, weightDecay: 0.1, priorOptimizerSteps: 0 })).toEqual([
      'shared',
      'decay',
    ]);
  });
});

/** A stand-in for the page's Session: reset applies the draft unless the dialog says cancel. */
class FakeSession implements TrySession {
  options = { draft: resolveDraft({ numIterations: 1, beta: 0, steps: 5 }) };
  model: { info: unknown } = { info: { label: 'tiny' } };
  busy: string | null = null;
  calls: string[] = [];
  training: {
    applied: { numIterations: number; beta: number } | null;
    step: number;
    status: string;
    reset(): Promise<void>;
    stepOnce(): Promise<void>;
  };
  constructor(answer: 'discard' | 'cancel', stepWorks = true) {
    const draft = this.options.draft;
    const calls = this.calls;
    const training: FakeSession['training'] = {
      applied: { numIterations: 1, beta: 0 },
      step: 3,
      status: 'paused',
      async reset() {
        calls.push(`reset μ=${draft.numIterations} β=${draft.beta}`);
        if (answer === 'cancel') return;
        training.applied = { numIterations: draft.numIterations, beta: draft.beta };
        training.step = 0;
      },
      async stepOnce() {
        calls.push('step');
        if (stepWorks) training.step = 1;
      },
    };
    this.training = training;
  }
}

describe('see it with …', () => {
  it('sets the option, resets and takes one step', async () => {
    const s = new FakeSession('discard');
    expect(await tryOptions(s, { numIterations: 2 })).toBe('stepped');
    expect(s.calls).toEqual(['reset μ=2 β=0', 'step']);
    expect(s.options.draft.numIterations).toBe(2);
    expect(s.training.applied).toEqual({ numIterations: 2, beta: 0 });
    expect(s.training.step).toBe(1);
  });

  it('a cancelled discard dialog puts the form back and takes no step', async () => {
    const s = new FakeSession('cancel');
    expect(await tryOptions(s, { beta: 0.001 })).toBe('cancelled');
    expect(s.calls).toEqual(['reset μ=1 β=0.001']);
    expect(s.options.draft.beta).toBe(0);
    expect(s.training.applied).toEqual({ numIterations: 1, beta: 0 });
    expect(s.training.step).toBe(3);
  });

  it('says so when the new run exists but its step did not happen', async () => {
    const s = new FakeSession('discard', false);
    expect(await tryOptions(s, { beta: 0.001 })).toBe('reset');
    expect(s.training.applied).toEqual({ numIterations: 1, beta: 0.001 });
  });

  it('does nothing without a model or while training', async () => {
    const none = new FakeSession('discard');
    none.model.info = null;
    expect(canTry(none)).toBe(false);
    expect(await tryOptions(none, { numIterations: 2 })).toBe('unavailable');
    expect(none.calls).toEqual([]);
    expect(none.options.draft.numIterations).toBe(1);
    const running = new FakeSession('discard');
    running.training.status = 'running';
    expect(canTry(running)).toBe(false);
    const busy = new FakeSession('discard');
    busy.busy = 'Step';
    expect(canTry(busy)).toBe(false);
    expect(canTry(new FakeSession('discard'))).toBe(true);
  });

  it('labels the button with the option’s symbol', () => {
    expect(tryLabel({ numIterations: 2 })).toBe('μ = 2');
    expect(tryLabel({ beta: 0.001 })).toBe('β = 0.001');
  });
});
