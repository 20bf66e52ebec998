// What `npm run recipe` does once its arguments are read: a recipe (src/grpo/recipe.ts) run into a
// run folder, and resumed from one.
//   <out>/recipe.json                the recipe as run (a built-in one written out)
//   <out>/state.json                 RecipeState after every checkpoint and stage: resume reads it
//   <out>/metrics.jsonl              the timeline: one line per optimizer step of any stage, with
//                                    `step` (across stages), `stage`, `stage_name`, `stage_step`
//   <out>/<i>-<name>/checkpoint-N/   each sft / grpo stage's checkpoints (a Hugging Face folder +
//                                    optimizer state + trainer_state.json, written atomically)
//   <out>/<i>-<name>/sft.jsonl       what a rejection-sample stage kept, with samples.jsonl (every
//                                    sample, kept or not, and why) and report.json (counts, yield)
//   <out>/final-model/               the last weights as a Hugging Face folder
// A module of its own (not an entry point) so tests run it in-process.
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Engine } from '../engine/engine';
import { toHfConfig } from '../core/model-config';
import { exportHfFolder } from '../export/hf-export';
import { checkpointFromFiles, checkpointToFiles, weightsIdentity } from '../grpo/checkpoint';
import { RecipeRun, type RecipeHooks } from '../grpo/recipe';
import {
  builtinRecipe,
  BUILTIN_RECIPES,
  parseRecipe,
  recipeScoringTask,
  reviveRecipeState,
  type Recipe,
  type RecipeState,
} from '../grpo/recipe-spec';
import { nodeSandboxFactory } from '../grpo/reward-sandbox-node';
import type { CheckpointPayload } from '../storage/checkpoints';
import { recoverRunFolder, writeFolderAtomically } from './_run-folder';
import { hfFolderExtras, jsonBytes, loadModel, type LoadedModel } from './_session';

/** A recipe named on the command line: a built-in name or a JSON file. A stage's
 * `"data": {"path": "x.jsonl"}` is read here, relative to the recipe file. */
export function readRecipe(nameOrPath: string, seed?: number): Recipe {
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
    const data = s?.data as { path?: unknown } | undefined;
    if (data && typeof data.path === 'string')
      s.data = { jsonl: readFileSync(resolve(dirname(path), data.path), 'utf8') };
  }
  return parseRecipe(seed === undefined ? value : { ...value, seed });
}

const stageDir = (runDir: string, index: number, name: string) => join(runDir, `${index}-${name}`);

/** The newest checkpoint folder of a stage (highest step), or null. */
export function latestCheckpointDir(dir: string): string | null {
  if (!existsSync(dir)) return null;
  const steps = readdirSync(dir)
    .map((f) => /^checkpoint-(\d+)$/.exec(f))
    .filter(
      (m): m is RegExpExecArray => m !== null && existsSync(join(dir, m[0], 'trainer_state.json')),
    )
    .map((m) => Number(m[1]));
  return steps.length ? join(dir, `checkpoint-${Math.max(...steps)}`) : null;
}

function readCheckpoint(dir: string): CheckpointPayload {
  return checkpointFromFiles((name) => new Uint8Array(readFileSync(join(dir, name)))).payload;
}

export interface RecipeFolderOptions {
  engine: Engine;
  model: LoadedModel;
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
  for (const action of recoverRunFolder(runDir)) log(action);
  const statePath = join(runDir, 'state.json');
  let resume: ConstructorParameters<typeof RecipeRun>[0]['resume'];
  if (o.resume) {
    if (!existsSync(statePath))
      throw new Error(`--resume: ${runDir} has no state.json (not a recipe run folder)`);
    const state = reviveRecipeState(JSON.parse(readFileSync(statePath, 'utf8')) as RecipeState);
    const index = state.stageIndex;
    const current = recipe.stages[index];
    const latest = current ? latestCheckpointDir(stageDir(runDir, index, current.name)) : null;
    const checkpoint = latest ? readCheckpoint(latest) : null;
    resume = {
      state,
      checkpoint,
      weightsOf: async (name) => {
        const i = recipe.stages.findIndex((s) => s.name === name);
        const dir = latestCheckpointDir(stageDir(runDir, i, name));
        if (!dir) throw new Error(`--resume: stage '${name}' has no checkpoint in ${runDir}`);
        const payload = readCheckpoint(dir);
        return new Map(
          payload.tensors
            .filter((t) => !t.name.startsWith('optimizer.'))
            .map((t) => [t.name, t.data]),
        );
      },
    };
    // The timeline lines after the checkpoint are trained again: drop them from metrics.jsonl.
    const keep = state.timeline.filter(
      (r) => r.stage < index || (r.stage === index && r.stageStep <= (checkpoint?.step ?? 0)),
    );
    writeFileSync(join(runDir, 'metrics.jsonl'), keep.map((r) => metricsLine(recipe, r)).join(''));
    log(
      `resuming '${recipe.name}' at stage ${index + 1}/${recipe.stages.length}` +
        (current ? ` (${current.name}) from ${latest ?? 'its start'}` : ' (all stages done)'),
    );
  } else {
    writeFileSync(join(runDir, 'recipe.json'), JSON.stringify(recipe, null, 2) + '\n');
    writeFileSync(join(runDir, 'metrics.jsonl'), '');
  }
  const identity = await weightsIdentity(model.folder, model.hf.tensors);
  let steps = 0;
  const run: RecipeRun = new RecipeRun({
    engine: o.engine,
    recipe,
    runId: runDir,
    base: {
      config: model.hf.config,
      weights: model.hf.tensors,
      tokenizer: model.tokenizer,
      identity,
    },
    loadModel: async (ref) => {
      const student = await loadModel(ref);
      return {
        config: student.hf.config,
        tokenizer: student.tokenizer,
        weights: student.hf.tensors,
        identity: await weightsIdentity(student.folder, student.hf.tensors),
      };
    },
    sandboxFactory: nodeSandboxFactory(),
    scoringTask: recipeScoringTask(),
    resume,
    hooks: {
      onStageStart: ({ index, stage, steps: n }) =>
        log(
          `stage ${index + 1}/${recipe.stages.length}: ${stage.kind} '${stage.name}'${n ? `, ${n} steps` : ''}`,
        ),
      onStep: (row, info) => {
        appendFileSync(join(runDir, 'metrics.jsonl'), metricsLine(recipe, row));
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
        writeFolderAtomically(dir, files);
        writeFileSync(statePath, JSON.stringify(run.snapshot()));
      },
      onRejection: (report, { index, stage }) => {
        const dir = stageDir(runDir, index, stage.name);
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, 'sft.jsonl'), run.snapshot().datasets[stage.name]);
        writeFileSync(
          join(dir, 'samples.jsonl'),
          report.samples.map((s) => JSON.stringify(s) + '\n').join(''),
        );
        const { samples: _samples, ...counts } = report;
        writeFileSync(join(dir, 'report.json'), JSON.stringify(counts, null, 2) + '\n');
        log(
          `  ${stage.name}: kept ${report.kept} of ${report.sampled} (yield ${(100 * report.yield).toFixed(1)}%); rejected: ` +
            Object.entries(report.reasons)
              .filter(([, n]) => n > 0)
              .map(([r, n]) => `${r} ${n}`)
              .join(', '),
        );
      },
      onStageEnd: async (result, info) => {
        writeFileSync(statePath, JSON.stringify(run.snapshot()));
        log(`stage '${result.name}' done in ${result.seconds.toFixed(1)} s`);
        await o.hooks?.onStageEnd?.(result, info);
        if (info.index === recipe.stages.length - 1) {
          writeFolderAtomically(
            join(runDir, 'final-model'),
            exportHfFolder({
              config: info.config,
              tensors: new Map(info.weights),
              tokenizerFiles: model.hf.tokenizerFiles,
              generation: model.hf.generation,
            }),
          );
          log(`final model: ${join(runDir, 'final-model')}`);
        }
      },
    },
  });
  const outcome = await run.run();
  writeFileSync(statePath, JSON.stringify(run.snapshot()));
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
