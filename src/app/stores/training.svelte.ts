// The page's store of the run service (src/worker/run-service.ts): the playground run the worker
// holds (its id, name, config in force, live option changes), its status and the step under way,
// the metrics history, recent step reports and evaluations, and the actions Step, Run, Pause,
// Apply, Reset and recovery after a device loss. Reports arrive once, as the worker's 'step' events.
import type { Config, ConfigKey, LiveChange } from '../../grpo/config';
import type { BestEval, EvalRecord } from '../../train/eval-during-training';
import type {
  CheckpointInfo,
  PhaseProgress,
  RunState,
  TrainerEvent,
  TrainerStatus,
  UiStepReport,
} from '../../worker/protocol';
import type { MetricsRow } from '../../worker/types';
import { estimate } from '../lib/format';
import { withOptions } from '../lib/pending';
import { msg, type Shell } from './shell';

/** The title of the options store's notice that a preset is in the form, waiting for a new run
 * (OptionsStore.usePreset); a new run dismisses it. */
const PRESET_PENDING = /^The '[^']+' preset is in the options$/;

/** Step reports kept in memory for the inspector (the metrics history keeps every step). */
export const MAX_REPORTS = 300;

export interface DeviceLost {
  /** Why: a loss reason, or the kind of GPU error that ended the device (protocol.ts). */
  reason: string;
  message: string;
  lastCheckpoint: CheckpointInfo | null;
}

/** The step under way as the page shows it: the worker's phase and when the step began here. */
export interface StepActivity extends PhaseProgress {
  /** performance.now() on the page when this step's first phase arrived. */
  startedAt: number;
}

export class TrainingStore {
  #status: TrainerStatus = $state('no-model');
  #runId: string | null = $state(null);
  #runName: string | null = $state(null);
  #applied: Config | null = $state.raw(null);
  /** The options the run takes at its next step without a Reset (RunState.liveOptions). */
  #liveOptions: ConfigKey[] | undefined = $state.raw(undefined);
  /** The options changed in the middle of this run (RunState.liveChanges), oldest first. */
  #liveChanges: LiveChange[] = $state.raw([]);
  #step = $state(0);
  #history: MetricsRow[] = $state.raw([]);
  #evals: EvalRecord[] = $state.raw([]);
  #bestEval: BestEval | null = $state.raw(null);
  #reports: UiStepReport[] = $state.raw([]);
  #stepMs: number[] = $state.raw([]);
  /** Pause was asked for and the worker has not stopped yet (the step under way finishes). */
  #pausing = $state(false);
  #activity: StepActivity | null = $state.raw(null);
  #deviceLost: DeviceLost | null = $state.raw(null);
  /** The failure already in a banner during this Step or Run: the worker's 'error' event and the
   * rejected call carry the same message, and it is shown once. */
  #failureShown: string | null = null;
  /** What last set the run going from this page: one Step, or Run (null: neither since adopted).
   * The header says "Paused" only after a Run was stopped, not after a single Step. */
  #lastAction: 'step' | 'run' | null = $state(null);

  #timing = $derived.by(() =>
    estimate(this.#stepMs, (this.#applied?.steps ?? this.shell.options.draft.steps) - this.#step),
  );

  private readonly shell: Shell;

  constructor(shell: Shell) {
    this.shell = shell;
  }

  get status() {
    return this.#status;
  }
  get runId() {
    return this.#runId;
  }
  get runName() {
    return this.#runName;
  }
  /** The run's config in force (live changes included), or null before a run. */
  get applied() {
    return this.#applied;
  }
  get liveOptions() {
    return this.#liveOptions;
  }
  /** The options changed in the middle of this run, each from the step it applies from. */
  get liveChanges(): LiveChange[] {
    return this.#liveChanges;
  }
  get step() {
    return this.#step;
  }
  get history() {
    return this.#history;
  }
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
  /** Pause was clicked; the step under way finishes first. */
  get pausing(): boolean {
    return this.#pausing;
  }
  /** The phase of the step under way (sampling k/N tokens, rewards, …), or null. */
  get activity(): StepActivity | null {
    return this.#activity;
  }
  get deviceLost() {
    return this.#deviceLost;
  }
  get timing() {
    return this.#timing;
  }
  get lastAction() {
    return this.#lastAction;
  }

  /** The worker's events about the run; false for an event that is not the run's. */
  onEvent(e: TrainerEvent): boolean {
    switch (e.type) {
      case 'status':
        this.#status = e.status;
        this.#step = e.step;
        if (e.status !== 'running') {
          this.#pausing = false;
          this.#activity = null;
        }
        return true;
      case 'phase': {
        const p = e.progress;
        const prev = this.#activity;
        // One clock per step: from its first phase on this page to its checkpoint and eval.
        this.#activity = p
          ? { ...p, startedAt: prev && prev.step === p.step ? prev.startedAt : performance.now() }
          : null;
        return true;
      }
      case 'step': {
        this.#step = e.report.step;
        this.#history = [...this.#history, { step: e.report.step, metrics: e.report.metrics }];
        const reports = [...this.#reports, e.report];
        this.#reports = reports.length > MAX_REPORTS ? reports.slice(-MAX_REPORTS) : reports;
        this.#stepMs = [...this.#stepMs.slice(-50), e.report.elapsedMs];
        if (e.report.skipped)
          this.shell.notify('warn', `Step ${e.report.step}: update skipped`, e.report.skipped);
        return true;
      }
      case 'eval':
        this.#evals = [...this.#evals, e.record];
        this.#bestEval = e.best;
        return true;
      case 'best-loaded':
        if (e.best.step !== e.lastStep)
          this.shell.notify(
            'info',
            `Loaded the weights of step ${e.best.step}`,
            `loadBestModelAtEnd: step ${e.best.step} had the best eval accuracy (${(100 * e.best.evalAccuracy).toFixed(1)}%); Chat, Compare and Export now use those weights. The checkpoint of step ${e.lastStep} keeps the last step's.`,
          );
        return true;
      case 'error':
        this.reportFailure(
          e.diverged ? 'Training stopped: the updates diverged' : 'Training stopped',
          e.message,
        );
        return true;
      case 'device-lost':
        this.#deviceLost = {
          reason: e.reason,
          message: e.message,
          lastCheckpoint: e.lastCheckpoint,
        };
        return true;
      default:
        return false;
    }
  }

  /**
   * The run the worker now holds (a load, Reset, a restore, an adapter): its config, history and
   * step. `fresh`: a new run or a restore, whose reports and selection start over; a recovered run
   * keeps the reports it still has.
   */
  adopt(run: RunState, fresh: boolean) {
    const shell = this.shell;
    shell.rememberAllowed(run.config);
    const sameRun = run.runId === this.#runId;
    this.#runId = run.runId;
    this.#runName = run.runName;
    this.#applied = run.config;
    this.#liveOptions = run.liveOptions;
    this.#liveChanges = run.liveChanges ?? [];
    this.#step = run.step;
    this.#history = run.history;
    // A run is adopted at step 0 or at the checkpoint it was restored from: nothing to lose yet.
    shell.checkpoints.noteAdopted(run.step);
    shell.followNewRun(fresh, run.step);
    if (!sameRun || fresh) this.#lastAction = null;
    // A new run took the draft: a notice that a preset waits for the next run is done with.
    if (fresh) for (const b of shell.banners) if (PRESET_PENDING.test(b.title)) shell.dismiss(b.id);
    // The worker builds a new run here: its evaluations start over.
    this.#evals = [];
    this.#bestEval = null;
    if (fresh || run.step === 0) {
      this.#reports = [];
      this.#stepMs = [];
    } else {
      this.#reports = sameRun ? this.#reports.filter((r) => r.step <= run.step) : [];
    }
    shell.model.notePlan(run.plan);
  }

  /** The run's new name (the checkpoint store renamed it in storage). */
  noteRenamed(runId: string, name: string) {
    if (runId === this.#runId) this.#runName = name;
  }

  /** A restore: the restored run's reports are not the ones kept here. */
  clearForRestore() {
    this.#reports = [];
    this.#stepMs = [];
    this.#deviceLost = null;
  }

  /** Applies the draft as a new run when it changed and nothing was trained yet. */
  private async ensureConfigured(): Promise<boolean> {
    const shell = this.shell;
    if (!shell.model.info) {
      shell.notify('info', 'No model loaded', 'Load a model first (the bundled one is ready).');
      return false;
    }
    if (shell.options.dirty && this.#step === 0) {
      const run = await shell.task(
        'Configuring',
        () => shell.api.configure(shell.options.forWorker(), shell.options.jsonl?.text),
        'The configuration was refused',
      );
      if (!run) return false;
      this.adopt(run, true);
    } else if (this.#step > 0 && shell.options.pendingLive.length > 0) {
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
    const shell = this.shell;
    const applied = this.#applied;
    const draft = shell.options.resolved;
    const keys = shell.options.pendingLive;
    if (!applied || !draft || keys.length === 0) return true;
    const run = await shell.task(
      'Applying options',
      () => shell.api.applyOptions(withOptions(applied, draft, keys)),
      'The options could not be applied',
    );
    if (!run) return false;
    shell.rememberAllowed(run.config);
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
    this.#lastAction = 'step';
    this.#failureShown = null;
    await this.shell.busyWith('Step', async () => {
      try {
        await this.shell.api.step();
      } catch (err) {
        this.reportFailure('Training stopped', msg(err));
      }
    });
  }

  /** One banner per failure: the event and the call's rejection arrive on separate channels, in
   * either order, with the same message. */
  private reportFailure(title: string, message: string) {
    const text = msg(message);
    if (this.#failureShown === text) return;
    this.#failureShown = text;
    this.shell.notify('error', title, text);
  }

  async run(): Promise<void> {
    if (!(await this.ensureConfigured())) return;
    this.#lastAction = 'run';
    this.#failureShown = null;
    try {
      await this.shell.api.run();
    } catch (err) {
      this.reportFailure('Training stopped', msg(err));
    }
  }

  /** Asks the worker to stop after the step under way; `pausing` shows it before the worker
   * answers (the worker is busy with that step, so its answer can take the step's time). */
  async pause(): Promise<void> {
    if (this.#status !== 'running') return;
    this.#pausing = true;
    try {
      await this.shell.api.pause();
    } catch (err) {
      this.#pausing = false;
      this.shell.notify('error', 'Pause failed', msg(err));
    }
  }

  /** Run when stopped, Pause when running (the keyboard shortcut and the toggle). */
  async toggleRun(): Promise<void> {
    if (this.#status === 'running') await this.pause();
    else await this.run();
  }

  /** A new run from the loaded weights with the draft config. */
  async reset(): Promise<void> {
    const shell = this.shell;
    if (!shell.model.info) return;
    if (!(await shell.confirmDiscard('reset'))) return;
    const run = await shell.task(
      'Resetting',
      () => shell.api.configure(shell.options.forWorker(), shell.options.jsonl?.text),
      'The run could not be reset',
    );
    if (run) this.adopt(run, true);
  }

  async recover(): Promise<void> {
    const shell = this.shell;
    const out = await shell.task(
      'Recovering',
      async () => ({ run: await shell.api.recover(shell.options.jsonl?.text) }),
      'Could not recover from the device loss',
    );
    if (!out) return;
    this.#deviceLost = null;
    // No model was loaded on the lost device: the new device is ready for one.
    const run = out.run;
    if (!run) return;
    this.adopt(run, false);
    this.#history = run.history;
  }
}
