// Multi-digit arithmetic: "Compute a op b" with a, b of `digits` digits and op among + - *. The
// answer is an integer (bigint: 12-digit products exceed 2^53), checked exactly.

import { formatPrompt } from './prompt';
import { createRng, type Rng } from '../core/rng';
import type { Problem, Task } from './types';
import { verifyAnswer } from './verify';

export interface ArithmeticOptions {
  digits: number; // digits of each operand, default 3
  operations: string; // which of + - * to draw from, default '+-*'
}

export const ARITHMETIC_DEFAULTS: ArithmeticOptions = { digits: 3, operations: '+-*' };

function operand(rng: Rng, digits: number): bigint {
  // Exactly `digits` digits (no leading zero), except 1 digit, which may be 0.
  let s = String(digits === 1 ? rng.int(0, 9) : rng.int(1, 9));
  for (let i = 1; i < digits; i++) s += String(rng.int(0, 9));
  return BigInt(s);
}

export function validateArithmeticOptions(o: ArithmeticOptions): void {
  if (!Number.isInteger(o.digits) || o.digits < 1 || o.digits > 30) {
    throw new RangeError(
      `arithmetic option 'digits' must be an integer in [1, 30], got ${o.digits}`,
    );
  }
  if (
    typeof o.operations !== 'string' ||
    o.operations.length === 0 ||
    /[^+\-*]/.test(o.operations)
  ) {
    throw new RangeError(
      `arithmetic option 'operations' must be a non-empty subset of "+-*", got ${JSON.stringify(o.operations)}`,
    );
  }
}

export function createArithmeticTask(options: Partial<ArithmeticOptions> = {}): Task {
  const o: ArithmeticOptions = { ...ARITHMETIC_DEFAULTS, ...options };
  validateArithmeticOptions(o);
  const ops = [...new Set(o.operations)];
  return {
    name: 'arithmetic',
    description: `Multi-digit arithmetic (${o.digits}-digit operands, ${ops.join(' ')}).`,
    generate(seed, count) {
      const rng = createRng(seed);
      return Array.from({ length: count }, (_, i): Problem => {
        const a = operand(rng, o.digits);
        const b = operand(rng, o.digits);
        const op = rng.pick(ops);
        const answer = String(op === '+' ? a + b : op === '-' ? a - b : a * b);
        return {
          id: `arithmetic-${seed}-${i}`,
          task: 'arithmetic',
          question: `Compute ${a} ${op} ${b} and give the result as an integer in <answer> </answer> tags`,
          reference: answer,
          verifier: { kind: 'integer', answer },
        };
      });
    },
    formatPrompt,
    verify: (answerText, problem) => verifyAnswer(answerText, problem.verifier),
  };
}
