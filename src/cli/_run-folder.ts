// The run folder as a whole, on top of _atomic-files.ts' single writes: leftovers of writes a kill
// interrupted are recovered on the next start (a folder moved aside comes back, `.partial` files
// and folders go), the newest complete checkpoint is found, and the per-step logs
// (metrics.jsonl, samples.jsonl, evals.jsonl) are cut back to a resumed checkpoint's step, so
// that no step appears twice and a row a kill tore is dropped (and said so) instead of read.
import * as nodeFs from 'node:fs';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHECKPOINT_FILES } from '../train/checkpoint';
import {
  ASIDE_SUFFIX,
  PARTIAL_SUFFIX,
  readJsonl,
  writeFileAtomic,
  writeFolderAtomic,
  type FolderFs,
} from './_atomic-files';

export { ASIDE_SUFFIX, PARTIAL_SUFFIX, type FolderFs };

/** Writes `files` as folder `dir`, visible only once complete (_atomic-files.ts). */
export const writeFolderAtomically = writeFolderAtomic;

/** The folders of a run folder the commands replace atomically. */
const REPLACED = /^(checkpoint-\d+|best-model|final-model)$/;
/** The files of a run folder (or a recipe stage's folder) the commands write atomically. */
const FILES = new Set([
  'config.json',
  'recipe.json',
  'state.json',
  'eval.json',
  'report.json',
  'sft.jsonl',
  'samples.jsonl',
  'metrics.jsonl',
  'evals.jsonl',
]);

/**
 * Finishes or undoes interrupted writes under `runDir`: a `.old` folder whose folder is missing is
 * moved back, a `.old` beside its folder and every `.partial` file or folder are removed. Only
 * the commands' own names are touched. Returns one line per action, for the log.
 */
export function recoverRunFolder(runDir: string, fs: typeof nodeFs = nodeFs): string[] {
  if (!fs.existsSync(runDir)) return [];
  const actions: string[] = [];
  const names = fs.readdirSync(runDir);
  for (const name of names) {
    if (!name.endsWith(ASIDE_SUFFIX)) continue;
    const base = name.slice(0, -ASIDE_SUFFIX.length);
    if (!REPLACED.test(base)) continue;
    const aside = join(runDir, name);
    const dir = join(runDir, base);
    if (fs.existsSync(dir)) {
      fs.rmSync(aside, { recursive: true, force: true });
      actions.push(`removed ${aside} (the replacement of ${base} had completed)`);
    } else {
      fs.renameSync(aside, dir);
      actions.push(`restored ${dir} from ${aside} (its replacement was interrupted)`);
    }
  }
  for (const name of names) {
    if (!name.endsWith(PARTIAL_SUFFIX)) continue;
    const base = name.slice(0, -PARTIAL_SUFFIX.length);
    const partial = join(runDir, name);
    if (REPLACED.test(base)) {
      fs.rmSync(partial, { recursive: true, force: true });
      actions.push(`removed ${partial} (an interrupted save)`);
    } else if (FILES.has(base) && fs.statSync(partial).isFile()) {
      fs.rmSync(partial, { force: true });
      actions.push(`removed ${partial} (an interrupted write of ${base})`);
    }
  }
  return actions;
}

/** Whether checkpoint folder `dir` has every file it was written with: trainer_state.json that
 * parses, the weights (a LoRA run's adapters) and the optimizer state, and `extra` files. */
export function checkpointComplete(dir: string, extra: readonly string[] = []): boolean {
  try {
    const state = JSON.parse(readFileSync(join(dir, CHECKPOINT_FILES.state), 'utf8')) as {
      config?: { usePeft?: unknown };
    };
    const weights =
      state.config?.usePeft === true ? CHECKPOINT_FILES.adapters : CHECKPOINT_FILES.weights;
    return [weights, CHECKPOINT_FILES.optimizer, ...extra].every((f) => existsSync(join(dir, f)));
  } catch {
    return false;
  }
}

/** The `checkpoint-<step>` folders of `dir`, newest first, with whether each is complete. */
export function checkpointFolders(
  dir: string,
  extra: readonly string[] = [],
): { dir: string; step: number; complete: boolean }[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((name) => /^checkpoint-(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ dir: join(dir, m[0]), step: Number(m[1]) }))
    .sort((a, b) => b.step - a.step)
    .map((c) => ({ ...c, complete: checkpointComplete(c.dir, extra) }));
}

/** The newest complete checkpoint folder of `dir`, or null; `log` hears of incomplete ones
 * skipped (folders are renamed into place complete: only damage or an old writer leaves one). */
export function newestCheckpoint(
  dir: string,
  log: (line: string) => void = () => {},
  extra: readonly string[] = [],
): string | null {
  for (const c of checkpointFolders(dir, extra)) {
    if (c.complete) return c.dir;
    log(`skipped ${c.dir}: incomplete (a file is missing or trainer_state.json does not parse)`);
  }
  return null;
}

/** The logs with one row per step (or per evaluation), each a JSON object with a `step`. */
export const STEP_LOGS = ['metrics.jsonl', 'samples.jsonl', 'evals.jsonl'] as const;

/** What cutting a step log back dropped. */
export interface Dropped {
  /** Rows of steps after the checkpoint's (trained again). */
  rows: number;
  /** A last line a kill or a full disk cut short. */
  torn: boolean;
  /** Complete lines that do not parse. */
  unreadable: number;
}

/** "removed 2 rows after step 3 (trained again), removed a torn last line (…)" and the like. */
export function droppedText(d: Dropped, step: number): string {
  const parts: string[] = [];
  if (d.rows > 0)
    parts.push(
      `removed ${d.rows} row${d.rows === 1 ? '' : 's'} after step ${step} (trained again)`,
    );
  if (d.unreadable > 0)
    parts.push(`removed ${d.unreadable} unreadable line${d.unreadable === 1 ? '' : 's'}`);
  if (d.torn) parts.push('removed a torn last line (a write cut short by a kill or a full disk)');
  return parts.join(', ');
}

/**
 * Keeps the rows of `runDir`'s step logs up to `step` (a resumed checkpoint's): the steps after it
 * are trained again, so their old rows would appear twice. A torn last line and a line that does
 * not parse are dropped too. Each file changed is rewritten atomically. Returns what each lost.
 */
export function cutStepLogs(runDir: string, step: number): Record<string, Dropped> {
  const dropped: Record<string, Dropped> = {};
  for (const file of STEP_LOGS) {
    const path = join(runDir, file);
    const read = readJsonl(path);
    const kept = read.rows.filter((r) => {
      const s = (r.value as { step?: unknown } | null)?.step;
      return typeof s === 'number' && s <= step;
    });
    const d = {
      rows: read.rows.length - kept.length,
      torn: read.torn !== null,
      unreadable: read.unreadable,
    };
    if (d.rows === 0 && !d.torn && d.unreadable === 0) continue;
    writeFileAtomic(path, kept.map((r) => r.line + '\n').join(''));
    dropped[file] = d;
  }
  return dropped;
}

/** cutStepLogs, counting every line each file lost (later rows, torn and unreadable lines). */
export function truncateStepLogs(runDir: string, step: number): Record<string, number> {
  return Object.fromEntries(
    Object.entries(cutStepLogs(runDir, step)).map(([file, d]) => [
      file,
      d.rows + d.unreadable + (d.torn ? 1 : 0),
    ]),
  );
}

/** Cuts the step logs back to `step` and logs what each lost (`<file>: removed …`). */
export function cutStepLogsLogged(runDir: string, step: number, log: (line: string) => void) {
  for (const [file, d] of Object.entries(cutStepLogs(runDir, step)))
    log(`${file}: ${droppedText(d, step)}`);
}
