// Running the built command line (a `vite build --mode cli` output folder) as child processes in
// kernel tests: two at a time (two cores; each process is mostly one thread compiling kernels),
// output collected, a hang stopped after 4 minutes. Used by cli-kill and cli-parity.
import { spawn } from 'node:child_process';

export interface CliRun {
  status: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
}

const SLOTS = 2;
let busy = 0;
const queue: (() => void)[] = [];
async function slot<T>(f: () => Promise<T>): Promise<T> {
  while (busy >= SLOTS) await new Promise<void>((wake) => queue.push(wake));
  busy += 1;
  try {
    return await f();
  } finally {
    busy -= 1;
    queue.shift()?.();
  }
}

/** Runs `<build>/<name>.js args` with `env` added to this process's environment. */
export function runBuiltCli(
  build: string,
  name: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<CliRun> {
  return slot(
    () =>
      new Promise<CliRun>((done, fail) => {
        const child = spawn(process.execPath, [`${build}/${name}.js`, ...args], {
          env: { ...process.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        const timer = setTimeout(() => child.kill('SIGTERM'), 240_000);
        child.on('error', fail);
        child.on('close', (status, signal) => {
          clearTimeout(timer);
          done({ status, signal, out, err });
        });
      }),
  );
}
