// The Rewards panel's "try it" columns (src/app/lib/reward-try.ts): the built-in rewards on a
// completion are rewards.ts's values, and the shown total weights the rewards that are on, with
// not-applicable and failed rewards counted 0 as training counts them.
import { describe, expect, it } from 'vitest';
import { builtinScores, shownTotal } from '../../src/app/lib/reward-try';
import type { Problem } from '../../src/tasks/types';

const problem: Problem = {
  id: 'arithmetic-1-0',
  task: 'arithmetic',
  question: 'What is 2 + 3',
  reference: '5',
  verifier: { kind: 'integer', answer: '5' },
};

describe('builtinScores', () => {
  it('scores format and accuracy as rewards.ts does', () => {
    expect(builtinScores(' <think>add</think> <answer>5</answer>', problem)).toEqual({
      format: 1,
      accuracy: 1,
    });
    expect(builtinScores('<answer>6</answer>', problem)).toEqual({ format: 0, accuracy: 0 });
    expect(builtinScores('it is 5', problem)).toEqual({ format: 0, accuracy: 0 });
    // A task's verify() is used when given.
    expect(builtinScores('<answer>x</answer>', problem, { verify: () => true })).toEqual({
      format: 0,
      accuracy: 1,
    });
    // No reference: accuracy is not applicable.
    expect(
      builtinScores('<think>a</think><answer>5</answer>', {
        ...problem,
        verifier: { kind: 'none' },
      }),
    ).toEqual({ format: 1, accuracy: null });
  });
});

describe('shownTotal', () => {
  const b = { format: 1, accuracy: 0 };
  it('weights the shown rewards that are on, in the config order', () => {
    expect(shownTotal('len', b, { value: 7 }, ['format', 'accuracy', 'custom:len'], null)).toBe(8);
    expect(shownTotal('len', b, { value: 7 }, ['custom:len', 'format'], [0.5, 2])).toBe(5.5);
    // Other custom rewards are not run here and not counted.
    expect(shownTotal('len', b, { value: 7 }, ['custom:other', 'format'], [3, 2])).toBe(2);
    expect(shownTotal('len', b, { value: 7 }, ['custom:other'], null)).toBeNull();
  });
  it('counts null and failed rewards as 0', () => {
    const failed = { error: { reward: 'custom:len', kind: 'threw' as const, message: 'x' } };
    expect(shownTotal('len', b, failed, ['format', 'custom:len'], [1, 5])).toBe(1);
    expect(shownTotal('len', b, { value: null }, ['format', 'custom:len'], [1, 5])).toBe(1);
    expect(
      shownTotal(
        'len',
        { format: 0, accuracy: null },
        { value: 2 },
        ['accuracy', 'custom:len'],
        [4, 3],
      ),
    ).toBe(6);
  });
});
