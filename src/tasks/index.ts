// Task registry: name → option schema + factory. The config names a task and its options; the CLI,
// the UI and the TRL export create it here. Tasks never import the config (no cycle).

import { ARITHMETIC_DEFAULTS, createArithmeticTask } from './arithmetic';
import { COUNTDOWN_DEFAULTS, createCountdownTask } from './countdown';
import { createJsonlTask, JSONL_CHECKERS, JSONL_DEFAULTS } from './jsonl';
import { mixSeeds } from '../core/rng';
import { withoutHeldOut } from './traces';
import type { Problem, Task } from './types';

export type { ChatMessage, FormattedPrompt, Problem, PromptTemplate, Task } from './types';
export { PROMPT_TEMPLATES } from './types';
export { formatPrompt, R1_ZERO_SYSTEM, R1_ZERO_TEMPLATE } from './prompt';
export { verifyAnswer, type VerifierSpec } from './verify';

export interface TaskOptionSpec {
  name: string;
  type: 'int' | 'number' | 'string' | 'enum';
  default: number | string;
  help: string;
  min?: number;
  max?: number;
  values?: readonly string[];
}

export interface TaskSpec {
  name: string;
  description: string;
  options: readonly TaskOptionSpec[];
  /** `sources.text` is the dataset content for tasks that read a file (jsonl). */
  create(options: Record<string, unknown>, sources?: { text?: string }): Task;
}

export const TASKS = {
  countdown: {
    name: 'countdown',
    description: 'Countdown (TinyZero): reach the target with each given number once, + - * / ( ).',
    options: [
      {
        name: 'numbers',
        type: 'int',
        default: COUNTDOWN_DEFAULTS.numbers,
        min: 2,
        max: 8,
        help: 'how many numbers are given',
      },
      {
        name: 'minNumber',
        type: 'int',
        default: COUNTDOWN_DEFAULTS.minNumber,
        min: 1,
        help: 'smallest given number',
      },
      {
        name: 'maxNumber',
        type: 'int',
        default: COUNTDOWN_DEFAULTS.maxNumber,
        min: 1,
        help: 'largest given number',
      },
      {
        name: 'minTarget',
        type: 'int',
        default: COUNTDOWN_DEFAULTS.minTarget,
        min: 0,
        help: 'smallest target',
      },
      {
        name: 'maxTarget',
        type: 'int',
        default: COUNTDOWN_DEFAULTS.maxTarget,
        min: 0,
        help: 'largest target',
      },
      {
        name: 'excludeHeldOut',
        type: 'int',
        default: 0,
        min: 0,
        max: 1,
        help: "1: never train on the bundled model's held-out problems (its evaluation set)",
      },
    ],
    create: ({ excludeHeldOut, ...options }) => {
      const task = createCountdownTask(options);
      return excludeHeldOut ? withoutHeldOut(task) : task;
    },
  },
  arithmetic: {
    name: 'arithmetic',
    description: 'Multi-digit integer arithmetic (+ - *), exact answers.',
    options: [
      {
        name: 'digits',
        type: 'int',
        default: ARITHMETIC_DEFAULTS.digits,
        min: 1,
        max: 30,
        help: 'digits of each operand',
      },
      {
        name: 'operations',
        type: 'string',
        default: ARITHMETIC_DEFAULTS.operations,
        help: 'operators to draw from, a subset of "+-*"',
      },
    ],
    create: (options) => createArithmeticTask(options),
  },
  jsonl: {
    name: 'jsonl',
    description:
      'An imported dataset: JSONL ({"prompt","answer"} or {"messages":[…]} per line), or Parquet, CSV, JSON as downloaded from the Hub (src/tasks/datasets).',
    options: [
      {
        name: 'path',
        type: 'string',
        default: JSONL_DEFAULTS.path,
        help: 'dataset file or folder of shards: .jsonl, .parquet, .csv, .json (read by the CLI; the page imports it)',
      },
      {
        name: 'checker',
        type: 'enum',
        default: JSONL_DEFAULTS.checker,
        values: JSONL_CHECKERS,
        help: 'answer check: exact, numeric, choice or math (LaTeX answers, docs/math-checker.md)',
      },
      {
        name: 'tolerance',
        type: 'number',
        default: JSONL_DEFAULTS.tolerance,
        min: 0,
        help: 'absolute tolerance of the numeric checker',
      },
      {
        name: 'columns',
        type: 'string',
        default: JSONL_DEFAULTS.columns,
        help: "column mapping of a Parquet/CSV/JSON/JSONL file or folder read from path, e.g. 'prompt=question,answer=final' (empty: the layout's own)",
      },
    ],
    create(options, sources) {
      if (sources?.text === undefined) {
        throw new RangeError(
          `task 'jsonl' needs the dataset text: read taskOptions.path (${JSON.stringify(options.path ?? '')}) and pass it as sources.text`,
        );
      }
      return createJsonlTask(sources.text, options);
    },
  },
} satisfies Record<string, TaskSpec>;

export type TaskName = keyof typeof TASKS;
export const TASK_NAMES = Object.keys(TASKS) as TaskName[];

export function isTaskName(name: unknown): name is TaskName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(TASKS, name);
}

/** Validates a task's options (unknown keys and wrong types name the key) and fills the defaults. */
export function resolveTaskOptions(
  task: string,
  options: unknown,
  where = 'taskOptions',
): Record<string, number | string> {
  if (!isTaskName(task))
    throw new RangeError(`unknown task '${task}' (known: ${TASK_NAMES.join(', ')})`);
  const spec: TaskSpec = TASKS[task];
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${where} must be an object, got ${JSON.stringify(options)}`);
  }
  const given = options as Record<string, unknown>;
  const known = new Set(spec.options.map((o) => o.name));
  for (const key of Object.keys(given)) {
    if (!known.has(key)) {
      throw new RangeError(
        `${where}.${key}: unknown option of task '${task}' (known: ${[...known].join(', ')})`,
      );
    }
  }
  const out: Record<string, number | string> = {};
  for (const o of spec.options) {
    const v = given[o.name] === undefined ? o.default : given[o.name];
    const bad = (what: string) =>
      new TypeError(`${where}.${o.name} must be ${what}, got ${JSON.stringify(v)}`);
    if (o.type === 'int' || o.type === 'number') {
      if (typeof v !== 'number' || !Number.isFinite(v)) throw bad('a number');
      if (o.type === 'int' && !Number.isInteger(v)) throw bad('an integer');
      if (o.min !== undefined && v < o.min) throw bad(`≥ ${o.min}`);
      if (o.max !== undefined && v > o.max) throw bad(`≤ ${o.max}`);
    } else if (typeof v !== 'string') {
      throw bad('a string');
    } else if (o.type === 'enum' && !o.values?.includes(v)) {
      throw bad(`one of ${o.values?.join(', ')}`);
    }
    out[o.name] = v as number | string;
  }
  return out;
}

export function createTask(name: string, options: unknown = {}, sources?: { text?: string }): Task {
  const resolved = resolveTaskOptions(name, options);
  return (TASKS[name as TaskName] as TaskSpec).create(resolved, sources);
}

/** Salt of the eval stream, so held-out prompts never share the training stream's draws. */
export const EVAL_SEED_SALT = 0x0e7a1;

/**
 * How many training problems the held-out problems are kept disjoint from by construction (the
 * whole training stream of every run up to this size, as before streams were drawn on demand);
 * past it, the stream skips problems equal to a held-out one instead. Generating this many
 * Countdown problems takes about a second on a slow machine.
 */
export const TRAIN_LOOKAHEAD = 32_768;

/** A run's training problems, produced as they are asked for (a long run does not build all of
 * them up front). */
export interface ProblemStream {
  /** Positions in one pass: the trainCount asked for (a trainer cycles past it). */
  readonly length: number;
  /** The problem at position i ≥ 0; the same (task, seed, counts) always give the same one. */
  at(i: number): Problem;
}

/**
 * Training problems as a stream and the held-out problems: the task's own split when it has one
 * (datasets hold lines out), otherwise two seeded streams, with eval questions that also appear
 * among the first TRAIN_LOOKAHEAD training problems removed, and later training problems equal to
 * a held-out one skipped. Position i is trainEvalProblems(…).train[i].
 */
export function trainEvalStream(
  task: Task,
  seed: number,
  trainCount: number,
  evalCount: number,
): { train: ProblemStream; eval: Problem[] } {
  if (task.splits) {
    const draw = (n: number) => task.splits!(seed, n, evalCount).train;
    return { train: lazyStream(trainCount, draw), eval: task.splits(seed, 0, evalCount).eval };
  }
  const window = Math.min(trainCount, TRAIN_LOOKAHEAD);
  const head = task.generate(seed, window);
  const seen = new Set(head.map((p) => p.question));
  const candidates = task.generate(mixSeeds(seed, EVAL_SEED_SALT), evalCount * 2 + 8);
  const evalProblems = candidates.filter((p) => !seen.has(p.question)).slice(0, evalCount);
  const held = new Set(evalProblems.map((p) => p.question));
  // generate() is prefix-stable: a longer draw repeats the head, then continues the same stream.
  const draw = (n: number) => {
    if (n <= window) return head.slice(0, n);
    const more = task.generate(seed, n).slice(window);
    return [...head, ...more.filter((p) => !held.has(p.question))];
  };
  return { train: lazyStream(trainCount, draw, head), eval: evalProblems };
}

/** A stream over a prefix-stable draw(n), grown by doubling (amortised O(1) per problem). */
function lazyStream(
  length: number,
  draw: (n: number) => Problem[],
  initial: Problem[] = [],
): ProblemStream {
  let drawn = initial;
  let asked = initial.length;
  return {
    length,
    at(i) {
      if (!(Number.isInteger(i) && i >= 0)) throw new RangeError(`no training problem at ${i}`);
      while (drawn.length <= i) {
        asked = Math.max(asked * 2, i + 1, 64);
        const next = draw(asked);
        if (next.length <= drawn.length && asked > 4 * (i + 1) + 1024)
          throw new Error('the task produced no further training problems');
        drawn = next;
      }
      return drawn[i];
    },
  };
}

/**
 * Training and held-out problems for a run as arrays (the TRL export writes them out): the
 * first trainCount of trainEvalStream's training stream and its held-out problems.
 */
export function trainEvalProblems(
  task: Task,
  seed: number,
  trainCount: number,
  evalCount: number,
): { train: Problem[]; eval: Problem[] } {
  const { train, eval: held } = trainEvalStream(task, seed, trainCount, evalCount);
  return { train: Array.from({ length: trainCount }, (_, i) => train.at(i)), eval: held };
}
