// The dataset importer (src/tasks/datasets) on real rows: 50 rows each of GSM8K test and MATH-500
// (tests/fixtures/datasets, MIT licensed; make-fixtures.mjs writes the Parquet and CSV copies from
// the JSONL) read as Parquet, JSONL and CSV map to the same problems, recognised without any
// configuration; the Countdown-Tasks layout becomes countdown problems; a column mapping overrides
// the layout; the other columns reach the problem under their names.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  finalAnswer,
  importPromptDataset,
  importSftDataset,
  lastBoxed,
  parseColumnMapping,
  type DatasetFile,
} from '../../src/tasks/datasets';
import { createJsonlTask } from '../../src/tasks/jsonl';
import { verifyAnswer } from '../../src/tasks/verify';
import { parseSftJsonl } from '../../src/train/sft-data';

const DIR = join(__dirname, '../fixtures/datasets');
const file = (name: string): DatasetFile => ({
  name,
  bytes: new Uint8Array(readFileSync(join(DIR, name))),
});
const folder = (name: string): DatasetFile[] =>
  readdirSync(join(DIR, name)).map((f) => file(join(name, f)));

/** The problems of a dataset's text, ids and all (what a run trains on). */
const problems = (text: string, checker = 'exact') =>
  createJsonlTask(text, { checker: checker as 'exact' }).dataset.problems;

describe('GSM8K test, 50 rows', () => {
  it('Parquet, JSONL and CSV map to the same problems, answers after "####"', async () => {
    const [pq, jl, csv] = await Promise.all(
      ['gsm8k-test-50.parquet', 'gsm8k-test-50.jsonl', 'gsm8k-test-50.csv'].map((n) =>
        importPromptDataset([file(n)]),
      ),
    );
    for (const d of [pq, jl, csv]) {
      expect(d.layout).toBe('gsm8k');
      expect(d.mapping).toEqual({ prompt: 'question', answer: 'answer' });
      expect(d.issues).toEqual([]);
      expect(d.rowCount).toBe(50);
    }
    expect(pq.format).toBe('parquet');
    expect(csv.format).toBe('csv');
    const p = problems(pq.text, 'numeric');
    expect(p).toHaveLength(50);
    expect(problems(jl.text, 'numeric')).toEqual(p);
    expect(problems(csv.text, 'numeric')).toEqual(p);
    // Row 1 of GSM8K test: Janet's ducks, 18 dollars.
    expect(p[0].question).toMatch(/^Janet’s ducks lay 16 eggs per day\./);
    expect(p[0].reference).toBe('18');
    expect(p[0].columns).toBeUndefined(); // question and answer are both roles
    expect(verifyAnswer('18', p[0].verifier)).toBe(true);
    expect(verifyAnswer('17', p[0].verifier)).toBe(false);
    // Each reference is the text after the row's "####" in the source file.
    const source = readFileSync(join(DIR, 'gsm8k-test-50.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { answer: string });
    expect(p.map((x) => x.reference)).toEqual(
      source.map((r) => r.answer.split('####')[1].trim().replace(/,/g, '')),
    );
    expect(p.every((x) => /^-?[0-9.]+$/.test(x.reference!))).toBe(true);
  });
});

describe('MATH-500, 50 rows', () => {
  it('a folder of two Parquet shards, JSONL and CSV map to the same problems', async () => {
    const [pq, jl, csv] = await Promise.all([
      importPromptDataset(folder('math500-test-50')),
      importPromptDataset([file('math500-test-50.jsonl')]),
      importPromptDataset([file('math500-test-50.csv')]),
    ]);
    for (const d of [pq, jl, csv]) {
      expect(d.layout).toBe('math');
      expect(d.mapping).toEqual({ prompt: 'problem', answer: 'answer' });
      expect(d.columns).toEqual(['problem', 'solution', 'answer', 'subject', 'level']);
      expect(d.issues).toEqual([]);
    }
    const p = problems(pq.text);
    expect(p).toHaveLength(50);
    expect(problems(jl.text)).toEqual(p);
    expect(problems(csv.text)).toEqual(p);
    expect(p[0].question).toMatch(/^Convert the point \$\(0,3\)\$ in rectangular coordinates/);
    expect(p[0].reference).toBe('\\left( 3, \\frac{\\pi}{2} \\right)');
    // The other columns travel with the problem, typed as the Hub's reader types them (level int).
    expect(p[0].columns).toEqual({
      solution: expect.stringContaining('\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}'),
      subject: 'Precalculus',
      level: 2,
    });
    // Every row's answer column is its solution's last \boxed{} (what the layout falls back to).
    expect(p.map((x) => lastBoxed(x.columns!.solution as string))).toEqual(
      p.map((x) => x.reference),
    );
    // Row 26 is the second shard's first row: the shards are read in name order.
    expect(pq.origin(26)).toBe('math500-test-50/test-00001-of-00002.parquet row 1');
    expect(csv.origin(26)).toBe('math500-test-50.csv row 26');
  });

  it('without an answer column the reference is the last \\boxed{} of the solution', async () => {
    const rows = readFileSync(join(DIR, 'math500-test-50.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .slice(0, 5)
      .map((l) => {
        const { problem, solution } = JSON.parse(l);
        return JSON.stringify({ problem, solution });
      });
    const d = await importPromptDataset([
      { name: 'm.jsonl', bytes: new TextEncoder().encode(rows.join('\n')) },
    ]);
    expect(d.layout).toBe('math');
    expect(d.mapping).toEqual({ prompt: 'problem', answer: 'solution' });
    const p = problems(d.text);
    expect(p.map((x) => x.reference)).toEqual([
      '\\left( 3, \\frac{\\pi}{2} \\right)',
      'p - q',
      '\\frac{14}{3}',
      '9',
      '\\text{Evelyn}',
    ]);
    // TRL passes the solution column to rewards: it stays, under its name.
    expect(p[1].columns?.solution).toMatch(/\\boxed\{p - q\}/);
  });
});

describe("the layout's checker", () => {
  it('GSM8K and MATH-500 take the math checker; every reference passes its own check', async () => {
    for (const files of [[file('gsm8k-test-50.parquet')], folder('math500-test-50')]) {
      const d = await importPromptDataset(files);
      expect(d.checker).toBe('math');
      const task = createJsonlTask(d.text, { checker: 'math' });
      expect(task.dataset.issues).toEqual([]);
      const p = task.dataset.problems;
      expect(p).toHaveLength(50);
      expect(p.filter((x) => verifyAnswer(x.reference!, x.verifier) === true)).toHaveLength(50);
      expect(verifyAnswer('no answer here', p[0].verifier)).toBe(false);
    }
  });
});

describe('layouts and mapping', () => {
  it('Countdown-Tasks (nums list<int64>, target int64) becomes countdown problems', async () => {
    const d = await importPromptDataset([file('countdown-tasks-3.parquet')]);
    expect(d.layout).toBe('countdown');
    const p = problems(d.text);
    expect(p.map((x) => x.verifier)).toEqual([
      { kind: 'countdown', nums: [3, 8, 2], target: 22 },
      { kind: 'countdown', nums: [5, 7, 3, 1], target: 15 },
      { kind: 'countdown', nums: [44, 19, 35], target: 98 },
    ]);
    expect(p[0].question).toMatch(
      /^Using the numbers \[3, 8, 2\], create an equation that equals 22\./,
    );
    expect(verifyAnswer('8 * 3 - 2', p[0].verifier)).toBe(true);
    expect(verifyAnswer('8 * 3', p[0].verifier)).toBe(false); // 2 unused
    expect(verifyAnswer('8 * 3 - 2 / 2', p[0].verifier)).toBe(false); // 2 twice
  });

  it("TRL's prompt / solution, conversational prompts, and a user mapping", async () => {
    const enc = (rows: object[]) => new TextEncoder().encode(JSON.stringify(rows));
    const trl = await importPromptDataset([
      {
        name: 'trl.json',
        bytes: enc([
          { prompt: [{ role: 'user', content: 'What is 6*7?' }], solution: '$\\boxed{42}$' },
        ]),
      },
    ]);
    expect(trl.layout).toBe('trl');
    const [p] = problems(trl.text);
    expect(p.messages).toEqual([{ role: 'user', content: 'What is 6*7?' }]);
    expect(p.reference).toBe('42');
    expect(p.columns).toEqual({ solution: '$\\boxed{42}$' });

    const csv = 'id,text,gold\n1,"Add 2 and 3, please",5\n2,Double 4,8\n';
    const bytes = new TextEncoder().encode(csv);
    await expect(importPromptDataset([{ name: 'x.csv', bytes }])).rejects.toThrow(
      'no prompt column recognised among id, text, gold: map one (--column prompt=<column>',
    );
    const mapped = await importPromptDataset([{ name: 'x.csv', bytes }], {
      columns: 'prompt=text,answer=gold',
    });
    expect(mapped.layout).toBe('custom');
    const q = problems(mapped.text, 'numeric');
    expect(q.map((x) => [x.question, x.reference, x.columns])).toEqual([
      ['Add 2 and 3, please', '5', { id: 1, gold: 5 }],
      ['Double 4', '8', { id: 2, gold: 8 }],
    ]);
    await expect(
      importPromptDataset([{ name: 'x.csv', bytes }], { columns: 'prompt=txt' }),
    ).rejects.toThrow(
      'column mapping prompt=txt: no column "txt" in x.csv (columns: id, text, gold)',
    );
    expect(() => parseColumnMapping('question')).toThrow('expected <role>=<column>');
    expect(() => parseColumnMapping('query=text')).toThrow("unknown role 'query'");
  });

  it('a .jsonl file in the native layout passes through unchanged', async () => {
    const text = '{"prompt": "1+1?", "answer": "2", "source": "mine"}\r\n\n{"prompt": "2+2?"}\n';
    const d = await importPromptDataset([
      { name: 'a.jsonl', bytes: new TextEncoder().encode(text) },
    ]);
    expect(d.text).toBe(text);
    const p = problems(d.text);
    expect(p.map((x) => [x.id, x.reference, x.columns])).toEqual([
      ['jsonl-1', '2', { source: 'mine' }],
      ['jsonl-3', null, undefined],
    ]);
  });

  it('finalAnswer: GSM8K "####", MATH \\boxed{} with nested braces, else the text', () => {
    expect(finalAnswer('so 1,000 in all.\n#### 1,000')).toBe('1000');
    expect(finalAnswer('$\\boxed{\\frac{1}{2}}$ and then \\boxed{\\sqrt{\\frac{3}{4}}}')).toBe(
      '\\sqrt{\\frac{3}{4}}',
    );
    expect(finalAnswer('42')).toBe('42');
  });

  it('SFT: GSM8K and MATH rows become prompt / completion (the worked solution)', async () => {
    const g = await importSftDataset([file('gsm8k-test-50.csv')]);
    expect(g.layout).toBe('gsm8k');
    const rows = parseSftJsonl(g.text).rows;
    expect(rows).toHaveLength(50);
    expect(rows[0]).toMatchObject({
      kind: 'prompt-completion',
      prompt: expect.stringMatching(/^Janet’s ducks/),
      completion: expect.stringMatching(/#### 18$/),
    });
    const m = await importSftDataset(folder('math500-test-50'));
    expect(m.layout).toBe('math');
    expect(parseSftJsonl(m.text).rows[1]).toMatchObject({
      completion: expect.stringContaining('\\boxed{p - q}'),
    });
  });
});
