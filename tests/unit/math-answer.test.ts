// The `math` checker (src/tasks/math-answer.ts, rules in docs/math-checker.md) against its table of
// MATH-500 / GSM8K references and model answer forms, and wired through the JSONL task and the
// accuracy reward as a dataset with `checker: math` uses it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { extractMathAnswer, normalizeMath, verifyMath } from '../../src/tasks/math-answer';
import { createJsonlTask, parseJsonlDataset } from '../../src/tasks/jsonl';
import { createTask, resolveTaskOptions, TASKS } from '../../src/tasks/index';
import { accuracyReward } from '../../src/rewards/rewards';
import { readMathTable } from './math-answer-table';

const ROWS = readMathTable();

describe('math checker table', () => {
  it('has at least 150 rows with both verdicts', () => {
    expect(ROWS.length).toBeGreaterThanOrEqual(150);
    expect(ROWS.filter((r) => r.expected).length).toBeGreaterThan(50);
    expect(ROWS.filter((r) => !r.expected).length).toBeGreaterThan(50);
  });

  it('gives every row its verdict', () => {
    const wrong = ROWS.filter((r) => verifyMath(r.candidate, r.reference) !== r.expected).map(
      (r) =>
        `line ${r.line} (${r.note}): ${JSON.stringify(r.reference)} vs ${JSON.stringify(r.candidate)} ` +
        `expected ${r.expected}`,
    );
    expect(wrong).toEqual([]);
  });
});

describe('real references (tests/fixtures/datasets, first 50 rows of each test split)', () => {
  const jsonl = (name: string) =>
    readFileSync(join(__dirname, '..', 'fixtures', 'datasets', name), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);

  it("MATH-500: each solution's last \\boxed{} is its answer column", () => {
    const rows = jsonl('math500-test-50.jsonl');
    expect(rows).toHaveLength(50);
    expect(rows.filter((r) => !verifyMath(r.answer, r.solution)).map((r) => r.answer)).toEqual([]);
    // and not the next row's answer, where that is a different answer (5 and x=5 are one).
    const pairs = rows
      .map((r, i) => ({ r, next: rows[(i + 1) % 50].answer }))
      .filter(({ r, next }) => !verifyMath(next, r.answer));
    expect(pairs.length).toBeGreaterThan(45);
    expect(pairs.filter(({ r, next }) => verifyMath(next, r.solution))).toEqual([]);
  });

  it('GSM8K: the number after #### with or without thousands commas', () => {
    const rows = jsonl('gsm8k-test-50.jsonl');
    for (const r of rows) {
      const n = /#### (.*)$/.exec(r.answer)?.[1] as string;
      expect(verifyMath(n, r.answer), r.answer).toBe(true);
      expect(verifyMath(Number(n).toLocaleString('en-US'), r.answer), n).toBe(true);
      expect(verifyMath(String(Number(n) + 1), r.answer), n).toBe(false);
    }
  });
});

describe('math checker parts', () => {
  it('extracts the last \\boxed / \\fbox with nested braces, else after ####, else the text', () => {
    expect(extractMathAnswer('so $\\boxed{\\frac{1}{2}}$ and \\fbox{\\sqrt{\\frac{3}{4}}}.')).toBe(
      '\\sqrt{\\frac{3}{4}}',
    );
    expect(extractMathAnswer('a #### 3 #### 1,000 ')).toBe('1,000');
    expect(extractMathAnswer(' 42 ')).toBe('42');
    expect(extractMathAnswer('\\boxed{1')).toBeNull();
    expect(extractMathAnswer('x'.repeat(1001))).toBeNull();
  });

  it('normalises LaTeX to one canonical string', () => {
    expect(normalizeMath('\\left( \\dfrac{1}{2}, 30^\\circ \\right)')).toBe('(\\frac{1}{2},30)');
    expect(normalizeMath('\\$1{,}000')).toBe('1000');
    expect(normalizeMath('The answer is \\pi r^{2}.')).toBe('\\pi r^2');
    expect(normalizeMath('50\\%')).toBe('50%');
  });

  it('stays bounded on degenerate answers', () => {
    expect(verifyMath('-'.repeat(999) + '5', '5')).toBe(false);
    expect(verifyMath('-'.repeat(998) + '5', '5')).toBe(true);
    expect(verifyMath('('.repeat(500) + '5' + ')'.repeat(499), '5')).toBe(false);
    expect(verifyMath('2^'.repeat(300) + '2', '4')).toBe(false);
    expect(verifyMath('10^{4096}', '10^{4096}')).toBe(true); // past the bit limit: as text
  });
});

describe('JSONL task with checker math', () => {
  const lines = [
    '{"prompt": "GSM8K-like", "answer": "She pays 3 * 4 = 12.\\n#### 1,212"}',
    '{"prompt": "MATH-like", "answer": "Hence the answer is $\\\\boxed{\\\\frac{14}{3}}$."}',
    '{"prompt": "no answer inside", "answer": "\\\\boxed{"}',
  ].join('\n');

  it('keeps the extracted reference answer and reports an unreadable one', () => {
    const d = parseJsonlDataset(lines, { checker: 'math' });
    expect(d.problems.map((p) => p.verifier)).toEqual([
      { kind: 'math', answer: '1,212' },
      { kind: 'math', answer: '\\frac{14}{3}' },
    ]);
    expect(d.issues).toEqual([
      { line: 3, message: 'answer "\\\\boxed{" has no math answer to check' },
    ]);
  });

  it('scores completions through the accuracy reward', () => {
    const task = createTask('jsonl', { checker: 'math' }, { text: lines });
    const [gsm, math] = createJsonlTask(lines, { checker: 'math' }).dataset.problems;
    const reward = accuracyReward(task);
    const score = (completion: string, problem = gsm) =>
      reward.compute({ completion, prompt: '', problem });
    expect(score('<think>x</think><answer>$1212</answer>')).toBe(1);
    expect(score('<think>x</think><answer>\\boxed{1,212}</answer>')).toBe(1);
    expect(score('<think>x</think><answer>1,213</answer>')).toBe(0);
    expect(score('<think>x</think><answer>\\dfrac{28}{6}</answer>', math)).toBe(1);
    expect(score('<think>x</think><answer>4.67</answer>', math)).toBe(0);
  });

  it('is a value of the task option the CLI (--task-options) and the task panel read', () => {
    expect(resolveTaskOptions('jsonl', { checker: 'math' }).checker).toBe('math');
    const checker = TASKS.jsonl.options.find((o) => o.name === 'checker');
    expect(checker?.values).toContain('math');
  });

  it('is refused by name by the other checkers and listed by validation', () => {
    expect(() => parseJsonlDataset(lines, { checker: 'maths' as never })).toThrow(
      /one of exact, numeric, choice, math/,
    );
  });
});
