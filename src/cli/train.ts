// `npm run train -- --model <folder|bundled> --task countdown --steps 50 [--out runs/x] [options]`
// GRPO on Node WebGPU. Writes a run folder: config.json, metrics.jsonl (GRPO.md §6 names, one line
// per step), samples.jsonl (every group's completions, rewards and advantages), checkpoint-<step>/
// (a Hugging Face folder + optimizer.safetensors + trainer_state.json, written atomically), and
// eval.json (held-out prompts) at the end. `--resume <run>/checkpoint-<step>` continues a run.
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import {
  configHelp,
  isHelpRequested,
  parseCliArgs,
  resolveConfig,
  type Config,
} from '../grpo/config';
import { EvalDuringTraining } from '../grpo/eval-during-training';
import { evaluate } from '../grpo/evaluate';
import type { GrpoTrainer, StepReport, TrainerSnapshot } from '../grpo/trainer';
import { exportHfFolder } from '../export/hf-export';
import { parseSafetensors, writeSafetensors } from '../formats/safetensors';
import { planMemory, deviceMemoryLimits, formatBytes } from '../model/memory-plan';
import { createTrainer, loadModel, loadTask, openEngine, takeFlag } from './_session';

const USAGE = `usage: npm run train -- [--model <folder|bundled>] [--out <run folder>] [--config <config.json>]
                       [--resume <run>/checkpoint-<step>] [--option value …]

Trains with GRPO on Node WebGPU and writes a run folder (metrics.jsonl, samples.jsonl, checkpoints).
`;

function stepLine(report: StepReport, steps: number): string {
  const m = report.metrics;
  const f = (k: string, d = 3) => (Number.isFinite(m[k]) ? m[k].toFixed(d) : '–');
  return (
    `step ${String(report.step).padStart(String(steps).length)}/${steps}  reward ${f('reward')}  ` +
    `acc ${f('accuracy')}  fmt ${f('format_rate')}  len ${f('completions/mean_length', 1)}  ` +
    `refl ${f('reflection_rate')}  loss ${f('loss', 4)}  |g| ${f('grad_norm')}  ${f('step_time', 1)}s` +
    (report.skipped ? `  SKIPPED (${report.skipped})` : '')
  );
}

function samplesLine(report: StepReport): string {
  return JSON.stringify({
    step: report.step,
    groups: report.groups.map((g) => ({
      problem: g.problem.id,
      prompt: g.prompt,
      completions: g.completions.map((c) => ({
        text: c.text,
        reward: c.reward.total,
        rewards: c.reward.perFunction,
        advantage: c.advantage,
        truncated: c.truncated,
        reflects: c.reflects,
        errors: c.reward.errors,
      })),
    })),
  });
}

/** `weights` as a Hugging Face folder (config, safetensors, tokenizer) in `dir`. */
function writeHfFolder(
  dir: string,
  weights: Map<string, Float32Array>,
  model: Awaited<ReturnType<typeof loadModel>>,
) {
  const files = exportHfFolder({
    config: model.hf.config,
    tensors: weights,
    tokenizerFiles: model.hf.tokenizerFiles,
    generation: model.hf.generation,
  });
  for (const [name, bytes] of files) writeFileSync(join(dir, name), bytes);
}

async function saveCheckpoint(
  runDir: string,
  trainer: GrpoTrainer,
  config: Config,
  model: Awaited<ReturnType<typeof loadModel>>,
) {
  const snapshot = await trainer.snapshot();
  const final = join(runDir, `checkpoint-${snapshot.step}`);
  const partial = `${final}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  writeHfFolder(partial, snapshot.weights, model);
  writeFileSync(
    join(partial, 'optimizer.safetensors'),
    writeSafetensors(
      [...snapshot.optimizer].map(([name, data]) => ({ name, shape: [data.length], data })),
    ),
  );
  const { weights: _w, optimizer: _o, ...scalars } = snapshot;
  writeFileSync(
    join(partial, 'trainer_state.json'),
    JSON.stringify({ ...scalars, config, baseModel: model.folder }, null, 2),
  );
  // Visible only once complete: an interrupted save leaves the previous checkpoint as the latest.
  rmSync(final, { recursive: true, force: true });
  renameSync(partial, final);
  return final;
}

function readCheckpoint(dir: string): {
  snapshot: TrainerSnapshot;
  config: Config;
  baseModel: string;
} {
  const state = JSON.parse(readFileSync(join(dir, 'trainer_state.json'), 'utf8'));
  const weights = parseSafetensors(
    new Uint8Array(readFileSync(join(dir, 'model.safetensors'))),
    'model.safetensors',
  );
  const optimizer = parseSafetensors(
    new Uint8Array(readFileSync(join(dir, 'optimizer.safetensors'))),
    'optimizer.safetensors',
  );
  const toMap = (t: typeof weights) =>
    new Map([...t.tensors].map(([name, v]) => [name, v.data.slice()]));
  return {
    snapshot: {
      step: state.step,
      numTokens: state.numTokens,
      promptCursor: state.promptCursor,
      consecutiveSkips: state.consecutiveSkips,
      optimizerStep: state.optimizerStep,
      weights: toMap(weights),
      optimizer: toMap(optimizer),
    },
    config: resolveConfig(state.config),
    baseModel: state.baseModel,
  };
}

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
  let resume: ReturnType<typeof readCheckpoint> | null = null;
  if (resumeFrom) {
    resume = readCheckpoint(resolve(resumeFrom));
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
  mkdirSync(runDir, { recursive: true });

  const model = await loadModel(resume ? resume.baseModel : config.model);
  const task = loadTask(config, configPath ? resolve(configPath, '..') : process.cwd());
  const engine = await openEngine();
  const plan = planMemory(
    {
      config: model.hf.config,
      numPrompts: config.perStepPrompts,
      groupSize: config.numGenerations,
      promptLength: config.maxPromptLength,
      completionLength: config.maxCompletionLength,
      beta: config.beta,
    },
    deviceMemoryLimits(engine.device.limits, engine.device.limits.maxBufferSize * 4),
  );
  console.log(`memory plan: ${formatBytes(plan.peakBytes)} at peak`);
  if (!plan.fits) throw new Error(plan.message);

  const trainer = createTrainer(engine, config, model, task);
  if (resume) {
    trainer.restore(resume.snapshot);
    console.log(`resumed from ${resumeFrom} at step ${trainer.step}`);
  } else {
    writeFileSync(join(runDir, 'config.json'), JSON.stringify(config, null, 2));
    for (const f of ['metrics.jsonl', 'samples.jsonl', 'evals.jsonl'])
      rmSync(join(runDir, f), { force: true });
  }
  console.log(`run folder: ${runDir}`);
  const evalContext = {
    sampler: trainer.sampler,
    tokenizer: model.tokenizer,
    task,
    renderPrompt: (p: Parameters<GrpoTrainer['renderPrompt']>[0]) => trainer.renderPrompt(p),
  };
  const duringTraining = new EvalDuringTraining(trainer, evalContext, config);
  const started = performance.now();
  while (trainer.step < config.steps) {
    const report = await trainer.trainStep();
    appendFileSync(
      join(runDir, 'metrics.jsonl'),
      JSON.stringify({ step: report.step, ...report.metrics, skipped: report.skipped }) + '\n',
    );
    appendFileSync(join(runDir, 'samples.jsonl'), samplesLine(report) + '\n');
    console.log(stepLine(report, config.steps));
    if (report.step % config.saveSteps === 0 || report.step === config.steps) {
      console.log(`saved ${await saveCheckpoint(runDir, trainer, config, model)}`);
    }
    if (duringTraining.due(report.step)) {
      const e = await duringTraining.run(report.step);
      appendFileSync(
        join(runDir, 'evals.jsonl'),
        JSON.stringify({ step: e.step, ...e.metrics }) + '\n',
      );
      console.log(
        `eval at step ${e.step}: eval_accuracy ${e.metrics.eval_accuracy.toFixed(3)} ` +
          `(${trainer.evalProblems.length} prompts × ${config.evalGenerations}, ${e.metrics.eval_time.toFixed(1)} s)`,
      );
    }
  }
  // The last checkpoint keeps the last step's weights; the best ones go to best-model/.
  const loaded = duringTraining.loadBest();
  if (loaded) {
    const dir = join(runDir, 'best-model');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeHfFolder(dir, loaded.weights, model);
    console.log(
      `loaded the best evaluation's weights (step ${loaded.best.step}, eval_accuracy ${loaded.best.evalAccuracy.toFixed(3)}), written to ${dir}`,
    );
  }
  console.log(
    `trained ${config.steps} steps in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  if (config.evalPrompts > 0 && trainer.evalProblems.length > 0) {
    const report = await evaluate(evalContext, trainer.evalProblems, {
      k: 4,
      temperature: config.temperature,
      maxCompletionLength: config.maxCompletionLength,
      seed: config.seed,
    });
    writeFileSync(join(runDir, 'eval.json'), JSON.stringify(report, null, 2));
    console.log(`held-out (${report.prompts} prompts): ${JSON.stringify(report.metrics)}`);
  }
  trainer.destroy();
  engine.destroy();
  if (!existsSync(join(runDir, 'metrics.jsonl'))) throw new Error('no step was run');
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
