// What `npm run sft` does once its arguments are read, and its flag table: the SFT stage
// (src/train/sft.ts SftRun) with a run folder around it, as `npm run train` keeps one: config.json,
// metrics.jsonl (one line per optimizer step: TRL's loss, mean_token_accuracy, num_tokens,
// learning_rate, grad_norm, epoch), checkpoint-<step>/ (a Hugging Face folder + optimizer.safetensors
// + trainer_state.json, through the checkpoint codec; a LoRA run's hold its adapters as
// adapter_model.safetensors) and final-model/ at the end (LoRA: merged, the PEFT adapter in
// final-model/adapter/), every file
// written atomically (_atomic-files.ts; a step's row is durable before its checkpoint). `--resume <run>/checkpoint-<step>` continues a run exactly (same data; only the length may
// change). A module of its own (not an entry point) so tests read its flags in-process.
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Engine } from '../engine/engine';
import { formatBytes } from '../core/format';
import { checkpointFromFiles, checkpointToFiles, fromStoredMetrics } from '../train/checkpoint';
import { SftRun, type SftStepReport } from '../train/sft';
import {
  resolveSftConfig,
  SFT_DTYPES,
  SFT_OPTIONS,
  trlName,
  type SftConfig,
} from '../train/sft-config';
import type { SftExample } from '../train/sft-data';
import type { CheckpointPayload } from '../storage/checkpoints';
import type { Identity } from '../storage/db';
import { takeCommandFlags, trainedLine, type Command } from './_flags';
import { appendLine, writeFileAtomic, writeFolderAtomic } from './_atomic-files';
import { cutStepLogsLogged, recoverRunFolder } from './_run-folder';
import {
  ADAPTER_FOLDER,
  hfFolderExtras,
  trainedModelFiles,
  type LoadedModel,
  type OpenedModel,
} from './_session';

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

const VALUE: Record<string, string> = {
  number: 'number',
  int: 'integer',
  boolean: 'true|false',
  'nullable-boolean': 'true|false|null',
  'nullable-int': 'integer|null',
  scheduler: 'linear|cosine|constant',
  'string-list': 'names',
  dtype: SFT_DTYPES.join('|'),
};

/** The command's own flags, then one flag per SFT option (kebab-case; TRL's snake_case works too). */
export const SFT: Command = {
  name: 'sft',
  summary:
    'Supervised fine-tuning (TRL SFTTrainer semantics) on a JSONL of prompt/completion pairs, chat prompt/completion, "messages" or "text" rows; writes a run folder (config.json, metrics.jsonl, checkpoint-<step>/, final-model/).',
  flags: [
    { name: 'model', value: 'folder', help: 'a local Hugging Face model folder (or bundled)' },
    {
      name: 'data',
      value: 'file|folder',
      help: 'the SFT dataset: JSONL in TRL’s formats, or a Hub dataset (.parquet, .jsonl, .json, .csv, a folder of shards; gsm8k and MATH rows become prompt/completion)',
    },
    { name: 'dataset', value: 'file|folder', help: 'the same as --data' },
    {
      name: 'column',
      value: 'role=column',
      help: 'the column of a role (prompt, completion), e.g. completion=solution (repeatable)',
      repeatable: true,
    },
    { name: 'out', value: 'folder', help: 'run folder (default runs/sft-<date>)' },
    {
      name: 'resume',
      value: 'run/checkpoint-N',
      help: 'continue that checkpoint’s run exactly (same data; only --max-steps / --num-train-epochs may change)',
    },
    ...SFT_OPTIONS.map((o) => ({ name: kebab(o.key), value: VALUE[o.kind], help: o.help })),
  ],
};

/** --help: usage and every flag. */
export function sftHelp(): string {
  const lines = SFT.flags.map((f) => `${`  --${f.name} <${f.value}>`.padEnd(44)} ${f.help}`);
  return [
    'usage: npm run sft -- --model <folder> --data <file.jsonl> [--out <folder>] [options]',
    '',
    SFT.summary,
    '',
    'Flags (kebab-case or TRL’s snake_case names):',
    ...lines,
    `  --help${' '.repeat(36)} this text`,
  ].join('\n');
}

export interface SftArgs {
  model?: string;
  data?: string;
  /** `--column` mappings joined with commas ('' when none). */
  columns: string;
  out?: string;
  resume?: string;
  /** Options as given (camelCase keys, string values): resolveSftConfig parses them. */
  options: Record<string, string>;
}

const BOOLEAN_FLAGS = new Set(
  SFT_OPTIONS.filter((o) => o.kind === 'boolean').map((o) => `--${kebab(o.key)}`),
);

/** A boolean option given bare (`--use-peft`, as TRL's parser takes it) means true. */
function withBareBooleans(argv: readonly string[]): string[] {
  return argv.flatMap((arg, i) => {
    const next = argv[i + 1];
    return BOOLEAN_FLAGS.has(arg) && (next === undefined || next.startsWith('--'))
      ? [arg, 'true']
      : [arg];
  });
}

/** Splits argv into the command's flags and its options; an unknown flag throws naming it. */
export function parseSftArgs(argv: readonly string[]): SftArgs {
  // TRL's snake_case spellings: --learning_rate → --learning-rate (the name only, not the value).
  const normalised = argv.map((a) => {
    if (!a.startsWith('--')) return a;
    const eq = a.indexOf('=');
    const name = a.slice(2, eq >= 0 ? eq : undefined).replace(/_/g, '-');
    return `--${name}${eq >= 0 ? a.slice(eq) : ''}`;
  });
  const { flags, rest } = takeCommandFlags(SFT, withBareBooleans(normalised));
  if (flags.has('data') && flags.has('dataset'))
    throw new Error('give the dataset once: --data or --dataset');
  if (rest.length) {
    throw new Error(
      `unknown argument '${rest[0]}' (npm run sft -- --help lists the flags and options)`,
    );
  }
  const one = (name: string) => flags.get(name)?.[0];
  const options: Record<string, string> = {};
  for (const o of SFT_OPTIONS) {
    const value = one(kebab(o.key));
    if (value !== undefined) options[o.key] = value;
  }
  return {
    model: one('model'),
    data: one('data') ?? one('dataset'),
    columns: (flags.get('column') ?? []).join(','),
    out: one('out'),
    resume: one('resume'),
    options,
  };
}

/** A checkpoint folder written by this command: its payload, config, base model and data file. */
export function readSftCheckpoint(
  dir: string,
  log: (line: string) => void = (line) => console.log(line),
): {
  payload: CheckpointPayload;
  config: SftConfig;
  baseModel: string;
  data: string;
  columns: string;
} {
  for (const action of recoverRunFolder(dirname(dir))) log(action);
  if (!existsSync(join(dir, 'trainer_state.json')))
    throw new Error(`--resume: ${dir} is not a checkpoint folder (it has no trainer_state.json)`);
  const { payload, state } = checkpointFromFiles(
    (name) => new Uint8Array(readFileSync(join(dir, name))),
  );
  const { stage, ...options } = (payload.config ?? {}) as Record<string, unknown>;
  if (stage !== 'sft')
    throw new Error(`--resume: ${dir} is not an SFT checkpoint (npm run train resumes GRPO runs)`);
  return {
    payload,
    config: resolveSftConfig(options),
    baseModel: String(state.baseModel),
    data: String(state.data),
    columns: typeof state.dataColumns === 'string' ? state.dataColumns : '',
  };
}

/** The progress line of one step. */
export function sftStepLine(report: SftStepReport, steps: number): string {
  const m = report.metrics;
  const f = (k: string, d: number) => (Number.isFinite(m[k]) ? m[k].toFixed(d) : '–');
  return (
    `step ${String(report.step).padStart(String(steps).length)}/${steps}  loss ${f('loss', 4)}  ` +
    `acc ${f('mean_token_accuracy', 3)}  tokens ${m.num_tokens}  lr ${m.learning_rate.toExponential(2)}  ` +
    `|g| ${f('grad_norm', 3)}  epoch ${f('epoch', 2)}` +
    (report.skipped ? `  SKIPPED (${report.skipped})` : '')
  );
}

export interface SftFolderOptions {
  engine: Engine;
  /** An opened model (`sft`: its weights stream into the GPU tensor by tensor), or one loaded
   * whole (its f32 Map). */
  model: LoadedModel | OpenedModel;
  identity: Identity;
  config: SftConfig;
  examples: readonly SftExample[];
  /** The data file (stored in each checkpoint, so --resume finds it). */
  dataPath: string;
  /** The data's column mapping (--column), stored with the path so a resume maps it again. */
  dataColumns?: string;
  runDir: string;
  resume?: { payload: CheckpointPayload; from: string } | null;
  log?: (line: string) => void;
}

/** Trains into run folder `runDir`; returns the checkpoint folders written. */
export async function sftFolder(o: SftFolderOptions): Promise<{ checkpoints: string[] }> {
  const { config, model, runDir } = o;
  const log = o.log ?? ((line: string) => console.log(line));
  const checkpoints: string[] = [];
  const run = await SftRun.create({
    engine: o.engine,
    runId: o.resume?.payload.runId || runDir,
    runName: runDir,
    modelIdentity: o.identity,
    config,
    model: {
      config: model.hf.config,
      weights: 'weights' in model.hf ? model.hf.weights : model.hf.tensors,
    },
    examples: o.examples,
    padTokenId: model.tokenizer.padTokenId,
    // A stage too large for the device is refused with the plan's advice before it allocates.
    mustFit: true,
    hooks: {
      onStep: (report) => {
        const row = { step: report.step, ...report.metrics, skipped: report.skipped };
        appendLine(join(runDir, 'metrics.jsonl'), JSON.stringify(row));
        const last = report.step === run.totalSteps;
        if (report.step % config.loggingSteps === 0 || last || report.skipped)
          log(sftStepLine(report, run.totalSteps));
      },
      onCheckpoint: (payload) => {
        const dir = join(runDir, `checkpoint-${payload.step}`);
        const files = hfFolderExtras(model);
        const extra = {
          baseModel: model.folder,
          data: o.dataPath,
          dataColumns: o.dataColumns ?? '',
        };
        for (const [name, bytes] of checkpointToFiles(payload, extra)) files.set(name, bytes);
        writeFolderAtomic(dir, files);
        checkpoints.push(dir);
        log(`saved ${dir}`);
      },
    },
  });
  try {
    mkdirSync(runDir, { recursive: true });
    for (const action of recoverRunFolder(runDir)) log(action);
    if (o.resume) {
      run.restore(o.resume.payload, fromStoredMetrics(o.resume.payload.metricsSoFar));
      log(`resumed from ${o.resume.from} at step ${run.stepCount}`);
      cutStepLogsLogged(runDir, run.stepCount, log);
    } else {
      const options = Object.fromEntries(Object.entries(config).map(([k, v]) => [trlName(k), v]));
      writeFileAtomic(
        join(runDir, 'config.json'),
        JSON.stringify({ model: model.folder, data: o.dataPath, ...options }, null, 2),
      );
      rmSync(join(runDir, 'metrics.jsonl'), { force: true });
    }
    log(
      `run folder: ${runDir}; ${o.examples.length} examples, ${run.totalSteps} steps of ` +
        `${config.perDeviceTrainBatchSize * config.gradientAccumulationSteps}`,
    );
    log(`memory plan: ${formatBytes(run.plan.peakBytes)} at peak`);
    const started = performance.now();
    const startStep = run.stepCount;
    await run.runUntil();
    log(trainedLine(startStep, run.stepCount, (performance.now() - started) / 1000));
    const finalDir = join(runDir, 'final-model');
    writeFolderAtomic(finalDir, await trainedModelFiles(run.policy, model));
    log(
      run.policy.lora
        ? `final model: ${finalDir} (merged; the PEFT adapter in ${join(finalDir, ADAPTER_FOLDER)})`
        : `final model: ${finalDir}`,
    );
    return { checkpoints };
  } finally {
    run.destroy();
  }
}

/** The run folder: --out, the resumed checkpoint's parent, or runs/sft-<date>. */
export function sftRunDir(args: SftArgs): string {
  if (args.out) return resolve(args.out);
  if (args.resume) return resolve(args.resume, '..');
  return resolve('runs', `sft-${new Date().toISOString().replace(/[:.]/g, '-')}`);
}
