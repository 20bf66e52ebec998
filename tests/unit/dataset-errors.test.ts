// Malformed and oversized dataset files (src/tasks/datasets/tables.ts): each is refused or its
// rows skipped with a message that names the file and, where it can, the row and the column, as
// the JSONL reader names its lines; sizes are checked before the work they would cost.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DATASET_ROW_LIMIT,
  importPromptDataset,
  readTable,
  type DatasetFile,
} from '../../src/tasks/datasets';
import { JSONL_LINE_LIMIT } from '../../src/tasks/jsonl';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { brotliCompressSync, gzipSync } from 'node:zlib';

const enc = (name: string, text: string): DatasetFile => ({
  name,
  bytes: new TextEncoder().encode(text),
});

describe('Parquet codecs', () => {
  it('gzip and brotli pages (hyparquet-compressors) read as the snappy ones do', async () => {
    const columnData = [
      { name: 'question', data: ['What is 6*7?', 'What is 2+2?'], type: 'STRING' as const },
      { name: 'answer', data: ['6*7 = 42\n#### 42', '#### 4'], type: 'STRING' as const },
    ];
    const texts: string[] = [];
    for (const [codec, compress] of [
      ['SNAPPY', undefined],
      ['GZIP', (b: Uint8Array) => new Uint8Array(gzipSync(b))],
      ['BROTLI', (b: Uint8Array) => new Uint8Array(brotliCompressSync(b))],
    ] as const) {
      const bytes = new Uint8Array(
        parquetWriteBuffer({
          columnData,
          codec,
          ...(compress ? { compressors: { [codec]: compress } } : {}),
        }),
      );
      const d = await importPromptDataset([{ name: `${codec}.parquet`, bytes }]);
      expect(d.layout).toBe('gsm8k');
      texts.push(d.text);
    }
    expect(texts[0]).toBe(
      '{"prompt":"What is 6*7?","answer":"42"}\n{"prompt":"What is 2+2?","answer":"4"}',
    );
    expect(texts.slice(1)).toEqual([texts[0], texts[0]]);
  });
});

describe('malformed files', () => {
  it('Parquet: not Parquet, truncated, a page that does not decode', async () => {
    await expect(readTable([enc('a.parquet', 'hello')])).rejects.toThrow(
      /^a\.parquet: not a readable Parquet file \(/,
    );
    const good = new Uint8Array(
      readFileSync(join(__dirname, '../fixtures/datasets/gsm8k-test-50.parquet')),
    );
    await expect(
      readTable([{ name: 'cut.parquet', bytes: good.slice(0, good.length - 100) }]),
    ).rejects.toThrow(/^cut\.parquet: not a readable Parquet file/);
    // Bytes of the first data page overwritten: the footer reads, the column does not.
    const bad = good.slice();
    bad.fill(0xff, 8, 400);
    await expect(readTable([{ name: 'bad.parquet', bytes: bad }])).rejects.toThrow(
      /^bad\.parquet: rows 1–50, column "question": cannot be decoded \(/,
    );
  });

  it('Parquet: a row count past the limit is refused from the footers, before any page', async () => {
    const half = DATASET_ROW_LIMIT.max / 2 + 1;
    const bytes = new Uint8Array(
      parquetWriteBuffer({
        columnData: [{ name: 'prompt', data: new Array(half).fill('a'), type: 'STRING' }],
        statistics: false,
        rowGroupSize: half,
      }),
    );
    const shard = (i: number) => ({ name: `train-0000${i}-of-00002.parquet`, bytes });
    await expect(readTable([shard(0), shard(1)])).rejects.toThrow(
      '2 files: rows 1000002 is more than the limit of 1000000 rows (the Parquet footers)',
    );
  });

  it('CSV: a row count past the limit is refused as the rows are read', async () => {
    const csv = 'n\n' + '1\n'.repeat(DATASET_ROW_LIMIT.max + 1);
    await expect(readTable([enc('big.csv', csv)])).rejects.toThrow(
      'big.csv: rows 1000001 is more than the limit of 1000000 rows (all files together)',
    );
  });

  it('CSV: unterminated quote, text after a quote, wrong field counts, duplicate header', async () => {
    await expect(readTable([enc('q.csv', 'prompt,answer\n"open,1\n')])).rejects.toThrow(
      'q.csv: line 2, field 1: a quoted field is never closed',
    );
    await expect(readTable([enc('t.csv', 'prompt,answer\n"a"b,1\n')])).rejects.toThrow(
      't.csv: line 2, field 1: text after a closing quote',
    );
    await expect(readTable([enc('d.csv', 'prompt,prompt\n')])).rejects.toThrow(
      'd.csv: line 1: column "prompt" appears twice',
    );
    const t = await readTable([
      enc(
        'f.csv',
        'prompt,answer\r\n"multi\nline, quoted ""x""",1\r\nonly one field\r\nq,2,extra\r\n',
      ),
    ]);
    expect(t.rows.map((r) => [r.row, r.values])).toEqual([
      [1, { prompt: 'multi\nline, quoted "x"', answer: 1 }],
    ]);
    expect(t.issues).toEqual([
      { file: 'f.csv', row: 2, message: 'line 4: 1 fields, the header has 2 (skipped)' },
      { file: 'f.csv', row: 3, message: 'line 5: 3 fields, the header has 2 (skipped)' },
    ]);
  });

  it('JSON and JSONL: invalid JSON, not rows; a row of the wrong type is skipped', async () => {
    await expect(readTable([enc('x.json', '{"a": [1, 2], "b": [1]}')])).rejects.toThrow(
      'x.json: column "b" has 1 values, column "a" has 2',
    );
    await expect(readTable([enc('y.json', '{oops')])).rejects.toThrow(/^y\.json: not valid JSON/);
    await expect(readTable([enc('z.json', '"text"')])).rejects.toThrow(
      'z.json: expected an array of row objects, an object holding one, or columns as arrays',
    );
    const cols = await readTable([enc('c.json', '{"prompt": ["p1", "p2"], "answer": [1, 2]}')]);
    expect(cols.rows.map((r) => r.values)).toEqual([
      { prompt: 'p1', answer: 1 },
      { prompt: 'p2', answer: 2 },
    ]);
    const d = await importPromptDataset([
      enc(
        'r.jsonl',
        '{"question": "q1", "answer": "#### 3"}\nnope\n{"question": 5, "answer": "x"}\n',
      ),
    ]);
    expect(d.issues).toEqual([
      { file: 'r.jsonl', row: 2, message: expect.stringMatching(/^not valid JSON/) },
      {
        file: 'r.jsonl',
        row: 3,
        message: 'column "question" must be text or a list of messages, got 5 (skipped)',
      },
    ]);
    // Line k of the converted text is row k: the skipped row is an empty line.
    expect(d.text.split('\n')).toEqual(['{"prompt":"q1","answer":"3"}', '']);
  });

  it('mixed formats, unknown extensions and an over-long cell', async () => {
    await expect(readTable([enc('a.csv', 'x\n1\n'), enc('b.jsonl', '{}')])).rejects.toThrow(
      'the files mix formats (csv, jsonl): give one format',
    );
    await expect(readTable([enc('a.txt', '')])).rejects.toThrow(
      'a.txt: not a dataset file (expected .parquet, .jsonl, .json or .csv)',
    );
    const long = 'x'.repeat(JSONL_LINE_LIMIT.max + 1);
    const t = await readTable([
      enc('l.json', JSON.stringify([{ prompt: long }, { prompt: 'ok' }])),
    ]);
    expect(t.rows.map((r) => r.values)).toEqual([{ prompt: 'ok' }]);
    expect(t.issues).toEqual([
      {
        file: 'l.json',
        row: 1,
        message:
          'column "prompt": length 1048577 is more than the limit of 1048576 characters a cell (skipped)',
      },
    ]);
  });

  it('fuzz: damaged Parquet, CSV and JSON files are read or refused with a DatasetError', async () => {
    // A seeded xorshift, so a failure repeats.
    let x = 0x2545f491;
    const rand = (n: number) => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return (x >>> 0) % n;
    };
    const dir = join(__dirname, '../fixtures/datasets');
    for (const name of ['gsm8k-test-50.parquet', 'gsm8k-test-50.csv', 'gsm8k-test-50.jsonl']) {
      const good = new Uint8Array(readFileSync(join(dir, name)));
      for (let i = 0; i < 40; i++) {
        const bytes = good.slice(0, good.length - rand(64));
        for (let k = 0; k < 8; k++) bytes[rand(bytes.length)] = rand(256);
        const outcome = await readTable([{ name, bytes }]).then(
          (t) => t,
          (e: unknown) => e,
        );
        if (outcome instanceof Error) expect(outcome.name, outcome.message).toBe('DatasetError');
        else expect(Array.isArray((outcome as { rows: unknown[] }).rows)).toBe(true);
      }
    }
  });
});
