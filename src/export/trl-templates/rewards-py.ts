// rewards.py of the TRL export: the built-in rewards of src/rewards/rewards.ts and the answer checkers
// of src/tasks/verify.ts in plain Python (stdlib only), with IDENTICAL semantics: the same regexes
// (the format and answer patterns are injected from the TypeScript constants), the same ASCII
// whitespace set, exact integers and fractions.Fraction for Countdown, never eval(); language
// consistency with the playground's own character classes as code point tables.
// tests/unit/trl-export.test.ts runs this file with python3 against the TypeScript rewards.

import {
  LETTER_CLASS,
  scriptClass,
  WORD_CHAR_CLASS,
  type LanguageScript,
} from '../../rewards/language-consistency';
import { ANSWER_PATTERN, FORMAT_PATTERN } from '../../rewards/rewards';
import { PROMPT_THINK_TAIL_PATTERN } from '../../tasks/prompt';
import { mathPy } from './math-py';
import { commentLines, commentText, pyStr } from './py-literal';
import {
  COUNTDOWN_MAX_DEPTH,
  COUNTDOWN_MAX_LITERAL_DIGITS,
  MAX_INTEGER_ANSWER_CHARS,
} from '../../tasks/verify';

export interface CustomRewardStub {
  id: string;
  pythonName: string;
  source: string;
}

export interface RewardsPyOptions {
  /** Reward names in config order: the built-ins' names and 'custom:<id>'. */
  rewards: readonly string[];
  custom: readonly CustomRewardStub[];
  /** Target script of language_consistency (config languageScript; default 'Latin'). */
  languageScript?: LanguageScript;
}

const BODY = String.raw`
import bisect
import json
import math
import os
import re
import threading
from fractions import Fraction

ASCII_WS = " \t\n\v\f\r"
FORMAT_RE = re.compile(__FORMAT_PATTERN__)
ANSWER_RE = re.compile(__ANSWER_PATTERN__)
PROMPT_THINK_TAIL_RE = re.compile(__THINK_TAIL_PATTERN__ + r"\Z")
OPENS_THINK_RE = re.compile(r"[ \t\n\v\f\r]*<think>")
INTEGER_RE = re.compile(r"[+-]?[0-9]+")
NUMERIC_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
CHOICE_RE = re.compile(r"(?:\(([A-Za-z])\)|([A-Za-z])\)?)\.?")
COUNTDOWN_MAX_DEPTH = __MAX_DEPTH__
COUNTDOWN_MAX_LITERAL_DIGITS = __MAX_LITERAL__
MAX_INTEGER_ANSWER_CHARS = __MAX_INT_CHARS__


def ascii_trim(text):
    return text.strip(ASCII_WS)


def completion_text(completion):
    """TRL passes a string (standard prompts) or [{"role": "assistant", "content": ...}] (chat)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant")


def format_ok(text):
    return FORMAT_RE.fullmatch(text) is not None


# (tokenizer, chat_template_kwargs) of the run, set by train_grpo.py for conversational prompts.
_CHAT_TEMPLATE = None


def use_chat_template(tokenizer, chat_template_kwargs):
    """TRL passes conversational prompts to reward functions as messages; format_reward renders
    them as the trainer does for generation (same tokenizer, same chat_template_kwargs) to see the
    think markup the template puts at the end of the prompt."""
    global _CHAT_TEMPLATE
    _CHAT_TEMPLATE = (tokenizer, dict(chat_template_kwargs or {}))


def prompt_text(prompt):
    """The prompt as the model saw it: a text prompt as is, messages through the chat template."""
    if isinstance(prompt, str):
        return prompt
    if prompt is None or _CHAT_TEMPLATE is None:
        return ""
    tokenizer, kwargs = _CHAT_TEMPLATE
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True, **kwargs)


def prompt_think_tail(text):
    """The think markup the prompt ends with (an opened <think>, or a whole block), else ""."""
    m = PROMPT_THINK_TAIL_RE.search(text)
    return m.group(0) if m else ""


def format_ok_after_prompt(prompt, completion):
    """format_ok of the model's whole turn: the prompt's trailing think markup, then the
    completion; a completion that opens its own <think> is judged alone."""
    tail = prompt_think_tail(prompt)
    if tail == "" or OPENS_THINK_RE.match(completion):
        return format_ok(completion)
    return format_ok(tail + completion)


def extract_answer(text):
    """The raw text inside the LAST <answer>...</answer> (non-greedy), or None."""
    matches = ANSWER_RE.findall(text)
    return matches[-1] if matches else None


def choice_letter(text):
    m = CHOICE_RE.fullmatch(ascii_trim(text))
    if m is None:
        return None
    return (m.group(1) or m.group(2)).upper()


class _Fail(Exception):
    def __init__(self, failure):
        super().__init__(failure)
        self.failure = failure


def _tokenize(text):
    tokens = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in ASCII_WS:
            i += 1
        elif "0" <= c <= "9":
            j = i
            while j < n and "0" <= text[j] <= "9":
                j += 1
            literal = text[i:j]
            if len(literal) > COUNTDOWN_MAX_LITERAL_DIGITS:
                raise _Fail("syntax")
            if len(literal) > 1 and literal[0] == "0" and re.search(r"[1-9]", literal):
                raise _Fail("leading-zero")
            tokens.append(("num", int(literal)))
            i = j
        elif c in "+-*/()":
            if c in "*/" and i + 1 < n and text[i + 1] == c:
                raise _Fail("invalid-character")
            tokens.append(("op", c))
            i += 1
        else:
            raise _Fail("invalid-character")
    return tokens


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0
        self.literals = []
        self.division_by_zero = False

    def parse(self):
        value = self.expr(0)
        if self.pos != len(self.tokens):
            raise _Fail("syntax")
        return value

    def peek_op(self):
        if self.pos < len(self.tokens) and self.tokens[self.pos][0] == "op":
            return self.tokens[self.pos][1]
        return None

    def expr(self, depth):
        left = self.term(depth)
        op = self.peek_op()
        while op in ("+", "-"):
            self.pos += 1
            right = self.term(depth)
            left = left + right if op == "+" else left - right
            op = self.peek_op()
        return left

    def term(self, depth):
        left = self.unary(depth)
        op = self.peek_op()
        while op in ("*", "/"):
            self.pos += 1
            right = self.unary(depth)
            if op == "*":
                left = left * right
            elif right == 0:
                self.division_by_zero = True
                left = Fraction(0)
            else:
                left = left / right
            op = self.peek_op()
        return left

    def unary(self, depth):
        negative = False
        op = self.peek_op()
        while op in ("+", "-"):
            if op == "-":
                negative = not negative
            self.pos += 1
            op = self.peek_op()
        value = self.primary(depth)
        return -value if negative else value

    def primary(self, depth):
        if self.pos >= len(self.tokens):
            raise _Fail("syntax")
        kind, value = self.tokens[self.pos]
        if kind == "num":
            self.pos += 1
            self.literals.append(value)
            return Fraction(value)
        if value != "(":
            raise _Fail("syntax")
        if depth + 1 > COUNTDOWN_MAX_DEPTH:
            raise _Fail("too-deep")
        self.pos += 1
        inner = self.expr(depth + 1)
        if self.pos >= len(self.tokens) or self.tokens[self.pos] != ("op", ")"):
            raise _Fail("syntax")
        self.pos += 1
        return inner


def verify_countdown(answer_text, nums, target):
    """TinyZero rules (see src/tasks/verify.ts): each number exactly once, + - * / ( ), exact value."""
    text = ascii_trim(answer_text)
    if text == "":
        return False
    try:
        parser = _Parser(_tokenize(text))
        value = parser.parse()
    except _Fail:
        return False
    if sorted(parser.literals) != sorted(int(n) for n in nums):
        return False
    if parser.division_by_zero:
        return False
    return value.denominator == 1 and value.numerator == int(target)


def verify_answer(answer_text, spec):
    """True correct, False wrong, None not checkable (no reference answer)."""
    text = ascii_trim(answer_text)
    kind = spec["kind"]
    if kind == "countdown":
        return verify_countdown(text, spec["nums"], spec["target"])
    if kind == "integer":
        if len(text) > MAX_INTEGER_ANSWER_CHARS or INTEGER_RE.fullmatch(text) is None:
            return False
        return int(text) == int(spec["answer"])
    if kind == "exact":
        return text == ascii_trim(spec["answer"])
    if kind == "numeric":
        if NUMERIC_RE.fullmatch(text) is None:
            return False
        return abs(float(text) - float(ascii_trim(spec["answer"]))) <= spec["tolerance"]
    if kind == "choice":
        letter = choice_letter(text)
        return letter is not None and letter == ascii_trim(spec["answer"]).upper()
    if kind == "math":
        return verify_math(text, spec["answer"])
    if kind == "none":
        return None
    raise ValueError("unknown verifier kind %r" % (kind,))


def format_reward(completions, prompts=None, **kwargs):
    """1.0 when the model's turn (the prompt's trailing think markup, then the completion) is
    exactly <think>...</think> <answer>...</answer> (ASCII whitespace around and between), each tag
    once; else 0.0."""
    if prompts is None:
        prompts = [None] * len(completions)
    return [
        1.0 if format_ok_after_prompt(prompt_text(p), completion_text(c)) else 0.0
        for p, c in zip(prompts, completions)
    ]


def accuracy_reward(completions, verifier, **kwargs):
    """The task's verifier on the text inside the last <answer> (a math problem without one: its
    last \\boxed{}): 1.0 / 0.0, None without a reference."""
    out = []
    for c, v in zip(completions, verifier):
        spec = json.loads(v) if isinstance(v, str) else v
        if spec["kind"] == "none":
            out.append(None)
            continue
        text = completion_text(c)
        answer = extract_answer(text)
        # A math problem without <answer>: the completion's last \\boxed{} (docs/grpo.md §1).
        if answer is None and spec["kind"] == "math" and _last_boxed(text)[0]:
            answer = text
        if answer is None:
            out.append(0.0)
            continue
        ok = verify_answer(answer, spec)
        out.append(None if ok is None else (1.0 if ok else 0.0))
    return out
`;

// The language-consistency reward, written only when the config uses it (its character tables
// are some 25 kB). Python's re has no \p{Script=…}, and unicodedata follows the Unicode version of
// the interpreter, so the three character classes travel as code point ranges computed here from
// the very patterns language-consistency.ts matches with: the same characters in both languages.
const LANGUAGE_BODY = String.raw`

# ---------------------------------------------------------------------------------------------
# Language consistency (DeepSeek-R1 §2.3.3; src/rewards/language-consistency.ts): the share of the
# chain of thought's words written in LANGUAGE_SCRIPT. A word is a maximal run of letters, marks,
# decimal digits, apostrophes and hyphens; it counts when it has a letter, and it is in the target
# language when every letter of it is in the target script. No word with a letter: None.
# The character classes are the playground's own, as code point ranges (tables at the end of this
# file): boundaries (start, end + 1, start, end + 1, ...), a code point is in the class when an odd
# number of boundaries are <= it. So the result does not depend on Python's Unicode version.
# ---------------------------------------------------------------------------------------------
LANGUAGE_SCRIPT = __LANGUAGE_SCRIPT__


def _in_class(bounds, ch):
    return bisect.bisect_right(bounds, ord(ch)) % 2 == 1


def think_text(text):
    """Inside the first <think>...</think> (to the end when unclosed); else what comes before
    </think>; else what comes before the first <answer>; else all of it."""
    start = text.find("<think>")
    if start >= 0:
        start += len("<think>")
        close = text.find("</think>", start)
        return text[start:close] if close >= 0 else text[start:]
    close = text.find("</think>")
    if close >= 0:
        return text[:close]
    answer = text.find("<answer>")
    return text[:answer] if answer >= 0 else text


def language_consistency(text):
    """(words with a letter, of those the words whose every letter is in LANGUAGE_SCRIPT)."""
    words = 0
    in_target = 0
    letters = 0
    foreign = 0
    for ch in text + " ":
        if _in_class(_WORD_BOUNDS, ch):
            if _in_class(_LETTER_BOUNDS, ch):
                letters += 1
                if not _in_class(_TARGET_BOUNDS, ch):
                    foreign += 1
            continue
        if letters:
            words += 1
            if foreign == 0:
                in_target += 1
        letters = 0
        foreign = 0
    return words, in_target


def language_consistency_reward(completions, **kwargs):
    """The share of the chain of thought's words in LANGUAGE_SCRIPT, in [0, 1]; None without words."""
    out = []
    for c in completions:
        words, in_target = language_consistency(think_text(completion_text(c)))
        out.append(in_target / words if words else None)
    return out
`;

const boundaryCache = new Map<string, number[]>();

/**
 * The code points that one character of `pattern` (a 'u'-flag class) matches, as sorted
 * boundaries [start, end + 1, start, end + 1, …] (a lone surrogate matches no class).
 */
export function codePointBoundaries(pattern: string): number[] {
  const cached = boundaryCache.get(pattern);
  if (cached) return cached;
  const re = new RegExp(`^${pattern}$`, 'u');
  const out: number[] = [];
  let inside = false;
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (re.test(String.fromCodePoint(cp)) !== inside) {
      out.push(cp);
      inside = !inside;
    }
  }
  if (inside) out.push(0x110000);
  boundaryCache.set(pattern, out);
  return out;
}

function pyBoundaries(name: string, pattern: string): string {
  const hex = codePointBoundaries(pattern).map((cp) => `0x${cp.toString(16)}`);
  const lines: string[] = [];
  for (let i = 0; i < hex.length; i += 10) lines.push(`    ${hex.slice(i, i + 10).join(', ')},`);
  return `${name} = (  # ${commentText(pattern)}\n${lines.join('\n')}\n)\n`;
}

function languageSection(script: LanguageScript): { body: string; tables: string } {
  return {
    body: LANGUAGE_BODY.replace('__LANGUAGE_SCRIPT__', pyStr(script)),
    tables:
      `\n\n# The character classes of language_consistency (see above), from the playground's patterns.\n` +
      pyBoundaries('_WORD_BOUNDS', WORD_CHAR_CLASS) +
      pyBoundaries('_LETTER_BOUNDS', LETTER_CLASS) +
      pyBoundaries('_TARGET_BOUNDS', scriptClass(script)),
  };
}

export function rewardsPy(o: RewardsPyOptions): string {
  // Untrusted text (a reward's id and JS source) only appears as pyStr literals and as escaped
  // comment lines: neither can end early, so nothing in it can become a Python statement.
  const sources = o.custom.map((c) => `    ${pyStr(c.id)}: ${pyStr(c.source)},\n`).join('');
  const stubs = o.custom.map(
    (c) => `

# ---------------------------------------------------------------------------------------------
# CUSTOM REWARD '${commentText(c.id)}': NOT PORTED. In the playground this reward is JavaScript; port it to
# Python here before training (the run stops on the first batch until you do). Its JS source
# (exactly, as a string: CUSTOM_JS_SOURCES above):
${commentLines(c.source)}
# ---------------------------------------------------------------------------------------------
def ${c.pythonName}(completions, **kwargs):
    raise NotImplementedError(
        ${pyStr(`custom reward '${c.id}' is JavaScript in the playground: port it to Python in rewards.py (the JS source is quoted above it)`)}
    )
`,
  );
  const byName = new Map(o.custom.map((c) => [`custom:${c.id}`, c.pythonName]));
  const funcs = o.rewards.map((name) => {
    if (name === 'format') return 'format_reward';
    if (name === 'accuracy') return 'accuracy_reward';
    if (name === 'language_consistency') return 'language_consistency_reward';
    const py = byName.get(name);
    if (!py) throw new RangeError(`no Python function for reward '${name}'`);
    return py;
  });
  const language = o.rewards.includes('language_consistency')
    ? languageSection(o.languageScript ?? 'Latin')
    : null;
  const body = BODY.replace('__FORMAT_PATTERN__', pyStr(FORMAT_PATTERN))
    .replace('__ANSWER_PATTERN__', pyStr(ANSWER_PATTERN))
    .replace('__THINK_TAIL_PATTERN__', pyStr(PROMPT_THINK_TAIL_PATTERN))
    .replace('__MAX_DEPTH__', String(COUNTDOWN_MAX_DEPTH))
    .replace('__MAX_LITERAL__', String(COUNTDOWN_MAX_LITERAL_DIGITS))
    .replace('__MAX_INT_CHARS__', String(MAX_INTEGER_ANSWER_CHARS));
  return (
    '"""Reward functions of the exported GRPO run, written by GRPO Playground.\n\n' +
    `format_reward, accuracy_reward${language ? ' and language_consistency_reward' : ''} re-implement the playground's built-in rewards with identical\n` +
    'semantics (src/rewards/rewards.ts, src/tasks/verify.ts). TRL calls each as f(prompts=..., completions=...,\n' +
    '**dataset_columns); the "verifier" column of train.jsonl carries what accuracy_reward needs.\n"""\n' +
    body +
    mathPy() +
    (language?.body ?? '') +
    `\n\n# The custom rewards' JavaScript sources, id → source, as data (never executed here).\nCUSTOM_JS_SOURCES = {\n${sources}}\n` +
    stubs.join('') +
    `\n\n# In config order; train_grpo.py passes these to GRPOTrainer with reward_weights in the same order.\nREWARD_FUNCS = [${funcs.join(', ')}]\n` +
    (language?.tables ?? '')
  );
}
