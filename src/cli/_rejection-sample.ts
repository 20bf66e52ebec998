// What `npm run rejection-sample` does once it has its argv: find the weights (a run folder's
// latest checkpoint, a checkpoint folder, or any Hugging Face folder; a LoRA checkpoint's adapters
// merged into its base model), take the run's config from the checkpoint (options given as flags
// win), sample k completions of each of the run's training prompts, and write
//   <out>/sft.jsonl      the kept completions, TRL's prompt-completion format (npm run sft reads it)
//   <out>/samples.jsonl  every sample: problemId, prompt, completion, length, kept, reasons
//   <out>/report.json    where the weights came from, the options, the per-prompt counts, sampled,
//                        kept, yield and how many rejected samples each reason applied to
// The sampling itself is src/recipes/rejection-sampling.ts (rejectionSampleFromWeights); this module
// is the files and flags around it, and not an entry point, so tests run it in-process.
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Engine } from '../engine/engine';
import { mergeLoraWeights } from '../export/peft-adapter';
import { parseSafetensors } from '../formats/safetensors';
import { CHECKPOINT_FILES } from '../train/checkpoint';
import {
  configHelp,
  isHelpRequested,
  loraOptionsOf,
  parseCliArgs,
  resolveConfig,
  type Config,
} from '../grpo/config';
import { LANGUAGE_SCRIPTS, type LanguageScript } from '../rewards/language-consistency';
import {
  checkRejectionCounts,
  rejectionFiles,
  rejectionSampleFromWeights,
  type RejectionSamplingOptions,
  type RejectionSamplingReport,
} from '../recipes/rejection-sampling';
import type { Problem } from '../tasks/types';
import { takeCommandFlags, type Command } from './_flags';
import {
  loadModel,
  openEngine,
  openModel,
  taskText,
  type LoadedModel,
  type OpenedModel,
} from './_session';
import { writeFileAtomic } from './_atomic-files';
import { parseCount, type SizeLimit } from '../core/limits';
import { REJECTION_LIMITS } from '../recipes/limits';

export const REJECTION_SAMPLE: Command = {
  name: 'rejection-sample',
  summary:
    "Rejection sampling (DeepSeek-R1 §2.3.3) from any checkpoint: k completions of each of the run's training prompts (never its held-out ones), kept when the answer is right, the format passes, the completion ended with EOS and the optional filters pass; writes <out>/sft.jsonl (TRL prompt-completion), samples.jsonl and report.json.",
  flags: [
    {
      name: 'checkpoint',
      value: 'folder',
      help: "a run folder (its latest checkpoint-<step>/), a checkpoint folder, or a Hugging Face model folder; without it, --model's weights",
    },
    { name: 'out', value: 'folder', help: 'where sft.jsonl, samples.jsonl and report.json go' },
    {
      name: 'k',
      value: 'n',
      help: `completions sampled per prompt (default 8; at most ${REJECTION_LIMITS.k.max})`,
    },
    {
      name: 'prompts',
      value: 'n',
      help: `training prompts to sample (default: the run's, steps × per-step-prompts; at most ${REJECTION_LIMITS.prompts.max}, and prompts × k at most ${REJECTION_LIMITS.samples.max})`,
    },
    { name: 'seed', value: 'n', help: "the sampling seed (default: the run's seed)" },
    {
      name: 'min-length',
      value: 'tokens',
      help: 'keep completions of at least this many tokens (EOS included)',
    },
    {
      name: 'max-length',
      value: 'tokens',
      help: 'keep completions of at most this many tokens (EOS included)',
    },
    {
      name: 'language',
      value: 'script',
      help: `keep chains of thought written in this script (${LANGUAGE_SCRIPTS.join(', ')}; any case)`,
    },
    {
      name: 'min-language-consistency',
      value: '0..1',
      help: "the share of the chain of thought's words that must be in --language's script (default 1; with it alone, the script is the config's language-script)",
    },
    {
      name: 'no-dedupe',
      value: '',
      help: 'keep identical completions of one prompt (default: one copy)',
      boolean: true,
    },
    {
      name: 'batch-size',
      value: 'prompts',
      help: `prompts decoded per batch (default 16; k completions each; at most ${REJECTION_LIMITS.batchSize.max})`,
    },
  ],
};

/** --help: usage, the command's flags, then the config options (the task and sampling ones apply). */
export function rejectionSampleHelp(): string {
  const own = REJECTION_SAMPLE.flags.map(
    (f) => `${`  --${f.name}${f.boolean ? '' : ` <${f.value}>`}`.padEnd(44)} ${f.help}`,
  );
  return [
    'usage: npm run rejection-sample -- --checkpoint <run or checkpoint folder> --out <folder> [flags] [options]',
    '       npm run rejection-sample -- --model <folder|bundled> --task countdown --out <folder> [flags] [options]',
    '',
    REJECTION_SAMPLE.summary,
    '',
    'Flags:',
    ...own,
    '',
    "Options: the run's config, from the checkpoint; these change it (task, task-options, template,",
    'eval-prompts and seed choose the prompts; temperature, top-k, top-p, min-p and',
    'max-completion-length the sampling; model is the base model of a LoRA checkpoint):',
    ...configHelp().split('\n').slice(1),
  ].join('\n');
}

export interface RejectionSampleArgs {
  checkpoint?: string;
  out: string;
  prompts?: number;
  /** k, seed, the filters and batchSize as given (the config's sampling options beneath). */
  options: Partial<RejectionSamplingOptions> & Pick<RejectionSamplingOptions, 'k'>;
  /** Config options given as flags (camelCase keys), over the checkpoint's config. */
  overrides: Record<string, unknown>;
}

/** No limit of its own: a length or a seed bounds no work. */
const UNLIMITED: SizeLimit = { max: Number.MAX_SAFE_INTEGER, unit: '' };

function integer(
  name: string,
  text: string | undefined,
  min: number,
  limit: SizeLimit = UNLIMITED,
): number | undefined {
  if (text === undefined) return undefined;
  return parseCount(`--${name}`, text, min, limit);
}

/** A script name in any case ('latin', 'HAN') as LANGUAGE_SCRIPTS spells it. */
export function languageScriptOf(text: string): LanguageScript {
  const script = LANGUAGE_SCRIPTS.find((s) => s.toLowerCase() === text.toLowerCase());
  if (!script)
    throw new Error(`--language: unknown script '${text}' (one of ${LANGUAGE_SCRIPTS.join(', ')})`);
  return script;
}

/** Splits argv into the command's flags and config options; a bad value throws naming its flag. */
export function parseRejectionSampleArgs(argv: readonly string[]): RejectionSampleArgs {
  const { flags, rest } = takeCommandFlags(REJECTION_SAMPLE, argv);
  const one = (name: string) => flags.get(name)?.[0];
  const out = one('out');
  if (!out) throw new Error('--out <folder> is required (npm run rejection-sample -- --help)');
  const overrides = parseCliArgs(rest) as Record<string, unknown>;
  const options: RejectionSampleArgs['options'] = {
    k: integer('k', one('k'), 1, REJECTION_LIMITS.k) ?? 8,
  };
  const seed = integer('seed', one('seed'), 0);
  if (seed !== undefined) options.seed = seed;
  const minLength = integer('min-length', one('min-length'), 0);
  if (minLength !== undefined) options.minLength = minLength;
  const maxLength = integer('max-length', one('max-length'), 1);
  if (maxLength !== undefined) options.maxLength = maxLength;
  const batchSize = integer('batch-size', one('batch-size'), 1, REJECTION_LIMITS.batchSize);
  if (batchSize !== undefined) options.batchSize = batchSize;
  if (one('no-dedupe')) options.dedupe = false;
  const language = one('language');
  const minText = one('min-language-consistency');
  if (language !== undefined || minText !== undefined) {
    const min = minText === undefined ? 1 : Number(minText);
    if (minText !== undefined && (!/^[0-9.eE+-]+$/.test(minText) || !(min >= 0 && min <= 1)))
      throw new Error(`--min-language-consistency must be a number in [0, 1], got '${minText}'`);
    const script = language !== undefined ? languageScriptOf(language) : null;
    // Without --language the config's languageScript applies (resolved with the config).
    options.language = { script: script ?? ('' as LanguageScript), minLanguageConsistency: min };
  }
  const prompts = integer('prompts', one('prompts'), 1, REJECTION_LIMITS.prompts);
  // prompts × k now when both are given; a default prompt count is checked with the run's config.
  if (prompts !== undefined)
    checkRejectionCounts(prompts, options.k, { steps: 0, perStepPrompts: 0 }, '--prompts');
  return { checkpoint: one('checkpoint'), out, prompts, options, overrides };
}

/** Where the weights and the run's config come from, as found on disk. */
export interface WeightsSource {
  /** What was loaded: a checkpoint folder or a model folder ('bundled' for the shipped model). */
  path: string;
  kind: 'checkpoint' | 'lora-checkpoint' | 'model';
  /** The run's config stored with a GRPO checkpoint (null for SFT checkpoints and model folders). */
  config: Record<string, unknown> | null;
  /** The model folder a checkpoint was trained from (trainer_state.json's baseModel). */
  baseModel: string | null;
  step: number | null;
}

const CHECKPOINT_DIR = /^checkpoint-(\d+)$/;

/**
 * What `--checkpoint <folder>` names: a checkpoint folder (it has trainer_state.json), a run folder
 * (its checkpoint-<step>/ with the highest step), or a Hugging Face model folder (config.json).
 */
export function findWeights(folder: string): WeightsSource {
  const dir = resolve(folder);
  if (!existsSync(dir)) throw new Error(`--checkpoint: ${dir} does not exist`);
  if (existsSync(join(dir, CHECKPOINT_FILES.state))) {
    const state = JSON.parse(readFileSync(join(dir, CHECKPOINT_FILES.state), 'utf8')) as Record<
      string,
      unknown
    >;
    const config = (state.config ?? null) as Record<string, unknown> | null;
    const lora = existsSync(join(dir, CHECKPOINT_FILES.adapters));
    if (!lora && !existsSync(join(dir, CHECKPOINT_FILES.weights)))
      throw new Error(
        `--checkpoint: ${dir} has neither ${CHECKPOINT_FILES.weights} nor ${CHECKPOINT_FILES.adapters}`,
      );
    return {
      path: dir,
      kind: lora ? 'lora-checkpoint' : 'checkpoint',
      // An SFT checkpoint stores its SFTConfig (stage 'sft'): not a GRPO run's config.
      config: config && config.stage !== 'sft' ? config : null,
      baseModel: typeof state.baseModel === 'string' ? state.baseModel : null,
      step: typeof state.step === 'number' ? state.step : null,
    };
  }
  const steps = readdirSync(dir)
    .map((name) => CHECKPOINT_DIR.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => b - a);
  if (steps.length > 0) return findWeights(join(dir, `checkpoint-${steps[0]}`));
  if (existsSync(join(dir, 'config.json')))
    return { path: dir, kind: 'model', config: null, baseModel: null, step: null };
  throw new Error(
    `--checkpoint: ${dir} is neither a checkpoint folder (trainer_state.json), a run folder (checkpoint-<step>/) nor a model folder (config.json)`,
  );
}

/** The weights to sample from: a model or full checkpoint folder opened (streamed into the GPU;
 * close its reader when done), or a LoRA checkpoint's adapters merged into its base model. */
export async function loadWeights(
  source: WeightsSource,
  config: Config,
  baseModel: string | null,
): Promise<LoadedModel | OpenedModel> {
  if (source.kind !== 'lora-checkpoint') return openModel(source.path);
  const base = baseModel ?? source.baseModel;
  if (!base)
    throw new Error(
      `--checkpoint: ${source.path} holds LoRA adapters and names no base model: give it with --model <folder>`,
    );
  const lora = loraOptionsOf(config);
  if (!lora)
    throw new Error(
      `--checkpoint: ${source.path} holds LoRA adapters but its config has usePeft false`,
    );
  const model = await loadModel(base);
  const file = join(source.path, CHECKPOINT_FILES.adapters);
  const adapters = new Map(
    [...parseSafetensors(new Uint8Array(readFileSync(file)), file).tensors].map(
      ([name, t]) => [name, t.data] as const,
    ),
  );
  const tensors = mergeLoraWeights(model.hf.config, model.hf.tensors, { options: lora, adapters });
  return { ...model, hf: { ...model.hf, tensors } };
}

export interface RejectionSampleResult {
  report: RejectionSamplingReport;
  problems: Problem[];
  source: WeightsSource;
  config: Config;
  options: RejectionSamplingOptions;
  files: { sft: string; samples: string; report: string };
}

/**
 * Rejection sampling from a checkpoint (or a model folder) into `outDir`: the reusable form of the
 * command, for a front end with its own engine. `overrides` are config options over the run's.
 */
export async function rejectionSampleFromCheckpoint(o: {
  engine: Engine;
  /** --checkpoint; absent: the config's model (`overrides.model`, default bundled). */
  checkpoint?: string;
  outDir: string;
  prompts?: number;
  options: RejectionSampleArgs['options'];
  overrides?: Record<string, unknown>;
  log?: (line: string) => void;
}): Promise<RejectionSampleResult> {
  const log = o.log ?? ((line: string) => console.log(line));
  const overrides = o.overrides ?? {};
  const source: WeightsSource = o.checkpoint
    ? findWeights(o.checkpoint)
    : {
        path: String(overrides.model ?? 'bundled'),
        kind: 'model',
        config: null,
        baseModel: null,
        step: null,
      };
  const config = resolveConfig({ ...(source.config ?? {}), ...overrides });
  // The counts are checked before the weights load or a prompt is drawn.
  checkRejectionCounts(o.prompts, o.options.k, config, '--prompts');
  const model = await loadWeights(
    source,
    config,
    typeof overrides.model === 'string' ? overrides.model : null,
  );
  log(
    `weights: ${source.kind === 'model' ? model.folder : source.path}${source.step !== null ? ` (step ${source.step})` : ''}${source.kind === 'lora-checkpoint' ? ` (LoRA adapters merged into ${model.folder})` : ''}`,
  );
  const options = { ...o.options };
  if (options.language && !options.language.script)
    options.language = { ...options.language, script: config.languageScript };
  const weights = 'weights' in model.hf ? model.hf.weights : model.hf.tensors;
  let sampled: Awaited<ReturnType<typeof rejectionSampleFromWeights>>;
  try {
    sampled = await rejectionSampleFromWeights({
      engine: o.engine,
      model: { config: model.hf.config, weights },
      tokenizer: model.tokenizer,
      config,
      taskText: await taskText(config),
      prompts: o.prompts,
      options,
    });
  } finally {
    if ('weights' in model.hf) await model.hf.weights.close();
  }
  const { report, problems, options: used } = sampled;
  const files = rejectionFiles(report, {
    weights: source.kind === 'model' ? model.folder : source.path,
    step: source.step,
    task: config.task,
    taskOptions: config.taskOptions,
    template: config.template,
    promptSeed: config.seed,
    prompts: problems.length,
    options: used,
  });
  mkdirSync(o.outDir, { recursive: true });
  const paths = {
    sft: join(o.outDir, 'sft.jsonl'),
    samples: join(o.outDir, 'samples.jsonl'),
    report: join(o.outDir, 'report.json'),
  };
  // Atomically: a kill or a full disk leaves each file whole (its old or new version), never torn.
  writeFileAtomic(paths.sft, files['sft.jsonl']);
  writeFileAtomic(paths.samples, files['samples.jsonl']);
  writeFileAtomic(paths.report, files['report.json']);
  for (const line of summaryLines(report, problems.length)) log(line);
  log(`wrote ${paths.sft}, ${paths.samples} and ${paths.report}`);
  return { report, problems, source, config, options: used, files: paths };
}

/** The yield and the per-reason counts, for the terminal. */
export function summaryLines(report: RejectionSamplingReport, prompts: number): string[] {
  const reasons = Object.entries(report.reasons).filter(([, n]) => n > 0);
  const k = prompts ? report.sampled / prompts : 0;
  const withKept = report.perPrompt.filter((p) => p.kept > 0).length;
  return [
    `${prompts} training prompts × ${k}: kept ${report.kept} of ${report.sampled} (yield ${report.sampled ? (100 * report.yield).toFixed(1) : '—'}%); ${withKept} of ${prompts} prompts kept at least one`,
    reasons.length
      ? `rejected (a sample may have several reasons): ${reasons.map(([r, n]) => `${r} ${n}`).join(', ')}`
      : 'rejected: none',
  ];
}

/** The command: argv in, files out (the entry point is rejection-sample.ts). */
export async function rejectionSampleCommand(
  argv: readonly string[],
  o: { engine?: Engine; log?: (line: string) => void } = {},
): Promise<RejectionSampleResult | null> {
  if (isHelpRequested([...argv])) {
    console.log(rejectionSampleHelp());
    return null;
  }
  const args = parseRejectionSampleArgs(argv);
  const engine = o.engine ?? (await openEngine());
  try {
    return await rejectionSampleFromCheckpoint({
      engine,
      checkpoint: args.checkpoint,
      outDir: resolve(args.out),
      prompts: args.prompts,
      options: args.options,
      overrides: args.overrides,
      log: o.log,
    });
  } finally {
    if (!o.engine) engine.destroy();
  }
}
