// Multi-stage recipes in the trainer worker (issue #27): grpo's RecipeRun (src/grpo/recipe.ts: SFT,
// GRPO and rejection-sample stages on one model, one timeline) on the worker's loaded model, with
// the page's storage in place of the CLI's run folder (src/cli/_recipe.ts):
//   run row `runId`                  RunRecord.recipe = { state: RecipeState, rejections } and
//                                    RunRecord.stages (where each stage begins on the timeline),
//                                    written after every step, checkpoint and stage
//   metrics [runId, step]            the timeline (the Runs panel lists, downloads and overlays it)
//   checkpoints of `${runId}/${i}-${name}`   each sft / grpo stage's checkpoints (the last two kept)
// Resuming (after Pause, or after a reload) reads the state back, restores the current stage from
// its latest checkpoint and asks for an earlier stage's final weights (a stage `from` it) from that
// stage's latest checkpoint. trainer-api.ts exposes these methods beside its own; the page gets
// the recipe's progress through its own listener (RecipeEvent), apart from the playground run's.
import type { Engine } from '../engine/engine';
import type { LlamaConfig } from '../core/model-config';
import { RecipeRun } from '../grpo/recipe';
import {
  builtinRecipe,
  parseRecipe,
  recipeScoringTask,
  reviveRecipeState,
  type Recipe,
  type RecipeState,
  type StageKind,
  type StageResult,
  type TimelineRow,
} from '../grpo/recipe-spec';
import type { RejectionSamplingReport } from '../grpo/rejection-sampling';
import type { SandboxFactory } from '../grpo/reward-sandbox';
import type { TrainerTokenizer } from '../grpo/trainer';
import type { CheckpointPayload } from '../storage/checkpoints';
import type { Identity, MetricsRow, RunStage, RunStatus, StoredRecipe } from '../storage/db';
import type { GrpoStorage } from '../storage/index';
import type { RunHistoryMeta } from '../storage/run-history';

/** What the recipe needs of the trainer worker (trainer-api.ts passes its own). */
export interface RecipeContext {
  getEngine(): Promise<Engine>;
  getStorage(): Promise<GrpoStorage>;
  /** The loaded base model, or null. */
  model(): {
    label: string;
    hf: { config: LlamaConfig; tensors: ReadonlyMap<string, Float32Array> };
    tokenizer: TrainerTokenizer;
    identity: Identity;
  } | null;
  sandboxFactory(): SandboxFactory;
  /** Why the GPU is taken by something else (the playground run is stepping), or null. */
  busy(): string | null;
}

export type RecipeStatus = 'ready' | 'running' | 'paused' | 'finished' | 'error';

/** The recipe's progress stream (setRecipeListener). */
export type RecipeEvent =
  | { type: 'recipe-status'; runId: string; status: RecipeStatus; message?: string }
  | {
      type: 'recipe-stage-start';
      runId: string;
      index: number;
      name: string;
      kind: StageKind;
      /** The stage's optimizer steps (0 for rejection-sample). */
      steps: number;
      /** The timeline step the stage starts after. */
      startStep: number;
    }
  | {
      type: 'recipe-step';
      runId: string;
      row: TimelineRow;
      steps: number;
      elapsedMs: number;
      skipped?: string | null;
    }
  | { type: 'recipe-checkpoint'; runId: string; index: number; step: number }
  | { type: 'recipe-checkpoint-failed'; runId: string; index: number; message: string }
  | {
      type: 'recipe-rejection';
      runId: string;
      index: number;
      name: string;
      report: RejectionSamplingReport;
    }
  | { type: 'recipe-stage-end'; runId: string; result: StageResult };

/** A recipe run as the page shows it: the state (its timeline trimmed to what is kept on resume)
 * and the rejection-sample stages' reports. */
export interface RecipeView {
  runId: string;
  runName: string;
  status: RecipeStatus;
  state: RecipeState;
  rejections: Record<string, RejectionSamplingReport>;
}

/** A stored recipe run (the Recipes view offers the unfinished ones for resume). */
export interface RecipeRunSummary {
  runId: string;
  runName: string;
  recipeName: string;
  status: RunStatus;
  stageIndex: number;
  stageCount: number;
  /** The current stage's name (null when every stage is done). */
  stageName: string | null;
  lastStep: number;
  updatedAt: number;
  finished: boolean;
  model: string | null;
}

/** Checkpoints kept per stage: the latest resumes it; one before it in case that one is cut. */
const KEEP_CHECKPOINTS = 2;

/** The run id of stage `index`'s checkpoints (RecipeRun names its stage runs so). */
export const stageRunId = (runId: string, index: number, name: string) =>
  `${runId}/${index}-${name}`;

/** Where each started stage begins on the timeline (RunRecord.stages). */
export function runStages(state: RecipeState): RunStage[] {
  const out: RunStage[] = [];
  for (let i = 0; i < state.recipe.stages.length; i++) {
    const started = i <= state.stageIndex || state.timeline.some((r) => r.stage === i);
    if (!started) break;
    const before = state.timeline.filter((r) => r.stage < i).at(-1)?.step ?? 0;
    out.push({
      name: state.recipe.stages[i].name,
      kind: state.recipe.stages[i].kind,
      firstStep: before + 1,
    });
  }
  return out;
}

/** The timeline a resume keeps: earlier stages', and the current stage's up to its checkpoint. */
export function keptTimeline(state: RecipeState, checkpointStep: number): TimelineRow[] {
  return state.timeline.filter(
    (r) =>
      r.stage < state.stageIndex || (r.stage === state.stageIndex && r.stageStep <= checkpointStep),
  );
}

const metricsRow = (row: TimelineRow): MetricsRow => ({ ...row.metrics, step: row.step });

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

interface Active {
  runId: string;
  runName: string;
  recipe: Recipe;
  /** null after a pause: the next run() resumes from storage (a stopped RecipeRun would start its
   * stage over). */
  run: RecipeRun | null;
  rejections: Record<string, RejectionSamplingReport>;
  status: RecipeStatus;
  meta: RunHistoryMeta;
  /** runRecipe's pauseAfterStep: stop once this timeline step is trained. */
  pauseAfter?: number;
}

export function createRecipeApi(ctx: RecipeContext) {
  let listener: ((event: RecipeEvent) => void) | null = null;
  let active: Active | null = null;
  let running = false;
  /** Storage writes in order: each hook awaits its own, so a step's state is stored before the
   * next step starts. */
  let writes: Promise<unknown> = Promise.resolve();

  const emit = (event: RecipeEvent) => {
    try {
      listener?.(event);
    } catch {
      // A closed page must not stop training.
    }
  };
  const setStatus = (a: Active, status: RecipeStatus, msg?: string) => {
    a.status = status;
    emit({ type: 'recipe-status', runId: a.runId, status, ...(msg ? { message: msg } : {}) });
  };

  function requireModel() {
    const m = ctx.model();
    if (!m) throw new Error('Load a model first: a recipe trains the loaded model.');
    return m;
  }

  function queue<T>(fn: () => Promise<T>): Promise<T> {
    const next = writes.then(fn);
    writes = next.catch(() => {});
    return next;
  }

  /** Stores the recipe's state (and, with `row`, that timeline row) on its run row. */
  function persist(a: Active, status: RunStatus, rows: MetricsRow[] = []): Promise<void> {
    const run = a.run;
    if (!run) return Promise.resolve();
    const state = run.snapshot();
    return queue(async () => {
      const s = await ctx.getStorage();
      const meta = { ...a.meta, stages: runStages(state) };
      if (rows.length) await s.recordRunMetrics(meta, rows);
      await s.putRecipe(
        meta,
        { state: state as unknown as StoredRecipe['state'], rejections: a.rejections },
        status,
      );
    });
  }

  function view(a: Active, state: RecipeState): RecipeView {
    return {
      runId: a.runId,
      runName: a.runName,
      status: a.status,
      state,
      rejections: a.rejections,
    };
  }

  /** A RecipeRun on the loaded model whose hooks stream its progress and store it. */
  async function build(a: Active, resume?: ConstructorParameters<typeof RecipeRun>[0]['resume']) {
    const m = requireModel();
    const engine = await ctx.getEngine();
    const runStatus = (): RunStatus => (running ? 'running' : 'paused');
    const run: RecipeRun = new RecipeRun({
      engine,
      recipe: a.recipe,
      runId: a.runId,
      base: {
        config: m.hf.config,
        weights: m.hf.tensors,
        tokenizer: m.tokenizer,
        identity: m.identity,
      },
      sandboxFactory: ctx.sandboxFactory(),
      scoringTask: recipeScoringTask(),
      resume,
      hooks: {
        onStageStart: async ({ index, stage, steps, startStep }) => {
          emit({
            type: 'recipe-stage-start',
            runId: a.runId,
            index,
            name: stage.name,
            kind: stage.kind,
            steps,
            startStep,
          });
          await persist(a, runStatus());
        },
        onStep: async (row, { steps, elapsedMs, skipped }) => {
          emit({ type: 'recipe-step', runId: a.runId, row, steps, elapsedMs, skipped });
          if (a.pauseAfter !== undefined && row.step >= a.pauseAfter) {
            a.pauseAfter = undefined;
            run.stop();
          }
          await persist(a, runStatus(), [metricsRow(row)]);
        },
        onCheckpoint: async (payload: CheckpointPayload, { index }) => {
          try {
            await queue(async () => {
              const s = await ctx.getStorage();
              await s.saveCheckpoint(
                { ...payload, runName: `${a.runName} · ${a.recipe.stages[index].name}` },
                { retention: { keepLast: KEEP_CHECKPOINTS } },
              );
            });
            emit({ type: 'recipe-checkpoint', runId: a.runId, index, step: payload.step });
          } catch (err) {
            // Training goes on; a resume starts from the stage's previous checkpoint.
            emit({
              type: 'recipe-checkpoint-failed',
              runId: a.runId,
              index,
              message: message(err),
            });
          }
          await persist(a, runStatus());
        },
        onRejection: async (report, { index, stage }) => {
          a.rejections = { ...a.rejections, [stage.name]: report };
          emit({ type: 'recipe-rejection', runId: a.runId, index, name: stage.name, report });
          await persist(a, runStatus());
        },
        onStageEnd: async (result) => {
          emit({ type: 'recipe-stage-end', runId: a.runId, result });
          await persist(a, runStatus());
        },
      },
    });
    return run;
  }

  /** Reads a stored recipe run back and builds its RecipeRun from the latest checkpoints. */
  async function restore(runId: string): Promise<{ a: Active; state: RecipeState }> {
    const m = requireModel();
    const s = await ctx.getStorage();
    const record = await s.getRun(runId);
    if (!record?.recipe) throw new Error(`There is no stored recipe run '${runId}'.`);
    if (record.modelIdentity && record.modelIdentity.sha256 !== m.identity.sha256)
      throw new Error(
        `This recipe trained '${record.modelIdentity.name}'; load that model to resume it (the loaded one is '${m.label}').`,
      );
    const state = reviveRecipeState(record.recipe.state as unknown as RecipeState);
    const recipe = state.recipe;
    const index = state.stageIndex;
    const current = recipe.stages[index];
    const checkpoint = current
      ? await s.loadLatestCheckpoint(stageRunId(runId, index, current.name))
      : null;
    const a: Active = {
      runId,
      runName: record.name,
      recipe,
      run: null,
      rejections: (record.recipe.rejections ?? {}) as Record<string, RejectionSamplingReport>,
      status: current ? 'paused' : 'finished',
      meta: {
        id: runId,
        name: record.name,
        config: record.config,
        modelConfig: record.modelConfig,
        modelIdentity: record.modelIdentity,
      },
    };
    a.run = await build(a, {
      state,
      checkpoint,
      weightsOf: async (name) => {
        const i = recipe.stages.findIndex((st) => st.name === name);
        const latest = await s.loadLatestCheckpoint(stageRunId(runId, i, name));
        if (!latest) throw new Error(`The recipe's stage '${name}' has no stored checkpoint.`);
        return new Map(
          latest.tensors
            .filter((t) => !t.name.startsWith('optimizer.'))
            .map((t) => [t.name, t.data]),
        );
      },
    });
    const kept = { ...state, timeline: keptTimeline(state, checkpoint?.step ?? 0) };
    // The rows after the checkpoint are trained again: drop them from the stored history now.
    await queue(async () => {
      const meta = { ...a.meta, stages: runStages(kept) };
      await s.recordRunMetrics(meta, kept.timeline.map(metricsRow));
    });
    return { a, state: kept };
  }

  return {
    /** The page's recipe event callback (wrap it in Comlink.proxy). */
    setRecipeListener(callback: ((event: RecipeEvent) => void) | null): void {
      listener = callback;
    },

    /** Checks a recipe (a built-in name or JSON) without starting it; throws parseRecipe's message. */
    checkRecipe(recipe: unknown, seed?: number): Recipe {
      if (typeof recipe === 'string') return builtinRecipe(recipe, seed);
      const value = recipe as Record<string, unknown>;
      return parseRecipe(seed === undefined ? value : { ...value, seed });
    },

    /** A new recipe run on the loaded model (stored at once; nothing trained until runRecipe). */
    async startRecipe(recipe: Recipe | string, seed?: number): Promise<RecipeView> {
      if (running) throw new Error('A recipe is running: pause it first.');
      const m = requireModel();
      const parsed =
        typeof recipe === 'string'
          ? builtinRecipe(recipe, seed)
          : parseRecipe(seed === undefined ? recipe : { ...recipe, seed });
      const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
      const runId = crypto.randomUUID();
      const runName = `recipe ${parsed.name} · ${when}`;
      const a: Active = {
        runId,
        runName,
        recipe: parsed,
        run: null,
        rejections: {},
        status: 'ready',
        meta: {
          id: runId,
          name: runName,
          config: { recipe: parsed } as unknown as Record<string, unknown>,
          modelConfig: m.hf.config,
          modelIdentity: m.identity,
        },
      };
      a.run = await build(a);
      active = a;
      await persist(a, 'created');
      setStatus(a, 'ready');
      return view(a, a.run.snapshot());
    },

    /** Loads a stored recipe run (after Pause or a reload) to continue with runRecipe. */
    async resumeRecipe(runId: string): Promise<RecipeView> {
      if (running) throw new Error('A recipe is running: pause it first.');
      const { a, state } = await restore(runId);
      active = a;
      setStatus(a, a.status);
      return view(a, state);
    },

    /** Runs the recipe's remaining stages until they finish, pauseRecipe() or an error;
     * `pauseAfterStep`: pause once that timeline step is trained (as the CLI's stop after N steps). */
    async runRecipe(
      options: { pauseAfterStep?: number } = {},
    ): Promise<{ outcome: 'finished' | 'paused' | 'error'; message?: string }> {
      if (!active) throw new Error('Start or resume a recipe first.');
      if (running) throw new Error('The recipe is already running.');
      const busy = ctx.busy();
      if (busy) throw new Error(busy);
      let a = active;
      if (!a.run) {
        // Paused in this page: continue from what is stored, as a reload would.
        a = (await restore(a.runId)).a;
        active = a;
      }
      const run = a.run!;
      a.pauseAfter = options.pauseAfterStep;
      if (run.finished) {
        setStatus(a, 'finished');
        return { outcome: 'finished' };
      }
      running = true;
      setStatus(a, 'running');
      try {
        const outcome = await run.run();
        running = false;
        if (outcome === 'stopped') {
          await persist(a, 'paused');
          a.run = null;
          setStatus(a, 'paused');
          return { outcome: 'paused' };
        }
        await persist(a, 'finished');
        setStatus(a, 'finished');
        return { outcome: 'finished' };
      } catch (err) {
        running = false;
        const msg = message(err);
        await persist(a, 'failed').catch(() => {});
        a.run = null;
        setStatus(a, 'error', msg);
        return { outcome: 'error', message: msg };
      }
    },

    /** Why the GPU is taken by a recipe (the playground's Step and Run wait for it), or null. */
    recipeBusy(): string | null {
      return running ? 'A recipe is training (Recipes view): pause it first.' : null;
    },

    /** Stops the recipe after the current step (Resume continues from the stage's latest
     * checkpoint: steps after it are trained again). */
    pauseRecipe(): void {
      active?.run?.stop();
    },

    /** The stored recipe runs, most recent first. */
    async listRecipeRuns(): Promise<RecipeRunSummary[]> {
      const records = await (await ctx.getStorage()).listRecipeRuns();
      return records.map((r) => {
        const state = r.recipe!.state as unknown as RecipeState;
        const current = state.recipe.stages[state.stageIndex];
        return {
          runId: r.id,
          runName: r.name,
          recipeName: state.recipe.name,
          status: r.status,
          stageIndex: state.stageIndex,
          stageCount: state.recipe.stages.length,
          stageName: current?.name ?? null,
          lastStep: state.timeline.at(-1)?.step ?? 0,
          updatedAt: r.updatedAt,
          finished: !current,
          model: r.modelIdentity?.name ?? null,
        };
      });
    },
  };
}
