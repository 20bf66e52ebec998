// `npm run train -- --model <folder|bundled> --task countdown --steps 50 [--out runs/x] [options]`
// GRPO on Node WebGPU. Writes a run folder: config.json, metrics.jsonl (docs/grpo.md §6 names, one
// line per step), samples.jsonl (every group's completions, rewards and advantages),
// checkpoint-<step>/ (a Hugging Face folder + optimizer.safetensors + trainer_state.json, written
// atomically), and eval.json (held-out prompts) at the end. `--resume <run>/checkpoint-<step>`
// continues a run. This file reads argv and loads the model; _train.ts runs the loop and the folder.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkBaseModel, weightsIdentity } from '../grpo/checkpoint';
import {
  configHelp,
  isHelpRequested,
  parseCliArgs,
  resolveConfig,
  type Config,
} from '../grpo/config';
import { loadModel, openEngine, takeFlag, taskText } from './_session';
import { readCheckpointFolder, trainFolder } from './_train';

const USAGE = `usage: npm run train -- [--model <folder|bundled>] [--out <run folder>] [--config <config.json>]
                       [--resume <run>/checkpoint-<step>] [--option value …]

Trains with GRPO on Node WebGPU and writes a run folder (metrics.jsonl, samples.jsonl, checkpoints).
`;

async function main(args: string[]) {
  if (isHelpRequested(args)) {
    console.log(`${USAGE}\n${configHelp()}`);
    return;
  }
  const argv = args.slice();
  const out = takeFlag(argv, '--out');
  const configPath = takeFlag(argv, '--config');
  const resumeFrom = takeFlag(argv, '--resume');
  const overrides = parseCliArgs(argv);
  let config: Config;
  let resume: ReturnType<typeof readCheckpointFolder> | null = null;
  if (resumeFrom) {
    resume = readCheckpointFolder(resolve(resumeFrom));
    // Only the length of the run may change on resume; anything else would not be the same run.
    const extra = Object.keys(overrides).filter((k) => k !== 'steps');
    if (extra.length)
      throw new Error(
        `--resume continues a run as configured; only --steps may change (got ${extra.join(', ')})`,
      );
    config = resolveConfig({ ...resume.config, ...overrides });
  } else {
    const fromFile = configPath ? JSON.parse(readFileSync(resolve(configPath), 'utf8')) : {};
    config = resolveConfig({ ...fromFile, ...overrides });
  }
  const runDir = resolve(
    out ??
      (resume
        ? join(resolve(resumeFrom!), '..')
        : join('runs', new Date().toISOString().replace(/[:.]/g, '-'))),
  );

  const model = await loadModel(resume ? resume.baseModel : config.model);
  const identity = await weightsIdentity(model.folder, model.hf.tensors);
  if (resume) {
    checkBaseModel(resume.payload, identity);
    // Checkpoints written before trainer_state.json held the model config.
    resume.payload.modelConfig ??= model.hf.config;
  }
  const text = taskText(config, configPath ? resolve(configPath, '..') : process.cwd());
  const engine = await openEngine();
  try {
    await trainFolder({
      engine,
      model,
      identity,
      config,
      runDir,
      taskText: text,
      resume: resume && { payload: resume.payload, from: resumeFrom! },
    });
  } finally {
    engine.destroy();
  }
  if (!existsSync(join(runDir, 'metrics.jsonl'))) throw new Error('no step was run');
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
