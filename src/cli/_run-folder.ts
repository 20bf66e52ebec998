// The files of a run folder that must stay consistent whatever happens to the process: folders
// (checkpoint-<step>/, best-model/) replaced atomically, leftovers of an interrupted replacement
// recovered on the next start, and the per-step logs (metrics.jsonl, samples.jsonl, evals.jsonl)
// cut back to a resumed checkpoint's step so that no step appears twice.
//
// Replacing a folder is four steps, each of which leaves a recoverable state if the process dies
// right after it:
//   1. write every file into `<dir>.partial`      (dies: <dir> untouched, .partial is junk)
//   2. rename `<dir>` aside to `<dir>.old`         (dies: <dir> missing, .old is the good copy)
//   3. rename `<dir>.partial` to `<dir>`           (dies: <dir> new and complete, .old is junk)
//   4. remove `<dir>.old`
// recoverRunFolder undoes or finishes each of these states; a rename is atomic on one file system.
import * as nodeFs from 'node:fs';
import { dirname, join } from 'node:path';

/** The file-system calls the replacement makes (tests inject a failure between them). */
export type FolderFs = Pick<
  typeof nodeFs,
  'existsSync' | 'mkdirSync' | 'renameSync' | 'rmSync' | 'writeFileSync'
>;

export const PARTIAL_SUFFIX = '.partial';
export const ASIDE_SUFFIX = '.old';

/** Writes `files` as folder `dir`, visible only once complete; the previous folder of that name
 * stays in place (or aside, recoverably) until the new one is. */
export function writeFolderAtomically(
  dir: string,
  files: ReadonlyMap<string, Uint8Array>,
  fs: FolderFs = nodeFs,
): void {
  const partial = dir + PARTIAL_SUFFIX;
  const aside = dir + ASIDE_SUFFIX;
  fs.rmSync(partial, { recursive: true, force: true });
  fs.mkdirSync(partial, { recursive: true });
  for (const [name, bytes] of files) {
    // A name may hold a subfolder (a LoRA export's adapter/): part of the same replacement.
    if (name.includes('/')) fs.mkdirSync(dirname(join(partial, name)), { recursive: true });
    fs.writeFileSync(join(partial, name), bytes);
  }
  // A leftover .old beside a complete folder is from an earlier finished replacement.
  if (fs.existsSync(dir)) {
    fs.rmSync(aside, { recursive: true, force: true });
    fs.renameSync(dir, aside);
  }
  fs.renameSync(partial, dir);
  fs.rmSync(aside, { recursive: true, force: true });
}

/** The folders of a run folder this command replaces atomically. */
const REPLACED = /^(checkpoint-\d+|best-model)$/;

/**
 * Finishes or undoes interrupted replacements under `runDir` (see the header): a `.old` whose
 * folder is missing is moved back, a `.old` beside its folder and every `.partial` are removed.
 * Only this command's folder names are touched. Returns one line per action, for the log.
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
    if (!REPLACED.test(name.slice(0, -PARTIAL_SUFFIX.length))) continue;
    const partial = join(runDir, name);
    fs.rmSync(partial, { recursive: true, force: true });
    actions.push(`removed ${partial} (an interrupted save)`);
  }
  return actions;
}

/** The logs with one row per step (or per evaluation), each a JSON object with a `step`. */
export const STEP_LOGS = ['metrics.jsonl', 'samples.jsonl', 'evals.jsonl'] as const;

/**
 * Keeps the rows of `runDir`'s step logs up to `step` (a resumed checkpoint's): the steps after it
 * are trained again, so their old rows would appear twice. A line that does not parse (the torn
 * last line of a killed run) is dropped too. Each file is rewritten through a temporary file and a
 * rename, so a kill leaves either the old or the new file. Returns how many rows each file lost.
 */
export function truncateStepLogs(runDir: string, step: number): Record<string, number> {
  const dropped: Record<string, number> = {};
  for (const file of STEP_LOGS) {
    const path = join(runDir, file);
    if (!nodeFs.existsSync(path)) continue;
    const lines = nodeFs.readFileSync(path, 'utf8').split('\n');
    const kept: string[] = [];
    let lost = 0;
    for (const line of lines) {
      if (line.trim() === '') continue;
      let row: unknown;
      try {
        row = JSON.parse(line);
      } catch {
        lost += 1;
        continue;
      }
      const s = (row as { step?: unknown } | null)?.step;
      if (typeof s === 'number' && s <= step) kept.push(line);
      else lost += 1;
    }
    if (lost === 0) continue;
    const tmp = `${path}.tmp`;
    nodeFs.writeFileSync(tmp, kept.map((l) => l + '\n').join(''));
    nodeFs.renameSync(tmp, path);
    dropped[file] = lost;
  }
  return dropped;
}
