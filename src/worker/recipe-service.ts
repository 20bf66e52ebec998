// Multi-stage recipes in the trainer worker (issue #27): grpo's RecipeRun (src/recipes/recipe.ts: SFT,
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
import type { WeightReader } from '../formats/hf-folder';
import { parseRecipeState } from '../recipes/recipe-state';
import {
  RecipeRun,
  stagePlanSummary,
  type RecipeSetup,
  type StagePlanSummary,
} from '../recipes/recipe';
import { defaultMemoryBudget } from '../train/run';
import {
  builtinRecipe,
  parseRecipe,
  recipeScoringTask,
  stageRunId,
  type Recipe,
  type RecipeState,
  type StageKind,
  type StageResult,
  type TimelineRow,
} from '../recipes/recipe-spec';
import type { RejectionSamplingReport } from '../recipes/rejection-sampling';
import type { SandboxFactory } from '../rewards/reward-sandbox';
import type { TrainerTokenizer } from '../grpo/trainer';
import type { CheckpointPayload } from '../storage/checkpoints';
import type { Identity, RunStage, RunStatus, StoredRecipe } from '../storage/db';
import { flattenMetricsRow, type FlatMetricsRow } from '../core/metrics-row';
import type { GrpoStorage } from '../storage/index';
import type { RunHistoryMeta } from '../storage/run-history';

/** What the recipe needs of the trainer worker (trainer-api.ts passes its own). */
export interface RecipeContext {
  getEngine(): Promise<Engine>;
  getStorage(): Promise<GrpoStorage>;
  /** The loaded base model, or null. */
  model(): {
    label: string;
    hf: { config: LlamaConfig; weights: WeightReader };
    tokenizer: TrainerTokenizer;
    identity: Identity;
  } | null;
  sandboxFactory(): SandboxFactory;
  /** Why the GPU is taken by something else (the playground run is stepping), or null. */
  busy(): string | null;
}

export type RecipeStatus = 'ready' | 'running' | 'paused' | 'finished' | 'error';

/** A recipe's training stages planned before it starts (planRecipe): each one's peak, whether it
 * fits and the plan's message (what to change when it does not), against `budgetBytes`. */
export interface RecipePlans {
  plans: StagePlanSummary[];
  budgetBytes: number;
}

/** The recipe's progress stream (setRecipeListener). */
export type RecipeEvent =
  | { type: 'recipe-status'; runId: string; status: RecipeStatus; message?: string }
  | {
      type: 'recipe-plans';
      runId: string;
      /** Each training stage still to run whose start is known: its planned peak and whether
       * it fits (one that does not stops the recipe before it runs a stage). */
      plans: StagePlanSummary[];
      budgetBytes: number;
    }
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
      /** A training stage's memory plan: its peak, and how a LoRA stage stores its frozen base
       * (null: a full fine-tune, whose weights are f32). */
      memory?: { peakBytes: number; baseDtype: string | null };
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

const metricsRow = (row: TimelineRow): FlatMetricsRow => flattenMetricsRow(row);

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

type RecipeHooks = ConstructorParameters<typeof RecipeRun>[0]['hooks'];
type RecipeResume = ConstructorParameters<typeof RecipeRun>[0]['resume'];

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

/** Checks a recipe (a built-in name or JSON) without starting it; throws parseRecipe's message. */
function checkRecipe(recipe: unknown, seed?: number): Recipe {
  if (typeof recipe === 'string') return builtinRecipe(recipe, seed);
  const value = recipe as Record<string, unknown>;
  return parseRecipe(seed === undefined ? value : { ...value, seed });
}

/** The stored recipe runs, most recent first. */
async function listRecipeRuns(ctx: RecipeContext): Promise<RecipeRunSummary[]> {
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
}

function view(a: Active, state: RecipeState): RecipeView {
  return { runId: a.runId, runName: a.runName, status: a.status, state, rejections: a.rejections };
}

/** The recipe under way in this worker: its RecipeRun, its storage writes and its events. */
class RecipeRunner {
  #listener: ((event: RecipeEvent) => void) | null = null;
  #active: Active | null = null;
  #running = false;
  /** Storage writes in order: each hook awaits its own, so a step's state is stored before the
   * next step starts. */
  #writes: Promise<unknown> = Promise.resolve();

  constructor(private readonly ctx: RecipeContext) {}

  setListener(callback: ((event: RecipeEvent) => void) | null): void {
    this.#listener = callback;
  }

  private emit(event: RecipeEvent) {
    try {
      this.#listener?.(event);
    } catch {
      // A closed page must not stop training.
    }
  }

  private setStatus(a: Active, status: RecipeStatus, msg?: string) {
    a.status = status;
    this.emit({ type: 'recipe-status', runId: a.runId, status, ...(msg ? { message: msg } : {}) });
  }

  private requireModel() {
    const m = this.ctx.model();
    if (!m) throw new Error('Load a model first: a recipe trains the loaded model.');
    return m;
  }

  private requireIdle() {
    if (this.#running) throw new Error('A recipe is running: pause it first.');
  }

  private queue<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#writes.then(fn);
    this.#writes = next.catch(() => {});
    return next;
  }

  /** Stores the recipe's state (and `rows` of its timeline) on its run row. */
  private persist(a: Active, status: RunStatus, rows: FlatMetricsRow[] = []): Promise<void> {
    const run = a.run;
    if (!run) return Promise.resolve();
    const state = run.snapshot();
    return this.queue(async () => {
      const s = await this.ctx.getStorage();
      const meta = { ...a.meta, stages: runStages(state) };
      if (rows.length) await s.recordRunMetrics(meta, rows);
      await s.putRecipe(
        meta,
        { state: state as unknown as StoredRecipe['state'], rejections: a.rejections },
        status,
      );
    });
  }

  /** A stage's checkpoint into storage (the last KEEP_CHECKPOINTS of its stage run kept). */
  private async storeCheckpoint(a: Active, payload: CheckpointPayload, index: number) {
    try {
      await this.queue(async () => {
        const s = await this.ctx.getStorage();
        await s.saveCheckpoint(
          { ...payload, runName: `${a.runName} · ${a.recipe.stages[index].name}` },
          { retention: { keepLast: KEEP_CHECKPOINTS } },
        );
      });
      this.emit({ type: 'recipe-checkpoint', runId: a.runId, index, step: payload.step });
    } catch (err) {
      // Training goes on; a resume starts from the stage's previous checkpoint.
      this.emit({ type: 'recipe-checkpoint-failed', runId: a.runId, index, message: message(err) });
    }
  }

  /** The RecipeRun's hooks: stream its progress to the page and store it as it goes. */
  private hooks(a: Active, run: () => RecipeRun): RecipeHooks {
    const status = (): RunStatus => (this.#running ? 'running' : 'paused');
    return {
      onPlans: (plans) => {
        if (plans.length === 0) return;
        this.emit({
          type: 'recipe-plans',
          runId: a.runId,
          plans: plans.map(stagePlanSummary),
          budgetBytes: plans[0].plan.limits.totalBudget,
        });
      },
      onStageStart: async ({ index, stage, steps, startStep, plan }) => {
        this.emit({
          type: 'recipe-stage-start',
          runId: a.runId,
          index,
          name: stage.name,
          kind: stage.kind,
          steps,
          startStep,
          ...(plan && {
            memory: {
              peakBytes: plan.peakBytes,
              baseDtype: plan.input.lora ? plan.input.dtype : null,
            },
          }),
        });
        await this.persist(a, status());
      },
      onStep: async (row, { steps, elapsedMs, skipped }) => {
        this.emit({ type: 'recipe-step', runId: a.runId, row, steps, elapsedMs, skipped });
        if (a.pauseAfter !== undefined && row.step >= a.pauseAfter) {
          a.pauseAfter = undefined;
          run().stop();
        }
        await this.persist(a, status(), [metricsRow(row)]);
      },
      onCheckpoint: async (payload: CheckpointPayload, { index }) => {
        await this.storeCheckpoint(a, payload, index);
        await this.persist(a, status());
      },
      onRejection: async (report, { index, stage }) => {
        a.rejections = { ...a.rejections, [stage.name]: report };
        this.emit({ type: 'recipe-rejection', runId: a.runId, index, name: stage.name, report });
        await this.persist(a, status());
      },
      onStageEnd: async (result) => {
        this.emit({ type: 'recipe-stage-end', runId: a.runId, result });
        await this.persist(a, status());
      },
    };
  }

  /** A RecipeRun on the loaded model whose hooks stream its progress and store it. */
  private async build(a: Active, resume?: RecipeResume): Promise<RecipeRun> {
    const run: RecipeRun = await this.recipeRun(a.recipe, a.runId, {
      resume,
      hooks: this.hooks(a, () => run),
    });
    return run;
  }

  /** A RecipeRun of `recipe` on the loaded model (the worker's engine, reward sandboxes and the
   * recipes' scoring task), with `extra`'s resume and hooks. */
  private async recipeRun(
    recipe: Recipe,
    runId: string,
    extra: Pick<RecipeSetup, 'resume' | 'hooks'> = {},
  ): Promise<RecipeRun> {
    const m = this.requireModel();
    return new RecipeRun({
      engine: await this.ctx.getEngine(),
      recipe,
      runId,
      base: {
        config: m.hf.config,
        // The loaded model's reader: each stage that starts from the base streams it into the GPU
        // as stored (a 4-bit checkpoint stays NF4), so the tab never holds a widened copy.
        weights: m.hf.weights,
        tokenizer: m.tokenizer,
        identity: m.identity,
      },
      sandboxFactory: this.ctx.sandboxFactory(),
      scoringTask: recipeScoringTask(),
      ...extra,
    });
  }

  /** Reads a stored recipe run back and builds its RecipeRun from the latest checkpoints. */
  private async restore(runId: string): Promise<{ a: Active; state: RecipeState }> {
    const m = this.requireModel();
    const s = await this.ctx.getStorage();
    const record = await s.getRun(runId);
    if (!record?.recipe) throw new Error(`There is no stored recipe run '${runId}'.`);
    if (record.modelIdentity && record.modelIdentity.sha256 !== m.identity.sha256)
      throw new Error(
        `This recipe trained '${record.modelIdentity.name}'; load that model to resume it (the loaded one is '${m.label}').`,
      );
    // Checked field by field: a damaged record says which field instead of a TypeError.
    const state = parseRecipeState(record.recipe.state, `stored recipe run '${runId}'`);
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
    a.run = await this.build(a, {
      state,
      checkpoint,
      checkpointOf: async (name) => {
        const i = recipe.stages.findIndex((st) => st.name === name);
        const latest = await s.loadLatestCheckpoint(stageRunId(runId, i, name));
        if (!latest) throw new Error(`The recipe's stage '${name}' has no stored checkpoint.`);
        return latest;
      },
    });
    const kept = { ...state, timeline: keptTimeline(state, checkpoint?.step ?? 0) };
    // The rows after the checkpoint are trained again: drop them from the stored history now.
    await this.queue(async () => {
      const meta = { ...a.meta, stages: runStages(kept) };
      await s.recordRunMetrics(meta, kept.timeline.map(metricsRow));
    });
    return { a, state: kept };
  }

  /**
   * The memory plan of each training stage of `recipe` on the loaded model, as the recipe's
   * preflight will check them when it starts (RecipeRun.planStages), without starting it: the
   * page shows them before Start. Throws what starting would (a bad recipe, a full stage on a
   * 4-bit model).
   */
  async plan(recipe: Recipe | string, seed?: number): Promise<RecipePlans> {
    const run = await this.recipeRun(checkRecipe(recipe, seed), 'plan');
    const engine = await this.ctx.getEngine();
    return {
      plans: (await run.planStages()).map(stagePlanSummary),
      budgetBytes: defaultMemoryBudget(engine.device.limits),
    };
  }

  /** A new recipe run on the loaded model (stored at once; nothing trained until run()). */
  async start(recipe: Recipe | string, seed?: number): Promise<RecipeView> {
    this.requireIdle();
    const m = this.requireModel();
    const parsed = checkRecipe(recipe, seed);
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
    a.run = await this.build(a);
    this.#active = a;
    await this.persist(a, 'created');
    this.setStatus(a, 'ready');
    return view(a, a.run.snapshot());
  }

  /** Loads a stored recipe run (after Pause or a reload) to continue with run(). */
  async resume(runId: string): Promise<RecipeView> {
    this.requireIdle();
    const { a, state } = await this.restore(runId);
    this.#active = a;
    this.setStatus(a, a.status);
    return view(a, state);
  }

  /** Runs the recipe's remaining stages until they finish, pause() or an error. */
  async run(options: {
    pauseAfterStep?: number;
  }): Promise<{ outcome: 'finished' | 'paused' | 'error'; message?: string }> {
    if (!this.#active) throw new Error('Start or resume a recipe first.');
    if (this.#running) throw new Error('The recipe is already running.');
    const busy = this.ctx.busy();
    if (busy) throw new Error(busy);
    let a = this.#active;
    if (!a.run) {
      // Paused in this page: continue from what is stored, as a reload would.
      a = (await this.restore(a.runId)).a;
      this.#active = a;
    }
    const run = a.run!;
    a.pauseAfter = options.pauseAfterStep;
    if (run.finished) {
      this.setStatus(a, 'finished');
      return { outcome: 'finished' };
    }
    this.#running = true;
    this.setStatus(a, 'running');
    try {
      const outcome = await run.run();
      this.#running = false;
      const paused = outcome === 'stopped';
      await this.persist(a, paused ? 'paused' : 'finished');
      if (paused) a.run = null;
      this.setStatus(a, paused ? 'paused' : 'finished');
      return { outcome: paused ? 'paused' : 'finished' };
    } catch (err) {
      this.#running = false;
      const msg = message(err);
      await this.persist(a, 'failed').catch(() => {});
      a.run = null;
      this.setStatus(a, 'error', msg);
      return { outcome: 'error', message: msg };
    }
  }

  /** Why the GPU is taken by a recipe (the playground's Step and Run wait for it), or null. */
  busy(): string | null {
    return this.#running ? 'A recipe is training (Recipes view): pause it first.' : null;
  }

  /** Stops the recipe after the current step (Resume continues from the stage's latest
   * checkpoint: steps after it are trained again). */
  pause(): void {
    this.#active?.run?.stop();
  }
}

/** The recipe methods of the trainer worker's API (trainer-api.ts spreads them in). */
export function createRecipeApi(ctx: RecipeContext) {
  const runner = new RecipeRunner(ctx);
  return {
    /** The page's recipe event callback (wrap it in Comlink.proxy). */
    setRecipeListener: (callback: ((event: RecipeEvent) => void) | null): void =>
      runner.setListener(callback),
    /** Checks a recipe (a built-in name or JSON) without starting it; throws parseRecipe's message. */
    checkRecipe,
    /** Each training stage's memory plan on the loaded model, before the recipe starts. */
    planRecipe: (recipe: Recipe | string, seed?: number) => runner.plan(recipe, seed),
    /** A new recipe run on the loaded model (stored at once; nothing trained until runRecipe). */
    startRecipe: (recipe: Recipe | string, seed?: number) => runner.start(recipe, seed),
    /** Loads a stored recipe run (after Pause or a reload) to continue with runRecipe. */
    resumeRecipe: (runId: string) => runner.resume(runId),
    /** Runs the recipe's remaining stages until they finish, pauseRecipe() or an error;
     * `pauseAfterStep`: pause once that timeline step is trained (as the CLI's stop after N steps). */
    runRecipe: (options: { pauseAfterStep?: number } = {}) => runner.run(options),
    /** Why the GPU is taken by a recipe (the playground's Step and Run wait for it), or null. */
    recipeBusy: () => runner.busy(),
    /** Stops the recipe after the current step. */
    pauseRecipe: () => runner.pause(),
    /** The stored recipe runs, most recent first. */
    listRecipeRuns: () => listRecipeRuns(ctx),
  };
}
