// The `math` checker of rewards.py: a line-by-line Python port of src/tasks/math-answer.ts (rules in
// docs/math-checker.md), plus the switch to math_verify (as TRL's accuracy_reward uses) when that
// package is importable. The port's constants are injected from the TypeScript ones, and
// tests/unit/math-answer-python.test.ts runs it over the same table as the TypeScript checker.

import {
  MATH_MAX_ANSWER_CHARS,
  MATH_MAX_BITS,
  MATH_REL_TOLERANCE,
  MATH_UNIT_WORDS,
} from '../../tasks/math-answer';
import { pyStr } from './py-literal';

const MATH_BODY = String.raw`

# ---------------------------------------------------------------------------------------------
# The "math" checker (docs/math-checker.md of GRPO Playground; src/tasks/math-answer.ts): the last
# \boxed{...} / \fbox{...} (else the text after the last "####", else the whole answer), LaTeX
# normalised, compared as exact rationals, floats within a relative MATH_REL_TOLERANCE (radicals,
# pi) or normalised text, element by element for sets, intervals and tuples.
# MATH_CHECKER picks who decides: "math_verify" (TRL's accuracy_reward's checker, when the
# math-verify package is installed) or "rules" (this port, the playground's own verdicts). Set the
# environment variable GRPO_MATH_CHECKER to "rules" or "math_verify" to choose.
# ---------------------------------------------------------------------------------------------
MATH_MAX_ANSWER_CHARS = __MAX_CHARS__
MATH_MAX_BITS = __MAX_BITS__
MATH_REL_TOLERANCE = __REL_TOL__
MATH_UNIT_WORDS = __UNIT_WORDS__

try:
    from latex2sympy2_extended import NormalizationConfig as _MvNormalization
    from math_verify import LatexExtractionConfig as _MvLatex, parse as _mv_parse, verify as _mv_verify
    _HAVE_MATH_VERIFY = True
except ImportError:
    _HAVE_MATH_VERIFY = False

MATH_CHECKER = os.environ.get("GRPO_MATH_CHECKER") or ("math_verify" if _HAVE_MATH_VERIFY else "rules")

_WS = "[ \t\n\v\f\r]"
_TEXT_CMD = r"\\(?:text|textrm|textbf|textit|mbox|mathrm|mathbf|mathit|operatorname)"
_UNIT_RE = re.compile(r"^(.+?)(?:" + "|".join(MATH_UNIT_WORDS) + r")(?:\^\{?[23]\}?)?$", re.S)
_TEXT_SUFFIX_RE = re.compile(r"^(.+?)" + _TEXT_CMD + r"\{[^{}]*\}$", re.S)
_TEXT_UNWRAP_RE = re.compile(_TEXT_CMD + r"\{([^{}]*)\}")
_THOUSANDS_RE = re.compile(r"^([+-]?[0-9]{1,3}(?:,[0-9]{3})+)(?![0-9,])")
_PREFIX_RE = re.compile(r"^(?:the[ \t\n\v\f\r]+)?(?:final[ \t\n\v\f\r]+)?answer[ \t\n\v\f\r]*(?:is|:)", re.I | re.A)
_ASSIGN_RE = re.compile(r"^[A-Za-z](?:_\{?[0-9A-Za-z]+\}?)?=([^=]*)$", re.S)
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_TOKEN_RE = re.compile(
    r"([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
    r"|(\\frac|\\sqrt|\\pi|\\cdot|\\times|\\div)(?![A-Za-z])|([-+*/^(){}[\]])"
)
_LITERAL_RE = re.compile(r"^([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?$")


def _last_boxed(text):
    """(found, content): content None when the last \\boxed is unclosed."""
    start = end = -1
    for m in _BOXED_RE.finditer(text):
        start, end = m.start(), m.end()
    if start < 0:
        return False, None
    i = end
    while i < len(text) and text[i] in ASCII_WS:
        i += 1
    if i >= len(text) or text[i] != "{":
        j = i
        while j < len(text) and text[j] not in ASCII_WS + "$":
            j += 1
        return True, (text[i:j] if j > i else None)
    depth = 0
    j = i
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return True, text[i + 1 : j]
        j += 1
    return True, None


def extract_math_answer(text):
    found, s = _last_boxed(text)
    if not found:
        k = text.rfind("####")
        s = text[k + 4 :] if k >= 0 else text
    if s is None:
        return None
    s = s.strip(ASCII_WS)
    if s == "" or len(s) > MATH_MAX_ANSWER_CHARS:
        return None
    return s


def _matrix_tuple(m):
    rows = []
    for r in m.group(1).split("\\\\"):
        rows.append([c.strip(ASCII_WS) for c in r.split("&")])
    rows = [r for r in rows if not (len(r) == 1 and r[0] == "")]
    if all(len(r) == 1 for r in rows):
        return "(" + ",".join(r[0] for r in rows) + ")"
    if len(rows) == 1:
        return "(" + ",".join(rows[0]) + ")"
    return "(" + ",".join("(" + ",".join(r) + ")" for r in rows) + ")"


def normalize_math(text):
    s = text
    s = s.replace("\u2212", "-").replace("\u00d7", "\\times ").replace("\u00f7", "\\div ")
    s = s.replace("\u03c0", "\\pi ").replace("\u221e", "\\infty ").replace("\u00b0", "")
    s = s.replace("\\$", "").replace("$", "")
    s = re.sub(r"\\begin\{[pbvB]?matrix\}(.*?)\\end\{[pbvB]?matrix\}", _matrix_tuple, s, flags=re.S)
    s = re.sub(r"\\[\[\]()]", "", s)
    s = re.sub(r"\\(?:left|right|[Bb]ig{1,2}[lr]?)(?![A-Za-z])", "", s)
    s = re.sub(r"\\[!,;: ]|~", " ", re.sub(r"\\(?:quad|qquad)(?![A-Za-z])", " ", s))
    s = re.sub(r"\\displaystyle(?![A-Za-z])", "", re.sub(r"\\(?:dfrac|tfrac)(?![A-Za-z])", r"\\frac", s))
    s = re.sub(r"\^\{?\\circ\}?|\\circ(?![A-Za-z])|\\degree(?![A-Za-z])", "", s)
    s = s.replace("\\%", "%").replace("{,}", ",")
    s = _PREFIX_RE.sub("", s, count=1)
    s = re.sub(r"\.$", "", s.strip(ASCII_WS), count=1)
    s = re.sub(r"\\frac[ \t\n\v\f\r]*([0-9A-Za-z])[ \t\n\v\f\r]*([0-9A-Za-z])", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac[ \t\n\v\f\r]*([0-9A-Za-z])[ \t\n\v\f\r]*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac[ \t\n\v\f\r]*\{([^{}]*)\}[ \t\n\v\f\r]*([0-9A-Za-z])", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt[ \t\n\v\f\r]*([0-9A-Za-z])", r"\\sqrt{\1}", s)
    s = _THOUSANDS_RE.sub(lambda m: m.group(0).replace(",", ""), s, count=1)
    s = re.sub(r"(\\[A-Za-z]+)[ \t\n\v\f\r]+(?=[A-Za-z])", "\\1\x00", s)
    s = re.sub(r"[ \t\n\v\f\r]+", "", s).replace("\x00", " ")
    s = re.sub(r"_\{([^{}])\}", r"_\1", re.sub(r"\^\{([^{}])\}", r"^\1", s))
    return s


class _NotNumeric(Exception):
    pass


def _exact(n, d):
    if d == 0:
        raise _NotNumeric()
    if d < 0:
        n, d = -n, -d
    g = math.gcd(n, d)
    if g > 1:
        n //= g
        d //= g
    if abs(n).bit_length() > MATH_MAX_BITS or d.bit_length() > MATH_MAX_BITS:
        raise _NotNumeric()
    return (n, d, float(n) / float(d))


def _approx(f):
    if not math.isfinite(f):
        raise _NotNumeric()
    return (None, 1, f)


def _add(a, b, sign):
    if a[0] is not None and b[0] is not None:
        return _exact(a[0] * b[1] + sign * b[0] * a[1], a[1] * b[1])
    return _approx(a[2] + b[2] if sign == 1 else a[2] - b[2])


def _mul(a, b):
    if a[0] is not None and b[0] is not None:
        return _exact(a[0] * b[0], a[1] * b[1])
    return _approx(a[2] * b[2])


def _div(a, b):
    if a[0] is not None and b[0] is not None:
        return _exact(a[0] * b[1], a[1] * b[0])
    if b[2] == 0:
        raise _NotNumeric()
    return _approx(a[2] / b[2])


def _int_root(v, k):
    if v < 0:
        return None
    if v < 2:
        return v
    lo, hi = 0, 1 << (v.bit_length() // k + 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if mid**k <= v:
            lo = mid
        else:
            hi = mid - 1
    return lo if lo**k == v else None


def _root(x, k):
    if x[0] is not None:
        neg = x[0] < 0
        if neg and k % 2 == 0:
            raise _NotNumeric()
        rn = _int_root(-x[0] if neg else x[0], k)
        rd = _int_root(x[1], k)
        if rn is not None and rd is not None:
            return _exact(-rn if neg else rn, rd)
    if x[2] < 0:
        if k % 2 == 0:
            raise _NotNumeric()
        return _approx(-math.pow(-x[2], 1 / k))
    return _approx(math.sqrt(x[2]) if k == 2 else math.pow(x[2], 1 / k))


def _int_power(base, e):
    m = -e if e < 0 else e
    result = _exact(1, 1)
    b = base
    while m > 0:
        if m & 1:
            result = _mul(result, b)
        m >>= 1
        if m > 0:
            b = _mul(b, b)
    return _div(_exact(1, 1), result) if e < 0 else result


def _power(base, e):
    if e[0] is not None and e[1] == 1:
        if e[0] > 4096 or e[0] < -4096:
            raise _NotNumeric()
        return _int_power(base, e[0])
    if e[0] is not None and e[1] <= 64:
        return _int_power(_root(base, e[1]), e[0])
    if base[2] <= 0:
        raise _NotNumeric()
    try:
        return _approx(math.pow(base[2], e[2]))
    except (OverflowError, ValueError):
        raise _NotNumeric()


def _tokenize_numeric(s):
    out = []
    i = 0
    while i < len(s):
        m = _TOKEN_RE.match(s, i)
        if m is None:
            return None
        if m.group(1) is not None:
            out.append(("num", m.group(1)))
        else:
            out.append(("op", m.group(2) or m.group(3)))
        i = m.end()
    return out


def _literal(v):
    m = _LITERAL_RE.match(v)
    whole = m.group(1)
    frac_digits = m.group(2) or ""
    exp_text = m.group(3) or "0"
    if len(whole) + len(frac_digits) > 400 or len(exp_text.lstrip("+-")) > 4:
        raise _NotNumeric()
    e = int(exp_text) - len(frac_digits)
    if e > 4000 or e < -4000:
        raise _NotNumeric()
    digits = int(whole + frac_digits or "0")
    return _exact(digits * 10**e, 1) if e >= 0 else _exact(digits, 10 ** (-e))


_PI = (None, 1, math.pi)
_STARTS_PRIMARY = ("(", "{", "\\frac", "\\sqrt", "\\pi")


class _NumParser:
    def __init__(self, toks):
        self.toks = toks
        self.pos = 0
        self.depth = 0

    def parse(self):
        v = self.expr()
        if self.pos != len(self.toks):
            raise _NotNumeric()
        return v

    def peek(self):
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def is_op(self, v):
        t = self.peek()
        return t is not None and t[0] == "op" and t[1] == v

    def expect(self, v):
        if not self.is_op(v):
            raise _NotNumeric()
        self.pos += 1

    def expr(self):
        self.depth += 1
        if self.depth > 64:
            raise _NotNumeric()
        left = self.term()
        while self.is_op("+") or self.is_op("-"):
            sign = 1 if self.is_op("+") else -1
            self.pos += 1
            left = _add(left, self.term(), sign)
        self.depth -= 1
        return left

    def term(self):
        left = self.unary()
        while True:
            t = self.peek()
            if t is None:
                return left
            if t[0] == "op" and t[1] in ("*", "\\cdot", "\\times"):
                self.pos += 1
                left = _mul(left, self.unary())
            elif t[0] == "op" and t[1] in ("/", "\\div"):
                self.pos += 1
                left = _div(left, self.unary())
            elif t[0] == "num" or t[1] in _STARTS_PRIMARY:
                left = _mul(left, self.power())
            else:
                return left

    def unary(self):
        negative = False
        while self.is_op("-") or self.is_op("+"):
            if self.is_op("-"):
                negative = not negative
            self.pos += 1
        v = self.power()
        return _mul(_exact(-1, 1), v) if negative else v

    def power(self):
        base = self.primary()
        if not self.is_op("^"):
            return base
        self.pos += 1
        negative = False
        while self.is_op("-") or self.is_op("+"):
            if self.is_op("-"):
                negative = not negative
            self.pos += 1
        self.depth += 1
        if self.depth > 64:
            raise _NotNumeric()
        e = self.power()
        self.depth -= 1
        return _power(base, _mul(_exact(-1, 1), e) if negative else e)

    def group(self):
        self.expect("{")
        v = self.expr()
        self.expect("}")
        return v

    def primary(self):
        t = self.peek()
        if t is None:
            raise _NotNumeric()
        self.pos += 1
        if t[0] == "num":
            return _literal(t[1])
        v = t[1]
        if v == "(":
            x = self.expr()
            self.expect(")")
            return x
        if v == "{":
            x = self.expr()
            self.expect("}")
            return x
        if v == "\\frac":
            a = self.group()
            return _div(a, self.group())
        if v == "\\sqrt":
            k = 2
            if self.is_op("["):
                self.pos += 1
                index = self.expr()
                self.expect("]")
                if index[0] is None or index[1] != 1 or index[0] < 2 or index[0] > 64:
                    raise _NotNumeric()
                k = index[0]
            return _root(self.group(), k)
        if v == "\\pi":
            return _PI
        raise _NotNumeric()


def _try_numeric(s):
    """(value, percent) or None."""
    percent = False
    if s.endswith("%"):
        percent = True
        s = s[:-1]
    if s == "":
        return None
    toks = _tokenize_numeric(s)
    if toks is None:
        return None
    try:
        return (_NumParser(toks).parse(), percent)
    except _NotNumeric:
        return None


def _num_equal(a, b):
    if a[0] is not None and b[0] is not None:
        return a[0] == b[0] and a[1] == b[1]
    return abs(a[2] - b[2]) <= MATH_REL_TOLERANCE * max(abs(a[2]), abs(b[2]))


def _num_answers_equal(a, b):
    if a[1] == b[1]:
        return _num_equal(a[0], b[0])
    p, q = (a, b) if a[1] else (b, a)
    if _num_equal(p[0], q[0]):
        return True
    try:
        return _num_equal(_div(p[0], _exact(100, 1)), q[0])
    except _NotNumeric:
        return False


def _split_top(s, sep):
    parts = []
    depth = 0
    start = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in "{}":
            depth += 1 if s[i + 1] == "{" else -1
            i += 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            start = i + len(sep)
            i += len(sep) - 1
        i += 1
    parts.append(s[start:])
    return parts


def _wraps_whole(s):
    depth = 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if depth == 0 and i < len(s) - 1:
            return False
    return depth == 0


def _strip_units(s):
    u = s
    for _ in range(4):
        m = _TEXT_SUFFIX_RE.match(u) or _UNIT_RE.match(u)
        if m is None:
            return None
        u = m.group(1)
        num = _try_numeric(u)
        if num is not None:
            return num
    return None


def _parse_element(raw):
    m = _ASSIGN_RE.match(raw)
    s = m.group(1) if m else raw
    num = _try_numeric(s) or _strip_units(s)
    if num is not None:
        return ("num", num)
    text = _TEXT_UNWRAP_RE.sub(r"\1", s)
    num = _try_numeric(text) or _strip_units(text)
    if num is not None:
        return ("num", num)
    letter = re.match(r"^\(([A-Za-z])\)$", text)
    if letter:
        text = letter.group(1)
    if re.match(r"^[A-Za-z' ]+$", text):
        text = text.lower()
    return ("text", text)


def _parse_item(s, depth):
    if depth > 8:
        return ("text", s)
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _wraps_whole(s):
        items = _split_top(s[1:-1], ",")
        if len(items) > 1:
            return ("seq", s[0], s[-1], [_parse_item(x, depth + 1) for x in items])
    return _parse_element(s)


def _parse_answer(s, depth=0):
    union = _split_top(s, "\\cup")
    if len(union) > 1:
        return ("union", [_parse_answer(p, depth + 1) for p in union])
    body = s
    if body.startswith("\\{") and body.endswith("\\}"):
        body = body[2:-2]
    elif body.startswith("{") and body.endswith("}") and _wraps_whole(body):
        body = body[1:-1]
    items = _split_top(body, ",")
    if len(items) == 1 and body == s:
        one = _parse_item(s, depth + 1)
        return one if one[0] == "seq" else ("set", [one])
    return ("set", [_parse_item(x, depth + 1) for x in items])


def _items_equal(a, b):
    if a[0] == "num" and b[0] == "num":
        return _num_answers_equal(a[1], b[1])
    if a[0] == "text" and b[0] == "text":
        return a[1] == b[1]
    if a[0] in ("num", "text") or b[0] in ("num", "text"):
        return False
    return _answers_equal(a, b)


def _same_set(a, b):
    return all(any(_items_equal(x, y) for y in b) for x in a) and all(
        any(_items_equal(x, y) for x in a) for y in b
    )


def _answers_equal(a, b):
    if a[0] == "set" and b[0] == "set":
        return _same_set(a[1], b[1])
    if a[0] == "seq" and b[0] == "seq":
        return a[1] == b[1] and a[2] == b[2] and len(a[3]) == len(b[3]) and all(
            _items_equal(x, y) for x, y in zip(a[3], b[3])
        )
    if a[0] == "union" and b[0] == "union":
        return _same_set(a[1], b[1])
    return False


def verify_math_rules(candidate, reference):
    """The playground's math checker (src/tasks/math-answer.ts), verdict for verdict."""
    ref = extract_math_answer(reference)
    cand = extract_math_answer(candidate)
    if ref is None or cand is None:
        return False
    r = normalize_math(ref)
    c = normalize_math(cand)
    if r == "" or c == "":
        return False
    return _answers_equal(_parse_answer(r), _parse_answer(c))


def verify_math_verify(candidate, reference):
    """math_verify's verdict, parsed as TRL's accuracy_reward parses (boxed first, LaTeX with
    units); an answer it cannot find by itself is given to it as \\boxed{our extraction}."""
    # math_verify times out with signal.alarm, which works only in the main thread (as TRL does).
    main = threading.current_thread() is threading.main_thread()
    parsing_timeout = 10 if main else None
    gold = _mv_parse("\\boxed{" + reference + "}", parsing_timeout=parsing_timeout)
    if len(gold) == 0:
        return False
    config = [
        _MvLatex(
            normalization_config=_MvNormalization(units=True),
            boxed_match_priority=0,
            try_extract_without_anchor=False,
        )
    ]
    answer = _mv_parse(
        candidate, extraction_config=config, extraction_mode="first_match", parsing_timeout=parsing_timeout
    )
    if len(answer) == 0:
        extracted = extract_math_answer(candidate)
        if extracted is None:
            return False
        answer = _mv_parse(
            "\\boxed{" + extracted + "}",
            extraction_config=config,
            extraction_mode="first_match",
            parsing_timeout=parsing_timeout,
        )
    return bool(_mv_verify(gold, answer, timeout_seconds=5 if main else None))


def verify_math(candidate, reference):
    if MATH_CHECKER == "math_verify":
        return verify_math_verify(candidate, reference)
    return verify_math_rules(candidate, reference)
`;

/** The math checker's Python, constants injected from src/tasks/math-answer.ts. */
export function mathPy(): string {
  return MATH_BODY.replace('__MAX_CHARS__', String(MATH_MAX_ANSWER_CHARS))
    .replace('__MAX_BITS__', String(MATH_MAX_BITS))
    .replace('__REL_TOL__', String(MATH_REL_TOLERANCE))
    .replace('__UNIT_WORDS__', `(${MATH_UNIT_WORDS.map(pyStr).join(', ')})`);
}
