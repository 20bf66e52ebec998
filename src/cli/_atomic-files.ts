// Every write the command line makes into a run folder goes through this module, so that a kill
// (SIGKILL, a crash, a power cut) or a full disk at any moment leaves files that are each either
// their old or their new whole version, never empty or torn:
//   writeFileAtomic(path, bytes)    writes `<path>.partial`, fsyncs it, renames it over `path`,
//                                   fsyncs the directory (state.json, recipe.json, config.json, …)
//   writeFolderAtomic(dir, files)   writes `<dir>.partial/`, fsyncs its files, moves an existing
//                                   `<dir>` aside to `<dir>.old`, renames the new one in, fsyncs the
//                                   parent, removes `.old` (checkpoint-N/, final-model/, …)
//   appendLine(path, line)          one write of `line\n`, then fsync (metrics.jsonl rows); a line
//                                   a kill or a full disk cuts short has no final newline, and
//                                   readJsonl reports it as torn instead of reading it as a row
// The leftovers of an interrupted write (`.partial`, `.old`) are recovered by _run-folder.ts.
// A full disk (ENOSPC, EDQUOT) is thrown as a DiskFullError that names the file; the partial
// file is removed so that the space it took is free again.
//
// Test hooks (environment variables, read once when the module loads; never set them in use):
//   GRPO_TEST_KILL_AT_WRITE=N        the process SIGKILLs itself right after its N-th write
//                                    operation. The operations are counted one by one: a file's
//                                    temp write, its fsync and its rename (with the directory
//                                    fsync); a folder's file writes, their fsync, the move aside of
//                                    the folder it replaces, its rename; an append's write and its
//                                    fsync. Removing leftovers is not counted.
//   GRPO_TEST_KILL_AFTER_WRITE=L     the same, right after the first operation whose label (as the
//                                    log below writes it: `<op> <path>`) is L: kills a resumed run
//                                    where the uninterrupted one wrote L
//   GRPO_TEST_ENOSPC_AT_WRITE=N      the N-th write operation fails as a full disk does: a data
//                                    write first writes half of its bytes (a torn file or line),
//                                    then throws an error shaped like Node's (code 'ENOSPC',
//                                    errno -28, syscall, path)
//   GRPO_TEST_WRITE_LOG=<file>       each operation appends `<n> <op> <path>` to <file>
// tests/kernels/cli-kill.test.ts kills `npm run recipe` after every operation, and `npm run train`
// after one of each kind (after every one with GRPO_KILL_TEST_EVERY_WRITE=1).
import * as nodeFs from 'node:fs';
import {
  appendFileSync,
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';

/** The suffix of a file or folder being written (removed by recovery, never read). */
export const PARTIAL_SUFFIX = '.partial';
/** The suffix of a folder moved aside while its replacement is renamed in. */
export const ASIDE_SUFFIX = '.old';

/** A write that failed because the disk (or the user's quota) is full. */
export class DiskFullError extends Error {
  constructor(
    readonly path: string,
    override readonly cause: NodeJS.ErrnoException,
    /** What the failed write left behind, for the message. */
    left = 'its previous version is intact',
  ) {
    super(`disk full (${cause.code}: no space left on the device) while writing ${path}; ${left}`, {
      cause,
    });
    this.name = 'DiskFullError';
  }
}

const FULL = new Set(['ENOSPC', 'EDQUOT']);

/** Whether `err` is a full disk (a DiskFullError or the file system's own error). */
export function isDiskFull(err: unknown): boolean {
  return (
    err instanceof DiskFullError || FULL.has(String((err as NodeJS.ErrnoException | null)?.code))
  );
}

const asDiskFull = (err: unknown, path: string, left?: string): unknown =>
  err instanceof DiskFullError || !isDiskFull(err)
    ? err
    : new DiskFullError(path, err as NodeJS.ErrnoException, left);

// ---- test hooks --------------------------------------------------------------------------------

const positive = (text: string | undefined): number | null =>
  text && /^[1-9][0-9]*$/.test(text) ? Number(text) : null;

const hooks = {
  killAt: positive(process.env.GRPO_TEST_KILL_AT_WRITE),
  killAfter: process.env.GRPO_TEST_KILL_AFTER_WRITE || null,
  enospcAt: positive(process.env.GRPO_TEST_ENOSPC_AT_WRITE),
  log: process.env.GRPO_TEST_WRITE_LOG || null,
};
let operations = 0;

/** An error as Node's fs throws it on a full disk. */
function enospc(syscall: string, path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOSPC: no space left on device, ${syscall} '${path}'`), {
    errno: -28,
    code: 'ENOSPC',
    syscall,
    path,
  });
}

/**
 * Runs one counted write operation `op` on `path`: `run` does it. Under the ENOSPC hook `partial`
 * (a data write's first half) runs instead and the operation throws, as on a disk that fills up
 * midway; an operation without data (fsync, rename) then fails without doing anything.
 */
function operation<T>(
  op: string,
  path: string,
  syscall: string,
  run: () => T,
  partial?: () => void,
): T {
  const n = ++operations;
  if (hooks.enospcAt === n) {
    partial?.();
    throw enospc(syscall, path);
  }
  const result = run();
  const label = `${op} ${path}`;
  if (hooks.log) appendFileSync(hooks.log, `${n} ${label}\n`);
  if (hooks.killAt === n || hooks.killAfter === label) process.kill(process.pid, 'SIGKILL');
  return result;
}

// ---- primitives --------------------------------------------------------------------------------

/** Writes all of `bytes` at the file's position (writeSync may write less than asked). */
function writeAll(fd: number, bytes: Uint8Array): void {
  let done = 0;
  while (done < bytes.byteLength) done += writeSync(fd, bytes, done, bytes.byteLength - done);
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Makes a rename or a new entry in `dir` durable. Some file systems refuse fsync on a folder
 * (EINVAL, EISDIR): there the rename is as durable as they make it. */
export function fsyncDir(dir: string): void {
  try {
    fsyncPath(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'EISDIR') throw err;
  }
}

const encode = (data: Uint8Array | string): Uint8Array =>
  typeof data === 'string' ? new TextEncoder().encode(data) : data;

/** Writes `data` as `path`: the old file or the new one is there whatever happens. */
export function writeFileAtomic(path: string, data: Uint8Array | string): void {
  const bytes = encode(data);
  const tmp = path + PARTIAL_SUFFIX;
  let fd: number | null = null;
  try {
    fd = openSync(tmp, 'w');
    const opened = fd;
    operation(
      'write',
      path,
      'write',
      () => writeAll(opened, bytes),
      () => writeAll(opened, bytes.subarray(0, bytes.byteLength >> 1)),
    );
    operation('fsync', path, 'fsync', () => fsyncSync(opened));
    closeSync(fd);
    fd = null;
    operation('rename', path, 'rename', () => {
      renameSync(tmp, path);
      fsyncDir(dirname(path));
    });
  } catch (err) {
    if (fd !== null) closeSync(fd);
    rmSync(tmp, { force: true });
    throw asDiskFull(err, path);
  }
}

/** Appends `line` and a newline in one write and makes it durable before returning. */
export function appendLine(path: string, line: string): void {
  const bytes = encode(line + '\n');
  const created = !existsSync(path);
  let fd: number | null = null;
  try {
    fd = openSync(path, 'a');
    const opened = fd;
    operation(
      'append',
      path,
      'write',
      () => writeAll(opened, bytes),
      () => writeAll(opened, bytes.subarray(0, bytes.byteLength >> 1)),
    );
    // Its own name: a resume's rewrite of the same file (writeFileAtomic) has a 'fsync' too.
    operation('append-fsync', path, 'fsync', () => {
      fsyncSync(opened);
      if (created) fsyncDir(dirname(path));
    });
  } catch (err) {
    throw asDiskFull(err, path, 'a partly written last line is dropped on resume');
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** The file-system calls writeFolderAtomic makes through its `fs` argument (unit tests inject a
 * failure between them); fsyncs and the counted hooks go to node:fs directly. */
export type FolderFs = Pick<
  typeof nodeFs,
  'existsSync' | 'mkdirSync' | 'renameSync' | 'rmSync' | 'writeFileSync'
>;

/**
 * Writes `files` (name → bytes; a name may hold a subfolder, as a LoRA export's adapter/) as folder
 * `dir`, visible only once complete. The steps, each leaving a state recovery handles
 * (_run-folder.ts recoverRunFolder):
 *   1. write every file into `<dir>.partial`, fsync them  (dies: <dir> untouched, .partial junk)
 *   2. move an existing `<dir>` aside to `<dir>.old`      (dies: <dir> missing, .old the good copy)
 *   3. rename `<dir>.partial` to `<dir>`, fsync the parent (dies: <dir> new, .old junk)
 *   4. remove `<dir>.old`
 */
export function writeFolderAtomic(
  dir: string,
  files: ReadonlyMap<string, Uint8Array>,
  fs: FolderFs = nodeFs,
): void {
  const partial = dir + PARTIAL_SUFFIX;
  const aside = dir + ASIDE_SUFFIX;
  try {
    fs.rmSync(partial, { recursive: true, force: true });
    fs.mkdirSync(partial, { recursive: true });
    // `half`: a disk that fills up midway; the file that crosses half of the folder is torn.
    const writeFiles = (half: boolean) => {
      let room = half ? [...files.values()].reduce((n, b) => n + b.byteLength, 0) >> 1 : Infinity;
      for (const [name, bytes] of files) {
        if (name.includes('/')) fs.mkdirSync(dirname(join(partial, name)), { recursive: true });
        const part = bytes.subarray(0, Math.min(room, bytes.byteLength));
        fs.writeFileSync(join(partial, name), part);
        room -= part.byteLength;
        if (part.byteLength < bytes.byteLength) return;
      }
    };
    operation(
      'write',
      `${dir}/`,
      'write',
      () => writeFiles(false),
      () => writeFiles(true),
    );
    operation('fsync', `${dir}/`, 'fsync', () => {
      const folders = new Set([partial]);
      for (const name of files.keys()) {
        fsyncPath(join(partial, name));
        folders.add(dirname(join(partial, name)));
      }
      for (const folder of folders) fsyncDir(folder);
    });
    // A leftover .old beside a complete folder is from an earlier finished replacement.
    if (fs.existsSync(dir)) {
      fs.rmSync(aside, { recursive: true, force: true });
      operation('aside', `${dir}/`, 'rename', () => fs.renameSync(dir, aside));
    }
    operation('rename', `${dir}/`, 'rename', () => {
      fs.renameSync(partial, dir);
      fsyncDir(dirname(dir));
    });
    fs.rmSync(aside, { recursive: true, force: true });
  } catch (err) {
    if (isDiskFull(err)) {
      // Free what the partial folder took; the old folder (or its .old) is left for recovery.
      nodeFs.rmSync(partial, { recursive: true, force: true });
      throw asDiskFull(err, `${dir}/`);
    }
    throw err;
  }
}

/** A JSONL file's complete rows, and what was not one. */
export interface JsonlRead {
  /** Each complete line that parses: its text (no newline) and value. */
  rows: { line: string; value: unknown }[];
  /** A last line without its newline (a write cut short), or null. */
  torn: string | null;
  /** Complete lines that do not parse. */
  unreadable: number;
}

/** Reads a JSONL file written with appendLine; a missing file has no rows. */
export function readJsonl(path: string): JsonlRead {
  const read: JsonlRead = { rows: [], torn: null, unreadable: 0 };
  if (!existsSync(path)) return read;
  const lines = nodeFs.readFileSync(path, 'utf8').split('\n');
  // After the last newline: '' for a complete file, else the start of a row that was cut off.
  const last = lines.pop()!;
  if (last !== '') read.torn = last;
  for (const line of lines) {
    if (line.trim() === '') continue;
    try {
      read.rows.push({ line, value: JSON.parse(line) });
    } catch {
      read.unreadable += 1;
    }
  }
  return read;
}
