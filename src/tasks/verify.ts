// Answer checkers shared by every task: the text inside <answer> against a Problem's VerifierSpec.
// rewards.py in the TRL export re-implements exactly this file (same regexes, same whitespace set,
// exact integer / rational arithmetic), so a completion scores the same here and on a cluster.
//
// Whitespace is the ASCII set [ \t\n\v\f\r] everywhere: JavaScript's \s and trim() and Python's \s and
// strip() disagree on Unicode spaces, and an identical reward in both languages matters more here.

import { verifyMath } from './math-answer';

export type VerifierSpec =
  | { kind: 'countdown'; nums: number[]; target: number }
  | { kind: 'integer'; answer: string }
  | { kind: 'exact'; answer: string }
  | { kind: 'numeric'; answer: string; tolerance: number }
  | { kind: 'choice'; answer: string }
  | { kind: 'math'; answer: string } // the extracted reference answer (math-answer.ts)
  | { kind: 'none' };

export const ASCII_WS = ' \t\n\v\f\r';

export function asciiTrim(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && ASCII_WS.includes(text[start])) start++;
  while (end > start && ASCII_WS.includes(text[end - 1])) end--;
  return text.slice(start, end);
}

const INTEGER_RE = /^[+-]?[0-9]+$/;
const NUMERIC_RE = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
const CHOICE_RE = /^(?:\(([A-Za-z])\)|([A-Za-z])\)?)\.?$/;

export function isNumericText(text: string): boolean {
  return NUMERIC_RE.test(text);
}

/** The letter of a multiple-choice answer ("B", "(b)", "B." …), upper-cased, or null. */
export function choiceLetter(text: string): string | null {
  const m = CHOICE_RE.exec(asciiTrim(text));
  return m ? (m[1] ?? m[2]).toUpperCase() : null;
}

export function verifyAnswer(answerText: string, spec: VerifierSpec): boolean | null {
  const text = asciiTrim(answerText);
  switch (spec.kind) {
    case 'countdown':
      return verifyCountdown(text, spec.nums, spec.target).ok;
    case 'integer':
      if (text.length > MAX_INTEGER_ANSWER_CHARS || !INTEGER_RE.test(text)) return false;
      return BigInt(text) === BigInt(spec.answer);
    case 'exact':
      return text === asciiTrim(spec.answer);
    case 'numeric': {
      if (!NUMERIC_RE.test(text)) return false;
      return Math.abs(Number(text) - Number(asciiTrim(spec.answer))) <= spec.tolerance;
    }
    case 'choice': {
      const letter = choiceLetter(text);
      return letter !== null && letter === asciiTrim(spec.answer).toUpperCase();
    }
    case 'math':
      return verifyMath(text, spec.answer);
    case 'none':
      return null;
  }
}

// ---------------------------------------------------------------------------------------------
// Countdown (TinyZero rules), exact rational arithmetic with bigint fractions, never eval().
//
// Accepted: integer literals, + - * /, parentheses, unary + and - (Python's eval accepts them, so
// TinyZero does), ASCII whitespace anywhere. The multiset of literals must equal the multiset of
// given numbers (TinyZero's sorted-list comparison: each number used exactly once, none missing).
// Rejected (not correct): any other character (=, ., ^, x, Unicode − × ÷ …), `**` and `//` (TinyZero's
// eval would accept them; the rules allow only + - * /), literals with a leading zero such as 05
// (a SyntaxError in Python), division by zero anywhere, unbalanced or empty parentheses, adjacent
// operands (`2 3`, `2(3)`), nesting deeper than COUNTDOWN_MAX_DEPTH.
// Non-integer intermediates are allowed (Python's / is true division): (8 / 3) * 3 = 8.
// The value must equal the target exactly; TinyZero compares floats with |x − t| < 1e-5, which can
// only differ for results within 1e-5 of the target that are not equal to it.
// ---------------------------------------------------------------------------------------------

export const COUNTDOWN_MAX_DEPTH = 64;
/** Longer literals are a syntax error: Python's int() refuses > 4300 digits, so both stop well before. */
export const COUNTDOWN_MAX_LITERAL_DIGITS = 100;
/** Integer answers longer than this are wrong without parsing (same reason). */
export const MAX_INTEGER_ANSWER_CHARS = 1000;

export type CountdownFailure =
  | 'empty'
  | 'invalid-character'
  | 'leading-zero'
  | 'syntax'
  | 'too-deep'
  | 'numbers-mismatch'
  | 'division-by-zero'
  | 'wrong-value';

export interface CountdownCheck {
  ok: boolean;
  failure?: CountdownFailure;
  /** The exact value as "n/d" or "n" when the expression evaluated. */
  value?: string;
}

interface Fraction {
  n: bigint;
  d: bigint; // > 0, gcd(n, d) = 1
}

function gcd(a: bigint, b: bigint): bigint {
  if (a < 0n) a = -a;
  if (b < 0n) b = -b;
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

function frac(n: bigint, d: bigint): Fraction {
  if (d < 0n) {
    n = -n;
    d = -d;
  }
  const g = gcd(n, d);
  return g > 1n ? { n: n / g, d: d / g } : { n, d };
}

type Token = { kind: 'num'; value: bigint } | { kind: 'op'; op: string };

class CountdownError extends Error {
  constructor(readonly failure: CountdownFailure) {
    super(failure);
  }
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (ASCII_WS.includes(c)) {
      i++;
    } else if (c >= '0' && c <= '9') {
      let j = i;
      while (j < text.length && text[j] >= '0' && text[j] <= '9') j++;
      const literal = text.slice(i, j);
      if (literal.length > COUNTDOWN_MAX_LITERAL_DIGITS) throw new CountdownError('syntax');
      if (literal.length > 1 && literal[0] === '0' && /[1-9]/.test(literal)) {
        throw new CountdownError('leading-zero');
      }
      tokens.push({ kind: 'num', value: BigInt(literal) });
      i = j;
    } else if ('+-*/()'.includes(c)) {
      if ((c === '*' || c === '/') && text[i + 1] === c)
        throw new CountdownError('invalid-character');
      tokens.push({ kind: 'op', op: c });
      i++;
    } else {
      throw new CountdownError('invalid-character');
    }
  }
  return tokens;
}

/** Recursive descent: expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
 * unary := ('+'|'-')* primary; primary := NUMBER | '(' expr ')'. */
class Parser {
  private pos = 0;
  readonly literals: bigint[] = [];
  divisionByZero = false;

  constructor(private readonly tokens: Token[]) {}

  parse(): Fraction {
    const value = this.expr(0);
    if (this.pos !== this.tokens.length) throw new CountdownError('syntax');
    return value;
  }

  private peekOp(): string | null {
    const t = this.tokens[this.pos];
    return t && t.kind === 'op' ? t.op : null;
  }

  private expr(depth: number): Fraction {
    let left = this.term(depth);
    for (let op = this.peekOp(); op === '+' || op === '-'; op = this.peekOp()) {
      this.pos++;
      const right = this.term(depth);
      left =
        op === '+'
          ? frac(left.n * right.d + right.n * left.d, left.d * right.d)
          : frac(left.n * right.d - right.n * left.d, left.d * right.d);
    }
    return left;
  }

  private term(depth: number): Fraction {
    let left = this.unary(depth);
    for (let op = this.peekOp(); op === '*' || op === '/'; op = this.peekOp()) {
      this.pos++;
      const right = this.unary(depth);
      if (op === '*') {
        left = frac(left.n * right.n, left.d * right.d);
      } else if (right.n === 0n) {
        // Keep parsing so that syntax errors and number checks still report; the result is void.
        this.divisionByZero = true;
        left = { n: 0n, d: 1n };
      } else {
        left = frac(left.n * right.d, left.d * right.n);
      }
    }
    return left;
  }

  private unary(depth: number): Fraction {
    let negative = false;
    for (let op = this.peekOp(); op === '+' || op === '-'; op = this.peekOp()) {
      if (op === '-') negative = !negative;
      this.pos++;
    }
    const value = this.primary(depth);
    return negative ? { n: -value.n, d: value.d } : value;
  }

  private primary(depth: number): Fraction {
    const t = this.tokens[this.pos];
    if (!t) throw new CountdownError('syntax');
    if (t.kind === 'num') {
      this.pos++;
      this.literals.push(t.value);
      return { n: t.value, d: 1n };
    }
    if (t.op !== '(') throw new CountdownError('syntax');
    if (depth + 1 > COUNTDOWN_MAX_DEPTH) throw new CountdownError('too-deep');
    this.pos++;
    const inner = this.expr(depth + 1);
    const close = this.tokens[this.pos];
    if (!close || close.kind !== 'op' || close.op !== ')') throw new CountdownError('syntax');
    this.pos++;
    return inner;
  }
}

function sameMultiset(a: readonly bigint[], b: readonly bigint[]): boolean {
  if (a.length !== b.length) return false;
  const sa = a.map(String).sort();
  const sb = b.map(String).sort();
  return sa.every((v, i) => v === sb[i]);
}

/** Checks a Countdown equation (the text inside <answer>, e.g. "(44 - 19) + 35"). */
export function verifyCountdown(
  answerText: string,
  nums: readonly number[],
  target: number,
): CountdownCheck {
  const text = asciiTrim(answerText);
  if (text === '') return { ok: false, failure: 'empty' };
  try {
    const parser = new Parser(tokenize(text));
    const value = parser.parse();
    if (
      !sameMultiset(
        parser.literals,
        nums.map((n) => BigInt(n)),
      )
    ) {
      return { ok: false, failure: 'numbers-mismatch' };
    }
    if (parser.divisionByZero) return { ok: false, failure: 'division-by-zero' };
    const shown = value.d === 1n ? String(value.n) : `${value.n}/${value.d}`;
    if (value.d === 1n && value.n === BigInt(target)) return { ok: true, value: shown };
    return { ok: false, failure: 'wrong-value', value: shown };
  } catch (e) {
    if (e instanceof CountdownError) return { ok: false, failure: e.failure };
    throw e;
  }
}
