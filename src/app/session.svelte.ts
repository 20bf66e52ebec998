// The page's session: the shell every view shares (the view, banners, the consent and discard
// dialogs, what is busy, the one selected step) over one store per trainer-worker service
// (stores/): options (the draft config), model, training (the run), checkpoints, evaluation and
// exports, with the Runs panel's and the recipes' stores (stores/runs.svelte.ts,
// stores/recipes.svelte.ts). Every action goes through the trainer worker (trainer-client.ts); nothing
// here touches the GPU. The worker's events arrive here once and go to the store they concern.
import * as Comlink from 'comlink';
import { configFromUrlParams, type Config } from '../grpo/config';
import { customRewardCode } from '../rewards/reward-id';
import type { DeletionCandidate } from '../storage/errors';
import { splitTestHooks } from './lib/test-hooks';
import { learnChoice } from './lib/step-select';
import { ConsentMemory, codeHash, type ConsentOrigin, type ConsentRequest } from './consent';
import type { TrainerEvent, UiStepReport } from '../worker/protocol';
import type { TrainerApi } from '../worker/trainer-api';
import { CheckpointStore } from './stores/checkpoints.svelte';
import { EvaluationStore, ExportStore } from './stores/evaluation.svelte';
import { ModelStore } from './stores/model.svelte';
import { OptionsStore } from './stores/options.svelte';
import { msg } from './stores/shell';
import { TrainingStore } from './stores/training.svelte';
import { recipes } from './stores/recipes.svelte';
import { stageRunId } from '../recipes/recipe-spec';

export type View = 'train' | 'inspect' | 'checkpoints' | 'recipes' | 'learn' | 'aha' | 'paper';
export const VIEWS: { id: View; label: string }[] = [
  { id: 'train', label: 'Train' },
  { id: 'inspect', label: 'Inspect' },
  { id: 'checkpoints', label: 'Checkpoints' },
  { id: 'recipes', label: 'Recipes' },
  { id: 'learn', label: 'Learn' },
  { id: 'aha', label: 'Aha' },
  { id: 'paper', label: 'Paper' },
];

export interface Banner {
  id: number;
  kind: 'error' | 'warn' | 'info';
  title: string;
  message: string;
  candidates?: DeletionCandidate[];
  /** The browser refused to store a checkpoint: the banner says how to free space. */
  storageFull?: boolean;
  /** Runs when the user dismisses the banner (e.g. marks storage notices as read). */
  onDismiss?: () => void;
}

/** What would discard unsaved steps: the confirm dialog names it. */
export type DiscardAction = 'reset' | 'restore' | 'load' | 'adapter';

/** The confirm dialog's question: `steps` trained since the last saved checkpoint would be lost. */
export interface DiscardRequest {
  action: DiscardAction;
  steps: number;
  /** The run's current step (the dialog says which steps: savedStep + 1 … step). */
  step: number;
}

/** The confirm dialog's answers. */
export type DiscardAnswer = 'save' | 'discard' | 'cancel';

/**
 * One playground session. State lives in private `$state` fields behind getters (the components
 * read them; only actions write them), computed values are `$derived`, as in svelte.dev's REPL
 * Workspace class. The stores are fields: `session.training.step`, `session.options.draft`, ….
 */
export class Session {
  readonly api: Comlink.Remote<TrainerApi>;
  readonly options: OptionsStore;
  readonly model: ModelStore;
  readonly training: TrainingStore;
  readonly checkpoints: CheckpointStore;
  readonly evaluation: EvaluationStore;
  readonly exports: ExportStore;
  /** The Runs panel's store (stores/runs.svelte.ts): told when the worker stored the run's metrics. */
  runs: { historySaved(): void } | null = null;

  #view: View = $state('train');
  #learnTopic: string | null = $state(null);
  #busy: string | null = $state(null);
  #banners: Banner[] = $state([]);
  #consent: ConsentRequest | null = $state.raw(null);
  #discard: DiscardRequest | null = $state.raw(null);

  /** The one selected step every view shows (lib/step-select.ts): the latest while `follow`,
   * otherwise `#pinned`, which a new step does not move. */
  #follow = $state(true);
  #pinned: number | null = $state(null);
  /** The step under the pointer on some chart: every chart draws its crosshair there. */
  #hoverStep: number | null = $state(null);
  /** The charts' EMA smoothing weight (0 = off; lib/chart-rules.ts). */
  #smoothing = $state(0);
  // $derived.by: the stores are built in the constructor, after these fields; read lazily.
  #selectedStep: number | null = $derived.by(() =>
    this.#follow ? (this.training.history.at(-1)?.step ?? null) : this.#pinned,
  );
  #selectedReport: UiStepReport | null = $derived.by(
    () => this.training.reports.find((r) => r.step === this.#selectedStep) ?? null,
  );
  #learnChoice = $derived.by(() =>
    learnChoice(this.training.reports, this.#selectedStep, this.#follow),
  );

  #bannerId = 0;
  /** Resolves the open discard dialog's promise (confirmDiscard). */
  #discardAnswer: ((answer: DiscardAnswer) => void) | null = null;
  /** Resolves the open consent dialog's promise (askConsent). */
  #consentAnswer: ((allowed: boolean) => void) | null = null;
  /** One dialog at a time: each question waits for the ones before it. */
  #consentQueue: Promise<unknown> = Promise.resolve();
  readonly #consentMemory = new ConsentMemory();

  constructor(api: Comlink.Remote<TrainerApi>) {
    this.api = api;
    this.options = new OptionsStore(this);
    this.model = new ModelStore(this);
    this.training = new TrainingStore(this);
    this.checkpoints = new CheckpointStore(this);
    this.evaluation = new EvaluationStore(this);
    this.exports = new ExportStore(this);
  }

  // ---- the shell's state (read-only outside the session, except the view) --------------
  get view() {
    return this.#view;
  }
  set view(view: View) {
    this.#view = view;
  }
  get learnTopic() {
    return this.#learnTopic;
  }
  set learnTopic(topic: string | null) {
    this.#learnTopic = topic;
  }
  /** What the page is waiting for ('Loading the model', 'Saving', …), or null. */
  get busy() {
    return this.#busy;
  }
  get banners() {
    return this.#banners;
  }
  /** Custom reward code (from a link, a file or a checkpoint) waiting for the user's answer. */
  get consent() {
    return this.#consent;
  }
  /** The open "discard unsaved steps?" question, or null. */
  get discard(): DiscardRequest | null {
    return this.#discard;
  }

  // ---- the selected step ----------------------------------------------------------------
  /** The step Inspect, Learn and Aha show, and the charts' crosshair (null: no step yet). */
  get selectedStep(): number | null {
    return this.#selectedStep;
  }
  /** The selected step's full report, or null when it is no longer kept (MAX_REPORTS). */
  get selectedReport(): UiStepReport | null {
    return this.#selectedReport;
  }
  /** Following: the selection moves to each new step; off (pinned): it stays where it is. */
  get follow(): boolean {
    return this.#follow;
  }
  set follow(follow: boolean) {
    if (!follow) this.#pinned = this.#selectedStep;
    this.#follow = follow;
  }
  /** The step Learn explains and why (lib/step-select.ts learnChoice). */
  get learnChoice() {
    return this.#learnChoice;
  }
  get hoverStep(): number | null {
    return this.#hoverStep;
  }
  get smoothing(): number {
    return this.#smoothing;
  }
  set smoothing(weight: number) {
    this.#smoothing = Math.min(Math.max(Number(weight) || 0, 0), 0.99);
  }

  /** Selects (and pins) a step: a chart click, the step picker, the inspector's step list. */
  selectStep(step: number | null) {
    if (step === null || !Number.isFinite(step)) return;
    this.#pinned = step;
    this.#follow = false;
  }

  /** The step under the pointer on a chart (null when it leaves). */
  hover(step: number | null) {
    this.#hoverStep = step;
  }

  /** A new run, or one that no longer has the pinned step: the selection follows it again. */
  followNewRun(fresh: boolean, step: number) {
    if (fresh || (this.#pinned ?? 0) > step) {
      this.#follow = true;
      this.#pinned = null;
    }
  }

  // ---- setup ---------------------------------------------------------------------------
  async init(): Promise<void> {
    this.readUrl();
    await this.api.setListener(Comlink.proxy((e: TrainerEvent) => this.onEvent(e)));
    const probe = await this.model.probeAdapter();
    if (probe.ok) void this.model.previewModel();
    void this.checkpoints.refresh();
    void this.checkpoints.showStorageNotices();
  }

  private readUrl() {
    const { enabled, rest: search } = splitTestHooks(
      typeof location === 'undefined' ? '' : location.search,
    );
    if (enabled) this.exposeTestHooks();
    if (!search || search === '?') return;
    try {
      // The promise settles when the user answers the consent dialog (if the link has code).
      void this.options.applyShared(configFromUrlParams(search));
    } catch (err) {
      this.notify('error', 'The shared link has an invalid configuration', msg(err));
    }
  }

  /** `window.__grpoTest`, only with ?test-hooks=1 (lib/test-hooks.ts): actions for e2e tests. */
  private exposeTestHooks() {
    (globalThis as { __grpoTest?: unknown }).__grpoTest = {
      loseDevice: () => this.api.loseDevice(),
      raiseGpuError: () => this.api.raiseGpuError(),
      /** The metrics of every step so far, as the charts get them. */
      history: () => $state.snapshot(this.training.history),
      /** Teacher-forced log-probs of fixed completions (token ids) under the current policy. */
      logProbs: (prompts: number[][], completions: number[][]) =>
        this.api.scoreCompletions(prompts, completions),
      /** The newest checkpoint this page saved or restored, as stored (tensor SHA-256s, rows). */
      lastCheckpointDigest: () => {
        const id = this.checkpoints.lastSaved?.id;
        if (!id) throw new Error('No checkpoint saved or restored in this page yet.');
        return this.api.checkpointDigest(id);
      },
      /** The recipe under way in the Recipes view: its timeline, and the newest checkpoint of its
       * stage `index` as stored (null when that stage has none). */
      recipeTimeline: () => $state.snapshot(recipes.timeline),
      recipeStageDigest: (index: number) => {
        const { runId, recipe } = recipes;
        if (!runId || !recipe?.stages[index]) throw new Error(`No recipe stage ${index} here.`);
        return this.api.latestCheckpointDigest(stageRunId(runId, index, recipe.stages[index].name));
      },
    };
  }

  /** The draft as a link to this view. */
  shareUrl(): string {
    return this.options.shareUrl(this.#view);
  }

  // ---- events from the worker: each to the store it concerns ---------------------------
  private onEvent(e: TrainerEvent) {
    if (e.type === 'load-progress') return this.model.onLoadProgress(e);
    if (e.type === 'history-saved') return this.runs?.historySaved();
    if (e.type === 'history-failed') return this.notify('warn', e.title, e.message);
    if (this.training.onEvent(e)) return;
    this.checkpoints.onEvent(e);
  }

  // ---- banners, dialogs, busy ----------------------------------------------------------
  notify(
    kind: Banner['kind'],
    title: string,
    message: string,
    candidates?: DeletionCandidate[],
    storageFull = false,
    onDismiss?: () => void,
  ) {
    this.#banners = [
      ...this.#banners,
      { id: ++this.#bannerId, kind, title, message, candidates, storageFull, onDismiss },
    ];
  }

  dismiss(id: number) {
    this.#banners.find((b) => b.id === id)?.onDismiss?.();
    this.#banners = this.#banners.filter((b) => b.id !== id);
  }

  /** Runs `fn` as what the page is busy with; a failure becomes an error banner (null result). */
  async task<T>(label: string, fn: () => Promise<T>, title = label): Promise<T | null> {
    return this.busyWith(label, async () => {
      try {
        return await fn();
      } catch (err) {
        this.notify('error', title, msg(err));
        return null;
      }
    });
  }

  /** Shows `label` as busy while `fn` runs (a later label replaces it). */
  async busyWith<T>(label: string, fn: () => Promise<T>): Promise<T> {
    this.#busy = label;
    try {
      return await fn();
    } finally {
      if (this.#busy === label) this.#busy = null;
    }
  }

  /**
   * Asks the user whether custom reward code may run; resolves true when allowed. The code is
   * shown in the consent dialog (App.svelte); the answer is remembered per code hash for this
   * browser session (consent.ts), so the same code asks once and any other code asks again.
   */
  askConsent(origin: ConsentOrigin, subject: string, code: Record<string, string>) {
    if (Object.keys(code).length === 0) return Promise.resolve(true);
    const answered = this.#consentQueue.then(async () => {
      const hash = await codeHash(code);
      const remembered = this.#consentMemory.get(hash);
      if (remembered !== undefined) return remembered;
      const allowed = await new Promise<boolean>((resolve) => {
        this.#consentAnswer = resolve;
        this.#consent = { origin, subject, code: { ...code }, hash };
      });
      this.#consentMemory.set(hash, allowed);
      return allowed;
    });
    this.#consentQueue = answered.catch(() => undefined);
    return answered;
  }

  /** The consent dialog's answer: true runs the code, false leaves it out (Escape declines). */
  answerConsent(allowed: boolean) {
    const answer = this.#consentAnswer;
    this.#consentAnswer = null;
    this.#consent = null;
    answer?.(allowed);
  }

  /** A run's own custom code is the user's (typed, or allowed when it came in): asking about it
   * again when one of its checkpoints is restored in this session would only be noise. */
  rememberAllowed(config: Config) {
    const code = customRewardCode(config);
    if (Object.keys(code).length === 0) return;
    void codeHash(code).then((hash) => this.#consentMemory.set(hash, true));
  }

  /**
   * Before an action that replaces the run: when steps were trained since its last checkpoint,
   * asks whether to save first, discard them or cancel (the discard dialog, App.svelte). Resolves
   * true when the action may go on. With nothing unsaved it asks nothing.
   */
  async confirmDiscard(action: DiscardAction): Promise<boolean> {
    const steps = this.checkpoints.unsavedSteps;
    if (steps === 0) return true;
    const answer = await new Promise<DiscardAnswer>((resolve) => {
      this.#discardAnswer?.('cancel');
      this.#discardAnswer = resolve;
      this.#discard = { action, steps, step: this.training.step };
    });
    if (answer === 'cancel') return false;
    if (answer === 'discard') return true;
    await this.checkpoints.save();
    // Go on only when the save worked: a failed save has its banner and keeps the run.
    return this.checkpoints.unsavedSteps === 0;
  }

  /** The discard dialog's answer (Escape cancels). */
  answerDiscard(answer: DiscardAnswer) {
    const resolve = this.#discardAnswer;
    this.#discardAnswer = null;
    this.#discard = null;
    resolve?.(answer);
  }
}
