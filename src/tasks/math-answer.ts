// The `math` answer checker (docs/math-checker.md is the one source of truth for its rules): takes
// the last \boxed{…} / \fbox{…} (else the text after the last "####", else the whole text), normalises
// LaTeX, and compares numerically (exact rationals with bigint; radicals and π as floats within a
// relative 1e-9) or as normalised text, element by element for sets, intervals and tuples.
// rewards.py of the TRL export carries a line-by-line Python port of this file (its rules path):
// regexes use only explicit ASCII classes ([0-9], [A-Za-z], the ASCII whitespace set), because
// JavaScript's and Python's \d, \w and \s disagree on Unicode, and every float operation is done in
// the same order in both, so both languages give the same verdict (tests/unit/math-answer*.test.ts).

/** Longer extracted answers are wrong unread (keeps parsing cheap on degenerate completions). */
export const MATH_MAX_ANSWER_CHARS = 1000;
/** Exact values whose numerator or denominator pass this many bits fall back to text comparison:
 * every exact value then converts to a finite float in both languages (2^1000 < 1.8e308). */
export const MATH_MAX_BITS = 1000;
/** Relative tolerance when either side is not an exact rational (radicals, π, fractional powers). */
export const MATH_REL_TOLERANCE = 1e-9;

const WS = '[ \\t\\n\\v\\f\\r]';

// ------------------------------------------------------------------------------------------------
// Extraction
// ------------------------------------------------------------------------------------------------

/** The content of the last \boxed{…} or \fbox{…} (braces matched), null when it is unclosed;
 * undefined when there is none. `\boxed 5` (no braces) takes the run up to whitespace or `$`. */
export function lastBoxed(text: string): string | null | undefined {
  const re = /\\(?:boxed|fbox)(?![A-Za-z])/g;
  let start = -1;
  let end = -1;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    start = m.index;
    end = re.lastIndex;
  }
  if (start < 0) return undefined;
  let i = end;
  while (i < text.length && ' \t\n\v\f\r'.includes(text[i])) i++;
  if (text[i] !== '{') {
    let j = i;
    while (j < text.length && !' \t\n\v\f\r$'.includes(text[j])) j++;
    return j > i ? text.slice(i, j) : null;
  }
  let depth = 0;
  for (let j = i; j < text.length; j++) {
    const c = text[j];
    if (c === '\\') {
      j++; // an escaped brace \{ \} does not count
    } else if (c === '{') {
      depth++;
    } else if (c === '}') {
      depth--;
      if (depth === 0) return text.slice(i + 1, j);
    }
  }
  return null;
}

/** Characters as Python counts them (code points, not UTF-16 units), so both cut at the same place. */
function codePoints(s: string): number {
  if (s.length <= MATH_MAX_ANSWER_CHARS) return s.length;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
      const lo = s.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo < 0xe000) i++;
    }
    n++;
  }
  return n;
}

/** The answer part of a reference or a completion's answer (see the file header), or null. */
export function extractMathAnswer(text: string): string | null {
  let s: string | null;
  const boxed = lastBoxed(text);
  if (boxed !== undefined) {
    s = boxed;
  } else {
    const k = text.lastIndexOf('####');
    s = k >= 0 ? text.slice(k + 4) : text;
  }
  if (s === null) return null;
  s = s.replace(new RegExp(`^${WS}+|${WS}+$`, 'g'), '');
  if (s === '' || codePoints(s) > MATH_MAX_ANSWER_CHARS) return null;
  return s;
}

// ------------------------------------------------------------------------------------------------
// Normalisation (string to string, in this order; docs/math-checker.md lists each step)
// ------------------------------------------------------------------------------------------------

const TEXT_CMD = '\\\\(?:text|textrm|textbf|textit|mbox|mathrm|mathbf|mathit|operatorname)';

/** Unit words dropped after a number ("5 cm", "12 dollars"); longest alternatives first. */
export const MATH_UNIT_WORDS = [
  'squareunits',
  'square',
  'units',
  'unit',
  'sq',
  'centimeters',
  'centimetres',
  'centimeter',
  'millimeters',
  'millimeter',
  'kilometers',
  'kilometer',
  'meters',
  'metres',
  'meter',
  'inches',
  'inch',
  'feet',
  'foot',
  'ft',
  'yards',
  'yard',
  'miles',
  'mile',
  'mph',
  'cm',
  'mm',
  'km',
  'in',
  'm',
  'dollars',
  'dollar',
  'cents',
  'cent',
  'degrees',
  'degree',
  'hours',
  'hour',
  'minutes',
  'minute',
  'seconds',
  'second',
  'days',
  'day',
  'weeks',
  'years',
  'grams',
  'gram',
  'kg',
  'liters',
  'liter',
  'pounds',
  'ounces',
  'percent',
] as const;

// The 's' flag: '.' matches every character, as re.S makes Python's (JS's '.' alone skips \u2028).
const UNIT_RE = new RegExp(`^(.+?)(?:${MATH_UNIT_WORDS.join('|')})(?:\\^\\{?[23]\\}?)?$`, 's');
const TEXT_SUFFIX_RE = new RegExp(`^(.+?)${TEXT_CMD}\\{[^{}]*\\}$`, 's');
const TEXT_UNWRAP_RE = new RegExp(`${TEXT_CMD}\\{([^{}]*)\\}`, 'g');
/** Digit groups of three at the start, before anything but a digit or comma ("1,000 cm"); checked
 * while the whitespace is still there, so "100, 200" stays a list and "100,200" is one number. */
const THOUSANDS_RE = /^([+-]?[0-9]{1,3}(?:,[0-9]{3})+)(?![0-9,])/;
const PREFIX_RE = /^(?:the[ \t\n\v\f\r]+)?(?:final[ \t\n\v\f\r]+)?answer[ \t\n\v\f\r]*(?:is|:)/i;
const ASSIGN_RE = /^[A-Za-z](?:_\{?[0-9A-Za-z]+\}?)?=([^=]*)$/;

/** The global rewrites of one extracted answer, ending without whitespace (docs/math-checker.md). */
export function normalizeMath(text: string): string {
  let s = text;
  s = s
    .replace(/\u2212/g, '-')
    .replace(/\u00d7/g, '\\times ')
    .replace(/\u00f7/g, '\\div ');
  s = s
    .replace(/\u03c0/g, '\\pi ')
    .replace(/\u221e/g, '\\infty ')
    .replace(/\u00b0/g, '');
  s = s.replace(/\\\$/g, '').replace(/\$/g, '');
  s = matricesToTuples(s); // before the spacing commands: its row break \\ is not "\ "
  s = s.replace(/\\[[\]()]/g, '');
  s = s.replace(/\\(?:left|right|[Bb]ig{1,2}[lr]?)(?![A-Za-z])/g, '');
  s = s.replace(/\\(?:quad|qquad)(?![A-Za-z])/g, ' ').replace(/\\[!,;: ]|~/g, ' ');
  s = s
    .replace(/\\(?:dfrac|tfrac)(?![A-Za-z])/g, '\\frac')
    .replace(/\\displaystyle(?![A-Za-z])/g, '');
  s = s.replace(/\^\{?\\circ\}?|\\circ(?![A-Za-z])|\\degree(?![A-Za-z])/g, '');
  s = s.replace(/\\%/g, '%').replace(/\{,\}/g, ',');
  s = s.replace(PREFIX_RE, '');
  s = s.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, '').replace(/\.$/, '');
  s = s.replace(/\\frac[ \t\n\v\f\r]*([0-9A-Za-z])[ \t\n\v\f\r]*([0-9A-Za-z])/g, '\\frac{$1}{$2}');
  s = s.replace(/\\frac[ \t\n\v\f\r]*([0-9A-Za-z])[ \t\n\v\f\r]*\{/g, '\\frac{$1}{');
  s = s.replace(/\\frac[ \t\n\v\f\r]*\{([^{}]*)\}[ \t\n\v\f\r]*([0-9A-Za-z])/g, '\\frac{$1}{$2}');
  s = s.replace(/\\sqrt[ \t\n\v\f\r]*([0-9A-Za-z])/g, '\\sqrt{$1}');
  s = s.replace(THOUSANDS_RE, (m: string) => m.replace(/,/g, ''));
  // Whitespace goes, except one space that ends a command before a letter (\pi r, not \pir).
  s = s.replace(/(\\[A-Za-z]+)[ \t\n\v\f\r]+(?=[A-Za-z])/g, '$1\u0000');
  s = s
    .replace(/[ \t\n\v\f\r]+/g, '')
    .split('\u0000')
    .join(' ');
  s = s.replace(/\^\{([^{}])\}/g, '^$1').replace(/_\{([^{}])\}/g, '_$1');
  return s;
}

/** \begin{pmatrix}a\\b\end{pmatrix} (also bmatrix, vmatrix, matrix) as a tuple: one row or one
 * column is a flat tuple, more are a tuple of row tuples. */
function matricesToTuples(s: string): string {
  return s.replace(
    /\\begin\{[pbvB]?matrix\}(.*?)\\end\{[pbvB]?matrix\}/gs,
    (_all: string, body: string) => {
      const rows = body
        .split('\\\\')
        .map((r) => r.split('&').map((c) => c.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, '')))
        .filter((r) => !(r.length === 1 && r[0] === ''));
      if (rows.every((r) => r.length === 1)) return `(${rows.map((r) => r[0]).join(',')})`;
      if (rows.length === 1) return `(${rows[0].join(',')})`;
      return `(${rows.map((r) => `(${r.join(',')})`).join(',')})`;
    },
  );
}

// ------------------------------------------------------------------------------------------------
// Numbers: exact rationals (bigint) or floats, one small expression grammar
// ------------------------------------------------------------------------------------------------

interface Num {
  n: bigint | null; // exact numerator (null: only the float f is known)
  d: bigint; // exact denominator > 0, gcd(n, d) = 1
  f: number; // the value as a float (n / d when exact)
}

function bitLength(v: bigint): number {
  return (v < 0n ? -v : v).toString(2).length;
}

function gcd(a: bigint, b: bigint): bigint {
  if (a < 0n) a = -a;
  if (b < 0n) b = -b;
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

class NotNumeric extends Error {}

function exact(n: bigint, d: bigint): Num {
  if (d === 0n) throw new NotNumeric();
  if (d < 0n) {
    n = -n;
    d = -d;
  }
  const g = gcd(n, d);
  if (g > 1n) {
    n /= g;
    d /= g;
  }
  if (bitLength(n) > MATH_MAX_BITS || bitLength(d) > MATH_MAX_BITS) throw new NotNumeric();
  return { n, d, f: Number(n) / Number(d) };
}

function approx(f: number): Num {
  if (!Number.isFinite(f)) throw new NotNumeric();
  return { n: null, d: 1n, f };
}

function add(a: Num, b: Num, sign: 1n | -1n): Num {
  if (a.n !== null && b.n !== null) return exact(a.n * b.d + sign * b.n * a.d, a.d * b.d);
  return approx(sign === 1n ? a.f + b.f : a.f - b.f);
}

function mul(a: Num, b: Num): Num {
  if (a.n !== null && b.n !== null) return exact(a.n * b.n, a.d * b.d);
  return approx(a.f * b.f);
}

function div(a: Num, b: Num): Num {
  if (a.n !== null && b.n !== null) return exact(a.n * b.d, a.d * b.n);
  if (b.f === 0) throw new NotNumeric();
  return approx(a.f / b.f);
}

/** The exact k-th root of a non-negative integer, or null. */
function intRoot(v: bigint, k: number): bigint | null {
  if (v < 0n) return null;
  if (v < 2n) return v;
  // Bisection on [0, 2^(bits/k + 1)]: the root is unique, so any method agrees with the port.
  let lo = 0n;
  let hi = 1n << BigInt(Math.floor(bitLength(v) / k) + 1);
  const K = BigInt(k);
  while (lo < hi) {
    const mid = (lo + hi + 1n) / 2n;
    if (mid ** K <= v) lo = mid;
    else hi = mid - 1n;
  }
  return lo ** K === v ? lo : null;
}

/** x^(1/k) for an integer k ≥ 2: exact when x is a perfect k-th power of a rational. */
function root(x: Num, k: number): Num {
  if (x.n !== null) {
    const neg = x.n < 0n;
    if (neg && k % 2 === 0) throw new NotNumeric();
    const rn = intRoot(neg ? -x.n : x.n, k);
    const rd = intRoot(x.d, k);
    if (rn !== null && rd !== null) return exact(neg ? -rn : rn, rd);
  }
  if (x.f < 0) {
    if (k % 2 === 0) throw new NotNumeric();
    return approx(-Math.pow(-x.f, 1 / k));
  }
  return approx(k === 2 ? Math.sqrt(x.f) : Math.pow(x.f, 1 / k));
}

function intPower(base: Num, e: bigint): Num {
  let m = e < 0n ? -e : e;
  let result: Num = exact(1n, 1n);
  let b = base;
  while (m > 0n) {
    if (m & 1n) result = mul(result, b);
    m >>= 1n;
    if (m > 0n) b = mul(b, b);
  }
  return e < 0n ? div(exact(1n, 1n), result) : result;
}

function power(base: Num, e: Num): Num {
  if (e.n !== null && e.d === 1n) {
    if (e.n > 4096n || e.n < -4096n) throw new NotNumeric();
    return intPower(base, e.n);
  }
  if (e.n !== null && e.d <= 64n) {
    // x^(p/q) = (x^(1/q))^p: exact when x is a perfect q-th power.
    return intPower(root(base, Number(e.d)), e.n);
  }
  if (base.f <= 0) throw new NotNumeric();
  return approx(Math.pow(base.f, e.f));
}

type Tok = { t: 'num'; v: string } | { t: 'op'; v: string };

/** Tokens of a normalised numeric expression, or null when it holds anything else. */
function tokenizeNumeric(s: string): Tok[] | null {
  const out: Tok[] = [];
  const re =
    /([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)|(\\frac|\\sqrt|\\pi|\\cdot|\\times|\\div)(?![A-Za-z])|([-+*/^(){}[\]])/y;
  let i = 0;
  while (i < s.length) {
    re.lastIndex = i;
    const m = re.exec(s);
    if (m === null) return null;
    if (m[1] !== undefined) out.push({ t: 'num', v: m[1] });
    else out.push({ t: 'op', v: m[2] ?? m[3] });
    i = re.lastIndex;
  }
  return out;
}

function literal(v: string): Num {
  const m = /^([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?$/.exec(v) as RegExpExecArray;
  const whole = m[1];
  const fracDigits = m[2] ?? '';
  const expText = m[3] ?? '0';
  if (whole.length + fracDigits.length > 400 || expText.replace(/^[+-]/, '').length > 4) {
    throw new NotNumeric();
  }
  const e = Number(expText) - fracDigits.length;
  if (e > 4000 || e < -4000) throw new NotNumeric();
  const digits = BigInt(whole + fracDigits || '0');
  return e >= 0 ? exact(digits * 10n ** BigInt(e), 1n) : exact(digits, 10n ** BigInt(-e));
}

const PI: Num = { n: null, d: 1n, f: Math.PI };
const STARTS_PRIMARY = new Set(['(', '{', '\\frac', '\\sqrt', '\\pi']);

/** expr := term (('+'|'-') term)*; term := unary (('*'|'/'|implicit) unary)*;
 * unary := ('+'|'-') unary | power; power := primary ('^' ('+'|'-')* power)?;
 * primary := number | ( expr ) | { expr } | \frac{expr}{expr} | \sqrt[expr]{expr} | \pi. */
class NumParser {
  private pos = 0;
  private depth = 0;
  constructor(private readonly toks: Tok[]) {}

  parse(): Num {
    const v = this.expr();
    if (this.pos !== this.toks.length) throw new NotNumeric();
    return v;
  }

  private peek(): Tok | undefined {
    return this.toks[this.pos];
  }

  private isOp(v: string): boolean {
    const t = this.toks[this.pos];
    return t !== undefined && t.t === 'op' && t.v === v;
  }

  private expect(v: string): void {
    if (!this.isOp(v)) throw new NotNumeric();
    this.pos++;
  }

  private expr(): Num {
    if (++this.depth > 64) throw new NotNumeric();
    let left = this.term();
    while (this.isOp('+') || this.isOp('-')) {
      const sign = this.isOp('+') ? 1n : -1n;
      this.pos++;
      left = add(left, this.term(), sign);
    }
    this.depth--;
    return left;
  }

  private term(): Num {
    let left = this.unary();
    for (;;) {
      const t = this.peek();
      if (t === undefined) return left;
      if (t.t === 'op' && (t.v === '*' || t.v === '\\cdot' || t.v === '\\times')) {
        this.pos++;
        left = mul(left, this.unary());
      } else if (t.t === 'op' && (t.v === '/' || t.v === '\\div')) {
        this.pos++;
        left = div(left, this.unary());
      } else if (t.t === 'num' || STARTS_PRIMARY.has(t.v)) {
        left = mul(left, this.power()); // implicit product: 2\sqrt{3}, 3\pi, 2(5)
      } else {
        return left;
      }
    }
  }

  private unary(): Num {
    // A loop, not recursion: a run of 999 signs must not reach Python's recursion limit in the port.
    let negative = false;
    while (this.isOp('-') || this.isOp('+')) {
      if (this.isOp('-')) negative = !negative;
      this.pos++;
    }
    const v = this.power();
    return negative ? mul(exact(-1n, 1n), v) : v;
  }

  private power(): Num {
    const base = this.primary();
    if (!this.isOp('^')) return base;
    this.pos++;
    let negative = false;
    while (this.isOp('-') || this.isOp('+')) {
      if (this.isOp('-')) negative = !negative;
      this.pos++;
    }
    if (++this.depth > 64) throw new NotNumeric();
    const e = this.power();
    this.depth--;
    return power(base, negative ? mul(exact(-1n, 1n), e) : e);
  }

  private group(): Num {
    this.expect('{');
    const v = this.expr();
    this.expect('}');
    return v;
  }

  private primary(): Num {
    const t = this.peek();
    if (t === undefined) throw new NotNumeric();
    this.pos++;
    if (t.t === 'num') return literal(t.v);
    switch (t.v) {
      case '(': {
        const v = this.expr();
        this.expect(')');
        return v;
      }
      case '{': {
        const v = this.expr();
        this.expect('}');
        return v;
      }
      case '\\frac': {
        const a = this.group();
        return div(a, this.group());
      }
      case '\\sqrt': {
        let k = 2;
        if (this.isOp('[')) {
          this.pos++;
          const index = this.expr();
          this.expect(']');
          if (index.n === null || index.d !== 1n || index.n < 2n || index.n > 64n) {
            throw new NotNumeric();
          }
          k = Number(index.n);
        }
        return root(this.group(), k);
      }
      case '\\pi':
        return PI;
      default:
        throw new NotNumeric();
    }
  }
}

/** A numeric answer: its value and whether it ended in %. */
interface NumAnswer {
  value: Num;
  percent: boolean;
}

function tryNumeric(s: string): NumAnswer | null {
  let percent = false;
  if (s.endsWith('%')) {
    percent = true;
    s = s.slice(0, -1);
  }
  if (s === '') return null;
  const toks = tokenizeNumeric(s);
  if (toks === null) return null;
  try {
    return { value: new NumParser(toks).parse(), percent };
  } catch (e) {
    if (e instanceof NotNumeric) return null;
    throw e;
  }
}

function numEqual(a: Num, b: Num): boolean {
  if (a.n !== null && b.n !== null) return a.n === b.n && a.d === b.d;
  return Math.abs(a.f - b.f) <= MATH_REL_TOLERANCE * Math.max(Math.abs(a.f), Math.abs(b.f));
}

function numAnswersEqual(a: NumAnswer, b: NumAnswer): boolean {
  if (a.percent === b.percent) return numEqual(a.value, b.value);
  // One side wrote %: 50% matches 50 and 0.5.
  const [p, q] = a.percent ? [a, b] : [b, a];
  if (numEqual(p.value, q.value)) return true;
  try {
    return numEqual(div(p.value, exact(100n, 1n)), q.value);
  } catch (e) {
    if (e instanceof NotNumeric) return false; // past MATH_MAX_BITS
    throw e;
  }
}

// ------------------------------------------------------------------------------------------------
// Structure: sets, intervals, tuples, unions
// ------------------------------------------------------------------------------------------------

type Element = { kind: 'num'; num: NumAnswer } | { kind: 'text'; text: string };
type Answer =
  | { kind: 'set'; items: Item[] } // \{…\}, a bare comma list, or a single element
  | { kind: 'seq'; open: string; close: string; items: Item[] } // (…), […], (…], […)
  | { kind: 'union'; parts: Answer[] };
type Item = Element | Answer;

const OPEN = '([{';
const CLOSE = ')]}';

/** Splits at `sep` outside any bracket (brackets counted without matching their kinds, so that
 * half-open intervals such as [0,1) nest). */
function splitTop(s: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && (s[i + 1] === '{' || s[i + 1] === '}')) {
      depth += s[i + 1] === '{' ? 1 : -1;
      i++;
    } else if (OPEN.includes(c)) {
      depth++;
    } else if (CLOSE.includes(c)) {
      depth--;
    } else if (depth === 0 && s.startsWith(sep, i)) {
      parts.push(s.slice(start, i));
      start = i + sep.length;
      i += sep.length - 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

/** True when the bracket at 0 closes exactly at the last character. */
function wrapsWhole(s: string): boolean {
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    if (OPEN.includes(s[i])) depth++;
    else if (CLOSE.includes(s[i])) depth--;
    if (depth === 0 && i < s.length - 1) return false;
  }
  return depth === 0;
}

function stripAssignment(s: string): string {
  const m = ASSIGN_RE.exec(s);
  return m ? m[1] : s;
}

/** Drops trailing \text{…} groups and unit words while what is left is not a number. */
function stripUnits(s: string): NumAnswer | null {
  let u = s;
  for (let k = 0; k < 4; k++) {
    const m = TEXT_SUFFIX_RE.exec(u) ?? UNIT_RE.exec(u);
    if (!m) return null;
    u = m[1];
    const num = tryNumeric(u);
    if (num) return num;
  }
  return null;
}

function parseElement(raw: string): Element {
  const s = stripAssignment(raw);
  let num = tryNumeric(s) ?? stripUnits(s);
  if (num) return { kind: 'num', num };
  let text = s.replace(TEXT_UNWRAP_RE, '$1');
  num = tryNumeric(text) ?? stripUnits(text);
  if (num) return { kind: 'num', num };
  const letter = /^\(([A-Za-z])\)$/.exec(text);
  if (letter) text = letter[1];
  if (/^[A-Za-z' ]+$/.test(text)) text = text.toLowerCase();
  return { kind: 'text', text };
}

function parseItem(s: string, depth: number): Item {
  if (depth > 8) return { kind: 'text', text: s };
  if (s.length >= 2 && '(['.includes(s[0]) && ')]'.includes(s[s.length - 1]) && wrapsWhole(s)) {
    const items = splitTop(s.slice(1, -1), ',');
    if (items.length > 1) {
      return {
        kind: 'seq',
        open: s[0],
        close: s[s.length - 1],
        items: items.map((x) => parseItem(x, depth + 1)),
      };
    }
  }
  return parseElement(s);
}

function parseAnswer(s: string, depth = 0): Answer {
  const union = splitTop(s, '\\cup');
  if (union.length > 1)
    return { kind: 'union', parts: union.map((p) => parseAnswer(p, depth + 1)) };
  let body = s;
  if (body.startsWith('\\{') && body.endsWith('\\}')) body = body.slice(2, -2);
  else if (body.startsWith('{') && body.endsWith('}') && wrapsWhole(body)) body = body.slice(1, -1);
  const items = splitTop(body, ',');
  if (items.length === 1 && body === s) {
    const one = parseItem(s, depth + 1);
    return one.kind === 'seq' ? one : { kind: 'set', items: [one] };
  }
  return { kind: 'set', items: items.map((x) => parseItem(x, depth + 1)) };
}

function itemsEqual(a: Item, b: Item): boolean {
  if (a.kind === 'num' && b.kind === 'num') return numAnswersEqual(a.num, b.num);
  if (a.kind === 'text' && b.kind === 'text') return a.text === b.text;
  if (a.kind === 'num' || b.kind === 'num' || a.kind === 'text' || b.kind === 'text') return false;
  return answersEqual(a, b);
}

/** Every item of `a` matches one of `b` and every item of `b` one of `a` (set equality). */
function sameSet(a: readonly Item[], b: readonly Item[]): boolean {
  return (
    a.every((x) => b.some((y) => itemsEqual(x, y))) &&
    b.every((y) => a.some((x) => itemsEqual(x, y)))
  );
}

function answersEqual(a: Answer, b: Answer): boolean {
  if (a.kind === 'set' && b.kind === 'set') return sameSet(a.items, b.items);
  if (a.kind === 'seq' && b.kind === 'seq') {
    return (
      a.open === b.open &&
      a.close === b.close &&
      a.items.length === b.items.length &&
      a.items.every((x, i) => itemsEqual(x, b.items[i]))
    );
  }
  if (a.kind === 'union' && b.kind === 'union') return sameSet(a.parts, b.parts);
  return false;
}

/** The math checker: does `candidate` (a completion's answer) state the answer `reference`? */
export function verifyMath(candidate: string, reference: string): boolean {
  const ref = extractMathAnswer(reference);
  const cand = extractMathAnswer(candidate);
  if (ref === null || cand === null) return false;
  const r = normalizeMath(ref);
  const c = normalizeMath(cand);
  if (r === '' || c === '') return false;
  return answersEqual(parseAnswer(r), parseAnswer(c));
}
