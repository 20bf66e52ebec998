// Nothing lost on a kill or a full disk: `npm run recipe` (SFT 1 step → GRPO 2 steps, a checkpoint
// every step) and `npm run train` (2 steps, a checkpoint every step), built and run as processes
// on the tiny Hugging Face folder, are killed (SIGKILL, by the test hook of src/cli/_atomic-files.ts)
// right after each of their write operations in turn, resumed, and must end exactly as the
// uninterrupted run: the same metrics rows (wall-clock fields aside), the same state, the same
// files, the same bytes of every weights and optimizer file. A full disk (a small tmpfs, or the
// ENOSPC hook where mounting is not allowed) and a row torn by one end with a message naming the
// file and resume to the same end.
//
// The uninterrupted run's write log lists its operations W[1..T]. A chain of processes covers a
// list of them: the first, a fresh run, dies after operation W[t1] (GRPO_TEST_KILL_AT_WRITE); each
// next one resumes the folder and dies after the first operation labelled as the next target's
// (GRPO_TEST_KILL_AFTER_WRITE); the last resumes to the end. A resume redoes W from its resume
// point (its newest checkpoint or state, or the start) on; where the target's label does not come
// earlier in that stretch, the process dies exactly where the uninterrupted run wrote the target
// (each process's own write log is checked for it). Every kill thus costs one process, not a killed
// run plus a resumed one.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, type ExpectStatic } from 'vitest';
import { tinyHfFolder } from '../support/tiny-hf-model';
import { runBuiltCli, type CliRun } from '../support/cli-process';

const work = mkdtempSync(join(tmpdir(), 'grpo-cli-kill-'));
// A build of its own: the other command-line tests rebuild dist-cli/ (emptying it first), which
// would pull the files from under these processes should they run at the same time.
const BUILD = 'node_modules/.cache/grpo-cli-kill';
const modelDir = join(work, 'model');
const recipeFile = join(work, 'recipe.json');
const rewardFile = join(work, 'digits.js');

// A reward that varies between completions of the random tiny model (format and accuracy are 0 for
// all of them), so that GRPO's updates move the weights and a wrong resume shows in them.
const DIGITS =
  'function reward({ completion }) { return (completion.match(/[0-9]/g) || []).length; }';

const RECIPE_ARGS = (dir: string) => [recipeFile, '--model', modelDir, '--out', dir];
const TRAIN_ARGS = (dir: string) => [
  ...['--model', modelDir, '--task', 'countdown'],
  ...['--task-options', '{"numbers":3,"maxNumber":10,"maxTarget":100}'],
  ...['--per-step-prompts', '1', '--num-generations', '4', '--max-completion-length', '8'],
  ...['--max-prompt-length', '120', '--eval-prompts', '0', '--learning-rate', '1e-2'],
  ...['--steps', '2', '--save-steps', '1', '--reward-file', `digits=${rewardFile}`],
  ...['--out', dir],
];

interface Command {
  name: 'recipe' | 'train';
  fresh(dir: string): string[];
  resume(dir: string): string[];
  /** The file whose rename makes a folder resumable (before it, the run starts again). */
  first: string;
}
const RECIPE: Command = {
  name: 'recipe',
  fresh: RECIPE_ARGS,
  resume: (dir) => ['--resume', dir, '--model', modelDir],
  first: 'recipe.json',
};
const TRAIN: Command = {
  name: 'train',
  fresh: TRAIN_ARGS,
  resume: (dir) => ['--resume', dir],
  first: 'config.json',
};

interface Ran extends CliRun {
  /** The process's write operations, `<op> <path>` (its GRPO_TEST_WRITE_LOG). */
  ops: string[];
}

let runs = 0;
/** Runs the built command `name` with `env` added, and reads back its write log. */
async function cli(name: string, args: string[], env: Record<string, string> = {}): Promise<Ran> {
  const log = join(work, `ops-${++runs}.log`);
  const r = await runBuiltCli(BUILD, name, args, { GRPO_TEST_WRITE_LOG: log, ...env });
  const ops = existsSync(log)
    ? readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.replace(/^\d+ /, ''))
    : [];
  return { ...r, ops };
}

/** A write log with the run folder's path made `<run>`, and back. */
const generic = (ops: string[], dir: string) => ops.map((op) => op.split(dir).join('<run>'));
const inRun = (label: string, dir: string) => label.split('<run>').join(dir);

const WALL_CLOCK = new Set(['step_time', 'tokens_per_second']);
const timeless = (row: Record<string, unknown> | undefined) =>
  row && Object.fromEntries(Object.entries(row).filter(([k]) => !WALL_CLOCK.has(k)));
const jsonl = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => timeless(JSON.parse(l) as Record<string, unknown>));

/** Every file under `dir` (relative paths), and the SHA-256 of each weights or optimizer file. */
function files(dir: string): { names: string[]; tensors: Record<string, string> } {
  const names: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else names.push(relative(dir, path));
    }
  };
  walk(dir);
  names.sort();
  const tensors = Object.fromEntries(
    names
      .filter((n) => n.endsWith('.safetensors'))
      .map((n) => [
        n,
        createHash('sha256')
          .update(readFileSync(join(dir, n)))
          .digest('hex'),
      ]),
  );
  return { names, tensors };
}

/** What a finished recipe folder must hold, wall-clock fields aside. */
function recipeOutcome(dir: string) {
  const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as {
    timeline: { metrics: Record<string, unknown> }[];
    results: { seconds: number; last?: Record<string, unknown> }[];
  };
  return {
    metrics: jsonl(join(dir, 'metrics.jsonl')),
    state: {
      ...state,
      timeline: state.timeline.map((r) => ({ ...r, metrics: timeless(r.metrics) })),
      results: state.results.map((r) => ({ ...r, seconds: 0, last: timeless(r.last) })),
    },
    ...files(dir),
  };
}

/** What a finished train folder must hold, wall-clock fields aside. */
function trainOutcome(dir: string) {
  return {
    metrics: jsonl(join(dir, 'metrics.jsonl')),
    samples: readFileSync(join(dir, 'samples.jsonl'), 'utf8'),
    config: readFileSync(join(dir, 'config.json'), 'utf8'),
    ...files(dir),
  };
}

interface Reference {
  dir: string;
  /** W: its write operations with the folder as `<run>`. */
  ops: string[];
}
let recipeRef: Reference;
let trainRef: Reference;

/** A resume's own writes before it redoes any: cutting a step log back to the checkpoint. */
const RECOVERY = /^(write|fsync|rename) <run>\/(metrics|samples|evals)\.jsonl$/;

/**
 * Kills `cmd` after each write operation W[t], t in `targets` (ascending), in folder `dir` (see the
 * header), then resumes it to the end; returns the last process. Each killed process's writes must
 * be recovery writes, then W[s..t] for some s (a folder replacement's move aside apart): proof
 * that it died where the uninterrupted run wrote W[t]. With `refusal`, a kill before the run's
 * first file is in place is followed by a --resume that must refuse with that message.
 */
async function chain(
  expect: ExpectStatic,
  cmd: Command,
  ref: Reference,
  targets: number[],
  dir: string,
  refusal: string | null = null,
): Promise<Ran> {
  const commit = ref.ops.indexOf(`rename <run>/${cmd.first}`) + 1;
  expect(commit).toBeGreaterThan(0);
  let started = false;
  for (const [i, t] of targets.entries()) {
    const label = inRun(ref.ops[t - 1], dir);
    const env: Record<string, string> =
      i === 0 ? { GRPO_TEST_KILL_AT_WRITE: String(t) } : { GRPO_TEST_KILL_AFTER_WRITE: label };
    const r = await cli(cmd.name, started ? cmd.resume(dir) : cmd.fresh(dir), env);
    const what = `${cmd.name}: kill after write ${t} (${ref.ops[t - 1]})`;
    expect(r.signal, `${what}: ${r.err}`).toBe('SIGKILL');
    const ops = generic(r.ops, dir).filter((op) => !op.startsWith('aside '));
    const redo = ops.filter((op) => !RECOVERY.test(op));
    expect(ops.slice(0, ops.length - redo.length), what).toEqual(
      ops.filter((op) => RECOVERY.test(op)),
    );
    expect(redo, what).toEqual(ref.ops.slice(t - redo.length, t));
    // Before its first file is renamed into place the run has not started: it starts again.
    started = t >= commit;
    if (!started && refusal !== null) {
      const refused = await cli(cmd.name, cmd.resume(dir));
      expect(refused.status, what).toBe(1);
      expect(refused.err, what).toContain(refusal);
      refusal = null;
    }
  }
  const end = await cli(cmd.name, started ? cmd.resume(dir) : cmd.fresh(dir));
  expect(end.status, `${cmd.name}: resume after write ${targets.at(-1)}: ${end.err}`).toBe(0);
  return end;
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

beforeAll(async () => {
  execFileSync(
    'npx',
    ['vite', 'build', '--mode', 'cli', '--logLevel', 'warn', '--outDir', BUILD, '--emptyOutDir'],
    { stdio: 'inherit' },
  );
  (await tinyHfFolder({ maxPositions: 256 })).writeTo(modelDir);
  writeFileSync(rewardFile, DIGITS);
  writeFileSync(
    recipeFile,
    JSON.stringify({
      name: 'kill-test',
      seed: 1,
      stages: [
        {
          kind: 'sft',
          name: 'cold-start',
          data: { coldStart: { count: 4 } },
          options: {
            perDeviceTrainBatchSize: 4,
            numTrainEpochs: 1,
            learningRate: 3e-3,
            maxLength: 96,
            saveSteps: 1,
          },
        },
        {
          kind: 'grpo',
          name: 'rl',
          options: {
            steps: 2,
            saveSteps: 1,
            numGenerations: 4,
            perStepPrompts: 1,
            maxCompletionLength: 8,
            learningRate: 0.01,
            rewards: ['custom:digits'],
            customRewards: { digits: DIGITS },
          },
        },
      ],
    }),
  );
  // The uninterrupted runs, side by side.
  const [recipe, train] = await Promise.all(
    [
      [RECIPE, join(work, 'recipe-ref')],
      [TRAIN, join(work, 'train-ref')],
    ].map(async ([cmd, dir]) => {
      const r = await cli((cmd as Command).name, (cmd as Command).fresh(dir as string));
      expect(r.status, r.err).toBe(0);
      return { dir: dir as string, ops: generic(r.ops, dir as string) };
    }),
  );
  recipeRef = recipe;
  trainRef = train;
}, 300_000);

// Concurrent tests: the chains and the full-disk runs share the two process slots, kept busy.
describe(
  'a kill or a full disk at any write resumes to the same end',
  { timeout: 900_000, concurrent: true },
  () => {
    const small = join(work, 'small-disk');
    let mounted = false;
    afterAll(() => {
      if (mounted) execFileSync('umount', [small]);
    });

    it('the uninterrupted runs write what the chains expect', ({ expect }) => {
      // The recipe: recipe.json, then per step its metrics row before its checkpoint, a stage's
      // state.json after its last checkpoint, the final model before the last state.json.
      const kinds = (ops: string[]) => ops.map((op) => op.replace(/ .*\/([^/]+\/?)$/, ' $1'));
      expect(kinds(recipeRef.ops)).toEqual([
        ...['write recipe.json', 'fsync recipe.json', 'rename recipe.json'],
        ...['append metrics.jsonl', 'append-fsync metrics.jsonl'],
        ...['write checkpoint-1/', 'fsync checkpoint-1/', 'rename checkpoint-1/'],
        ...['write state.json', 'fsync state.json', 'rename state.json'],
        ...['append metrics.jsonl', 'append-fsync metrics.jsonl'],
        ...['write checkpoint-1/', 'fsync checkpoint-1/', 'rename checkpoint-1/'],
        ...['append metrics.jsonl', 'append-fsync metrics.jsonl'],
        ...['write checkpoint-2/', 'fsync checkpoint-2/', 'rename checkpoint-2/'],
        ...['write final-model/', 'fsync final-model/', 'rename final-model/'],
        ...['write state.json', 'fsync state.json', 'rename state.json'],
      ]);
      expect(kinds(trainRef.ops)).toEqual([
        ...['write config.json', 'fsync config.json', 'rename config.json'],
        ...[1, 2].flatMap((step) => [
          ...['append metrics.jsonl', 'append-fsync metrics.jsonl'],
          ...['append samples.jsonl', 'append-fsync samples.jsonl'],
          ...[`write checkpoint-${step}/`, `fsync checkpoint-${step}/`],
          `rename checkpoint-${step}/`,
        ]),
      ]);
      // GRPO moved the weights (a resume from the wrong checkpoint would show in them).
      for (const rows of [
        jsonl(join(recipeRef.dir, 'metrics.jsonl')).filter((r) => r!.stage === 1),
        jsonl(join(trainRef.dir, 'metrics.jsonl')),
      ])
        expect(rows.map((r) => (r!.grad_norm as number) > 0)).toEqual([true, true]);
    });

    it('npm run recipe: killed after each of its writes, resumed, ends as the uninterrupted run', async ({
      expect,
    }) => {
      const T = recipeRef.ops.length;
      const half = Math.ceil(T / 2);
      const a = join(work, 'recipe-a');
      const b = join(work, 'recipe-b');
      // Two chains side by side: writes 1..half and half+1..T.
      const [endA, endB] = await Promise.all([
        chain(
          expect,
          RECIPE,
          recipeRef,
          range(1, half),
          a,
          'has no recipe.json: the run was stopped before it started',
        ),
        chain(expect, RECIPE, recipeRef, range(half + 1, T), b),
      ]);
      const expected = recipeOutcome(recipeRef.dir);
      expect(recipeOutcome(a)).toEqual(expected);
      expect(recipeOutcome(b)).toEqual(expected);
      expect(endA.out).toMatch(/resuming 'kill-test' at stage 2\/2/);
      // The last kill of chain b came after the recipe was done: its resume had nothing to do.
      expect(endB.out).toContain('(all stages done)');
      expect(endB.ops).toEqual([]);
    });

    it('npm run train: killed after its writes, resumed with --resume <run>, ends as the uninterrupted run', async ({
      expect,
    }) => {
      const dir = join(work, 'train-chain');
      // Every write with GRPO_KILL_TEST_EVERY_WRITE=1 (10 processes more); by default one kill
      // per kind of state a resume meets: before config.json is in place (refused: start again),
      // config.json alone (starts over from it), a step's rows and its checkpoint folder written
      // but not renamed (starts over: rows cut, folder removed), checkpoint-1 just renamed, the
      // next step's row after it (resumes from it, the row cut), the next folder not renamed, the
      // end. (Each target's label must not come earlier in what the resume before it redoes:
      // checkpoint-1's rename keeps the step 2 row from matching step 1's.)
      const targets = process.env.GRPO_KILL_TEST_EVERY_WRITE
        ? range(1, trainRef.ops.length)
        : [1, 3, 9, 10, 12, 16, 17];
      const end = await chain(
        expect,
        TRAIN,
        trainRef,
        targets,
        dir,
        'the run was stopped before it started',
      );
      expect(end.out).toMatch(/resumed from .*checkpoint-2 at step 2/);
      expect(trainOutcome(dir)).toEqual(trainOutcome(trainRef.dir));
    });

    it('the recipe on a disk that fills up mid-run (a 400 KiB tmpfs, or the ENOSPC hook)', async ({
      expect,
    }) => {
      mkdirSync(small);
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=400k', 'tmpfs', small], {
          stdio: 'pipe',
        });
        mounted = true;
      } catch (err) {
        // Not root (or no tmpfs): the hook fails the write of the last GRPO checkpoint instead.
        console.warn(`cannot mount a tmpfs (${(err as Error).message}): using the ENOSPC hook`);
      }
      const dir = join(small, 'run');
      const env: Record<string, string> = mounted
        ? {}
        : {
            GRPO_TEST_ENOSPC_AT_WRITE: String(
              recipeRef.ops.indexOf('write <run>/1-rl/checkpoint-2/') + 1,
            ),
          };
      const full = await cli('recipe', RECIPE_ARGS(dir), env);
      expect(full.status, full.out + full.err).toBe(1);
      expect(full.err).toMatch(/^disk full \((ENOSPC|EDQUOT): no space left on the device\)/);
      const file = /while writing (\S+);/.exec(full.err)?.[1] ?? '';
      expect(file.startsWith(dir + '/'), full.err).toBe(true);
      expect(full.err).toContain(`npm run recipe -- --resume ${dir}`);
      // The disk filled after the first stage: a checkpoint and state.json made it, whole.
      expect(existsSync(join(dir, '0-cold-start', 'checkpoint-1', 'recipe_state.json'))).toBe(true);
      expect(JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')).stageIndex).toBe(1);
      // The partial write was removed, giving its space back.
      expect(files(dir).names.filter((n) => /\.(partial|old)(\/|$)/.test(n))).toEqual([]);
      if (mounted) execFileSync('mount', ['-o', 'remount,size=16m', small]);
      const resumed = await cli('recipe', RECIPE.resume(dir));
      expect(resumed.status, resumed.err).toBe(0);
      expect(recipeOutcome(dir)).toEqual(recipeOutcome(recipeRef.dir));
    });

    it('a metrics row torn by a full disk is dropped and reported on resume', async ({
      expect,
    }) => {
      const dir = join(work, 'torn');
      const lastRow = recipeRef.ops.lastIndexOf('append <run>/metrics.jsonl') + 1;
      const full = await cli('recipe', RECIPE_ARGS(dir), {
        GRPO_TEST_ENOSPC_AT_WRITE: String(lastRow),
      });
      expect(full.status).toBe(1);
      expect(full.err).toContain(`while writing ${join(dir, 'metrics.jsonl')}`);
      const text = readFileSync(join(dir, 'metrics.jsonl'), 'utf8');
      expect(text.endsWith('\n')).toBe(false);
      expect(text.split('\n')).toHaveLength(3);
      const resumed = await cli('recipe', RECIPE.resume(dir));
      expect(resumed.status, resumed.err).toBe(0);
      expect(resumed.out).toContain('metrics.jsonl: removed a torn last line');
      expect(recipeOutcome(dir)).toEqual(recipeOutcome(recipeRef.dir));
    });
  },
);
