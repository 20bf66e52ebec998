// Countdown: TinyZero verifier rules (exact rationals, no eval) and the seeded generator.
import { describe, expect, it } from 'vitest';
import { createCountdownTask } from '../../src/tasks/countdown';
import { formatPrompt, R1_ZERO_TEMPLATE } from '../../src/tasks/prompt';
import { createTask, trainEvalProblems } from '../../src/tasks/index';
import { verifyCountdown } from '../../src/tasks/verify';

const NUMS = [44, 19, 35];

describe('verifyCountdown', () => {
  it.each([
    ['44 + 19 + 35', 98],
    ['(44 - 19) + 35', 60],
    ['35 + 19 + 44', 98],
    ['  44+19+35\n', 98],
    ['44 * (35 - 19)', 704],
    ['-44 + 19 + 35', 10], // unary minus, as Python's eval allows
    ['44 - -19 + 35', 98],
    ['+(44) + 19 + 35', 98],
  ])('accepts %j = %d', (expr, target) => {
    expect(verifyCountdown(expr, NUMS, target)).toMatchObject({ ok: true });
  });

  it('allows non-integer intermediates and compares exactly: (8 / 3) * 3 = 8', () => {
    expect(verifyCountdown('(8 / 3) * 3', [8, 3, 3], 8).ok).toBe(true);
    expect(verifyCountdown('8 / 3 + 3', [8, 3, 3], 6)).toMatchObject({
      ok: false,
      failure: 'wrong-value',
      value: '17/3',
    });
    // 1/3 + 1/3 + 1/3 is exactly 1 with rationals (floats give 0.9999999999999999).
    expect(verifyCountdown('1/3 + 1/3 + 1/3', [1, 3, 1, 3, 1, 3], 1).ok).toBe(true);
  });

  it.each([
    ['44 + 19', 'numbers-mismatch'], // 35 missing
    ['44 + 44 + 19 + 35', 'numbers-mismatch'], // 44 reused
    ['44 + 19 + 35 + 1', 'numbers-mismatch'], // extra number
    ['44 + 19 + 53', 'numbers-mismatch'], // digits reordered is another number
    ['(44 + 19 + 35', 'syntax'], // unbalanced
    ['44 + 19 + 35)', 'syntax'],
    ['()44 + 19 + 35', 'syntax'],
    ['44 19 + 35', 'syntax'], // adjacent operands
    ['44(19) + 35', 'syntax'],
    ['44 + 19 +', 'syntax'],
    ['44 + 19 + 35 = 98', 'invalid-character'],
    ['44 + 19 + 35.0', 'invalid-character'],
    ['44 × 19 + 35', 'invalid-character'],
    ['44 − 19 + 35', 'invalid-character'], // U+2212 minus
    ['44 ** 19 + 35', 'invalid-character'],
    ['44 // 19 + 35', 'invalid-character'],
    ['044 + 19 + 35', 'leading-zero'], // a SyntaxError in Python
    ['', 'empty'],
    [' \n ', 'empty'],
  ])('rejects %j (%s)', (expr, failure) => {
    expect(verifyCountdown(expr, NUMS, 98)).toMatchObject({ ok: false, failure });
  });

  it('rejects division by zero anywhere, even when the total would match', () => {
    expect(verifyCountdown('5 / (3 - 3) + 7', [5, 3, 3, 7], 7)).toMatchObject({
      ok: false,
      failure: 'division-by-zero',
    });
    expect(verifyCountdown('0 / 5 + 7', [0, 5, 7], 7).ok).toBe(true);
    expect(verifyCountdown('7 + 5 / 0', [0, 5, 7], 7)).toMatchObject({
      failure: 'division-by-zero',
    });
  });

  it('accepts an all-zero literal like Python ("00") and rejects very deep nesting', () => {
    expect(verifyCountdown('00 + 7', [0, 7], 7).ok).toBe(true);
    const deep = '('.repeat(65) + '7' + ')'.repeat(65);
    expect(verifyCountdown(deep, [7], 7)).toMatchObject({ ok: false, failure: 'too-deep' });
    const ok = '('.repeat(64) + '7' + ')'.repeat(64);
    expect(verifyCountdown(ok, [7], 7).ok).toBe(true);
  });

  it('handles repeated given numbers as a multiset', () => {
    expect(verifyCountdown('3 * 3 + 1', [3, 1, 3], 10).ok).toBe(true);
    expect(verifyCountdown('3 * 1 + 1', [3, 1, 3], 4)).toMatchObject({
      failure: 'numbers-mismatch',
    });
  });
});

describe('countdown task', () => {
  it('generates the same problems for the same seed, and prefixes for shorter counts', () => {
    const task = createCountdownTask();
    const a = task.generate(7, 20);
    expect(task.generate(7, 20)).toEqual(a);
    expect(task.generate(7, 5)).toEqual(a.slice(0, 5));
    expect(task.generate(8, 20)).not.toEqual(a);
  });

  it('every generated problem is solvable by its own reference and respects the knobs', () => {
    const task = createCountdownTask({
      numbers: 4,
      minNumber: 2,
      maxNumber: 30,
      minTarget: 10,
      maxTarget: 50,
    });
    for (const p of task.generate(123, 200)) {
      if (p.verifier.kind !== 'countdown') throw new Error('wrong verifier');
      const { nums, target } = p.verifier;
      expect(nums).toHaveLength(4);
      for (const n of nums) expect(n >= 2 && n <= 30).toBe(true);
      expect(target >= 10 && target <= 50).toBe(true);
      expect(task.verify(p.reference as string, p)).toBe(true);
      expect(p.question).toContain(`equals ${target}`);
    }
  });

  it('fails loudly on impossible knobs', () => {
    expect(() =>
      createCountdownTask({
        numbers: 2,
        minNumber: 1,
        maxNumber: 1,
        minTarget: 50,
        maxTarget: 60,
      }).generate(1, 1),
    ).toThrow(/widen the ranges/);
    expect(() => createCountdownTask({ numbers: 1 })).toThrow(/numbers/);
  });

  it('formats the R1-Zero prompt verbatim', () => {
    const task = createTask('countdown');
    const [p] = task.generate(1, 1);
    const f = task.formatPrompt(p, 'r1-zero');
    expect(f.kind).toBe('text');
    if (f.kind !== 'text') return;
    expect(
      f.text.startsWith(
        'A conversation between User and Assistant. The user asks a question, and the Assistant solves it.',
      ),
    ).toBe(true);
    expect(f.text).toBe(R1_ZERO_TEMPLATE.replace('{prompt}', p.question));
    expect(
      f.text.endsWith(`</answer> tags, for example <answer> (1 + 2) / 3 </answer>. Assistant:`),
    ).toBe(true);
    const chat = formatPrompt(p, 'chat');
    expect(chat).toEqual({
      kind: 'chat',
      messages: [
        {
          role: 'system',
          content: expect.stringMatching(
            /^A conversation between User and Assistant\..*<answer> answer here <\/answer>\.$/,
          ),
        },
        { role: 'user', content: p.question },
      ],
    });
  });

  it('keeps eval problems out of the training stream', () => {
    const task = createCountdownTask({ numbers: 2, maxNumber: 5, maxTarget: 30 });
    const { train, eval: held } = trainEvalProblems(task, 3, 40, 10);
    expect(train).toHaveLength(40);
    const trainQ = new Set(train.map((p) => p.question));
    for (const p of held) expect(trainQ.has(p.question)).toBe(false);
  });
});
