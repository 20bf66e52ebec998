// The page's state of one playground session, as Svelte 5 runes: the draft config the forms edit,
// the run the worker holds, the metrics history and recent step reports, checkpoints, and the
// banners for the error states (no WebGPU, device lost, model too large, storage full). Every
// action goes through the trainer worker (trainer-client.ts); nothing here touches the GPU.
import * as Comlink from 'comlink';
import {
  configFromUrlParams,
  configToUrlParams,
  draftFromConfig,
  resolveConfig,
  resolveDraft,
  type Config,
  type ConfigInput,
  type ConfigKey,
  type DraftConfig,
  type LiveChange,
} from '../grpo/config';
import type { BestEval, EvalRecord } from '../grpo/eval-during-training';
import { PRESETS, type PresetName } from '../grpo/presets';
import { CUSTOM_REWARD_PREFIX } from '../grpo/rewards';
import { customRewardCode, rewardIdsProblem, withoutCustomRewards } from '../grpo/reward-id';
import { decodeCheckpointFile } from '../storage/transfer';
import { parseJsonlDataset, type JsonlDataset } from '../tasks/jsonl';
import type { DeletionCandidate } from '../storage/errors';
import { estimate } from './lib/format';
import { changedOptions, splitPending, withOptions } from './lib/pending';
import { splitTestHooks } from './lib/test-hooks';
import { learnChoice } from './lib/step-select';
import { ConsentMemory, codeHash, type ConsentOrigin, type ConsentRequest } from './consent';
import { CHECKPOINT_FAILURE_REPORTED } from '../worker/protocol';
import type {
  ChatOptions,
  ChatReply,
  CheckpointInfo,
  Comparison,
  ModelChoice,
  ModelInfo,
  ModelPreview,
  PhaseProgress,
  RunState,
  StorageInfo,
  TrainerEvent,
  TrainerStatus,
  UiStepReport,
} from '../worker/protocol';
import type { AdapterProbe, TrainerApi } from '../worker/trainer-api';
import type { MetricsRow, StorageNotice } from '../worker/types';

/** Step reports kept in memory for the inspector (the metrics history keeps every step). */
export const MAX_REPORTS = 300;

/** Playground defaults for the bundled tiny model on any GPU, even CPU-emulated WebGPU. */
export const PLAYGROUND_DEFAULTS: Partial<ConfigInput> = {
  task: 'countdown',
  taskOptions: { numbers: 3, minNumber: 1, maxNumber: 10, minTarget: 1, maxTarget: 100 },
  perStepPrompts: 2,
  numGenerations: 4,
  maxPromptLength: 64,
  maxCompletionLength: 80,
  learningRate: 2e-4,
  lrScheduler: 'constant',
  steps: 200,
  saveSteps: 25,
  evalPrompts: 16,
};

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

export interface JsonlImport {
  name: string;
  text: string;
  preview: JsonlDataset;
}

export interface LoadProgress {
  phase: string;
  file: string;
  loaded: number;
  total: number | null;
}

export interface DeviceLost {
  message: string;
  lastCheckpoint: CheckpointInfo | null;
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

/** The step under way as the page shows it: the worker's phase and when the step began here. */
export interface StepActivity extends PhaseProgress {
  /** performance.now() on the page when this step's first phase arrived. */
  startedAt: number;
}

/** Where a checkpoint file's manifest ends: read that much to see its config before importing. */
const CHECKPOINT_PREFIX_BYTES = 16;
const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

/**
 * The config inside a checkpoint file, read on the page from the manifest alone (the tensors are
 * not read), or null when the file is not readable as one (the worker's import then says why).
 */
export async function checkpointFileConfig(file: Blob): Promise<Record<string, unknown> | null> {
  try {
    const head = new Uint8Array(await file.slice(0, CHECKPOINT_PREFIX_BYTES).arrayBuffer());
    if (head.byteLength < CHECKPOINT_PREFIX_BYTES) return null;
    const manifestBytes = Number(new DataView(head.buffer).getBigUint64(8, true));
    if (manifestBytes > Math.min(MAX_MANIFEST_BYTES, file.size - CHECKPOINT_PREFIX_BYTES))
      return null;
    const bytes = new Uint8Array(
      await file.slice(0, CHECKPOINT_PREFIX_BYTES + manifestBytes).arrayBuffer(),
    );
    const { manifest } = decodeCheckpointFile(bytes, (file as File).name ?? 'checkpoint');
    const config = (manifest as { config?: unknown } | null)?.config;
    return config && typeof config === 'object' && !Array.isArray(config)
      ? (config as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

function msg(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.replace(/^Error: /, '');
}

/** The draft as the worker takes it: nulls kept, the imported JSONL file named in taskOptions. */
function draftForWorker(draft: DraftConfig, jsonl: JsonlImport | null): Partial<ConfigInput> {
  const d = $state.snapshot(draft);
  if (d.task !== 'jsonl') return d;
  return { ...d, taskOptions: { ...d.taskOptions, path: jsonl?.name ?? '' } };
}

/**
 * One playground session. State lives in private `$state` fields behind getters (the components
 * read them; only the session's actions write them), computed values are `$derived`, as in
 * svelte.dev's REPL Workspace class. The draft is the exception the forms need: its object is a
 * deep `$state` proxy that the option, task and reward panels edit in place (bind:value on its
 * fields).
 */
export class Session {
  readonly api: Comlink.Remote<TrainerApi>;

  #probe: AdapterProbe | null = $state(null);
  #status: TrainerStatus = $state('no-model');
  #view: View = $state('train');
  #learnTopic: string | null = $state(null);

  /** The form's config, nulls kept (DraftConfig); applied when a run starts or is reset. */
  #draft: DraftConfig = $state(resolveDraft(PLAYGROUND_DEFAULTS));
  #applied: Config | null = $state.raw(null);
  /** The options the run takes at its next step without a Reset (RunState.liveOptions). */
  #liveOptions: ConfigKey[] | undefined = $state.raw(undefined);
  /** The options changed in the middle of this run (RunState.liveChanges), oldest first. */
  #liveChanges: LiveChange[] = $state.raw([]);
  #jsonl: JsonlImport | null = $state.raw(null);

  #modelChoice: ModelChoice = $state.raw({ kind: 'bundled' });
  #preview: ModelPreview | null = $state.raw(null);
  #previewError: string | null = $state(null);
  #model: ModelInfo | null = $state.raw(null);
  #loadProgress: LoadProgress | null = $state.raw(null);

  #runId: string | null = $state(null);
  #runName: string | null = $state(null);
  #step = $state(0);
  #history: MetricsRow[] = $state.raw([]);
  #evals: EvalRecord[] = $state.raw([]);
  #bestEval: BestEval | null = $state.raw(null);
  #reports: UiStepReport[] = $state.raw([]);
  #stepMs: number[] = $state.raw([]);
  #busy: string | null = $state(null);

  #checkpoints: CheckpointInfo[] = $state.raw([]);
  #storage: StorageInfo | null = $state.raw(null);
  #lastSaved: CheckpointInfo | null = $state.raw(null);
  #deviceLost: DeviceLost | null = $state.raw(null);
  #banners: Banner[] = $state([]);
  #consent: ConsentRequest | null = $state.raw(null);
  #discard: DiscardRequest | null = $state.raw(null);
  /** Pause was asked for and the worker has not stopped yet (the step under way finishes). */
  #pausing = $state(false);
  #activity: StepActivity | null = $state.raw(null);

  /** The one selected step every view shows (lib/step-select.ts): the latest while `follow`,
   * otherwise `#pinned`, which a new step does not move. */
  #follow = $state(true);
  #pinned: number | null = $state(null);
  /** The step under the pointer on some chart: every chart draws its crosshair there. */
  #hoverStep: number | null = $state(null);
  /** The charts' EMA smoothing weight (0 = off; lib/chart-rules.ts). */
  #smoothing = $state(0);
  #selectedStep: number | null = $derived(
    this.#follow ? (this.#history.at(-1)?.step ?? null) : this.#pinned,
  );
  #selectedReport: UiStepReport | null = $derived(
    this.#reports.find((r) => r.step === this.#selectedStep) ?? null,
  );
  #learnChoice = $derived(learnChoice(this.#reports, this.#selectedStep, this.#follow));

  #bannerId = 0;
  /** Resolves the open discard dialog's promise (confirmDiscard). */
  #discardAnswer: ((answer: DiscardAnswer) => void) | null = null;
  /** Resolves the open consent dialog's promise (askConsent). */
  #consentAnswer: ((allowed: boolean) => void) | null = null;
  /** One dialog at a time: each question waits for the ones before it. */
  #consentQueue: Promise<unknown> = Promise.resolve();
  readonly #consentMemory = new ConsentMemory();

  /** The draft resolved, or why it does not resolve; follows the draft and the imported JSONL. */
  #resolved: { config: Config; error: null } | { config: null; error: string } = $derived.by(() => {
    try {
      return { config: resolveConfig(draftForWorker(this.#draft, this.#jsonl)), error: null };
    } catch (err) {
      return { config: null, error: msg(err) };
    }
  });

  #configError: string | null = $derived(
    this.#resolved.error ??
      (this.#draft.task === 'jsonl' && !this.#jsonl ? 'Import a JSONL dataset first.' : null),
  );

  #dirty: boolean = $derived(
    !this.#applied ||
      !this.#resolved.config ||
      JSON.stringify(this.#resolved.config) !== JSON.stringify(this.#applied),
  );

  /** The options changed in the form since the run was built or last took live options. */
  #pendingOptions: string[] = $derived(
    this.#applied && this.#resolved.config
      ? changedOptions(this.#applied, this.#resolved.config)
      : [],
  );
  /** Those split: `live` apply at the next Step / Run, `reset` wait for a Reset (lib/pending.ts). */
  #pendingSplit: { live: ConfigKey[]; reset: ConfigKey[] } = $derived(
    this.#applied && this.#resolved.config
      ? splitPending(this.#applied, this.#resolved.config, this.#liveOptions)
      : { live: [], reset: [] },
  );

  /** The last step of this run that a stored checkpoint holds: the step it was adopted at (0, or
   * the checkpoint it was restored from), or a later save; a deleted checkpoint no longer counts. */
  #savedStep = $state(0);

  #timing = $derived(
    estimate(this.#stepMs, (this.#applied?.steps ?? this.#draft.steps) - this.#step),
  );

  #rewardNames: string[] = $derived((this.#applied ?? this.#draft).rewards);

  /** Where each step's metrics are stored as they arrive (runs.svelte.ts; App connects it). */
  /** The Runs panel's store (runs.svelte.ts): told when the worker stored the run's metrics. */
  runs: { historySaved(): void } | null = null;

  constructor(api: Comlink.Remote<TrainerApi>) {
    this.api = api;
  }

  // ---- state (read-only outside the session, except the view and the form's draft) -----
  get probe() {
    return this.#probe;
  }
  get status() {
    return this.#status;
  }
  get view() {
    return this.#view;
  }
  set view(view: View) {
    this.#view = view;
  }
  /** The Learn section the URL points at (#learn/<topic>). */
  get learnTopic() {
    return this.#learnTopic;
  }
  set learnTopic(topic: string | null) {
    this.#learnTopic = topic;
  }
  /** The form's config (a deep $state proxy the panels edit in place); nulls keep their meaning:
   * epsilonHigh null follows epsilon, rewardWeights null = 1 each. */
  get draft(): DraftConfig {
    return this.#draft;
  }
  /** The config of the run the worker holds. */
  get applied() {
    return this.#applied;
  }
  get jsonl() {
    return this.#jsonl;
  }
  get modelChoice() {
    return this.#modelChoice;
  }
  get preview() {
    return this.#preview;
  }
  get previewError() {
    return this.#previewError;
  }
  get model() {
    return this.#model;
  }
  get loadProgress() {
    return this.#loadProgress;
  }
  get runId() {
    return this.#runId;
  }
  get runName() {
    return this.#runName;
  }
  get step() {
    return this.#step;
  }
  get history() {
    return this.#history;
  }
  /** Evaluations during training of the current run (evalSteps > 0) and the best of them. */
  get evals() {
    return this.#evals;
  }
  get bestEval() {
    return this.#bestEval;
  }
  get reports() {
    return this.#reports;
  }
  get stepMs() {
    return this.#stepMs;
  }
  get busy() {
    return this.#busy;
  }
  get checkpoints() {
    return this.#checkpoints;
  }
  get storage() {
    return this.#storage;
  }
  get lastSaved() {
    return this.#lastSaved;
  }
  get deviceLost() {
    return this.#deviceLost;
  }
  get banners() {
    return this.#banners;
  }
  /** Custom reward code (from a link, a file or a checkpoint) waiting for the user's answer. */
  get consent() {
    return this.#consent;
  }

  // ---- derived -------------------------------------------------------------------------
  /** Why the draft cannot start a run, or null. */
  get configError(): string | null {
    return this.#configError;
  }

  /** The draft differs from the run's config (applies on Reset, or on Step at step 0). */
  get dirty(): boolean {
    return this.#dirty;
  }

  get timing() {
    return this.#timing;
  }

  /** The options changed in the form since this run started or last took live options. */
  get pendingOptions(): string[] {
    return this.#pendingOptions;
  }

  /** The pending options the next Step or Run applies to the run as it goes on. */
  get pendingLive(): ConfigKey[] {
    return this.#pendingSplit.live;
  }

  /** The pending options that apply only on Reset (a new run). */
  get pendingReset(): ConfigKey[] {
    return this.#pendingSplit.reset;
  }

  /** The options changed in the middle of this run, each from the step it applies from. */
  get liveChanges(): LiveChange[] {
    return this.#liveChanges;
  }

  /** The steps the run trains to once the pending live options apply (Run's limit). */
  get targetSteps(): number {
    const next = this.#resolved.config;
    if (next && this.#pendingSplit.live.includes('steps')) return next.steps;
    return this.#applied?.steps ?? this.#draft.steps;
  }

  /** Steps trained since the last checkpoint of this run: what Reset, Restore or Load would lose. */
  get unsavedSteps(): number {
    return this.#runId ? Math.max(0, this.#step - Math.min(this.#savedStep, this.#step)) : 0;
  }

  /** Pause was clicked; the step under way finishes first. */
  get pausing(): boolean {
    return this.#pausing;
  }

  /** The phase of the step under way (sampling k/N tokens, rewards, …), or null. */
  get activity(): StepActivity | null {
    return this.#activity;
  }

  /** The open "discard unsaved steps?" question, or null. */
  get discard(): DiscardRequest | null {
    return this.#discard;
  }

  get rewardNames(): string[] {
    return this.#rewardNames;
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

  // ---- setup ---------------------------------------------------------------------------
  async init(): Promise<void> {
    this.readUrl();
    await this.api.setListener(Comlink.proxy((e: TrainerEvent) => this.onEvent(e)));
    try {
      this.#probe = await this.api.probeAdapter();
    } catch (err) {
      this.#probe = {
        ok: false,
        reason: `The trainer worker failed to start: ${msg(err)}`,
        remedy: 'Reload the page. If it keeps failing, your browser may block module workers.',
      };
    }
    if (this.#probe.ok) void this.previewModel();
    void this.refreshCheckpoints();
    void this.showStorageNotices();
  }

  /** Stored rows the database could not read (an upgrade or a read left them out): one banner
   * that names them until the user dismisses it, after which they are not shown again. */
  private async showStorageNotices(): Promise<void> {
    let notices: StorageNotice[];
    try {
      notices = await this.api.storageNotices();
    } catch {
      return; // Storage unavailable: refreshCheckpoints reports that.
    }
    if (notices.length === 0) return;
    const SHOWN = 8;
    const listed = notices
      .slice(0, SHOWN)
      .map((n) => `run '${n.runId}', ${n.row}: ${n.problem}`)
      .join('; ');
    const more = notices.length > SHOWN ? ` and ${notices.length - SHOWN} more` : '';
    const rows = notices.length === 1 ? '1 stored row' : `${notices.length} stored rows`;
    this.notify(
      'warn',
      `${rows} could not be read and ${notices.length === 1 ? 'was' : 'were'} left out`,
      `Every readable run and checkpoint is kept. Left out (unchanged in the database): ${listed}${more}.`,
      undefined,
      false,
      () => void this.api.dismissStorageNotices(notices.map((n) => n.key)).catch(() => {}),
    );
  }

  private readUrl() {
    const { enabled, rest: search } = splitTestHooks(
      typeof location === 'undefined' ? '' : location.search,
    );
    if (enabled) this.exposeTestHooks();
    if (!search || search === '?') return;
    try {
      // The promise settles when the user answers the consent dialog (if the link has code).
      void this.applySharedConfig(configFromUrlParams(search));
    } catch (err) {
      this.notify('error', 'The shared link has an invalid configuration', msg(err));
    }
  }

  /** `window.__grpoTest`, only with ?test-hooks=1 (lib/test-hooks.ts): actions for e2e tests. */
  private exposeTestHooks() {
    (globalThis as { __grpoTest?: unknown }).__grpoTest = {
      loseDevice: () => this.api.loseDevice(),
      /** The metrics of every step so far, as the charts get them. */
      history: () => $state.snapshot(this.#history),
      /** Teacher-forced log-probs of fixed completions (token ids) under the current policy. */
      logProbs: (prompts: number[][], completions: number[][]) =>
        this.api.scoreCompletions(prompts, completions),
      /** The newest checkpoint this page saved or restored, as stored (tensor SHA-256s, rows). */
      lastCheckpointDigest: () => {
        const id = this.#lastSaved?.id;
        if (!id) throw new Error('No checkpoint saved or restored in this page yet.');
        return this.api.checkpointDigest(id);
      },
    };
  }

  /**
   * A shared link's config: everything but its custom reward code applies at once; the code is
   * added only after the user has seen it and allowed it (the consent dialog). Resolves when the
   * answer has been applied.
   */
  async applySharedConfig(shared: Partial<ConfigInput>): Promise<void> {
    const code = customRewardCode(shared);
    const custom = Object.keys(code).length > 0;
    try {
      this.#draft = resolveDraft({
        ...PLAYGROUND_DEFAULTS,
        ...(custom ? withoutCustomRewards(shared) : shared),
      });
    } catch (err) {
      this.notify('error', 'The shared configuration could not be applied', msg(err));
      return;
    }
    if (!custom) return;
    const allowed = await this.askConsent('link', 'This link', code);
    if (!allowed) {
      this.notify(
        'info',
        "The link's custom reward code was left out",
        `Not added: ${Object.keys(code)
          .map((id) => CUSTOM_REWARD_PREFIX + id)
          .join(', ')}. The rest of the shared configuration is in the options.`,
      );
      return;
    }
    try {
      this.#draft = resolveDraft({ ...PLAYGROUND_DEFAULTS, ...shared });
    } catch (err) {
      this.notify('error', 'The shared configuration could not be applied', msg(err));
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
  private rememberAllowed(config: Config) {
    const code = customRewardCode(config);
    if (Object.keys(code).length === 0) return;
    void codeHash(code).then((hash) => this.#consentMemory.set(hash, true));
  }

  shareUrl(): string {
    const params = configToUrlParams(resolveConfig(this.draftForWorker()));
    const q = params.toString();
    return `${location.origin}${location.pathname}${q ? `?${q}` : ''}#${this.#view}`;
  }

  /** Replaces the draft with a named preset (src/grpo/presets.ts), exactly as the CLI runs it;
   * like any draft change it applies on Reset, or on the first Step of a fresh run. */
  usePreset(name: PresetName) {
    this.#draft = resolveDraft({ ...PRESETS[name] });
    this.notify(
      'info',
      `The '${name}' preset is in the options`,
      'It applies on Reset, or on the first Step of a run not trained yet.',
    );
  }

  /** The draft as the worker takes it (epsilonHigh / rewardWeights keep their null meaning). */
  draftForWorker(): Partial<ConfigInput> {
    return draftForWorker(this.#draft, this.#jsonl);
  }

  importJsonl(name: string, text: string) {
    const options = this.#draft.task === 'jsonl' ? this.#draft.taskOptions : {};
    const preview = parseJsonlDataset(text, {
      checker: (options.checker as 'exact' | 'numeric' | 'choice') ?? 'exact',
      tolerance: Number(options.tolerance ?? 1e-6),
    });
    this.#jsonl = { name, text, preview };
  }

  // ---- events from the worker ----------------------------------------------------------
  private onEvent(e: TrainerEvent) {
    switch (e.type) {
      case 'load-progress':
        this.#loadProgress = e;
        break;
      case 'status':
        this.#status = e.status;
        this.#step = e.step;
        if (e.status !== 'running') {
          this.#pausing = false;
          this.#activity = null;
        }
        break;
      case 'phase': {
        const p = e.progress;
        const prev = this.#activity;
        // One clock per step: from its first phase on this page to its checkpoint and eval.
        this.#activity = p
          ? { ...p, startedAt: prev && prev.step === p.step ? prev.startedAt : performance.now() }
          : null;
        break;
      }
      case 'step': {
        this.#step = e.report.step;
        this.#history = [...this.#history, { step: e.report.step, metrics: e.report.metrics }];
        const reports = [...this.#reports, e.report];
        this.#reports = reports.length > MAX_REPORTS ? reports.slice(-MAX_REPORTS) : reports;
        this.#stepMs = [...this.#stepMs.slice(-50), e.report.elapsedMs];
        if (e.report.skipped)
          this.notify('warn', `Step ${e.report.step}: update skipped`, e.report.skipped);
        break;
      }
      case 'eval':
        this.#evals = [...this.#evals, e.record];
        this.#bestEval = e.best;
        break;
      case 'best-loaded':
        if (e.best.step !== e.lastStep)
          this.notify(
            'info',
            `Loaded the weights of step ${e.best.step}`,
            `loadBestModelAtEnd: step ${e.best.step} had the best eval accuracy (${(100 * e.best.evalAccuracy).toFixed(1)}%); Chat, Compare and Export now use those weights. The checkpoint of step ${e.lastStep} keeps the last step's.`,
          );
        break;
      case 'checkpoint-saved':
        this.#lastSaved = e.checkpoint;
        this.noteSaved(e.checkpoint);
        void this.refreshCheckpoints();
        break;
      case 'checkpoint-failed':
        // The storage names runs by id; the page knows the current run's name.
        if (this.#runId && this.#runName)
          e.message = e.message.replaceAll(`'${this.#runId}'`, `'${this.#runName}'`);
        this.notify(
          e.quota ? 'warn' : 'error',
          (e.quota
            ? `Storage full: the checkpoint at step ${e.step} was not saved`
            : `The checkpoint at step ${e.step} was not saved`) +
            (e.automatic ? ' (training continues)' : ''),
          `${e.message} ${this.unsavedNote()}`,
          e.candidates,
          e.quota,
        );
        if (e.quota) void this.refreshCheckpoints();
        break;
      case 'history-saved':
        this.runs?.historySaved();
        break;
      case 'history-failed':
        this.notify('warn', e.title, e.message);
        break;
      case 'error':
        this.notify(
          'error',
          e.diverged ? 'Training stopped: the updates diverged' : 'Training stopped',
          e.message,
        );
        break;
      case 'device-lost':
        this.#deviceLost = { message: e.message, lastCheckpoint: e.lastCheckpoint };
        break;
    }
  }

  /** Which trained steps no checkpoint holds, for a failed save's banner (it stays until
   * dismissed, so it must say what the user would lose). */
  private unsavedNote(): string {
    const n = this.unsavedSteps;
    if (n === 0) return 'Every trained step is in an earlier checkpoint.';
    const first = this.#step - n + 1;
    const range = n === 1 ? `Step ${this.#step} is` : `Steps ${first}–${this.#step} are`;
    return `${range} not in any checkpoint of run '${this.#runName ?? this.#runId}' yet.`;
  }

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

  private async task<T>(label: string, fn: () => Promise<T>, title = label): Promise<T | null> {
    this.#busy = label;
    try {
      return await fn();
    } catch (err) {
      this.notify('error', title, msg(err));
      return null;
    } finally {
      if (this.#busy === label) this.#busy = null;
    }
  }

  // ---- model ---------------------------------------------------------------------------
  async previewModel(choice: ModelChoice = this.#modelChoice): Promise<void> {
    this.#modelChoice = choice;
    this.#preview = null;
    this.#previewError = null;
    try {
      this.#preview = await this.api.previewModel(choice, this.draftForWorker());
    } catch (err) {
      this.#previewError = msg(err);
    }
  }

  /** Orders replan() answers: only the latest request's plan is shown. */
  #planRequest = 0;

  /**
   * Plans the previewed model's memory again for the form's options (ModelPanel calls it when the
   * draft changes, e.g. its LoRA / dtype / checkpointing switches), so the plan follows the form
   * before anything is loaded. A draft that does not resolve keeps the last plan: the form says why.
   */
  async replan(): Promise<void> {
    const preview = this.#preview;
    if (!preview || !this.#resolved.config) return;
    const request = ++this.#planRequest;
    try {
      const plan = await this.api.planMemory(preview.config, this.draftForWorker());
      const now = this.#preview;
      if (request === this.#planRequest && now?.config === preview.config)
        this.#preview = { ...now, plan };
    } catch {
      // Same as an unresolved draft: the options form names the problem.
    }
  }

  async loadModel(): Promise<void> {
    if (!(await this.confirmDiscard('load'))) return;
    this.#loadProgress = null;
    const out = await this.task(
      'Loading the model',
      () => this.api.loadModel(this.#modelChoice, this.draftForWorker(), this.#jsonl?.text),
      'The model could not be loaded',
    );
    this.#loadProgress = null;
    if (!out) return;
    this.#model = out.model;
    this.adoptRun(out.run, true);
  }

  private adoptRun(run: RunState, fresh: boolean) {
    this.rememberAllowed(run.config);
    const sameRun = run.runId === this.#runId;
    this.#runId = run.runId;
    this.#runName = run.runName;
    this.#applied = run.config;
    this.#liveOptions = run.liveOptions;
    this.#liveChanges = run.liveChanges ?? [];
    this.#step = run.step;
    // A run is adopted at step 0 or at the checkpoint it was restored from: nothing to lose yet.
    this.#savedStep = run.step;
    this.#history = run.history;
    // A new run, or one that no longer has the pinned step: the selection follows it again.
    if (fresh || (this.#pinned ?? 0) > run.step) {
      this.#follow = true;
      this.#pinned = null;
    }
    // The worker builds a new run here: its evaluations start over.
    this.#evals = [];
    this.#bestEval = null;
    if (fresh || run.step === 0) {
      this.#reports = [];
      this.#stepMs = [];
    } else {
      this.#reports = sameRun ? this.#reports.filter((r) => r.step <= run.step) : [];
    }
    this.#preview = this.#preview ? { ...this.#preview, plan: run.plan } : this.#preview;
  }

  /**
   * A PEFT LoRA adapter (its adapter_config.json and adapter_model.safetensors) onto the loaded
   * base model: a new run at step 0 with the adapter's LoRA options and weights; the form follows.
   */
  async importAdapter(files: readonly File[]): Promise<void> {
    if (!this.#model) return;
    if (!(await this.confirmDiscard('adapter'))) return;
    const run = await this.task(
      'Loading the adapter',
      async () => {
        const read = await Promise.all(
          files.map(async (f) => ({ name: f.name, bytes: new Uint8Array(await f.arrayBuffer()) })),
        );
        return this.api.importAdapter(read, this.#jsonl?.text);
      },
      'The adapter could not be loaded',
    );
    if (!run) return;
    this.#draft = draftFromConfig(run.config);
    this.adoptRun(run, true);
  }

  // ---- training ------------------------------------------------------------------------
  /** Applies the draft as a new run when it changed and nothing was trained yet. */
  private async ensureConfigured(): Promise<boolean> {
    if (!this.#model) {
      this.notify('info', 'No model loaded', 'Load a model first (the bundled one is ready).');
      return false;
    }
    if (this.dirty && this.#step === 0) {
      const run = await this.task(
        'Configuring',
        () => this.api.configure(this.draftForWorker(), this.#jsonl?.text),
        'The configuration was refused',
      );
      if (!run) return false;
      this.adoptRun(run, true);
    } else if (this.#step > 0 && this.#pendingSplit.live.length > 0) {
      return this.applyLiveOptions();
    }
    return true;
  }

  /**
   * The pending options the run can take in the middle (learning rate, sampling, rewards, clip
   * range, steps…: lib/pending.ts), applied to it from its next step: no Reset, and its history
   * records each change at that step. Options that need a Reset stay pending.
   */
  private async applyLiveOptions(): Promise<boolean> {
    const applied = this.#applied;
    const draft = this.#resolved.config;
    const keys = this.#pendingSplit.live;
    if (!applied || !draft || keys.length === 0) return true;
    const run = await this.task(
      'Applying options',
      () => this.api.applyOptions(withOptions(applied, draft, keys)),
      'The options could not be applied',
    );
    if (!run) return false;
    this.rememberAllowed(run.config);
    this.#applied = run.config;
    this.#liveOptions = run.liveOptions;
    this.#liveChanges = run.liveChanges ?? [];
    return true;
  }

  /**
   * During Run: the pending live options, sent to the run now. The worker takes them between two
   * steps, so the step under way finishes with the options it started with and the next one uses
   * them (docs/grpo.md "Options changed during a run"). When stopped, Step and Run apply them.
   */
  async applyNow(): Promise<void> {
    if (this.#status !== 'running') return;
    await this.applyLiveOptions();
  }

  async stepOnce(): Promise<void> {
    if (!(await this.ensureConfigured())) return;
    await this.task('Step', () => this.api.step(), 'The step failed');
  }

  async run(): Promise<void> {
    if (!(await this.ensureConfigured())) return;
    try {
      await this.api.run();
    } catch (err) {
      this.notify('error', 'Training stopped', msg(err));
    }
  }

  /** Asks the worker to stop after the step under way; `pausing` shows it before the worker
   * answers (the worker is busy with that step, so its answer can take the step's time). */
  async pause(): Promise<void> {
    if (this.#status !== 'running') return;
    this.#pausing = true;
    try {
      await this.api.pause();
    } catch (err) {
      this.#pausing = false;
      this.notify('error', 'Pause failed', msg(err));
    }
  }

  /** Run when stopped, Pause when running (the keyboard shortcut and the toggle). */
  async toggleRun(): Promise<void> {
    if (this.#status === 'running') await this.pause();
    else await this.run();
  }

  /**
   * Before an action that replaces the run: when steps were trained since its last checkpoint,
   * asks whether to save first, discard them or cancel (the discard dialog, App.svelte). Resolves
   * true when the action may go on. With nothing unsaved it asks nothing.
   */
  async confirmDiscard(action: DiscardAction): Promise<boolean> {
    const steps = this.unsavedSteps;
    if (steps === 0) return true;
    const answer = await new Promise<DiscardAnswer>((resolve) => {
      this.#discardAnswer?.('cancel');
      this.#discardAnswer = resolve;
      this.#discard = { action, steps, step: this.#step };
    });
    if (answer === 'cancel') return false;
    if (answer === 'discard') return true;
    await this.save();
    // Go on only when the save worked: a failed save has its banner and keeps the run.
    return this.unsavedSteps === 0;
  }

  /** The discard dialog's answer (Escape cancels). */
  answerDiscard(answer: DiscardAnswer) {
    const resolve = this.#discardAnswer;
    this.#discardAnswer = null;
    this.#discard = null;
    resolve?.(answer);
  }

  /** A new run from the loaded weights with the draft config. */
  async reset(): Promise<void> {
    if (!this.#model) return;
    if (!(await this.confirmDiscard('reset'))) return;
    const run = await this.task(
      'Resetting',
      () => this.api.configure(this.draftForWorker(), this.#jsonl?.text),
      'The run could not be reset',
    );
    if (run) this.adoptRun(run, true);
  }

  // ---- checkpoints ---------------------------------------------------------------------
  async refreshCheckpoints(): Promise<void> {
    try {
      const [list, storage] = await Promise.all([
        this.api.listCheckpoints(),
        this.api.storageInfo(),
      ]);
      this.#checkpoints = list;
      this.#storage = storage;
    } catch (err) {
      this.notify('warn', 'Checkpoints are unavailable', msg(err));
    }
  }

  async save(): Promise<void> {
    this.#busy = 'Saving';
    try {
      this.#lastSaved = await this.api.saveCheckpoint();
      this.noteSaved(this.#lastSaved);
    } catch (err) {
      // A failure the worker already reported with its 'checkpoint-failed' event is not repeated.
      if ((err as { name?: string }).name !== CHECKPOINT_FAILURE_REPORTED)
        this.notify('error', 'Not saved', msg(err));
    } finally {
      if (this.#busy === 'Saving') this.#busy = null;
    }
  }

  async restore(id: string): Promise<void> {
    // A checkpoint of another model is refused before the discard question: answering it would
    // cost nothing but the user's trust, and the message names the model to load.
    const problem = await this.api.restoreProblem(id).catch((err: unknown) => msg(err));
    if (problem) {
      this.notify('error', 'The checkpoint could not be restored', problem);
      return;
    }
    if (!(await this.confirmDiscard('restore'))) return;
    const info = this.#checkpoints.find((c) => c.id === id);
    const subject = info
      ? `The checkpoint of run '${info.runName}' at step ${info.step}`
      : 'This checkpoint';
    let declined: string[] = [];
    // The worker asks (through this proxy) before it builds the run, so declined code never runs.
    const consent = async (code: Record<string, string>) => {
      const allowed = await this.askConsent('restore', subject, code);
      if (!allowed) declined = Object.keys(code);
      return allowed;
    };
    const run = await this.task(
      'Restoring',
      () => this.api.restoreCheckpoint(id, this.#jsonl?.text, Comlink.proxy(consent)),
      'The checkpoint could not be restored',
    );
    if (!run) return;
    if (declined.length > 0)
      this.notify(
        'info',
        'Restored without its custom reward code',
        `Left out: ${declined.map((d) => CUSTOM_REWARD_PREFIX + d).join(', ')}. The weights and optimizer state are restored; steps are scored with ${run.config.rewards.join(', ')}.`,
      );
    this.#draft = draftFromConfig(run.config);
    this.#reports = [];
    this.#stepMs = [];
    this.#deviceLost = null;
    this.adoptRun(run, true);
  }

  async recover(): Promise<void> {
    const out = await this.task(
      'Recovering',
      async () => ({ run: await this.api.recover(this.#jsonl?.text) }),
      'Could not recover from the device loss',
    );
    if (!out) return;
    this.#deviceLost = null;
    // No model was loaded on the lost device: the new device is ready for one.
    const run = out.run;
    if (!run) return;
    this.adoptRun(run, false);
    this.#history = run.history;
  }

  async rename(runId: string, name: string): Promise<void> {
    await this.task('Renaming', () => this.api.renameRun(runId, name), 'Not renamed');
    if (runId === this.#runId) this.#runName = name.trim();
    await this.refreshCheckpoints();
  }

  /** A checkpoint of the current run now holds its steps up to `c.step`. */
  private noteSaved(c: CheckpointInfo) {
    if (c.runId === this.#runId) this.#savedStep = Math.max(this.#savedStep, c.step);
  }

  async remove(id: string): Promise<void> {
    const info = this.#checkpoints.find((c) => c.id === id);
    const deleted = await this.task(
      'Deleting',
      async () => (await this.api.deleteCheckpoint(id), true),
      'Not deleted',
    );
    // "saved at step N" and the unsaved-steps count must not lean on a deleted checkpoint.
    if (deleted && this.#lastSaved?.id === id) this.#lastSaved = null;
    await this.refreshCheckpoints();
    if (deleted && info && info.runId === this.#runId && info.step === this.#savedStep) {
      // The run's steps up to there are now held only by its other checkpoints, if any.
      this.#savedStep = Math.max(
        0,
        ...this.#checkpoints
          .filter((c) => c.runId === this.#runId && c.step <= this.#step)
          .map((c) => c.step),
      );
    }
  }

  async exportCheckpoint(id: string): Promise<{ blob: Blob; fileName: string } | null> {
    return this.task('Exporting', () => this.api.exportCheckpoint(id), 'Not exported');
  }

  /**
   * Imports a checkpoint file. Its config is read on the page first: reward ids must follow the
   * one rule, and custom reward code is shown for consent. Declining still imports the file as it
   * is (weights are data, and an export gives back the same file), but the answer is remembered
   * for this session, so restoring it leaves the code out without asking again.
   */
  async importCheckpoint(file: File): Promise<void> {
    const config = await checkpointFileConfig(file);
    let allowed = true;
    if (config) {
      const problem = rewardIdsProblem(config);
      if (problem) {
        this.notify('error', 'Not imported', `${file.name}: ${problem.message}`);
        return;
      }
      allowed = await this.askConsent(
        'import',
        `The checkpoint file '${file.name}'`,
        customRewardCode(config),
      );
    }
    const info = await this.task(
      'Importing',
      () => this.api.importCheckpoint(file),
      'Not imported',
    );
    await this.refreshCheckpoints();
    if (info && !allowed)
      this.notify(
        'info',
        `Imported '${file.name}' without permission to run its reward code`,
        'Restoring it leaves its custom rewards out; its weights and optimizer state restore as usual.',
      );
  }

  chat(text: string, options: ChatOptions): Promise<ChatReply | null> {
    return this.task('Generating', () => this.api.chat(text, options), 'The model did not answer');
  }

  /** Base vs current weights on the first `prompts` held-out prompts (default COMPARE_PROMPTS). */
  compare(prompts?: number): Promise<Comparison | null> {
    return this.task('Comparing', () => this.api.compare(prompts), 'The comparison failed');
  }

  exportModel(format: 'hf' | 'onnx' | 'peft') {
    return this.task('Exporting the model', () => this.api.exportModel(format), 'Not exported');
  }
}
