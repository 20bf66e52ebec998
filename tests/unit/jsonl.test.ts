// JSONL datasets: both line forms, malformed lines with their numbers, the three checkers.
import { describe, expect, it } from 'vitest';
import {
  createJsonlTask,
  describeIssues,
  parseJsonlDataset,
  promptTooLongError,
} from '../../src/tasks/jsonl';
import { createTask, trainEvalProblems } from '../../src/tasks/index';
import { verifyAnswer } from '../../src/tasks/verify';

const TEXT = [
  '{"prompt": "What is 2 + 2?", "answer": "4"}',
  '',
  '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris"}]}',
  '{"prompt": "no answer here"}',
  'not json',
  '{"prompt": 5, "answer": "x"}',
  '{"messages": [{"role": "bot", "content": "hi"}]}',
  '{"prompt": "a", "messages": []}',
  '{"prompt": "q", "answer": {"x": 1}}',
  '[1, 2]',
  '{"messages": [{"role": "system", "content": "only system"}]}',
  '{"prompt": "   ", "answer": "1"}',
  '{"prompt": "How many?", "answer": 7}',
].join('\n');

describe('parseJsonlDataset', () => {
  it('reads both forms and reports malformed lines with their 1-based numbers', () => {
    const { problems, issues } = parseJsonlDataset(TEXT);
    expect(problems.map((p) => p.id)).toEqual(['jsonl-1', 'jsonl-3', 'jsonl-4', 'jsonl-13']);
    expect(issues.map((i) => i.line)).toEqual([5, 6, 7, 8, 9, 10, 11, 12]);
    expect(issues[0].message).toMatch(/not valid JSON/);
    expect(issues[2].message).toMatch(/role/);
    const chat = problems[1];
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Capital of France?' },
    ]);
    expect(chat.reference).toBe('Paris');
    expect(chat.question).toBe('Capital of France?');
    expect(problems[2].verifier).toEqual({ kind: 'none' });
    expect(problems[3].reference).toBe('7');
  });

  it('keeps the dataset system turn in chat form and flattens it for the text template', () => {
    const task = createJsonlTask(TEXT);
    const chat = task.dataset.problems[1];
    expect(task.formatPrompt(chat, 'chat')).toEqual({ kind: 'chat', messages: chat.messages });
    const text = task.formatPrompt(chat, 'r1-zero');
    expect(
      text.kind === 'text' && text.text.endsWith('User: Be brief.\nCapital of France?. Assistant:'),
    ).toBe(true);
    // A question's own final period is not doubled by the template's ". Assistant:".
    const plain = task.formatPrompt(
      { ...task.dataset.problems[0], question: 'Say hi.' },
      'r1-zero',
    );
    expect(plain.kind === 'text' && plain.text.endsWith('User: Say hi. Assistant:')).toBe(true);
  });

  it('validates answers for the numeric and choice checkers', () => {
    const lines = [
      '{"prompt": "p", "answer": "3.5"}',
      '{"prompt": "p", "answer": "three"}',
      '{"prompt": "p", "answer": "(c)"}',
    ].join('\n');
    expect(parseJsonlDataset(lines, { checker: 'numeric' }).issues).toEqual([
      { line: 2, message: 'answer "three" is not a number' },
      { line: 3, message: 'answer "(c)" is not a number' },
    ]);
    const choice = parseJsonlDataset(lines, { checker: 'choice' });
    expect(choice.issues.map((i) => i.line)).toEqual([1, 2]);
    expect(choice.problems[0].verifier).toEqual({ kind: 'choice', answer: 'C' });
  });

  it('throws naming lines when nothing is usable, and needs the text through the registry', () => {
    expect(() => createJsonlTask('oops\n{}')).toThrow(/line 1: not valid JSON.*; line 2: expected/);
    expect(() => createTask('jsonl', { path: 'data.jsonl' })).toThrow(/sources.text/);
    expect(
      createTask('jsonl', { checker: 'numeric' }, { text: '{"prompt":"p","answer":1}' }).name,
    ).toBe('jsonl');
    expect(() => createTask('jsonl', { checker: 'fuzzy' }, { text: '' })).toThrow(
      /taskOptions.checker/,
    );
  });
});

describe('answer checkers', () => {
  it('exact: trimmed equality, case-sensitive', () => {
    const spec = { kind: 'exact', answer: 'Paris' } as const;
    expect(verifyAnswer('  Paris \n', spec)).toBe(true);
    expect(verifyAnswer('paris', spec)).toBe(false);
    expect(verifyAnswer('Paris.', spec)).toBe(false);
  });

  it('numeric: |x − ref| ≤ tolerance, strict number syntax', () => {
    const spec = { kind: 'numeric', answer: '3.5', tolerance: 0.01 } as const;
    expect(verifyAnswer('3.5', spec)).toBe(true);
    expect(verifyAnswer('3.509', spec)).toBe(true);
    expect(verifyAnswer('3.52', spec)).toBe(false);
    expect(verifyAnswer('35e-1', spec)).toBe(true);
    expect(verifyAnswer('+3.50', spec)).toBe(true);
    expect(verifyAnswer('3.5 m', spec)).toBe(false);
    expect(verifyAnswer('0x3', spec)).toBe(false);
    expect(verifyAnswer('Infinity', spec)).toBe(false);
    expect(verifyAnswer('1e999', spec)).toBe(false);
  });

  it('choice: one letter, optional parentheses and period', () => {
    const spec = { kind: 'choice', answer: 'B' } as const;
    for (const ok of ['B', 'b', '(B)', 'B.', 'B)', ' (b). '])
      expect(verifyAnswer(ok, spec)).toBe(true);
    for (const bad of ['C', 'B is right', 'BB', '(B', ''])
      expect(verifyAnswer(bad, spec)).toBe(false);
    expect(verifyAnswer('none', { kind: 'none' })).toBeNull();
  });
});

describe('jsonl splits', () => {
  it('holds lines out of training (at most half of the dataset) and cycles the rest', () => {
    const text = Array.from({ length: 10 }, (_, i) =>
      JSON.stringify({ prompt: `q${i}`, answer: String(i) }),
    ).join('\n');
    const task = createJsonlTask(text);
    const { train, eval: held } = trainEvalProblems(task, 1, 25, 8);
    expect(held).toHaveLength(5);
    expect(train).toHaveLength(25);
    const heldIds = new Set(held.map((p) => p.id));
    expect(train.some((p) => heldIds.has(p.id))).toBe(false);
    expect(new Set(train.map((p) => p.id)).size).toBe(5);
    expect(
      task
        .generate(4, 10)
        .map((p) => p.id)
        .sort(),
    ).toEqual(task.dataset.problems.map((p) => p.id).sort());
  });
});

describe('files from any editor', () => {
  const rows = [
    '{"prompt": "What is 2 + 2?", "answer": "4"}',
    'oops',
    '{"prompt": "Capital of France?", "answer": "Paris"}',
  ];

  it('a UTF-8 byte-order mark before the first line is ignored', () => {
    const { problems, issues } = parseJsonlDataset('\uFEFF' + rows.join('\n'));
    expect(problems.map((p) => p.id)).toEqual(['jsonl-1', 'jsonl-3']);
    expect(problems[0].question).toBe('What is 2 + 2?');
    expect(issues.map((i) => i.line)).toEqual([2]);
  });

  it('CR-only (classic Mac) and mixed line ends give the same lines and line numbers', () => {
    for (const eol of ['\r', '\r\n', '\n']) {
      const { problems, issues } = parseJsonlDataset(rows.join(eol) + eol);
      expect(
        problems.map((p) => [p.id, p.reference]),
        JSON.stringify(eol),
      ).toEqual([
        ['jsonl-1', '4'],
        ['jsonl-3', 'Paris'],
      ]);
      expect(issues).toEqual([{ line: 2, message: expect.stringMatching(/^not valid JSON/) }]);
    }
    const mixed = parseJsonlDataset(`${rows[0]}\r${rows[1]}\r\n${rows[2]}\n`);
    expect(mixed.problems.map((p) => p.id)).toEqual(['jsonl-1', 'jsonl-3']);
  });

  it('the task names every skipped line and why', () => {
    const task = createJsonlTask(
      ['{"prompt": "a", "answer": "1"}', 'nope', '{"prompt": 5}', '{"prompt": "b"}'].join('\r'),
      { path: 'data.jsonl' },
    );
    expect(task.description).toBe(
      'Imported dataset data.jsonl (2 prompts). 2 lines skipped: line 2: not valid JSON ' +
        `(${jsonError('nope')}); line 3: expected a string "prompt" or a "messages" array.`,
    );
    expect(describeIssues(task.dataset.issues)).toBe(
      `line 2: not valid JSON (${jsonError('nope')}); line 3: expected a string "prompt" or a "messages" array`,
    );
  });

  it('a prompt-length error gives the shortest length and the flag to change', () => {
    const err = promptTooLongError(64, 97);
    expect(err).toBeInstanceOf(RangeError);
    expect(err.message).toBe(
      'no training prompt fits maxPromptLength = 64 tokens: the shortest prompt is 97 tokens; raise ' +
        "--max-prompt-length (maxPromptLength in a config file or the playground's options) to at " +
        'least 97, or use shorter prompts',
    );
  });
});

function jsonError(text: string): string {
  try {
    JSON.parse(text);
  } catch (e) {
    return (e as Error).message;
  }
  return '';
}
