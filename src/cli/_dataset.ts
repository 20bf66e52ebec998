// Dataset files on the command line: `--dataset <file|folder>` (train, sft), a config's
// taskOptions.path and a recipe SFT stage's data.path all read here, through the importer of
// src/tasks/datasets (Parquet, JSONL, JSON, CSV; a folder is its shards of one format). Sizes are
// checked from the file system before a byte is read. `--column prompt=question` (repeatable)
// maps columns; `--checker` picks the answer check, by default the one the layout wants (gsm8k
// and MATH-style sets: layout.ts suggestedChecker).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { overLimitMessage } from '../core/limits';
import {
  datasetFormat,
  describeRowIssues,
  formatColumnMapping,
  importPromptDataset,
  importSftDataset,
  type DatasetFile,
  type ImportedDataset,
} from '../tasks/datasets';
import { JSONL_CHECKERS, JSONL_FILE_LIMIT } from '../tasks/jsonl';

/**
 * The files of a dataset path: the file itself, or a folder's dataset files (.parquet, .jsonl,
 * .json, .csv; not recursive), named relative to the folder. Their total size is checked against
 * JSONL_FILE_LIMIT before any is read; an unreadable path throws with the system's code.
 */
export function datasetFiles(path: string, label: string): DatasetFile[] {
  let names: string[];
  let total = 0;
  try {
    if (statSync(path).isDirectory()) {
      names = readdirSync(path)
        .filter((n) => datasetFormat(n) !== null)
        .map((n) => join(path, n))
        .filter((f) => statSync(f).isFile());
      if (names.length === 0)
        throw new RangeError(
          `${label}: ${path}: no dataset file in the folder (.parquet, .jsonl, .json or .csv)`,
        );
    } else names = [path];
    for (const f of names) total += statSync(f).size;
    if (total > JSONL_FILE_LIMIT.max)
      throw new RangeError(
        `${label}: ${path}: ${overLimitMessage('size', total, JSONL_FILE_LIMIT)} (a dataset)`,
      );
    return names.map((f) => ({
      name: names.length === 1 && f === path ? f : relative(path, f),
      bytes: new Uint8Array(readFileSync(f)),
    }));
  } catch (e) {
    if (e instanceof RangeError) throw e;
    throw new Error(
      `${label}: cannot read the dataset ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      { cause: e },
    );
  }
}

/** The importer over files read, its errors beginning with `label`. */
export async function importOrExplain(
  files: readonly DatasetFile[],
  label: string,
  columns: string,
  kind: 'prompts' | 'sft',
): Promise<ImportedDataset> {
  try {
    return await (kind === 'prompts' ? importPromptDataset : importSftDataset)(files, { columns });
  } catch (e) {
    throw new Error(`${label}: ${(e as Error).message}`, { cause: e });
  }
}

/** Reads a prompt set (the jsonl task's text) from a file or folder; errors begin with `label`. */
export function readPromptDataset(
  path: string,
  label: string,
  columns = '',
): Promise<ImportedDataset> {
  return importOrExplain(datasetFiles(path, label), label, columns, 'prompts');
}

/** Reads an SFT set (parseSftJsonl's text) from a file or folder; errors begin with `label`. */
export function readSftDataset(
  path: string,
  label: string,
  columns = '',
): Promise<ImportedDataset> {
  return importOrExplain(datasetFiles(path, label), label, columns, 'sft');
}

/** What the import found, for the log: the layout, the mapping and the rows skipped. */
export function describeImport(path: string, d: ImportedDataset): string[] {
  const lines = [
    `${path}: ${d.format}, ${d.rowCount} rows, layout ${d.layout} (${formatColumnMapping(d.mapping) || 'as given'})`,
  ];
  if (d.issues.length)
    lines.push(`${d.issues.length} rows skipped: ${describeRowIssues(d.issues, 10)}`);
  return lines;
}

/** `--column role=col` flags (repeatable) as the `columns` option's text. */
export const columnsFlag = (values: readonly string[] | undefined): string =>
  (values ?? []).join(',');

/**
 * `--dataset <path> [--column r=c …] [--checker c]` as config overrides: task 'jsonl' with the
 * path (absolute, so the stored config finds it from anywhere), the mapping and the checker (the
 * layout's when --checker is not given), and the text read, so it is read once.
 */
export async function datasetOverrides(
  flags: ReadonlyMap<string, readonly string[]>,
): Promise<{ task: 'jsonl'; taskOptions: Record<string, unknown>; text: string } | null> {
  const path = flags.get('dataset')?.[0];
  if (path === undefined) {
    for (const f of ['column', 'checker'])
      if (flags.has(f))
        throw new Error(
          `--${f} applies to --dataset: give the dataset with --dataset <file|folder>`,
        );
    return null;
  }
  const checker = flags.get('checker')?.[0];
  if (checker !== undefined && !(JSONL_CHECKERS as readonly string[]).includes(checker))
    throw new Error(`--checker must be one of ${JSONL_CHECKERS.join(', ')}, got '${checker}'`);
  const file = resolve(path);
  const columns = columnsFlag(flags.get('column'));
  const d = await readPromptDataset(file, '--dataset', columns);
  for (const line of describeImport(path, d)) console.log(line);
  const taskOptions: Record<string, unknown> = { path: file, columns };
  const chosen = checker ?? d.checker;
  if (chosen) taskOptions.checker = chosen;
  return { task: 'jsonl', taskOptions, text: d.text };
}
