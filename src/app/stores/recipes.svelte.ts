// The page's state of a multi-stage recipe run (Svelte 5 runes) over the trainer worker's recipe
// methods (src/worker/recipe-service.ts): the recipe, the stage under way, the one timeline, the
// finished stages' results and the rejection-sample reports, fed by the worker's RecipeEvents;
// and the recipe runs stored in this browser, so an unfinished one is offered for resume after a
// reload. One instance for the page (`recipes`), connected once to the worker.
import * as Comlink from 'comlink';
import {
  stagePlansText,
  type Recipe,
  type StageResult,
  type TimelineRow,
} from '../../recipes/recipe-spec';
import { recipeRewardCode } from '../lib/recipe-view';
import { formatBytes } from '../../core/format';
import type { RejectionSamplingReport } from '../../recipes/rejection-sampling';
import type {
  RecipeEvent,
  RecipePlans,
  RecipeRunSummary,
  RecipeStatus,
  RecipeView,
} from '../../worker/recipe-service';
import type { TrainerApi } from '../../worker/trainer-api';

type Api = Pick<
  Comlink.Remote<TrainerApi>,
  | 'setRecipeListener'
  | 'planRecipe'
  | 'startRecipe'
  | 'runRecipe'
  | 'pauseRecipe'
  | 'resumeRecipe'
  | 'listRecipeRuns'
>;

/** One line of the page's recipe log; `step` is the timeline step of a trained step. */
export interface LogEntry {
  kind: 'stage' | 'step' | 'checkpoint' | 'rejection' | 'status';
  text: string;
  step?: number;
}
const LOG_LINES = 200;

const msg = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class RecipeSession {
  #api: Api | null = null;
  #connected: Promise<void> | null = null;
  #onCheckpoint: (() => void) | null = null;

  #runId: string | null = $state(null);
  #runName: string | null = $state(null);
  #recipe: Recipe | null = $state(null);
  #status: RecipeStatus | 'idle' = $state('idle');
  #pausing = $state(false);
  #stageIndex = $state(0);
  #timeline: TimelineRow[] = $state([]);
  #results: StageResult[] = $state([]);
  /** Each started stage's optimizer steps, as it announced them (SFT's depend on its data). */
  #totals: Record<number, number> = $state({});
  #rejections: Record<string, RejectionSamplingReport> = $state({});
  #lastCheckpoint: { index: number; step: number } | null = $state(null);
  #error: string | null = $state(null);
  #busy: string | null = $state(null);
  #stored: RecipeRunSummary[] = $state([]);
  /** What happened in this page, oldest first (the last LOG_LINES): stages, steps, checkpoints. */
  #log: LogEntry[] = $state([]);
  /** Pause once this timeline step is trained (the next Run / Resume), or null. */
  pauseAfter: number | null = $state(null);

  get runId() {
    return this.#runId;
  }
  get runName() {
    return this.#runName;
  }
  get recipe() {
    return this.#recipe;
  }
  get status() {
    return this.#status;
  }
  get pausing() {
    return this.#pausing;
  }
  get stageIndex() {
    return this.#stageIndex;
  }
  get timeline() {
    return this.#timeline;
  }
  get results() {
    return this.#results;
  }
  get totals() {
    return this.#totals;
  }
  get rejections() {
    return this.#rejections;
  }
  get lastCheckpoint() {
    return this.#lastCheckpoint;
  }
  get error() {
    return this.#error;
  }
  get busy() {
    return this.#busy;
  }
  get stored() {
    return this.#stored;
  }
  get log() {
    return this.#log;
  }
  /** Stored recipe runs that did not finish, other than the one shown. */
  get resumable(): RecipeRunSummary[] {
    return this.#stored.filter(
      (r) => !r.finished && !(r.runId === this.#runId && this.#status !== 'idle'),
    );
  }

  /** Listens to the worker's recipe events and lists the stored runs (once). `onCheckpoint` runs
   * whenever a stage stores a checkpoint: the page's checkpoint list follows without a Refresh. */
  connect(api: Api, onCheckpoint?: () => void): Promise<void> {
    if (onCheckpoint) this.#onCheckpoint = onCheckpoint;
    if (this.#api === api && this.#connected) return this.#connected;
    this.#api = api;
    this.#connected = (async () => {
      await api.setRecipeListener(Comlink.proxy((e: RecipeEvent) => this.onEvent(e)));
      await this.refresh();
    })();
    return this.#connected;
  }

  async refresh(): Promise<void> {
    if (!this.#api) return;
    try {
      this.#stored = await this.#api.listRecipeRuns();
    } catch (err) {
      this.#error = `The stored recipes could not be read: ${msg(err)}`;
    }
  }

  private adopt(v: RecipeView) {
    if (v.runId !== this.#runId) this.#log = [];
    this.#runId = v.runId;
    this.#runName = v.runName;
    this.#recipe = v.state.recipe;
    this.#status = v.status;
    this.#stageIndex = v.state.stageIndex;
    this.#timeline = v.state.timeline;
    this.#results = v.state.results;
    this.#rejections = v.rejections;
    this.#totals = Object.fromEntries(v.state.results.map((r) => [r.stage, r.steps]));
    this.#lastCheckpoint = null;
    this.#pausing = false;
    if (v.state.timeline.length)
      this.note({
        kind: 'status',
        text: `loaded: ${v.state.timeline.length} stored steps, stage ${Math.min(v.state.stageIndex + 1, v.state.recipe.stages.length)} of ${v.state.recipe.stages.length}`,
      });
  }

  private note(entry: LogEntry) {
    const log = [...this.#log, entry];
    this.#log = log.length > LOG_LINES ? log.slice(-LOG_LINES) : log;
  }

  private stageName(index: number) {
    return this.#recipe?.stages[index]?.name ?? `stage ${index + 1}`;
  }

  onEvent(e: RecipeEvent) {
    if (e.runId !== this.#runId) return;
    this.logEvent(e);
    switch (e.type) {
      case 'recipe-status':
        this.#status = e.status;
        if (e.status !== 'running') this.#pausing = false;
        if (e.status === 'error') this.#error = `The recipe stopped: ${e.message ?? 'error'}`;
        break;
      case 'recipe-stage-start':
        this.#stageIndex = e.index;
        this.#totals = { ...this.#totals, [e.index]: e.steps };
        break;
      case 'recipe-step':
        this.#timeline = [...this.#timeline.filter((r) => r.step < e.row.step), e.row];
        break;
      case 'recipe-checkpoint':
        this.#lastCheckpoint = { index: e.index, step: e.step };
        this.#onCheckpoint?.();
        break;
      case 'recipe-checkpoint-failed':
        this.#error = `A checkpoint of stage ${e.index + 1} was not saved (training goes on): ${e.message}`;
        break;
      case 'recipe-rejection':
        this.#rejections = { ...this.#rejections, [e.name]: e.report };
        break;
      case 'recipe-stage-end':
        this.#results = [...this.#results.filter((r) => r.stage !== e.result.stage), e.result];
        this.#stageIndex = e.result.stage + 1;
        break;
    }
  }

  private logEvent(e: RecipeEvent) {
    switch (e.type) {
      case 'recipe-status':
        if (e.status !== 'running') this.note({ kind: 'status', text: `recipe ${e.status}` });
        break;
      case 'recipe-plans':
        this.note({
          kind: 'stage',
          text: stagePlansText(e.plans, e.budgetBytes),
        });
        break;
      case 'recipe-stage-start':
        this.note({
          kind: 'stage',
          text:
            `stage ${e.index + 1} '${e.name}' (${e.kind}) starts after step ${e.startStep}${e.steps ? `: ${e.steps} steps` : ''}` +
            (e.memory
              ? `; memory plan ${formatBytes(e.memory.peakBytes)} at peak` +
                (e.memory.baseDtype ? `, base stored as ${e.memory.baseDtype}` : '')
              : ''),
        });
        break;
      case 'recipe-step':
        this.note({
          kind: 'step',
          step: e.row.step,
          text: `step ${e.row.step}: ${this.stageName(e.row.stage)} ${e.row.stageStep}/${e.steps} in ${(e.elapsedMs / 1000).toFixed(1)} s`,
        });
        break;
      case 'recipe-checkpoint':
        this.note({
          kind: 'checkpoint',
          text: `checkpoint: ${this.stageName(e.index)} step ${e.step}`,
        });
        break;
      case 'recipe-rejection':
        this.note({
          kind: 'rejection',
          text: `${e.name}: kept ${e.report.kept} of ${e.report.sampled} samples`,
        });
        break;
      case 'recipe-stage-end':
        this.note({
          kind: 'stage',
          text: `stage '${e.result.name}' done in ${e.result.seconds.toFixed(1)} s`,
        });
        break;
    }
  }

  private async task<T>(label: string, fn: (api: Api) => Promise<T>): Promise<T | null> {
    if (!this.#api) return null;
    this.#busy = label;
    this.#error = null;
    try {
      return await fn(this.#api);
    } catch (err) {
      this.#error = msg(err);
      return null;
    } finally {
      if (this.#busy === label) this.#busy = null;
    }
  }

  /**
   * A new run of `recipe` (a built-in name or a checked recipe), then runs it. Custom reward code
   * in a recipe object runs only once `consent` allows it (the page's consent dialog); declined,
   * or with no one to ask, the recipe does not start and the error says why.
   */
  async start(
    recipe: Recipe | string,
    seed?: number,
    consent?: (name: string, code: Record<string, string>) => Promise<boolean>,
  ): Promise<void> {
    if (typeof recipe !== 'string') {
      const code = recipeRewardCode(recipe);
      if (Object.keys(code).length > 0 && !(await consent?.(recipe.name, code))) {
        this.#error = `The recipe '${recipe.name}' did not start: its custom reward code was not allowed to run.`;
        return;
      }
    }
    const v = await this.task('Starting the recipe', (api) => api.startRecipe(recipe, seed));
    if (!v) return;
    this.adopt(v);
    await this.run();
  }

  /** Each training stage's memory plan on the loaded model (the worker's planRecipe), or why
   * there is none: shown before Start. */
  async plan(recipe: Recipe | string, seed?: number): Promise<RecipePlans | { error: string }> {
    if (!this.#api) return { error: 'The trainer is not ready yet.' };
    try {
      return await this.#api.planRecipe(recipe, seed);
    } catch (err) {
      return { error: msg(err) };
    }
  }

  /** Runs the current recipe until it finishes or is paused. */
  async run(): Promise<void> {
    if (!this.#api || !this.#runId) return;
    this.#error = null;
    this.#status = 'running';
    try {
      const pauseAfter = this.pauseAfter ?? undefined;
      const out = await this.#api.runRecipe({ pauseAfterStep: pauseAfter });
      if (out.outcome === 'error') this.#error = `The recipe stopped: ${out.message}`;
      // Reached: the next Resume runs on.
      if (pauseAfter !== undefined && (this.#timeline.at(-1)?.step ?? 0) >= pauseAfter)
        this.pauseAfter = null;
    } catch (err) {
      this.#error = msg(err);
      this.#status = 'paused';
    }
    await this.refresh();
  }

  pause(): void {
    if (!this.#api || this.#status !== 'running') return;
    this.#pausing = true;
    void this.#api.pauseRecipe();
  }

  /** Loads a stored recipe run (its timeline up to the current stage's checkpoint), then runs it. */
  async resume(runId: string = this.#runId ?? ''): Promise<void> {
    const v = await this.task('Resuming the recipe', (api) => api.resumeRecipe(runId));
    if (!v) return;
    this.adopt(v);
    if (v.status !== 'finished') await this.run();
  }

  /** Shows a stored run (finished or not) without training. */
  async open(runId: string): Promise<void> {
    const v = await this.task('Opening the recipe', (api) => api.resumeRecipe(runId));
    if (v) this.adopt(v);
  }

  dismissError() {
    this.#error = null;
  }
}

export const recipes = new RecipeSession();
