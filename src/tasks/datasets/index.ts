// The dataset importer: files as downloaded from the Hub (tables.ts reads them) → the layout and
// column mapping (layout.ts) → the JSONL text the jsonl task and the SFT reader already take, one
// line per row (line k is row k of the dataset, all shards in name order; a row that cannot be
// mapped is an empty line and an issue). Everything downstream (the run, the worker, checkpoints,
// the TRL export) keeps passing that text, so an imported Parquet set trains, saves and restores
// exactly as a JSONL file does. A .jsonl file already in this project's layout, with no mapping
// given, passes through unchanged (its line numbers stay the file's own).
//   prompt sets: {"prompt" | "messages", "answer", …other columns} or {"nums", "target", …}
//   SFT sets:    {"prompt", "completion"} (TRL's formats pass through)
import { JSONL_FILE_LIMIT } from '../jsonl';
import { overLimitMessage } from '../../core/limits';
import {
  finalAnswer,
  parseColumnMapping,
  recognisePromptLayout,
  recogniseSftLayout,
  suggestedChecker,
  type ColumnMapping,
  type DatasetLayout,
} from './layout';
import {
  DatasetError,
  readTable,
  type DatasetFile,
  type DatasetFormat,
  type RowIssue,
  type TableRow,
} from './tables';

export * from './layout';
export * from './tables';

/** Keys of a converted line that are roles, never passed on as the row's own columns. */
const RESERVED = new Set(['prompt', 'messages', 'answer', 'nums', 'target', 'completion']);

export interface ImportedDataset {
  format: DatasetFormat;
  layout: DatasetLayout;
  /** The mapping in force: the layout's, with the user's overrides. */
  mapping: ColumnMapping;
  /** Every column of the files, in first-seen order. */
  columns: string[];
  /** The JSONL text the task (or the SFT reader) parses. */
  text: string;
  /** Rows of the dataset (all shards), skipped ones included: line k of `text` is row k. */
  rowCount: number;
  /** Rows skipped while reading or mapping (files and rows named). */
  issues: RowIssue[];
  /** The checker the layout's answers want (layout.ts suggestedChecker), or null. */
  checker: string | null;
  /** The first rows as read, for a preview. */
  preview: TableRow[];
  /** Where line k of `text` came from: "file row r". */
  origin(line: number): string;
}

export interface ImportOptions {
  /** The user's mapping, `prompt=question,answer=final` (roles not named keep the layout's). */
  columns?: string;
  /** Rows kept for `preview` (default 5). */
  previewRows?: number;
}

const PREVIEW_ROWS = 5;

/** The columns of a row that are not a role's: passed to rewards under their own names. */
function extras(values: Record<string, unknown>, mapping: ColumnMapping): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(values))
    if (!RESERVED.has(k) && k !== mapping.prompt) out[k] = v;
  return out;
}

const cellText = (v: unknown) =>
  typeof v === 'string' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : null;

/** One row as a prompt-set line, or why it cannot be one. */
function promptLine(
  values: Record<string, unknown>,
  layout: DatasetLayout,
  m: ColumnMapping,
): Record<string, unknown> | string {
  if (layout === 'countdown' || (m.nums && m.target && !m.prompt)) {
    const nums = values[m.nums!];
    const target = values[m.target!];
    if (!Array.isArray(nums) || nums.length === 0 || !nums.every(Number.isSafeInteger))
      return `column "${m.nums}" must be a non-empty list of integers`;
    if (!Number.isSafeInteger(target)) return `column "${m.target}" must be an integer`;
    return { nums, target, ...extras(values, m) };
  }
  const prompt = values[m.prompt!];
  const line: Record<string, unknown> = {};
  if (typeof prompt === 'string') line.prompt = prompt;
  else if (Array.isArray(prompt))
    line.messages = prompt; // a conversational prompt
  else
    return `column "${m.prompt}" must be text or a list of messages, got ${JSON.stringify(prompt) ?? 'nothing'}`;
  if (m.answer !== undefined) {
    const raw = values[m.answer];
    if (raw !== null && raw !== undefined) {
      const text = cellText(raw);
      if (text === null) return `column "${m.answer}" must be text or a number`;
      line.answer = layout === 'prompt-answer' ? text : finalAnswer(text);
    }
  }
  return { ...line, ...extras(values, m) };
}

/** One row as an SFT line ({"prompt", "completion"}), or the row itself for TRL's formats. */
function sftLine(
  values: Record<string, unknown>,
  layout: DatasetLayout,
  m: ColumnMapping,
): Record<string, unknown> | string {
  if (layout === 'sft' && !m.completion) return values;
  const prompt = values[m.prompt!];
  const completion = values[m.completion!];
  if (typeof prompt !== 'string' && !Array.isArray(prompt))
    return `column "${m.prompt}" must be text or a list of messages`;
  const text = cellText(completion);
  if (text === null && !Array.isArray(completion))
    return `column "${m.completion}" must be text or a list of messages`;
  return { prompt, completion: text ?? completion };
}

async function importDataset(
  files: readonly DatasetFile[],
  options: ImportOptions,
  kind: 'prompts' | 'sft',
): Promise<ImportedDataset> {
  const user = parseColumnMapping(options.columns ?? '');
  const table = await readTable(files);
  const recognised = (kind === 'prompts' ? recognisePromptLayout : recogniseSftLayout)(
    table.columns,
  );
  const mapping = { ...recognised.mapping, ...user };
  const changed = Object.entries(user).some(
    ([r, c]) => recognised.mapping[r as keyof ColumnMapping] !== c,
  );
  const layout: DatasetLayout = changed ? 'custom' : recognised.layout;
  for (const [role, column] of Object.entries(user))
    if (!table.columns.includes(column))
      throw new DatasetError(
        `column mapping ${role}=${column}: no column "${column}" in ${files.length === 1 ? files[0].name : 'the files'} (columns: ${table.columns.join(', ')})`,
      );
  const needs =
    layout === 'countdown'
      ? []
      : kind === 'prompts'
        ? ['prompt']
        : layout === 'sft'
          ? []
          : ['prompt', 'completion'];
  for (const role of needs)
    if (!mapping[role as keyof ColumnMapping])
      throw new DatasetError(
        `no ${role} column recognised among ${table.columns.join(', ') || 'no columns'}: map one (--column ${role}=<column>, or the importer's ${role} select)`,
      );
  const nativeJsonl =
    table.format === 'jsonl' &&
    files.length === 1 &&
    !changed &&
    (kind === 'prompts' ? layout === 'prompt-answer' : layout === 'sft');
  const issues = [...table.issues];
  const lines: string[] = [];
  let chars = 0;
  const where = table.rows.map((r) => `${r.file} row ${r.row}`);
  for (const r of table.rows) {
    const line = (kind === 'prompts' ? promptLine : sftLine)(r.values, layout, mapping);
    if (typeof line === 'string') {
      issues.push({ file: r.file, row: r.row, message: `${line} (skipped)` });
      lines.push('');
      continue;
    }
    const json = JSON.stringify(line);
    chars += json.length + 1;
    if (chars > JSONL_FILE_LIMIT.max)
      throw new DatasetError(
        `${r.file}: ${overLimitMessage('converted size', chars, JSONL_FILE_LIMIT)} (the rows as JSONL text)`,
      );
    lines.push(json);
  }
  const text = nativeJsonl ? new TextDecoder().decode(files[0].bytes) : lines.join('\n');
  return {
    format: table.format,
    layout,
    mapping,
    columns: table.columns,
    text,
    rowCount: table.rows.length,
    issues,
    checker: kind === 'prompts' ? suggestedChecker(layout) : null,
    preview: table.rows.slice(0, options.previewRows ?? PREVIEW_ROWS),
    origin: (line) =>
      nativeJsonl ? `${files[0].name} line ${line}` : (where[line - 1] ?? `line ${line}`),
  };
}

/** A prompt set (the jsonl task's text) from dataset files; throws DatasetError when unreadable. */
export function importPromptDataset(
  files: readonly DatasetFile[],
  options: ImportOptions = {},
): Promise<ImportedDataset> {
  return importDataset(files, options, 'prompts');
}

/** An SFT set (parseSftJsonl's text) from dataset files; throws DatasetError when unreadable. */
export function importSftDataset(
  files: readonly DatasetFile[],
  options: ImportOptions = {},
): Promise<ImportedDataset> {
  return importDataset(files, options, 'sft');
}

/** What the page's file pickers give (a File): its name, size and bytes. */
export interface PickedFile {
  name: string;
  size: number;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/**
 * Picked files' bytes, their total size checked against the dataset bound before any is read
 * (a DatasetError names the file, or the count of files).
 */
export async function readPickedFiles(picked: readonly PickedFile[]): Promise<DatasetFile[]> {
  const size = picked.reduce((n, f) => n + f.size, 0);
  if (size > JSONL_FILE_LIMIT.max)
    throw new DatasetError(
      `${picked.length === 1 ? picked[0].name : `${picked.length} files`}: ${overLimitMessage('size', size, JSONL_FILE_LIMIT)} (a dataset)`,
    );
  return Promise.all(
    picked.map(async (f) => ({ name: f.name, bytes: new Uint8Array(await f.arrayBuffer()) })),
  );
}

/** Skipped rows as one sentence: 'a.csv row 5: …; b.csv row 9: …' (the first `max`). */
export function describeRowIssues(issues: readonly RowIssue[], max = 5): string {
  const shown = issues.slice(0, max).map((i) => `${i.file} row ${i.row}: ${i.message}`);
  if (issues.length > max) shown.push(`and ${issues.length - max} more`);
  return shown.join('; ');
}
