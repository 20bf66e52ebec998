// The exported rewards.py's math checker (its Python rules, src/export/trl-templates/math-py.ts)
// gives the TypeScript checker's verdict on every row of tests/fixtures/math-answers.tsv, directly
// and through accuracy_reward with the verifier JSON the export writes. Skipped only without Python.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rewardsPy } from '../../src/export/trl-templates/rewards-py';
import { createRng } from '../../src/core/rng';
import { accuracyReward } from '../../src/rewards/rewards';
import { extractMathAnswer, normalizeMath, verifyMath } from '../../src/tasks/math-answer';
import type { Problem } from '../../src/tasks/types';
import { readMathTable } from './math-answer-table';

function findPython(): string | null {
  for (const p of [process.env.PYTHON, 'python3', '/usr/bin/python3']) {
    if (!p) continue;
    try {
      execFileSync(p, ['-c', 'pass'], { stdio: 'ignore' });
      return p;
    } catch {
      // try the next one
    }
  }
  return null;
}

const PYTHON = findPython();
const FUZZ_CASES = 500;
const FUZZ_PIECES = [
  '1',
  '2',
  '0',
  '7',
  '12',
  '000',
  '.5',
  ',',
  '1,000',
  '\\frac',
  '\\dfrac12',
  '{',
  '}',
  '{2}',
  '\\sqrt',
  '\\sqrt[3]',
  '\\pi',
  '(',
  ')',
  '[',
  ']',
  '\\{',
  '\\}',
  '-',
  '+',
  '/',
  '^',
  '^{-1}',
  '%',
  '\\%',
  '$',
  '\\$',
  '\\boxed{',
  '\\fbox',
  '####',
  'x',
  '=',
  'x=',
  '\\text{cm}',
  '\\text{(A)}',
  'cm',
  'in',
  ' ',
  '\\cup',
  '\\infty',
  'e3',
  'E-2',
  '\\left(',
  '\\right]',
  '\\!',
  '\\,',
  '{,}',
  '^\\circ',
  'i',
  '\\times',
  '10^',
  '\\cdot',
  '\\div',
  'answer is',
  'The ',
  '&',
  '\\\\',
  '\\begin{pmatrix}',
  '\\end{pmatrix}',
  '_8',
  'ſ',
  'K',
  '\u2028',
  '\u00a0',
  '\u{1F600}',
  '\u2212',
  '°',
  'π',
  '∞',
];
const dir = mkdtempSync(join(tmpdir(), 'math-py-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(PYTHON === null)('exported math checker (Python rules)', () => {
  it('agrees with the TypeScript checker on every table row and on degenerate answers', () => {
    writeFileSync(join(dir, 'rewards.py'), rewardsPy({ rewards: ['accuracy'], custom: [] }));
    const rows = readMathTable().map((r) => [r.candidate, r.reference] as [string, string]);
    // Rows past the table: bounds and Unicode, where the two languages' string models differ.
    rows.push(
      ['-'.repeat(999) + '5', '5'],
      ['('.repeat(500) + '5' + ')'.repeat(499), '5'],
      ['2^'.repeat(300) + '2', '4'],
      ['\u{1F600}'.repeat(600), '\u{1F600}'.repeat(600)],
      ['ANſWER IS 5', '5'],
      ['5\u2028', '5'],
      ['1e400', '1e400'],
      ['10^{4096}', '10^{4096}'],
      ['\\sqrt[3]{-27}', '-3'],
      ['(-8)^{1/3}', '-2'],
    );
    // The real references: MATH-500 solutions against their own and the next row's answer, GSM8K
    // answers against the number after ####.
    const fixture = (name: string) =>
      readFileSync(join(__dirname, '..', 'fixtures', 'datasets', name), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, string>);
    const math500 = fixture('math500-test-50.jsonl');
    math500.forEach((r, i) => {
      rows.push([r.answer, r.solution], [math500[(i + 1) % math500.length].answer, r.solution]);
    });
    for (const r of fixture('gsm8k-test-50.jsonl')) {
      rows.push([/#### (.*)$/.exec(r.answer)?.[1] ?? '', r.answer]);
    }
    // Seeded random answers from LaTeX pieces (each against itself with one piece changed, and
    // against another): the port must agree off the table too, where no one chose the inputs.
    const rng = createRng(36);
    const piece = () => rng.pick(FUZZ_PIECES);
    const answer = () => Array.from({ length: rng.int(1, 8) }, piece);
    for (let k = 0; k < FUZZ_CASES; k++) {
      const a = answer();
      const b = [...a];
      b[rng.int(0, b.length - 1)] = piece();
      rows.push([a.join(''), b.join('')], [a.join(''), answer().join('')]);
    }
    const ts = rows.map(([c, r]) => verifyMath(c, r));
    const wrap = (a: string) => `<think>x</think><answer>${a}</answer>`;
    // accuracy_reward gets each row as a completion and the verifier JSON a dataset line exports.
    // And without answer tags: a math problem's accuracy then reads the completion's last \boxed{}.
    const boxed = rows.map(([c]) => `<think>x</think> so it is \\boxed{${c}}.`);
    const input = JSON.stringify({
      rows,
      completions: rows.map(([c]) => wrap(c)),
      boxed,
      verifier: rows.map(([, r]) => JSON.stringify({ kind: 'math', answer: r })),
    });
    const script = [
      'import json, os, sys',
      'os.environ["GRPO_MATH_CHECKER"] = "rules"',
      'sys.path.insert(0, sys.argv[1])',
      'import rewards',
      'data = json.load(sys.stdin)',
      'direct = [rewards.verify_math(c, r) for c, r in data["rows"]]',
      'acc = rewards.accuracy_reward(completions=data["completions"], verifier=data["verifier"])',
      'acc_boxed = rewards.accuracy_reward(completions=data["boxed"], verifier=data["verifier"])',
      'ext = [rewards.extract_math_answer(c) for c, _ in data["rows"]]',
      'norm = [None if e is None else rewards.normalize_math(e) for e in ext]',
      'print(json.dumps({"checker": rewards.MATH_CHECKER, "direct": direct, "accuracy": acc, "accuracyBoxed": acc_boxed, "norm": norm}))',
    ].join('\n');
    const out = JSON.parse(
      execFileSync(PYTHON as string, ['-c', script, dir], { input, encoding: 'utf8' }),
    ) as {
      checker: string;
      direct: boolean[];
      accuracy: (number | null)[];
      accuracyBoxed: (number | null)[];
      norm: (string | null)[];
    };
    expect(out.checker).toBe('rules');
    const accuracy = accuracyReward();
    const tsBoxed = rows.map(([, r], i) => {
      const problem = { verifier: { kind: 'math', answer: r } } as unknown as Problem;
      return accuracy.compute({ completion: boxed[i], prompt: '', problem });
    });
    expect(out.accuracyBoxed).toEqual(tsBoxed);
    // Boxed answers are found without tags (some right), not all scored 0.
    expect(tsBoxed.filter((a) => a === 1).length).toBeGreaterThan(rows.length / 10);
    const disagree = rows
      .map(([c, r], i) => ({ c, r, ts: ts[i], py: out.direct[i] }))
      .filter((x) => x.ts !== x.py);
    expect(disagree).toEqual([]);
    // The normalised answers themselves agree, so a rule that differs shows even where both
    // verdicts happen to be false.
    const norm = rows.map(([c]) => {
      const e = extractMathAnswer(c);
      return e === null ? null : normalizeMath(e);
    });
    expect(out.norm.map((n, i) => (n === norm[i] ? null : [rows[i][0], norm[i], n]))).toEqual(
      rows.map(() => null),
    );
    const expectedAccuracy = rows.map(([c], i) =>
      // accuracy_reward reads <answer>; the ANSWER pattern ends at the first </answer>.
      c.includes('</answer>') ? null : ts[i] ? 1 : 0,
    );
    out.accuracy.forEach((a, i) => {
      if (expectedAccuracy[i] !== null)
        expect(a, JSON.stringify(rows[i])).toBe(expectedAccuracy[i]);
    });
    // Both verdicts occur, so agreement is not all-false.
    expect(new Set(ts)).toEqual(new Set([true, false]));
  });

  it('asks math_verify as TRL does when it is importable (a recording stand-in of its API)', () => {
    // math-verify is not installed here (only npm is reachable), so this checks the wiring with a
    // stand-in that records its calls: which checker is picked, and the arguments TRL's
    // accuracy_reward passes (boxed first, units, first_match, the main-thread timeouts).
    writeFileSync(join(dir, 'rewards.py'), rewardsPy({ rewards: ['accuracy'], custom: [] }));
    const stub = join(dir, 'stub');
    mkdirSync(join(stub, 'math_verify'), { recursive: true });
    mkdirSync(join(stub, 'latex2sympy2_extended'), { recursive: true });
    writeFileSync(
      join(stub, 'latex2sympy2_extended', '__init__.py'),
      'class NormalizationConfig:\n    def __init__(self, **kw):\n        self.kw = kw\n',
    );
    writeFileSync(
      join(stub, 'math_verify', '__init__.py'),
      [
        'CALLS = []',
        'class LatexExtractionConfig:',
        '    def __init__(self, **kw):',
        '        self.kw = {k: getattr(v, "kw", v) for k, v in kw.items()}',
        'def parse(text, extraction_config=None, extraction_mode="any_match", parsing_timeout=5):',
        '    cfg = None if extraction_config is None else [c.kw for c in extraction_config]',
        '    CALLS.append(["parse", text, cfg, extraction_mode, parsing_timeout])',
        '    return [text] if "\\\\boxed" in text else []',
        'def verify(gold, answer, timeout_seconds=5):',
        '    CALLS.append(["verify", gold, answer, timeout_seconds])',
        '    return gold == answer',
      ].join('\n'),
    );
    const script = (env: string) =>
      [
        'import json, os, sys',
        env,
        'sys.path.insert(0, sys.argv[1])',
        'sys.path.insert(0, sys.argv[2])',
        'import rewards, math_verify',
        'acc = rewards.accuracy_reward(',
        '    completions=["<answer>\\\\boxed{5}</answer>", "<answer>x = 5</answer>"],',
        '    verifier=[json.dumps({"kind": "math", "answer": "5"})] * 2)',
        'print(json.dumps({"checker": rewards.MATH_CHECKER, "acc": acc, "calls": math_verify.CALLS}))',
      ].join('\n');
    const run = (env: string) =>
      JSON.parse(
        execFileSync(PYTHON as string, ['-c', script(env), dir, stub], { encoding: 'utf8' }),
      ) as { checker: string; acc: number[]; calls: unknown[] };
    const config = [
      {
        normalization_config: { units: true },
        boxed_match_priority: 0,
        try_extract_without_anchor: false,
      },
    ];
    const picked = run('os.environ.pop("GRPO_MATH_CHECKER", None)');
    expect(picked.checker).toBe('math_verify');
    expect(picked.acc).toEqual([1, 0]); // the stand-in compares strings: "x = 5" is our extraction
    expect(picked.calls).toEqual([
      ['parse', '\\boxed{5}', null, 'any_match', 10],
      ['parse', '\\boxed{5}', config, 'first_match', 10],
      ['verify', ['\\boxed{5}'], ['\\boxed{5}'], 5],
      ['parse', '\\boxed{5}', null, 'any_match', 10],
      ['parse', 'x = 5', config, 'first_match', 10],
      ['parse', '\\boxed{x = 5}', config, 'first_match', 10],
      ['verify', ['\\boxed{5}'], ['\\boxed{x = 5}'], 5],
    ]);
    const rules = run('os.environ["GRPO_MATH_CHECKER"] = "rules"');
    expect(rules).toEqual({ checker: 'rules', acc: [1, 1], calls: [] });
  });
});
