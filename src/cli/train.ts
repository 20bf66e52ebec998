// `npm run train -- --model <folder|bundled> --task countdown --steps 50 [--out runs/x] [options]`
// GRPO on Node WebGPU. Writes a run folder: config.json, metrics.jsonl (docs/grpo.md §6 names, one
// line per step), samples.jsonl (every group's completions, rewards and advantages),
// checkpoint-<step>/ (a Hugging Face folder + optimizer.safetensors + trainer_state.json, written
// atomically), and eval.json (held-out prompts) at the end. `--resume <run>/checkpoint-<step>`
// continues a run from that checkpoint, `--resume <run>` from its newest complete one (after any
// kill); `--config <file.json>` gives options as JSON, `--reward-file id=file.js` a custom
// reward's source, `--export <folder>` the final model (with --use_peft: merged, plus the PEFT
// adapter in <folder>/adapter/). Exits 0 when the run finished, 1 with a message otherwise. This
// file reads argv and loads the model; _train.ts runs the loop and the folder, _flags.ts holds the
// flag table.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkBaseModel, readerIdentity } from '../train/checkpoint';
import {
  configWarnings,
  flagName,
  isHelpRequested,
  parseCliArgs,
  resolveConfig,
  type Config,
} from '../grpo/config';
import {
  commandHelp,
  readConfigFile,
  resolveWithFile,
  rewardFiles,
  runCommand,
  takeCommandFlags,
  TRAIN,
} from './_flags';
import { openEngine, openModel, taskText } from './_session';
import { datasetOverrides } from './_dataset';
import {
  readCheckpointFolder,
  resumeTarget,
  storedConfig,
  terminalStatus,
  trainFolder,
} from './_train';

const isRecord = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

async function main(args: string[]) {
  if (isHelpRequested(args)) {
    console.log(commandHelp(TRAIN));
    return;
  }
  const { flags, rest } = takeCommandFlags(TRAIN, args);
  const one = (name: string) => flags.get(name)?.[0];
  const out = one('out');
  const configPath = one('config');
  const resumeFrom = one('resume');
  const exportTo = one('export');
  const overrides: Record<string, unknown> = parseCliArgs(rest);
  // --dataset: task jsonl over the file or folder (read once here; resume reads taskOptions.path).
  const dataset = resumeFrom ? null : await datasetOverrides(flags);
  if (dataset) {
    overrides.task = dataset.task;
    overrides.taskOptions = {
      ...(isRecord(overrides.taskOptions) ? overrides.taskOptions : {}),
      ...dataset.taskOptions,
    };
  }
  let config: Config;
  let resume: ReturnType<typeof readCheckpointFolder> | null = null;
  let resumeDir: string | null = null;
  let resumedFrom: string | null = null;
  if (resumeFrom) {
    // Only the length of the run may change on resume; anything else would not be the same run.
    const extra = [
      ...Object.keys(overrides).filter((k) => k !== 'steps'),
      ...(configPath ? ['--config'] : []),
      ...(flags.has('reward-file') ? ['--reward-file'] : []),
      ...['dataset', 'column', 'checker'].filter((f) => flags.has(f)).map((f) => `--${f}`),
    ];
    if (extra.length)
      throw new Error(
        `--resume continues a run as configured; only --steps may change (got ${extra.join(', ')})`,
      );
    const target = resumeTarget(resolve(resumeFrom));
    resumeDir = target.runDir;
    resumedFrom = target.checkpoint;
    if (target.checkpoint) {
      resume = readCheckpointFolder(target.checkpoint);
      config = resolveConfig({ ...resume.config, ...overrides });
    } else {
      console.log(
        `${target.runDir} has no checkpoint yet (the run was stopped before its first): training it again from its config.json`,
      );
      config = resolveConfig({ ...storedConfig(target.runDir), ...overrides });
    }
  } else {
    const fromFile = configPath ? readConfigFile(configPath) : {};
    const files = flags.get('reward-file') ?? [];
    if (files.length) {
      const pick = <T>(key: string): T | undefined =>
        (overrides[key] ?? fromFile[key]) as T | undefined;
      const added = rewardFiles(files, {
        rewards: Array.isArray(pick('rewards')) ? pick<string[]>('rewards') : undefined,
        // A malformed customRewards is left for resolveConfig to report where it was given.
        customRewards: {
          ...(isRecord(fromFile.customRewards) ? fromFile.customRewards : {}),
          ...(isRecord(overrides.customRewards) ? overrides.customRewards : {}),
        } as Record<string, string>,
      });
      overrides.rewards = added.rewards;
      overrides.customRewards = added.customRewards;
    }
    config = resolveWithFile(fromFile, configPath, overrides);
  }
  // Values the schema accepts but runs rarely use (research does): said, not refused.
  for (const warning of configWarnings(config, flagName)) console.warn(`warning: ${warning}`);
  const runDir = resolve(
    out ?? resumeDir ?? join('runs', new Date().toISOString().replace(/[:.]/g, '-')),
  );

  // Opened, not loaded: the run streams the weights into the GPU tensor by tensor as stored, so
  // the command never holds the whole model widened to f32 (the identity reads each tensor once).
  const model = await openModel(resume ? resume.baseModel : config.model);
  try {
    const identity = await readerIdentity(model.folder, model.hf.weights);
    if (resume) {
      checkBaseModel(resume.payload, identity);
      // Checkpoints written before trainer_state.json held the model config.
      resume.payload.modelConfig ??= model.hf.config;
    }
    const text =
      dataset?.text ??
      (await taskText(config, configPath ? resolve(configPath, '..') : process.cwd()));
    const engine = await openEngine();
    try {
      // On a terminal, the phase of the step under way on stderr (a log keeps only the lines).
      const status = process.stderr.isTTY ? terminalStatus(process.stderr, config.steps) : null;
      // trainFolder disposes its run (GPU buffers, reward sandboxes) in its own finally.
      await trainFolder({
        log: status?.log,
        progress: status?.progress,
        engine,
        model,
        identity,
        config,
        runDir,
        taskText: text,
        resume: resume && { payload: resume.payload, from: resumedFrom! },
        exportDir: exportTo ? resolve(exportTo) : null,
      });
    } finally {
      engine.destroy();
    }
    if (!existsSync(join(runDir, 'metrics.jsonl'))) throw new Error('no step was run');
  } finally {
    await model.hf.weights.close();
  }
}

runCommand(() => main(process.argv.slice(2)));
