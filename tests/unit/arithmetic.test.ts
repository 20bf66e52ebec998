// Multi-digit arithmetic task: exact bigint answers, the digits knob, the integer checker.
import { describe, expect, it } from 'vitest';
import { createArithmeticTask } from '../../src/tasks/arithmetic';
import { verifyAnswer } from '../../src/tasks/verify';

describe('arithmetic task', () => {
  it('computes exact answers beyond 2^53 and honours the digits knob', () => {
    const task = createArithmeticTask({ digits: 12, operations: '*' });
    for (const p of task.generate(5, 20)) {
      const m = /^Compute (\d+) \* (\d+) and/.exec(p.question);
      expect(m).not.toBeNull();
      const [, a, b] = m as RegExpExecArray;
      expect(a).toHaveLength(12);
      expect(b).toHaveLength(12);
      expect(p.reference).toBe(String(BigInt(a) * BigInt(b)));
      expect(task.verify(p.reference as string, p)).toBe(true);
    }
  });

  it('draws only the requested operators and is seeded', () => {
    const task = createArithmeticTask({ digits: 2, operations: '+-' });
    const ps = task.generate(9, 50);
    expect(ps.every((p) => /^Compute \d\d [+-] \d\d /.test(p.question))).toBe(true);
    expect(ps.some((p) => p.question.includes(' - '))).toBe(true);
    expect(task.generate(9, 50)).toEqual(ps);
    expect(() => createArithmeticTask({ operations: '/' })).toThrow(/operations/);
    expect(() => createArithmeticTask({ digits: 0 })).toThrow(/digits/);
  });

  it('checks integers strictly', () => {
    const spec = { kind: 'integer', answer: '-1234' } as const;
    expect(verifyAnswer(' -1234\n', spec)).toBe(true);
    expect(verifyAnswer('-01234', spec)).toBe(true); // same integer
    expect(verifyAnswer('-1,234', spec)).toBe(false);
    expect(verifyAnswer('-1234.0', spec)).toBe(false);
    expect(verifyAnswer('1234', spec)).toBe(false);
    expect(verifyAnswer('-1234 apples', spec)).toBe(false);
    expect(verifyAnswer('\u00a0-1234', spec)).toBe(false); // only ASCII whitespace is trimmed
    expect(verifyAnswer('١٢٣٤', { kind: 'integer', answer: '1234' })).toBe(false); // Arabic-Indic digits
  });
});
