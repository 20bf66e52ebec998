// What `npm run recipe` does once its arguments are read: a recipe (src/recipes/recipe.ts) run into a
// run folder, and resumed from one.
//   <out>/recipe.json                the recipe as run (a built-in one written out), written first
//   <out>/metrics.jsonl              the timeline: one line per optimizer step of any stage, with
//                                    `step` (across stages), `stage`, `stage_name`, `stage_step`
//   <out>/<i>-<name>/checkpoint-N/   each sft / grpo stage's checkpoints (a Hugging Face folder +
//                                    optimizer state + trainer_state.json) with recipe_state.json,
//                                    the RecipeState at that checkpoint: one atomic folder holds
//                                    the weights and the state that match them
//   <out>/state.json                 RecipeState after each stage (and at a stop)
//   <out>/<i>-<name>/sft.jsonl       what a rejection-sample stage kept, with samples.jsonl (every
//                                    sample, kept or not, and why) and report.json (counts, yield)
//   <out>/final-model/               the last weights as a Hugging Face folder, before the last
//                                    stage's state.json says the recipe is done
// Every file is written atomically (_atomic-files.ts) and a step's metrics row is durable before
// its checkpoint, so a kill anywhere leaves a folder --resume continues exactly: it takes the most
// advanced of state.json and the newest complete checkpoints' states, removes the leftovers of
// interrupted writes and makes metrics.jsonl the timeline up to that point (resumePoint).
// A module of its own (not an entry point) so tests run it in-process.
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Engine } from '../engine/engine';
import { toHfConfig } from '../core/model-config';
import { formatBytes } from '../core/format';
import type { MemoryPlan } from '../model/memory-plan';
import { exportDtypeOf, exportHfFolder } from '../export/hf-export';
import type { SafetensorsDtype } from '../formats/safetensors';
import { checkpointFromFiles, checkpointToFiles } from '../train/checkpoint';
import { isPrequantised, storedValuesOf } from '../model/parameters';
import { RecipeRun, stagePlanSummary, type RecipeHooks, type StagePlan } from '../recipes/recipe';
import {
  builtinRecipe,
  BUILTIN_RECIPES,
  parseRecipe,
  recipeScoringTask,
  stagePlansText,
  stageTrainingOptions,
  startsFromBase,
  type Recipe,
  type RecipeState,
} from '../recipes/recipe-spec';
import { nodeSandboxFactory } from '../rewards/reward-sandbox-node';
import type { CheckpointPayload } from '../storage/checkpoints';
import type { Identity } from '../storage/db';
import {
  appendLine,
  isDiskFull,
  readJsonl,
  writeFileAtomic,
  writeFolderAtomic,
} from './_atomic-files';
import { droppedText, newestCheckpoint, recoverRunFolder } from './_run-folder';
import { readSftDataset } from './_dataset';
import { parseRecipeState } from '../recipes/recipe-state';
import {
  hfFolderExtras,
  jsonBytes,
  loadModel,
  modelIdentity,
  modelWeights,
  type LoadedModel,
  type OpenedModel,
} from './_session';

/** A recipe named on the command line: a built-in name or a JSON file. An SFT stage's
 * `"data": {"path": "x.jsonl"}` is read here, relative to the recipe file: any dataset file or
 * folder the importer reads (src/tasks/datasets: TRL's SFT JSONL as is, gsm8k / MATH rows as
 * prompt / completion), with `"columns": "prompt=question,completion=answer"` when its layout
 * needs a mapping. */
export async function readRecipe(nameOrPath: string, seed?: number): Promise<Recipe> {
  if (nameOrPath in BUILTIN_RECIPES) return builtinRecipe(nameOrPath, seed);
  const path = resolve(nameOrPath);
  if (!existsSync(path))
    throw new Error(
      `no recipe file ${path} and no built-in recipe '${nameOrPath}' (${Object.keys(BUILTIN_RECIPES).join(', ')})`,
    );
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`${path} is not JSON: ${(err as Error).message}`, { cause: err });
  }
  const stages = Array.isArray(value?.stages) ? (value.stages as Record<string, unknown>[]) : [];
  for (const s of stages) {
    const data = s?.data as { path?: unknown; columns?: unknown } | undefined;
    if (data && typeof data.path === 'string') {
      const columns = typeof data.columns === 'string' ? data.columns : '';
      const d = await readSftDataset(resolve(dirname(path), data.path), 'data.path', columns);
      s.data = { jsonl: d.text };
    }
  }
  return parseRecipe(seed === undefined ? value : { ...value, seed });
}

const stageDir = (runDir: string, index: number, name: string) => join(runDir, `${index}-${name}`);

/** The RecipeState a recipe checkpoint folder carries beside the stage's own checkpoint files. */
export const RECIPE_STATE = 'recipe_state.json';

function readCheckpoint(dir: string): CheckpointPayload {
  return checkpointFromFiles((name) => new Uint8Array(readFileSync(join(dir, name)))).payload;
}

/** A saved state, checked field by field (parseRecipeState: errors name the file and the field). */
const readState = (path: string): RecipeState =>
  parseRecipeState(JSON.parse(readFileSync(path, 'utf8')), path);

/** Whether state `a` is further on than `b`: a later stage, or more timeline rows in the same one
 * (a stage's end has moved stageIndex past the stage's last checkpoint). */
const ahead = (a: RecipeState, b: RecipeState) =>
  a.stageIndex !== b.stageIndex
    ? a.stageIndex > b.stageIndex
    : a.timeline.length > b.timeline.length;

/**
 * Where a recipe run folder resumes after a stop or any kill: the most advanced of state.json
 * (written at stage ends) and each stage's newest complete checkpoint's recipe_state.json, with
 * the checkpoint of its current stage (null: the stage starts over). Leftovers of interrupted
 * writes are recovered first, in the run folder and in every stage's folder. `state` null: nothing
 * was saved yet, the recipe starts over. A state.json that does not parse (a folder written
 * before writes were atomic) is reported and passed over.
 */
export function resumePoint(
  runDir: string,
  recipe: Recipe,
  log: (line: string) => void,
): { state: RecipeState | null; checkpoint: string | null } {
  for (const action of recoverRunFolder(runDir)) log(action);
  const dirs = recipe.stages.map((s, i) => stageDir(runDir, i, s.name));
  for (const dir of dirs) for (const action of recoverRunFolder(dir)) log(action);
  let best: { state: RecipeState; checkpoint: string | null } | null = null;
  const statePath = join(runDir, 'state.json');
  if (existsSync(statePath)) {
    try {
      best = { state: readState(statePath), checkpoint: null };
    } catch (err) {
      log(`${statePath} does not parse (${(err as Error).message}): passed over`);
    }
  }
  for (const dir of dirs) {
    // The newest complete checkpoint of the stage; one without recipe_state.json is from before
    // checkpoints carried it (state.json then names the stage it belongs to).
    const newest = newestCheckpoint(dir, log);
    if (!newest || !existsSync(join(newest, RECIPE_STATE))) continue;
    let state: RecipeState;
    try {
      state = readState(join(newest, RECIPE_STATE));
    } catch (err) {
      log(`${join(newest, RECIPE_STATE)} does not parse (${(err as Error).message}): passed over`);
      continue;
    }
    // On a tie (a stop writes both) the checkpoint wins: it holds the stage's weights.
    if (!best || !ahead(best.state, state)) best = { state, checkpoint: newest };
  }
  if (!best) return { state: null, checkpoint: null };
  const current = recipe.stages[best.state.stageIndex];
  const checkpoint =
    best.checkpoint ??
    (current ? newestCheckpoint(stageDir(runDir, best.state.stageIndex, current.name)) : null);
  return { state: best.state, checkpoint };
}

/**
 * Makes metrics.jsonl exactly `rows` (the timeline up to the resume point): rows of steps trained
 * again and a torn last line go, rows the file lacks come back from the state. Logs what changed;
 * writes nothing when the file is already right.
 */
function reconcileMetrics(
  path: string,
  recipe: Recipe,
  rows: readonly RecipeState['timeline'][number][],
  log: (line: string) => void,
): void {
  const expected = rows.map((r) => metricsLine(recipe, r)).join('');
  if ((existsSync(path) ? readFileSync(path, 'utf8') : '') === expected) return;
  const read = readJsonl(path);
  const step = rows.at(-1)?.step ?? 0;
  const later = read.rows.filter(
    (r) => ((r.value as { step?: number } | null)?.step ?? 0) > step,
  ).length;
  const lacking = rows.length - (read.rows.length - later);
  const changes = [
    droppedText({ rows: later, torn: read.torn !== null, unreadable: read.unreadable }, step),
    lacking > 0 ? `restored ${lacking} row${lacking === 1 ? '' : 's'} from the state` : '',
  ].filter(Boolean);
  writeFileAtomic(path, expected);
  log(`metrics.jsonl: ${changes.join(', ') || 'rewritten from the state'}`);
}

/**
 * The dtype of the recipe's final-model/ folder, as `npm run train -- --export` picks it
 * (exportDtypeOf): BF16 when the stage whose weights end the recipe trained LoRA on an NF4 base
 * (its dequantised base with the adapters merged in): one with dtype nf4, or, when the loaded model
 * is a 4-bit checkpoint (`baseQuantised`), one that starts from it; F32 otherwise. A
 * rejection-sample stage passes its start weights through, so the stage behind them decides; the
 * base or a student model given by `from` is exported exactly (F32).
 */
export function finalModelDtype(recipe: Recipe, baseQuantised = false): SafetensorsDtype {
  let i = recipe.stages.length - 1;
  while (i >= 0) {
    const stage = recipe.stages[i];
    if (stage.kind !== 'rejection-sample') {
      const { usePeft, dtype } = stageTrainingOptions(recipe, i);
      if (!usePeft) return 'F32';
      return baseQuantised && startsFromBase(recipe, i) ? 'BF16' : exportDtypeOf([dtype]);
    }
    const from = stage.from ?? 'previous';
    // A stage starts from an earlier one (parseRecipe refuses the rest); -1: base or a model.
    const j = from === 'previous' ? i - 1 : recipe.stages.findIndex((s) => s.name === from);
    i = j < i ? j : -1;
  }
  return 'F32';
}

/** How a LoRA stage stores its frozen base, for the stage's log line (a full stage has none). */
const baseLine = (plan: MemoryPlan) =>
  plan.input.lora ? `, base stored as ${plan.input.dtype}` : '';

/**
 * `npm run recipe -- <recipe> --plan`: each training stage's memory plan on `model`, as the
 * recipe's preflight checks them before it runs a stage (RecipeRun.planStages), without running.
 */
export async function planRecipeStages(o: {
  engine: Engine;
  model: LoadedModel | OpenedModel;
  recipe: Recipe;
}): Promise<StagePlan[]> {
  const run = new RecipeRun({
    engine: o.engine,
    recipe: o.recipe,
    runId: 'plan',
    base: {
      config: o.model.hf.config,
      weights: await modelWeights(o.model),
      tokenizer: o.model.tokenizer,
    },
    sandboxFactory: nodeSandboxFactory(),
    scoringTask: recipeScoringTask(),
  });
  return run.planStages();
}

/** planRecipeStages' report: a line per planned stage, the plan's message for one that does not
 * fit, and the stages left to their own check. */
export function formatStagePlans(recipe: Recipe, plans: readonly StagePlan[]): string {
  const lines = [
    `memory plans of '${recipe.name}' (budget ${formatBytes(plans[0]?.plan.limits.totalBudget)}):`,
  ];
  for (const [index, stage] of recipe.stages.entries()) {
    const head = `  stage ${index + 1}/${recipe.stages.length}: ${stage.kind} '${stage.name}'`;
    const p = plans.find((x) => x.index === index);
    if (stage.kind === 'rejection-sample') lines.push(`${head}: samples, trains nothing`);
    else if (!p) lines.push(`${head}: planned when it starts (its start is not known yet)`);
    else {
      lines.push(
        `${head}: ${formatBytes(p.plan.peakBytes)} at peak${baseLine(p.plan)}, ${p.plan.fits ? 'fits' : 'does not fit'}`,
      );
      if (!p.plan.fits) lines.push(`    ${p.plan.message}`);
    }
  }
  return lines.join('\n');
}

export interface RecipeFolderOptions {
  engine: Engine;
  /** Opened (npm run recipe: streamed, the stages upload it tensor by tensor) or loaded whole. */
  model: LoadedModel | OpenedModel;
  /** The model's weightsIdentity when the caller has it; by default hashed here (modelIdentity). */
  identity?: Identity;
  recipe: Recipe;
  runDir: string;
  /** Continue the recipe stored in runDir (its state.json and latest checkpoint). */
  resume?: boolean;
  /** Extra hooks (the comparison evaluates each stage's weights). */
  hooks?: Pick<RecipeHooks, 'onStageEnd'>;
  /** Stop after this many optimizer steps in total (tests stop mid-stage to resume). */
  stopAfterSteps?: number;
  log?: (line: string) => void;
}

/** Runs (or resumes) a recipe into `runDir`; returns its final state. */
export async function recipeFolder(
  o: RecipeFolderOptions,
): Promise<{ state: RecipeState; outcome: 'finished' | 'stopped' }> {
  const { model, recipe, runDir } = o;
  const log = o.log ?? ((line: string) => console.log(line));
  mkdirSync(runDir, { recursive: true });
  const statePath = join(runDir, 'state.json');
  const metricsPath = join(runDir, 'metrics.jsonl');
  let resume: ConstructorParameters<typeof RecipeRun>[0]['resume'];
  if (o.resume) {
    const point = resumePoint(runDir, recipe, log);
    const state = point.state;
    const index = state?.stageIndex ?? 0;
    const current = recipe.stages[index];
    const checkpoint = point.checkpoint ? readCheckpoint(point.checkpoint) : null;
    if (state)
      resume = {
        state,
        checkpoint,
        checkpointOf: async (name) => {
          const i = recipe.stages.findIndex((s) => s.name === name);
          const dir = newestCheckpoint(stageDir(runDir, i, name));
          if (!dir) throw new Error(`--resume: stage '${name}' has no checkpoint in ${runDir}`);
          return readCheckpoint(dir);
        },
      };
    log(
      `resuming '${recipe.name}' at stage ${index + 1}/${recipe.stages.length}` +
        (current
          ? ` (${current.name}) from ${point.checkpoint ?? 'its start'}`
          : ' (all stages done)'),
    );
    // The timeline rows after the checkpoint are trained again: metrics.jsonl keeps those before.
    const rows = (state?.timeline ?? []).filter(
      (r) => r.stage < index || (r.stage === index && r.stageStep <= (checkpoint?.step ?? 0)),
    );
    reconcileMetrics(metricsPath, recipe, rows, log);
  } else {
    for (const action of recoverRunFolder(runDir)) log(action);
    // Two runs in one folder would mix their checkpoints, and --resume could take either's.
    for (const file of ['recipe.json', 'state.json'])
      if (existsSync(join(runDir, file)))
        throw new Error(
          `${runDir} already holds a recipe run (${file}): continue it with npm run recipe -- --resume ${runDir}, or choose another --out`,
        );
    // recipe.json first: from here on --resume can continue (or start over) this run.
    writeFileAtomic(join(runDir, 'recipe.json'), JSON.stringify(recipe, null, 2) + '\n');
    rmSync(metricsPath, { force: true });
  }
  const identity = o.identity ?? (await modelIdentity(model));
  // As stored (an opened model: streamed), never a whole-model f32 copy on the host.
  const baseWeights = await modelWeights(model);
  let steps = 0;
  const run: RecipeRun = new RecipeRun({
    engine: o.engine,
    recipe,
    runId: runDir,
    base: {
      config: model.hf.config,
      weights: baseWeights,
      tokenizer: model.tokenizer,
      identity,
    },
    loadModel: async (ref) => {
      const student = await loadModel(ref);
      return {
        config: student.hf.config,
        tokenizer: student.tokenizer,
        weights: student.hf.tensors,
        identity: await modelIdentity(student),
      };
    },
    sandboxFactory: nodeSandboxFactory(),
    scoringTask: recipeScoringTask(),
    resume,
    hooks: {
      onPlans: (plans) => {
        if (plans.length === 0) return;
        log(stagePlansText(plans.map(stagePlanSummary), plans[0].plan.limits.totalBudget));
      },
      onStageStart: ({ index, stage, steps: n, plan }) =>
        log(
          `stage ${index + 1}/${recipe.stages.length}: ${stage.kind} '${stage.name}'${n ? `, ${n} steps` : ''}` +
            (plan ? `; memory plan: ${formatBytes(plan.peakBytes)} at peak${baseLine(plan)}` : ''),
        ),
      onStep: (row, info) => {
        // Durable before the step's checkpoint, which resume would otherwise start after.
        appendLine(metricsPath, metricsLine(recipe, row).slice(0, -1));
        const m = row.metrics;
        const show = (k: string, d = 3) => (Number.isFinite(m[k]) ? `${k} ${m[k].toFixed(d)}` : '');
        log(
          [
            `  ${info.stage.name} ${row.stageStep}/${info.steps} (step ${row.step})`,
            show('loss', 4),
            show('mean_token_accuracy'),
            show('reward'),
            show('accuracy'),
            show('reflection_rate'),
          ]
            .filter(Boolean)
            .join('  '),
        );
        if (o.stopAfterSteps !== undefined && ++steps >= o.stopAfterSteps) run.stop();
      },
      onCheckpoint: (payload, { index, stage }) => {
        const dir = join(stageDir(runDir, index, stage.name), `checkpoint-${payload.step}`);
        const files = hfFolderExtras(model);
        // A student stage's checkpoint is of the student's architecture.
        files.set('config.json', jsonBytes(toHfConfig(payload.modelConfig)));
        for (const [name, bytes] of checkpointToFiles(payload, {
          baseModel: model.folder,
          recipe: recipe.name,
        }))
          files.set(name, bytes);
        // The state at this checkpoint, in the same atomic folder: resume never sees the weights
        // without the timeline that led to them (or the reverse).
        files.set(RECIPE_STATE, new TextEncoder().encode(JSON.stringify(run.snapshot())));
        writeFolderAtomic(dir, files);
      },
      onRejection: (report, { index, stage }) => {
        const dir = stageDir(runDir, index, stage.name);
        mkdirSync(dir, { recursive: true });
        // The stage is redone (the same draws) if a kill comes before its state.json.
        writeFileAtomic(join(dir, 'sft.jsonl'), run.snapshot().datasets[stage.name]);
        writeFileAtomic(
          join(dir, 'samples.jsonl'),
          report.samples.map((s) => JSON.stringify(s) + '\n').join(''),
        );
        const { samples: _samples, ...counts } = report;
        writeFileAtomic(join(dir, 'report.json'), JSON.stringify(counts, null, 2) + '\n');
        log(
          `  ${stage.name}: kept ${report.kept} of ${report.sampled} (yield ${(100 * report.yield).toFixed(1)}%); rejected: ` +
            Object.entries(report.reasons)
              .filter(([, n]) => n > 0)
              .map(([r, n]) => `${r} ${n}`)
              .join(', '),
        );
      },
      onStageEnd: async (result, info) => {
        log(`stage '${result.name}' done in ${result.seconds.toFixed(1)} s`);
        await o.hooks?.onStageEnd?.(result, info);
        // The final model before the state that says the recipe is done: a resume of a done
        // recipe has nothing left to write.
        if (info.index === recipe.stages.length - 1) {
          writeFolderAtomic(
            join(runDir, 'final-model'),
            exportHfFolder({
              config: info.config,
              // A LoRA stage's end weights have its adapters merged in (Run.readWeights); the base
              // passed through a rejection stage is read (and widened) here.
              tensors: await storedValuesOf(info.config, info.weights, 'f32'),
              tokenizerFiles: model.hf.tokenizerFiles,
              generation: model.hf.generation,
              dtype: finalModelDtype(recipe, isPrequantised(baseWeights)),
            }),
          );
          log(`final model: ${join(runDir, 'final-model')}`);
        }
        writeFileAtomic(statePath, JSON.stringify(run.snapshot()));
      },
    },
  });
  let outcome: 'finished' | 'stopped';
  try {
    outcome = await run.run();
    // A stop saved the stage's checkpoint (with its state); state.json says so too.
    if (outcome === 'stopped') writeFileAtomic(statePath, JSON.stringify(run.snapshot()));
  } catch (err) {
    if (isDiskFull(err))
      throw new Error(
        `${(err as Error).message}. The run folder keeps its last complete state: free some space, then continue with npm run recipe -- --resume ${runDir}`,
        { cause: err },
      );
    throw err;
  }
  return { state: run.snapshot(), outcome };
}

/** One metrics.jsonl line: the row's metrics with its place on the timeline. */
function metricsLine(recipe: Recipe, row: RecipeState['timeline'][number]): string {
  return (
    JSON.stringify({
      step: row.step,
      stage: row.stage,
      stage_name: recipe.stages[row.stage].name,
      stage_kind: recipe.stages[row.stage].kind,
      stage_step: row.stageStep,
      ...row.metrics,
    }) + '\n'
  );
}
