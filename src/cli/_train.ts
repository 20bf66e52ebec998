// What `npm run train` does once its arguments are read: grpo's Run (src/train/run.ts, the loop the
// playground's worker shares) with a run folder's I/O around it: config.json, metrics.jsonl,
// samples.jsonl and evals.jsonl appended per step, checkpoint-<step>/ through the checkpoint codec
// (src/train/checkpoint.ts), best-model/ and eval.json at the end (and the final model with
// --export; a LoRA run's model folders hold merged weights plus the PEFT adapter/), progress on
// stdout (and the phase of the step under way on a terminal). Every file is written atomically
// (_atomic-files.ts) in an order that a kill at any point leaves resumable: a step's rows are
// durable before its checkpoint, and `--resume <run folder>` takes the newest complete checkpoint,
// removes the leftovers and cuts the logs back to its step (_run-folder.ts). A module of its own
// (not an entry point) so tests drive the command's path in-process.
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Engine } from '../engine/engine';
import { CHECKPOINT_FILES, checkpointFromFiles, checkpointToFiles } from '../train/checkpoint';
import { resolveConfig, type Config } from '../grpo/config';
import { evaluate } from '../train/evaluate';
import { nodeSandboxFactory } from '../rewards/reward-sandbox-node';
import { Run } from '../train/run';
import { phaseText, type PhaseProgress } from '../grpo/step-progress';
import type { StepReport } from '../grpo/trainer';
import { formatBytes } from '../core/format';
import type { MemoryPlan } from '../model/memory-plan';
import type { CheckpointPayload } from '../storage/checkpoints';
import type { Identity } from '../storage/db';
import { appendLine, isDiskFull, writeFileAtomic, writeFolderAtomic } from './_atomic-files';
import { cutStepLogsLogged, newestCheckpoint, recoverRunFolder, STEP_LOGS } from './_run-folder';
import {
  ADAPTER_FOLDER,
  hfFolderExtras,
  modelWeights,
  trainedModelFiles,
  type LoadedModel,
  type OpenedModel,
} from './_session';
import { trainedLine } from './_flags';

/** "custom:len failed on 3/8 (threw: TypeError: …)" per reward with errors in this step, or ''. */
export function rewardErrorSummary(report: Pick<StepReport, 'groups'>): string {
  const completions = report.groups.flatMap((g) => g.completions);
  const byReward = new Map<string, { count: number; first: string }>();
  for (const c of completions) {
    // One count per completion and reward, however many records it has.
    const seen = new Set<string>();
    for (const e of c.reward.errors) {
      if (seen.has(e.reward)) continue;
      seen.add(e.reward);
      const entry = byReward.get(e.reward);
      if (entry) entry.count += 1;
      else byReward.set(e.reward, { count: 1, first: `${e.kind}: ${e.message}` });
    }
  }
  const clip = (s: string) => (s.length > 80 ? `${s.slice(0, 79)}…` : s);
  return [...byReward]
    .map(([name, e]) => `${name} failed on ${e.count}/${completions.length} (${clip(e.first)})`)
    .join('; ');
}

/** The progress line of one step; reward failures and a skipped update are always shown. */
export function stepLine(report: StepReport, steps: number): string {
  const m = report.metrics;
  const f = (k: string, d = 3) => (Number.isFinite(m[k]) ? m[k].toFixed(d) : '–');
  const errors = rewardErrorSummary(report);
  return (
    `step ${String(report.step).padStart(String(steps).length)}/${steps}  reward ${f('reward')}  ` +
    `acc ${f('accuracy')}  fmt ${f('format_rate')}  len ${f('completions/mean_length', 1)}  ` +
    `refl ${f('reflection_rate')}  loss ${f('loss', 4)}  |g| ${f('grad_norm')}  ${f('step_time', 1)}s` +
    (errors ? `  REWARD ERRORS: ${errors}` : '') +
    (report.skipped ? `  SKIPPED (${report.skipped})` : '')
  );
}

/** Whether a step's progress line is printed: every loggingSteps steps and the last, and any step
 * whose rewards failed or whose update was skipped. (metrics.jsonl has every step.) */
export function stepLogged(report: StepReport, config: Pick<Config, 'loggingSteps' | 'steps'>) {
  return (
    report.step % config.loggingSteps === 0 ||
    report.step === config.steps ||
    report.skipped !== null ||
    report.groups.some((g) => g.completions.some((c) => c.reward.errors.length > 0))
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

/**
 * A checkpoint folder written by this command: its payload, config and base model folder. An
 * interrupted replacement of it (or of its siblings) is recovered first: a folder moved aside
 * by a save that died comes back under its name.
 */
export function readCheckpointFolder(
  dir: string,
  log: (line: string) => void = (line) => console.log(line),
): {
  payload: CheckpointPayload;
  config: Config;
  baseModel: string;
} {
  for (const action of recoverRunFolder(dirname(dir))) log(action);
  if (!existsSync(dir)) throw new Error(`--resume: checkpoint folder ${dir} does not exist`);
  if (!existsSync(join(dir, CHECKPOINT_FILES.state)))
    throw new Error(
      `--resume: ${dir} is not a checkpoint folder of this command (it has no ${CHECKPOINT_FILES.state})`,
    );
  const { payload, state } = checkpointFromFiles(
    (name) => new Uint8Array(readFileSync(join(dir, name))),
  );
  return { payload, config: resolveConfig(payload.config), baseModel: String(state.baseModel) };
}

/**
 * What `--resume <path>` continues: `path` itself when it is a checkpoint folder (as named, even
 * an older one), else the newest complete checkpoint of run folder `path`, after recovering the
 * leftovers of a killed write. `checkpoint` null: the run was killed before its first checkpoint,
 * and its config.json starts it over (the steps are the same again).
 */
export function resumeTarget(
  path: string,
  log: (line: string) => void = (line) => console.log(line),
): { runDir: string; checkpoint: string | null } {
  if (/^checkpoint-\d+$/.test(basename(path)) || existsSync(join(path, CHECKPOINT_FILES.state)))
    return { runDir: dirname(path), checkpoint: path };
  if (!existsSync(path)) throw new Error(`--resume: ${path} does not exist`);
  for (const action of recoverRunFolder(path)) log(action);
  const checkpoint = newestCheckpoint(path, log);
  if (!checkpoint && !existsSync(join(path, 'config.json')))
    throw new Error(
      `--resume: ${path} has no checkpoint-<step>/ and no config.json: the run was stopped before it started (start it again), or this is not a run folder of npm run train`,
    );
  return { runDir: path, checkpoint };
}

/** A run folder's config.json (what `--resume` starts over from when no checkpoint was saved). */
export function storedConfig(runDir: string): Config {
  const path = join(runDir, 'config.json');
  try {
    return resolveConfig(JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>);
  } catch (err) {
    throw new Error(`--resume: ${path}: ${(err as Error).message}`, { cause: err });
  }
}

export interface TrainFolderOptions {
  engine: Engine;
  /** An opened model (`train`: its weights stream into the run tensor by tensor, as stored), or
   * one loaded whole (tests; the weights are then given as the Map). */
  model: LoadedModel | OpenedModel;
  /** weightsIdentity of the model's weights: each checkpoint's base model. */
  identity: Identity;
  config: Config;
  runDir: string;
  /** Task 'jsonl': the file's text. */
  taskText?: string;
  /** Continue from this checkpoint (`--resume`): `from` names it in the output. */
  resume?: { payload: CheckpointPayload; from: string } | null;
  /** `--export`: the final model as a Hugging Face folder here (LoRA: merged, + adapter/). */
  exportDir?: string | null;
  log?: (line: string) => void;
  /** The phase of the step under way (the Run's onProgress); null between steps. */
  progress?: (progress: PhaseProgress | null) => void;
}

/**
 * A status line for a terminal: the phase of the step under way ("step 3/10: sampling 12/80
 * tokens"), rewritten in place on `out` and erased between steps and before each log line.
 */
export function terminalStatus(
  out: { write(text: string): unknown },
  steps: number,
): { progress(p: PhaseProgress | null): void; log(line: string): void } {
  let shown = false;
  const clear = () => {
    if (shown) out.write('\r\x1b[K');
    shown = false;
  };
  return {
    progress(p) {
      if (!p) return clear();
      out.write(`\r\x1b[Kstep ${p.step}/${steps}: ${phaseText(p)}`);
      shown = true;
    },
    log(line) {
      clear();
      console.log(line);
    },
  };
}

/** Trains `config` into run folder `runDir`; returns the memory plan and the checkpoint folders. */
export async function trainFolder(o: TrainFolderOptions): Promise<{
  plan: MemoryPlan;
  checkpoints: string[];
}> {
  const { config, model, runDir } = o;
  const log = o.log ?? ((line: string) => console.log(line));
  const checkpoints: string[] = [];
  const append = (file: string, row: unknown) =>
    appendLine(join(runDir, file), JSON.stringify(row));
  const run = await Run.create({
    engine: o.engine,
    config,
    model: {
      config: model.hf.config,
      weights: await modelWeights(model),
      tokenizer: model.tokenizer,
    },
    runId: o.resume?.payload.runId || runDir,
    runName: runDir,
    modelIdentity: o.identity,
    taskText: o.taskText,
    sandboxFactory: nodeSandboxFactory(),
    mustFit: true,
    hooks: {
      onProgress: o.progress,
      onStep: (report) => {
        append('metrics.jsonl', { step: report.step, ...report.metrics, skipped: report.skipped });
        appendLine(join(runDir, 'samples.jsonl'), samplesLine(report));
        if (stepLogged(report, config)) log(stepLine(report, config.steps));
      },
      onCheckpoint: (payload) => {
        const dir = join(runDir, `checkpoint-${payload.step}`);
        const files = hfFolderExtras(model);
        for (const [name, bytes] of checkpointToFiles(payload, { baseModel: model.folder }))
          files.set(name, bytes);
        writeFolderAtomic(dir, files);
        checkpoints.push(dir);
        log(`saved ${dir}`);
      },
      onEval: (e) => {
        append('evals.jsonl', { step: e.step, ...e.metrics });
        log(
          `eval at step ${e.step}: eval_accuracy ${e.metrics.eval_accuracy.toFixed(3)} ` +
            `(${run.trainer.evalProblems.length} prompts × ${config.evalGenerations}, ${e.metrics.eval_time.toFixed(1)} s)`,
        );
      },
      // The last checkpoint keeps the last step's weights; the best ones go to best-model/.
      // The policy holds the best weights now (LoRA: base + best adapters, written merged).
      onBestLoaded: async ({ best }) => {
        const dir = join(runDir, 'best-model');
        writeFolderAtomic(dir, await trainedModelFiles(run.trainer.policy, model));
        log(
          `loaded the best evaluation's weights (step ${best.step}, eval_accuracy ${best.evalAccuracy.toFixed(3)}), written to ${dir}`,
        );
      },
    },
  });
  try {
    log(`memory plan: ${formatBytes(run.plan.peakBytes)} at peak`);
    // For a JSONL dataset this names the lines that were skipped and why.
    log(`task: ${run.task.description}`);
    mkdirSync(runDir, { recursive: true });
    for (const action of recoverRunFolder(runDir)) log(action);
    if (o.resume) {
      run.restore(o.resume.payload);
      log(`resumed from ${o.resume.from} at step ${run.stepCount}`);
      // The steps after the checkpoint are trained again: their earlier rows would appear twice.
      cutStepLogsLogged(runDir, run.stepCount, log);
    } else {
      // config.json first: from here on `--resume <run folder>` can start the run over.
      writeFileAtomic(join(runDir, 'config.json'), JSON.stringify(config, null, 2));
      for (const f of STEP_LOGS) rmSync(join(runDir, f), { force: true });
    }
    log(`run folder: ${runDir}`);
    const started = performance.now();
    const startStep = run.stepCount;
    await run.runUntil();
    log(trainedLine(startStep, run.stepCount, (performance.now() - started) / 1000));
    if (o.exportDir) {
      writeFolderAtomic(o.exportDir, await trainedModelFiles(run.trainer.policy, model));
      log(
        run.trainer.policy.lora
          ? `exported the merged model to ${o.exportDir} and the PEFT adapter to ${join(o.exportDir, ADAPTER_FOLDER)}`
          : `exported the model to ${o.exportDir}`,
      );
    }
    if (config.evalPrompts > 0 && run.trainer.evalProblems.length > 0) {
      const report = await evaluate(run.evalContext, run.trainer.evalProblems, {
        k: 4,
        temperature: config.temperature,
        maxCompletionLength: config.maxCompletionLength,
        seed: config.seed,
      });
      writeFileAtomic(join(runDir, 'eval.json'), JSON.stringify(report, null, 2));
      log(`held-out (${report.prompts} prompts): ${JSON.stringify(report.metrics)}`);
    }
    return { plan: run.plan, checkpoints };
  } catch (err) {
    if (isDiskFull(err))
      throw new Error(
        `${(err as Error).message}. The run folder keeps its last complete checkpoint: free some space, then continue with npm run train -- --resume ${runDir}`,
        { cause: err },
      );
    throw err;
  } finally {
    run.destroy();
  }
}
