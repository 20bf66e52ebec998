// Dataset files as the Hugging Face Hub serves them, read into one table of rows: Parquet (any
// codec the Hub writes: snappy built into hyparquet, zstd / gzip / brotli / lz4 through
// hyparquet-compressors), JSON Lines, JSON (an array of row objects, or an object holding one such
// array) and CSV (RFC 4180, a header row). A folder of shards is several files of one format read
// in name order (train-00000-of-00002.parquet, train-00001-…). Nothing is fetched: the caller
// passes the bytes.
// Reads are bounded as the JSONL reader's are (src/tasks/jsonl.ts): all files together at most
// JSONL_FILE_LIMIT bytes, a cell at most JSONL_LINE_LIMIT characters (the row is skipped and
// reported), at most DATASET_ROW_LIMIT rows, and a Parquet file's decoded size is checked from its
// footer before any page is decompressed. A malformed file throws a DatasetError naming the file
// and, where it can, the row and the column; a malformed row is skipped and reported.
import type { FileMetaData } from 'hyparquet';
import { overLimitMessage, type SizeLimit } from '../../core/limits';
import { JSONL_FILE_LIMIT, JSONL_LINE_LIMIT, jsonlLines, lineTooLongMessage } from '../jsonl';

/** The most rows a dataset may have (all shards together): ten times GSM8K's and MATH's training
 * sets, and far more prompts than a run here trains on. */
export const DATASET_ROW_LIMIT: SizeLimit = { max: 1_000_000, unit: 'rows' };

/** The most bytes a Parquet file's pages may decode to (its footer's total_byte_size): four times
 * the file bound, so a compressed file cannot grow past memory before a row is seen. */
export const PARQUET_DECODED_LIMIT: SizeLimit = { max: 4 * JSONL_FILE_LIMIT.max, unit: 'bytes' };

export const DATASET_FORMATS = ['parquet', 'jsonl', 'json', 'csv'] as const;
export type DatasetFormat = (typeof DATASET_FORMATS)[number];

/** One file of a dataset: its name (for messages and the format) and its bytes. */
export interface DatasetFile {
  name: string;
  bytes: Uint8Array;
}

/** A row skipped while reading: its file, its 1-based row in that file, and why. */
export interface RowIssue {
  file: string;
  row: number;
  message: string;
}

/** One row read from a file: its values by column, and where it came from. */
export interface TableRow {
  file: string;
  row: number; // 1-based within its file (a JSONL file's line number)
  values: Record<string, unknown>;
}

export interface Table {
  format: DatasetFormat;
  /** Column names in first-seen order over all files. */
  columns: string[];
  rows: TableRow[];
  issues: RowIssue[];
}

/** A file that cannot be read at all: the message names the file (and row, column when known). */
export class DatasetError extends Error {
  override name = 'DatasetError';
}

/** The format a file name says ('.jsonl', '.json', '.csv', '.parquet', case-insensitive), or null. */
export function datasetFormat(name: string): DatasetFormat | null {
  const m = /\.(parquet|jsonl|json|csv)$/i.exec(name);
  return m ? (m[1].toLowerCase() as DatasetFormat) : null;
}

const decoder = new TextDecoder('utf-8');
/** UTF-8 text of a file, a byte-order mark dropped (as readFileSync(…, 'utf8') reads JSONL). */
const textOf = (bytes: Uint8Array) => decoder.decode(bytes);

/** A cell over the line limit, as the row's issue. */
function cellTooLong(column: string, length: number): string {
  return `column "${column}": ${overLimitMessage('length', length, JSONL_LINE_LIMIT)} a cell`;
}

/** The first cell of a row over the line limit, or null (strings, and JSON text of anything else). */
function oversizedCell(values: Record<string, unknown>): string | null {
  for (const [k, v] of Object.entries(values)) {
    const n = typeof v === 'string' ? v.length : v && typeof v === 'object' ? jsonLength(v) : 0;
    if (n > JSONL_LINE_LIMIT.max) return cellTooLong(k, n);
  }
  return null;
}
const jsonLength = (v: unknown) => JSON.stringify(v)?.length ?? 0;

/** Parquet values as JSON data: INT64 (BigInt) as a number when safe, else its digits; dates as
 * ISO text; raw bytes (not UTF-8 strings) as null, since no reward could read them. */
function plain(v: unknown): unknown {
  if (typeof v === 'bigint')
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(v)
      : v.toString();
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Uint8Array) return null;
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

type ParquetMeta = FileMetaData;

/** hyparquet and its decompressors, loaded on the first Parquet file (the page's first bundle
 * stays without them). */
const parquetModules = () =>
  Promise.all([import('hyparquet'), import('hyparquet-compressors')]).then(([pq, c]) => ({
    parquetMetadata: pq.parquetMetadata,
    parquetReadObjects: pq.parquetReadObjects,
    compressors: c.compressors,
  }));
type ParquetModules = Awaited<ReturnType<typeof parquetModules>>;

/** A Parquet file's footer, its decoded size checked; the file's bytes as an ArrayBuffer. */
function parquetFooter(
  { parquetMetadata }: ParquetModules,
  file: DatasetFile,
): { ab: ArrayBuffer; meta: ParquetMeta } {
  const { name, bytes } = file;
  const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  let meta: ParquetMeta;
  try {
    meta = parquetMetadata(ab as ArrayBuffer);
  } catch (e) {
    throw new DatasetError(`${name}: not a readable Parquet file (${(e as Error).message})`);
  }
  const decoded = meta.row_groups.reduce((s, g) => s + Number(g.total_byte_size), 0);
  if (decoded > PARQUET_DECODED_LIMIT.max)
    throw new DatasetError(
      `${name}: ${overLimitMessage('decoded size', decoded, PARQUET_DECODED_LIMIT)} (the Parquet footer's total_byte_size)`,
    );
  return { ab: ab as ArrayBuffer, meta };
}

async function readParquet(
  { parquetReadObjects, compressors }: ParquetModules,
  name: string,
  { ab, meta }: { ab: ArrayBuffer; meta: ParquetMeta },
  out: Table,
): Promise<void> {
  // Top-level columns of the schema (a list column is one column, its children below it).
  const columns: string[] = [];
  const schema = meta.schema;
  for (let i = 1, skip = 0; i < schema.length; i++) {
    if (skip > 0) {
      skip += (schema[i].num_children ?? 0) - 1;
      continue;
    }
    columns.push(schema[i].name);
    skip = schema[i].num_children ?? 0;
  }
  for (const c of columns) if (!out.columns.includes(c)) out.columns.push(c);
  // One row group at a time, one column at a time: an error names the rows and the column, and
  // only one row group is ever decoded at once.
  let start = 0;
  for (const group of meta.row_groups) {
    const end = start + Number(group.num_rows);
    const byColumn: unknown[][] = [];
    for (const column of columns) {
      try {
        const rows = await parquetReadObjects({
          file: ab,
          metadata: meta,
          columns: [column],
          rowStart: start,
          rowEnd: end,
          compressors,
        });
        byColumn.push(rows.map((r) => r[column]));
      } catch (e) {
        throw new DatasetError(
          `${name}: rows ${start + 1}–${end}, column "${column}": cannot be decoded (${(e as Error).message})`,
        );
      }
    }
    for (let i = 0; i < end - start; i++) {
      const values: Record<string, unknown> = {};
      columns.forEach((c, k) => (values[c] = plain(byColumn[k][i])));
      pushRow(out, { file: name, row: start + i + 1, values });
    }
    start = end;
  }
}

/** Adds a row unless one of its cells is over the line limit (then reports it). */
function pushRow(out: Table, row: TableRow): void {
  const tooLong = oversizedCell(row.values);
  if (tooLong) out.issues.push({ file: row.file, row: row.row, message: `${tooLong} (skipped)` });
  else out.rows.push(row);
}

function addColumns(out: Table, values: Record<string, unknown>): void {
  for (const c of Object.keys(values)) if (!out.columns.includes(c)) out.columns.push(c);
}

function readJsonl(file: DatasetFile, out: Table): void {
  for (const l of jsonlLines(textOf(file.bytes))) {
    if ('tooLong' in l) {
      out.issues.push({
        file: file.name,
        row: l.line,
        message: lineTooLongMessage(l.tooLong),
      });
      continue;
    }
    if (l.text.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(l.text);
    } catch (e) {
      out.issues.push({
        file: file.name,
        row: l.line,
        message: `not valid JSON (${(e as Error).message})`,
      });
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      out.issues.push({ file: file.name, row: l.line, message: 'expected a JSON object' });
      continue;
    }
    addColumns(out, value as Record<string, unknown>);
    out.rows.push({ file: file.name, row: l.line, values: value as Record<string, unknown> });
    checkRows(out, file.name);
  }
}

function checkRows(out: Table, name: string): void {
  if (out.rows.length > DATASET_ROW_LIMIT.max)
    throw new DatasetError(
      `${name}: ${overLimitMessage('rows', out.rows.length, DATASET_ROW_LIMIT)} (all files together)`,
    );
}

function readJson(file: DatasetFile, out: Table): void {
  let value: unknown;
  try {
    value = JSON.parse(textOf(file.bytes).replace(/^\uFEFF/, ''));
  } catch (e) {
    throw new DatasetError(`${file.name}: not valid JSON (${(e as Error).message})`);
  }
  // The Hub's JSON files: an array of rows, or {"data": [rows]} (datasets' `field`), or the
  // columns as arrays {"col": [v0, v1, …], …} (pandas' orient="list").
  let rows: unknown;
  if (Array.isArray(value)) rows = value;
  else if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    const arrays = entries.filter(([, v]) => Array.isArray(v));
    if (arrays.length === 1 && entries.length === 1 && isObjectArray(arrays[0][1])) {
      rows = arrays[0][1];
    } else if (entries.length > 0 && arrays.length === entries.length) {
      const n = (arrays[0][1] as unknown[]).length;
      const bad = arrays.find(([, v]) => (v as unknown[]).length !== n);
      if (bad)
        throw new DatasetError(
          `${file.name}: column "${bad[0]}" has ${(bad[1] as unknown[]).length} values, column "${arrays[0][0]}" has ${n}`,
        );
      rows = Array.from({ length: n }, (_, i) =>
        Object.fromEntries(arrays.map(([k, v]) => [k, (v as unknown[])[i]])),
      );
    }
  }
  if (!Array.isArray(rows))
    throw new DatasetError(
      `${file.name}: expected an array of row objects, an object holding one, or columns as arrays`,
    );
  rows.forEach((r, i) => {
    if (typeof r !== 'object' || r === null || Array.isArray(r)) {
      out.issues.push({ file: file.name, row: i + 1, message: 'expected a JSON object' });
      return;
    }
    addColumns(out, r as Record<string, unknown>);
    pushRow(out, { file: file.name, row: i + 1, values: r as Record<string, unknown> });
  });
  checkRows(out, file.name);
}
const isObjectArray = (v: unknown) =>
  Array.isArray(v) && v.every((x) => x !== null && typeof x === 'object' && !Array.isArray(x));

/**
 * CSV records (RFC 4180: fields separated by commas, a field quoted with " may hold commas, line
 * breaks and doubled quotes; records end in \n, \r\n or \r). Yields each record with the 1-based
 * line it starts on; an unterminated quoted field throws naming that line.
 */
function* csvRecords(text: string, name: string): Generator<{ line: number; fields: string[] }> {
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 1;
  while (i < text.length) {
    const startLine = line;
    const fields: string[] = [];
    for (;;) {
      let field = '';
      if (text[i] === '"') {
        const open = line;
        i++;
        for (;;) {
          const q = text.indexOf('"', i);
          if (q < 0)
            throw new DatasetError(
              `${name}: line ${open}, field ${fields.length + 1}: a quoted field is never closed`,
            );
          field += text.slice(i, q);
          line += countBreaks(text, i, q);
          if (text[q + 1] === '"') {
            field += '"';
            i = q + 2;
          } else {
            i = q + 1;
            break;
          }
        }
        if (i < text.length && text[i] !== ',' && text[i] !== '\n' && text[i] !== '\r')
          throw new DatasetError(
            `${name}: line ${line}, field ${fields.length + 1}: text after a closing quote`,
          );
      } else {
        const m = /[,\r\n]/g;
        m.lastIndex = i;
        const hit = m.exec(text);
        const stop = hit ? hit.index : text.length;
        field = text.slice(i, stop);
        i = stop;
      }
      if (field.length > JSONL_LINE_LIMIT.max)
        throw new DatasetError(
          `${name}: line ${startLine}, field ${fields.length + 1}: ${overLimitMessage('length', field.length, JSONL_LINE_LIMIT)} a field`,
        );
      fields.push(field);
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === '\r') i += text[i + 1] === '\n' ? 2 : 1;
      else if (text[i] === '\n') i++;
      line++;
      break;
    }
    yield { line: startLine, fields };
  }
}
function countBreaks(text: string, from: number, to: number): number {
  let n = 0;
  for (let k = from; k < to; k++) {
    const c = text.charCodeAt(k);
    if (c === 10 || (c === 13 && text.charCodeAt(k + 1) !== 10)) n++;
  }
  return n;
}

const INTEGER = /^-?[0-9]+$/;
const DECIMAL = /^-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$/;

/**
 * A CSV file: the first record is the header; each column is typed as the Hub's reader (pyarrow)
 * types it: all its non-empty cells integers → numbers, all decimals → numbers, else strings; an
 * empty cell is null. A record with another field count than the header is skipped and reported.
 */
function readCsv(file: DatasetFile, out: Table): void {
  const records = csvRecords(textOf(file.bytes), file.name);
  const head = records.next();
  if (head.done) throw new DatasetError(`${file.name}: empty CSV file (no header row)`);
  const header = head.value.fields;
  const seen = new Set<string>();
  header.forEach((h, k) => {
    if (h === '') throw new DatasetError(`${file.name}: line 1, column ${k + 1} has no name`);
    if (seen.has(h)) throw new DatasetError(`${file.name}: line 1: column "${h}" appears twice`);
    seen.add(h);
  });
  const cells: { line: number; fields: string[] }[] = [];
  let row = 0;
  for (const r of records) {
    row++;
    if (r.fields.length === 1 && r.fields[0] === '') continue; // blank line
    if (r.fields.length !== header.length) {
      out.issues.push({
        file: file.name,
        row,
        message: `line ${r.line}: ${r.fields.length} fields, the header has ${header.length} (skipped)`,
      });
      continue;
    }
    cells.push({ line: row, fields: r.fields });
    if (out.rows.length + cells.length > DATASET_ROW_LIMIT.max)
      throw new DatasetError(
        `${file.name}: ${overLimitMessage('rows', out.rows.length + cells.length, DATASET_ROW_LIMIT)} (all files together)`,
      );
  }
  const numeric = header.map((_, k) => {
    const filled = cells.map((c) => c.fields[k]).filter((v) => v !== '');
    if (filled.length === 0) return false;
    if (filled.every((v) => INTEGER.test(v) && Number.isSafeInteger(Number(v)))) return true;
    return filled.every((v) => DECIMAL.test(v));
  });
  for (const h of header) if (!out.columns.includes(h)) out.columns.push(h);
  for (const c of cells) {
    const values: Record<string, unknown> = {};
    header.forEach((h, k) => {
      const v = c.fields[k];
      values[h] = v === '' ? null : numeric[k] ? Number(v) : v;
    });
    out.rows.push({ file: file.name, row: c.line, values });
  }
  checkRows(out, file.name);
}

/**
 * Reads one dataset (one file, or the shards of a folder: all of one format, read in name order)
 * into a table. Throws DatasetError for a file that cannot be read, a mix of formats, or a size
 * past the limits; skipped rows are in `issues`.
 */
export async function readTable(files: readonly DatasetFile[]): Promise<Table> {
  if (files.length === 0) throw new DatasetError('no dataset file given');
  const formats = new Set(files.map((f) => datasetFormat(f.name)));
  if (formats.has(null)) {
    const bad = files.find((f) => datasetFormat(f.name) === null)!;
    throw new DatasetError(
      `${bad.name}: not a dataset file (expected .parquet, .jsonl, .json or .csv)`,
    );
  }
  if (formats.size > 1)
    throw new DatasetError(
      `the files mix formats (${[...formats].join(', ')}): give one format's shards`,
    );
  const bytes = files.reduce((s, f) => s + f.bytes.byteLength, 0);
  if (bytes > JSONL_FILE_LIMIT.max)
    throw new DatasetError(
      `${files.length === 1 ? files[0].name : `${files.length} files`}: ${overLimitMessage('size', bytes, JSONL_FILE_LIMIT)} (a dataset)`,
    );
  const format = [...formats][0] as DatasetFormat;
  const out: Table = { format, columns: [], rows: [], issues: [] };
  const sorted = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // Parquet: every footer first, so the row count of all shards is checked before any page.
  const modules = format === 'parquet' ? await parquetModules() : null;
  const footers = modules ? sorted.map((f) => parquetFooter(modules, f)) : [];
  const total = footers.reduce((s, f) => s + Number(f.meta.num_rows), 0);
  if (total > DATASET_ROW_LIMIT.max)
    throw new DatasetError(
      `${files.length === 1 ? files[0].name : `${files.length} files`}: ${overLimitMessage('rows', total, DATASET_ROW_LIMIT)} (the Parquet footers)`,
    );
  for (const [i, file] of sorted.entries()) {
    if (modules) await readParquet(modules, file.name, footers[i], out);
    else if (format === 'jsonl') readJsonl(file, out);
    else if (format === 'json') readJson(file, out);
    else readCsv(file, out);
  }
  return out;
}
