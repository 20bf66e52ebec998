// The command lines' own flags (those that are not config options), one table per command: the
// table is what the command parses and what its --help prints, so the help promises exactly what
// is accepted (tests/unit/cli-help.test.ts checks both ways). Config options come from the config
// schema (src/grpo/config.ts). Also the end of every command: exit with its status once its
// resources are released.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  configHelp,
  ConfigError,
  resolveConfig,
  type Config,
  CONFIG_SCHEMA,
  MAX_STEPS,
} from '../grpo/config';
import { overLimitMessage, parseCount, type SizeLimit } from '../core/limits';

/**
 * A flag whose value is a count that sizes work or memory: an integer ≥ min and at most
 * limit.max, refused otherwise with src/core/limits.ts's message before anything runs. With
 * `list`, the value is comma-separated integers ≥ min (--seeds) and the limit bounds how many.
 */
export interface FlagCount {
  min: number;
  limit: SizeLimit;
  list?: boolean;
}

/** Completions sampled per prompt by an evaluation (--k): numGenerations' and rejection
 * sampling's bound. One decode holds (prompts per batch) × k sequences. */
const COMPLETIONS_PER_PROMPT: SizeLimit = { max: 1024, unit: 'completions per prompt' };
/** Seeds of a measurement: each one is a whole training run (minutes to hours). */
const SEEDS: SizeLimit = { max: 64, unit: 'seeds' };

export interface CommandFlag {
  /** Without the leading dashes. */
  name: string;
  /** The value's placeholder in the help. */
  value: string;
  help: string;
  /** May be given more than once (each value kept, in order). */
  repeatable?: boolean;
  /** A switch without a value (`--json`): parsed as 'true'. */
  boolean?: boolean;
  /** A count with a size limit (flagCount, flagCounts read it). */
  count?: FlagCount;
}

export interface Command {
  name: 'train' | 'eval' | 'aha' | 'plan' | 'sft' | 'recipe' | 'rejection-sample';
  summary: string;
  flags: readonly CommandFlag[];
}

export const TRAIN: Command = {
  name: 'train',
  summary:
    'Trains with GRPO on Node WebGPU and writes a run folder (config.json, metrics.jsonl, samples.jsonl, checkpoint-<step>/, eval.json).',
  flags: [
    {
      name: 'out',
      value: 'folder',
      help: 'run folder (default runs/<date>; with --resume, the checkpoint’s run folder)',
    },
    {
      name: 'config',
      value: 'file.json',
      help: 'config options as a JSON object; options given as flags win',
    },
    {
      name: 'resume',
      value: 'run/checkpoint-N | run',
      help: 'continue that checkpoint’s run exactly, or a run folder from its newest complete checkpoint (after a kill); only --steps may change',
    },
    {
      name: 'reward-file',
      value: 'id=file.js',
      help: 'a custom reward’s JavaScript source from a file: customRewards.<id>, added to --rewards as custom:<id> (repeatable)',
      repeatable: true,
    },
    {
      name: 'export',
      value: 'folder',
      help: 'after training, the final model as a Hugging Face folder there (LoRA: adapters merged in, and the PEFT adapter in <folder>/adapter/)',
    },
    {
      name: 'dataset',
      value: 'file|folder',
      help: 'train on a dataset as downloaded from the Hub (.parquet, .jsonl, .json, .csv, or a folder of shards): task jsonl, its layout recognised (gsm8k, MATH, TRL prompt/solution, Countdown-Tasks)',
    },
    {
      name: 'column',
      value: 'role=column',
      help: 'with --dataset: the column of a role (prompt, answer; nums, target), e.g. prompt=question (repeatable)',
      repeatable: true,
    },
    {
      name: 'checker',
      value: 'name',
      help: 'with --dataset: the answer check (default: the layout’s, else exact)',
    },
  ],
};

export const EVAL: Command = {
  name: 'eval',
  summary:
    "Evaluates a model (or a checkpoint folder) on the config's held-out prompts: greedy accuracy, pass@k, cons@k, format and reflection rates.",
  flags: [
    {
      name: 'compare',
      value: 'folder',
      help: 'a second model, evaluated on the same prompts and draws',
    },
    {
      name: 'k',
      value: 'samples',
      help: 'sampled completions per prompt (default 4)',
      count: { min: 0, limit: COMPLETIONS_PER_PROMPT },
    },
    { name: 'json', value: 'file', help: 'write the full reports (every completion) to this file' },
  ],
};

export const AHA: Command = {
  name: 'aha',
  summary:
    "The aha demo, measured: the 'aha' preset per seed, base vs trained on the same held-out prompts; writes report.json, README.md and SVG plots.",
  flags: [
    {
      name: 'seeds',
      value: '1,2,3',
      help: 'training seeds, comma-separated (default 1,2,3)',
      count: { min: 0, limit: SEEDS, list: true },
    },
    { name: 'out', value: 'folder', help: 'report folder (default docs/aha)' },
    {
      name: 'k',
      value: 'samples',
      help: 'samples per held-out prompt (default 2; 4 with --prompts selection)',
      count: { min: 0, limit: COMPLETIONS_PER_PROMPT },
    },
    {
      name: 'prompts',
      value: 'report|selection',
      help: 'held-out set to evaluate on (default report)',
    },
    {
      name: 'eval-batch',
      value: 'n',
      help: 'prompts per evaluation batch (default 200)',
      // Rejection sampling's batch bound: one decode holds eval-batch × k sequences.
      count: { min: 1, limit: { max: 1024, unit: 'prompts per batch' } },
    },
  ],
};

export const PLAN: Command = {
  name: 'plan',
  summary:
    'Prints the memory plan of a GRPO run (or, with --sft, an SFT run) without a GPU: `npm run plan -- <model> [flags] [options]`, <model> a local Hugging Face folder (its config.json) or a built-in config (smollm2-135m, smollm2-360m, qwen2.5-0.5b, qwen2.5-1.5b, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen2.5-3b, llama-3.2-1b, llama-3.2-3b); bytes by category, the peak, and what to change when it does not fit. Without --gradient-accumulation-steps the plan chooses the largest micro-batch that fits.',
  flags: [
    { name: 'json', value: '', help: 'print the plan as JSON', boolean: true },
    {
      name: 'budget',
      value: 'GiB',
      help: 'GPU memory to fit (default: the smallest budget step the run fits: 0.5 GiB steps up to 4 GiB, then 6, 8, 12, 16, 24, 32, 48, 80 GiB)',
    },
    { name: 'num-prompts', value: 'B', help: 'prompts per step (the option per-step-prompts)' },
    {
      name: 'sft',
      value: '',
      help: 'plan an SFT run instead (npm run sft’s options: a step of per-device-train-batch-size × gradient-accumulation-steps sequences of max-length tokens)',
      boolean: true,
    },
  ],
};

export const RECIPE: Command = {
  name: 'recipe',
  summary:
    'Runs a multi-stage recipe (sft | grpo | rejection-sample stages; built-in: r1-zero, r1, distill, or a JSON file) into a run folder (recipe.json, state.json, metrics.jsonl, <i>-<stage>/checkpoint-N/, final-model/); --resume continues one; --compare puts the R1 paper’s three findings to the bundled models (docs/recipe/protocol.md) and writes docs/recipe.',
  flags: [
    {
      name: 'out',
      value: 'folder',
      help: 'run folder (default runs/recipe-<date>); with --compare, the report folder (default docs/recipe)',
    },
    { name: 'seed', value: 'n', help: 'the recipe’s seed (default: the recipe’s own)' },
    {
      name: 'resume',
      value: 'run folder',
      help: 'continue that recipe run from its state.json and latest checkpoint',
    },
    { name: 'model', value: 'folder', help: 'a local Hugging Face model folder (default bundled)' },
    {
      name: 'plan',
      value: '',
      help: 'print each training stage’s memory plan on the model and exit without training (exit 1 when one does not fit)',
      boolean: true,
    },
    {
      name: 'compare',
      value: '',
      help: 'the R1 paper’s three findings (RL alone, cold start, distillation into a student) on the aha held-out prompts, by docs/recipe/protocol.md',
      boolean: true,
    },
    {
      name: 'quick',
      value: '',
      help: 'with --compare: every arm shortened (2 GRPO steps, 8 held-out prompts, seed 1), a smoke run into runs/recipe-compare-quick',
      boolean: true,
    },
    {
      name: 'grpo-steps',
      value: 'n',
      help: 'with --compare: every GRPO arm’s steps (default 95 on the tiny reasoner, 30 on the student)',
      count: { min: 1, limit: { max: MAX_STEPS, unit: 'steps' } },
    },
    {
      name: 'student',
      value: 'model',
      help: 'with --compare: the student distilled into (default tiny-student; the same tokenizer)',
    },
    {
      name: 'work',
      value: 'folder',
      help: 'with --compare: the seeds’ run folders (default runs/recipe-compare; an interrupted comparison continues from it, a finished one removes it)',
    },
    {
      name: 'seeds',
      value: '1,2,3',
      help: 'with --compare: the seeds (default 1,2,3)',
      count: { min: 0, limit: SEEDS, list: true },
    },
    {
      name: 'prompts',
      value: 'report|selection',
      help: 'with --compare: the held-out set (default report; selection is where choices are made)',
    },
    {
      name: 'k',
      value: 'samples',
      help: 'with --compare: samples per held-out prompt (default 1)',
      count: { min: 0, limit: COMPLETIONS_PER_PROMPT },
    },
    {
      name: 'render',
      value: 'folder',
      help: 'rewrite a comparison’s README.md and plots from its findings.json (no training)',
    },
    {
      name: 'sft-learning-rate',
      value: 'lr',
      help: 'with --compare: the cold start’s and the distillation’s SFT learning rate (default 3e-4)',
    },
  ],
};

/** A flag's --help line; a count says its limit. */
function flagHelpLine(f: CommandFlag): string {
  const limit = f.count
    ? ` (at most ${f.count.limit.max}${f.count.list ? ` ${f.count.limit.unit}` : ''})`
    : '';
  return `${`  --${f.name}${f.boolean ? '' : ` <${f.value}>`}`.padEnd(44)} ${f.help}${limit}`;
}

/** --help of `npm run recipe`: usage, the flags, the recipe format. */
export function recipeHelp(): string {
  return [
    'usage: npm run recipe -- <recipe.json | r1-zero | r1 | distill> [--out <folder>] [--seed n]',
    '       npm run recipe -- --resume <run folder>',
    '       npm run recipe -- --compare [--seeds 1,2,3] [--out docs/recipe] [--grpo-steps n | --quick]',
    '',
    RECIPE.summary,
    '',
    ...RECIPE.flags.map(flagHelpLine),
    '',
    'A recipe file: {"name": "...", "seed": 1, "stages": [ {"kind": "sft", "name": "cold-start",',
    '  "data": {"coldStart": {"count": 256}} | {"path": "set.jsonl"} | {"stage": "<rejection stage>"},',
    '  "options": {SFTConfig options}}, {"kind": "grpo", "preset": "aha", "options": {config options}},',
    '  {"kind": "rejection-sample", "prompts": 64, "options": {"k": 4, "temperature": 1}} ]};',
    'each stage starts from the previous one’s weights unless "from" names "base" or an earlier stage.',
    'An SFT stage’s "path" may be any dataset file or folder (.parquet, .jsonl, .json, .csv; gsm8k and',
    'MATH rows become prompt / completion), with "columns": "prompt=<col>,completion=<col>" to map others.',
  ].join('\n');
}

export const COMMANDS: readonly Command[] = [TRAIN, EVAL, AHA, PLAN];

/** --help: usage, the command's own flags, then every config option. */
export function commandHelp(command: Command): string {
  const own = command.flags.map(flagHelpLine);
  // configHelp's own header describes its spellings with example flags; ours says it in words.
  const options = configHelp().split('\n').slice(1);
  return [
    `usage: npm run ${command.name} -- ${command.name === 'plan' ? '<model> ' : ''}[flags] [options]`,
    '',
    command.summary,
    '',
    'Flags:',
    ...own,
    '',
    'Options (kebab-case or snake_case names; TRL option names and no-<flag> for false are accepted too):',
    ...options,
  ].join('\n');
}

/**
 * Splits the command's own flags (`--name value` or `--name=value`) out of argv; the rest are
 * config options for parseCliArgs. A flag without a value, or a flag given twice that is not
 * repeatable, throws naming it.
 */
export function takeCommandFlags(
  command: Command,
  argv: readonly string[],
): { flags: Map<string, string[]>; rest: string[] } {
  const byName = new Map(command.flags.map((f) => [f.name, f]));
  const flags = new Map<string, string[]>();
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, eq >= 0 ? eq : undefined) : '';
    const flag = byName.get(name);
    if (!flag) {
      rest.push(arg);
      continue;
    }
    let value: string | undefined = eq >= 0 ? arg.slice(eq + 1) : argv[i + 1];
    if (flag.boolean) {
      if (eq >= 0) throw new Error(`--${name} takes no value`);
      value = 'true';
    } else if (eq < 0) {
      if (value === undefined || value.startsWith('--'))
        throw new Error(`--${name} needs a value: --${name} <${flag.value}>`);
      i += 1;
    }
    if (value === '') value = undefined;
    if (value === undefined) throw new Error(`--${name} needs a value: --${name} <${flag.value}>`);
    const values = flags.get(name) ?? [];
    if (values.length && !flag.repeatable)
      throw new Error(`--${name} was given twice ('${values[0]}' and '${value}')`);
    values.push(value);
    flags.set(name, values);
  }
  return { flags, rest };
}

function countOf(command: Command, name: string): FlagCount {
  const count = command.flags.find((f) => f.name === name)?.count;
  if (!count) throw new Error(`npm run ${command.name}: --${name} is not a count flag`);
  return count;
}

/**
 * A count flag's value (its declaration in the command's table: least value and limit), or
 * `fallback` when it is not given; anything else throws naming the flag, the value and the bound.
 */
export function flagCount(
  command: Command,
  flags: ReadonlyMap<string, readonly string[]>,
  name: string,
  fallback: number,
): number {
  const { min, limit } = countOf(command, name);
  const raw = flags.get(name)?.[0];
  return raw === undefined ? fallback : parseCount(`--${name}`, raw, min, limit);
}

/**
 * A list flag's integers (`--seeds 1,2,3`), or `fallback`: how many is checked against the limit
 * before any entry is read, then each entry as a count of its own (digits, ≥ min).
 */
export function flagCounts(
  command: Command,
  flags: ReadonlyMap<string, readonly string[]>,
  name: string,
  fallback: readonly number[],
): number[] {
  const { min, limit } = countOf(command, name);
  const raw = flags.get(name)?.[0];
  if (raw === undefined) return [...fallback];
  const parts = raw.split(',');
  if (parts.length > limit.max)
    throw new RangeError(overLimitMessage(`--${name} count`, parts.length, limit));
  return parts.map((part) => {
    const text = part.trim();
    const n = Number(text);
    if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < min)
      throw new RangeError(
        `--${name} must be integers ≥ ${min}, comma-separated, got '${text}' in '${raw}'`,
      );
    return n;
  });
}

/**
 * Reads `--config <file>`: a JSON object of config options. Every error about it begins with the
 * file's path: unreadable, not JSON, not an object.
 */
export function readConfigFile(path: string): Record<string, unknown> {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(
      `${path}: cannot read the config file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      { cause: e },
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${path}: not valid JSON (${(e as Error).message})`, { cause: e });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new Error(
      `${path}: a config file must hold a JSON object of options, got ${Array.isArray(value) ? 'an array' : JSON.stringify(value)}`,
    );
  return value as Record<string, unknown>;
}

/**
 * resolveConfig over the config file's options and the flags' (which win). An error about a key
 * that only the file gives (an unknown key, a wrong type, a rule on its value) begins with the
 * file's path, so the user knows where to look.
 */
export function resolveWithFile(
  fromFile: Record<string, unknown>,
  filePath: string | undefined,
  overrides: Record<string, unknown>,
): Config {
  try {
    return resolveConfig({ ...fromFile, ...overrides });
  } catch (e) {
    if (
      filePath !== undefined &&
      e instanceof ConfigError &&
      Object.prototype.hasOwnProperty.call(fromFile, e.key) &&
      !Object.prototype.hasOwnProperty.call(overrides, e.key)
    )
      throw new ConfigError(e.key, `${filePath}: ${e.message}`);
    throw e;
  }
}

/**
 * `--reward-file id=path`: each file's text becomes customRewards.<id>, and custom:<id> joins
 * the reward list unless it is already in it. A missing file or a malformed value throws naming it.
 */
export function rewardFiles(
  specs: readonly string[],
  options: { rewards?: string[]; customRewards?: Record<string, string> },
): { rewards: string[] | undefined; customRewards: Record<string, string> | undefined } {
  if (specs.length === 0) return { rewards: options.rewards, customRewards: options.customRewards };
  const customRewards = { ...(options.customRewards ?? {}) };
  const rewards = [...(options.rewards ?? (resolveConfig({}).rewards as string[]))];
  // customRewards' own limit, checked before any file is read.
  const ids = new Set([...Object.keys(customRewards), ...specs.map((s) => s.split('=')[0])]);
  const limit = CONFIG_SCHEMA.customRewards.type.limit;
  if (limit && ids.size > limit.max)
    throw new RangeError(
      overLimitMessage('custom rewards (customRewards and --reward-file)', ids.size, limit),
    );
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    const id = eq > 0 ? spec.slice(0, eq) : '';
    const path = eq > 0 ? spec.slice(eq + 1) : '';
    if (!id || !path)
      throw new Error(
        `--reward-file ${spec}: expected <id>=<file.js>, e.g. --reward-file length=rewards/length.js`,
      );
    try {
      customRewards[id] = readFileSync(resolve(path), 'utf8');
    } catch (e) {
      throw new Error(
        `--reward-file ${spec}: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
        { cause: e },
      );
    }
    if (!rewards.includes(`custom:${id}`)) rewards.push(`custom:${id}`);
  }
  return { rewards, customRewards };
}

/**
 * The line after the loop: the steps this process trained, `from` the step it started at (a resumed
 * run's checkpoint, else 0) to `to`: a resume from 2 to 4 trained 2 steps, not 4.
 */
export function trainedLine(from: number, to: number, seconds: number): string {
  const n = to - from;
  return (
    `trained ${n} step${n === 1 ? '' : 's'}${from > 0 ? ` (${from} → ${to})` : ''} ` +
    `in ${seconds.toFixed(1)} s`
  );
}

/**
 * Runs a command's main and ends the process with its status: the process.exitCode main set (a
 * recipe that stopped, a plan that does not fit: 1) or 0 on success, 1 with the error's message
 * on stderr. `main` releases what it opened (GPU, reward sandboxes) in its own finally blocks; the
 * explicit exit is the backstop that a forgotten handle cannot turn into a hang.
 */
export function runCommand(main: () => Promise<void>, showStack = false): void {
  main().then(
    () => process.exit(process.exitCode ?? 0),
    (e: unknown) => {
      console.error(e instanceof Error ? (showStack ? e.stack : e.message) : String(e));
      process.exit(1);
    },
  );
}
