// Countdown (TinyZero, Jiayi-Pan/TinyZero): reach a target with the given numbers, each used exactly
// once, with + - * / and parentheses. The generator builds a random expression over the numbers so
// every problem is solvable and carries one solution; the verifier (verify.ts) follows TinyZero's
// rules with exact rational arithmetic.

import { formatPrompt } from './prompt';
import { createRng, type Rng } from '../core/rng';
import type { Problem, Task } from './types';
import { verifyAnswer } from './verify';

export interface CountdownOptions {
  numbers: number; // how many numbers are given (TinyZero: 3 or 4), default 3
  minNumber: number; // smallest given number, default 1
  maxNumber: number; // largest given number, default 100 (TinyZero's max_number)
  minTarget: number; // smallest target, default 1
  maxTarget: number; // largest target, default 100
}

export const COUNTDOWN_DEFAULTS: CountdownOptions = {
  numbers: 3,
  minNumber: 1,
  maxNumber: 100,
  minTarget: 1,
  maxTarget: 100,
};

/** Phrases of backtracking in Countdown reasoning, added to the docs/grpo.md §7 markers. */
export const COUNTDOWN_REFLECTION_MARKERS = [
  "doesn't work",
  'does not work',
  'let me try',
  'another combination',
] as const;

/** Random draws per problem before giving up: knobs such as a target range no combination of the
 * number range can reach must fail loudly, not loop forever. */
const MAX_ATTEMPTS = 10_000;

interface Item {
  value: number;
  expr: string;
  compound: boolean;
}

function combine(rng: Rng, a: Item, b: Item): Item | null {
  const wrap = (x: Item) => (x.compound ? `(${x.expr})` : x.expr);
  const op = rng.pick(['+', '-', '*', '/'] as const);
  // Intermediates stay non-negative integers: the shown solution is then easy to read.
  if (op === '-' && a.value < b.value) [a, b] = [b, a];
  if (op === '/') {
    if (b.value === 0 || a.value % b.value !== 0) return null;
  }
  const value =
    op === '+'
      ? a.value + b.value
      : op === '-'
        ? a.value - b.value
        : op === '*'
          ? a.value * b.value
          : a.value / b.value;
  return { value, expr: `${wrap(a)} ${op} ${wrap(b)}`, compound: true };
}

function generateOne(
  rng: Rng,
  o: CountdownOptions,
): { nums: number[]; target: number; solution: string } {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const nums = Array.from({ length: o.numbers }, () => rng.int(o.minNumber, o.maxNumber));
    let pool: Item[] = rng
      .shuffle(nums)
      .map((v) => ({ value: v, expr: String(v), compound: false }));
    while (pool.length > 1) {
      const i = rng.int(0, pool.length - 1);
      const a = pool[i];
      const rest = pool.filter((_, k) => k !== i);
      const j = rng.int(0, rest.length - 1);
      const merged = combine(rng, a, rest[j]);
      if (!merged) break;
      pool = [...rest.filter((_, k) => k !== j), merged];
    }
    if (pool.length !== 1) continue;
    const target = pool[0].value;
    if (target < o.minTarget || target > o.maxTarget) continue;
    return { nums, target, solution: pool[0].expr };
  }
  throw new RangeError(
    `countdown: no problem with ${o.numbers} numbers in [${o.minNumber}, ${o.maxNumber}] reached a ` +
      `target in [${o.minTarget}, ${o.maxTarget}] after ${MAX_ATTEMPTS} attempts; widen the ranges`,
  );
}

export function countdownQuestion(nums: readonly number[], target: number): string {
  return (
    `Using the numbers [${nums.join(', ')}], create an equation that equals ${target}. ` +
    'You can use basic arithmetic operations (+, -, *, /) and each number can only be used once. ' +
    'Return the final equation in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>'
  );
}

export function validateCountdownOptions(o: CountdownOptions): void {
  const ints: (keyof CountdownOptions)[] = [
    'numbers',
    'minNumber',
    'maxNumber',
    'minTarget',
    'maxTarget',
  ];
  for (const k of ints) {
    if (!Number.isSafeInteger(o[k]))
      throw new RangeError(`countdown option '${k}' must be an integer, got ${o[k]}`);
  }
  if (o.numbers < 2 || o.numbers > 8)
    throw new RangeError(`countdown option 'numbers' must be in [2, 8], got ${o.numbers}`);
  if (o.minNumber < 1 || o.maxNumber < o.minNumber) {
    throw new RangeError(
      `countdown options need 1 ≤ minNumber ≤ maxNumber, got ${o.minNumber}, ${o.maxNumber}`,
    );
  }
  if (o.minTarget < 0 || o.maxTarget < o.minTarget) {
    throw new RangeError(
      `countdown options need 0 ≤ minTarget ≤ maxTarget, got ${o.minTarget}, ${o.maxTarget}`,
    );
  }
}

export function createCountdownTask(options: Partial<CountdownOptions> = {}): Task {
  const o: CountdownOptions = { ...COUNTDOWN_DEFAULTS, ...options };
  validateCountdownOptions(o);
  return {
    name: 'countdown',
    description:
      'Countdown (TinyZero): combine the given numbers with + - * / to reach the target.',
    generate(seed, count) {
      const rng = createRng(seed);
      return Array.from({ length: count }, (_, i): Problem => {
        const { nums, target, solution } = generateOne(rng, o);
        return {
          id: `countdown-${seed}-${i}`,
          task: 'countdown',
          question: countdownQuestion(nums, target),
          reference: solution,
          verifier: { kind: 'countdown', nums, target },
        };
      });
    },
    formatPrompt,
    verify: (answerText, problem) => verifyAnswer(answerText, problem.verifier),
    reflectionMarkers: COUNTDOWN_REFLECTION_MARKERS,
  };
}
