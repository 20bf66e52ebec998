// The math checker's table (tests/fixtures/math-answers.tsv) as rows, shared by the TypeScript test
// and the Python agreement test: reference, candidate, verdict, what the row covers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface MathRow {
  line: number;
  reference: string;
  candidate: string;
  expected: boolean;
  note: string;
}

export const MATH_TABLE_PATH = join(__dirname, '..', 'fixtures', 'math-answers.tsv');

export function readMathTable(): MathRow[] {
  const rows: MathRow[] = [];
  readFileSync(MATH_TABLE_PATH, 'utf8')
    .split('\n')
    .forEach((text, i) => {
      if (text === '' || text.startsWith('#')) return;
      const cells = text.split('\t');
      if (cells.length !== 4 || (cells[2] !== '0' && cells[2] !== '1')) {
        throw new Error(`math-answers.tsv line ${i + 1}: expected 4 tab-separated cells`);
      }
      rows.push({
        line: i + 1,
        reference: cells[0],
        candidate: cells[1],
        expected: cells[2] === '1',
        note: cells[3],
      });
    });
  return rows;
}
