// What the trainer worker's services share: the GPU engine, the loaded model, the playground's
// run, the worker's status, its event stream to the page and its storage. Each service module
// (model-service, run-service, checkpoint-service, evaluation-service, export-service, and the
// recipes' recipe-service) is a small set of methods over one WorkerContext; trainer-api.ts
// composes them into the one API the page reaches over comlink. Dependencies are injectable
// (TrainerApiOptions) so Node tests drive the same code.
import type { AdapterSummary } from '../engine/device';
import { createEngine, type Engine } from '../engine/engine';
import { resolveConfig, type Config } from '../grpo/config';
import { defaultRunName } from '../grpo/run-name';
import { browserSandboxFactory } from '../rewards/reward-sandbox-browser';
import type { SandboxFactory } from '../rewards/reward-sandbox';
import { planRunMemory, Run } from '../train/run';
import { TrainingDivergedError, type StepReport } from '../grpo/trainer';
import { type OpenedHfModel } from '../formats/hf-folder';
import { filesSource, urlSource, type ModelSource } from '../formats/model-source';
import type { Tokenizer } from '../formats/tokenizer';
import { parameterCount, type LlamaConfig } from '../core/model-config';
import { DEFAULT_BUNDLED, type BundledName } from '../core/bundled-models';
import type { MemoryPlan } from '../model/memory-plan';
import type { CheckpointPayload } from '../storage/checkpoints';
import { GrpoStorage } from '../storage/index';
import type { Identity } from '../storage/db';
import type { FlatMetricsRow } from '../core/metrics-row';
import { StorageQuotaError } from '../storage/errors';
import { CHECKPOINT_FAILURE_REPORTED } from './protocol';
import { RunHistoryWriter } from './run-history-writer';
import type {
  CheckpointInfo,
  ModelChoice,
  ModelInfo,
  PlanSummary,
  RunState,
  TrainerEvent,
  TrainerStatus,
  UiStepReport,
} from './protocol';

export type AdapterProbe =
  { ok: true; adapter: AdapterSummary } | { ok: false; reason: string; remedy: string };

export interface TrainerApiOptions {
  createEngine?: () => Promise<Engine>;
  /** Where custom reward code runs (default: QuickJS in a module worker per source, nested in this worker). */
  sandboxFactory?: () => SandboxFactory;
  openStorage?: () => Promise<GrpoStorage>;
  /** URL of the folder holding the bundled model folders (default models/ under the app's base):
   * a bundled choice loads <modelsUrl><name>/. */
  modelsUrl?: string;
  /** Overrides how a ModelChoice becomes a ModelSource (tests). */
  modelSource?: (choice: ModelChoice) => ModelSource;
  /** GPU bytes a run may plan for (WebGPU reports no free memory); default 4 × maxBufferSize. */
  budgetBytes?: number;
}

export interface LoadedModel {
  label: string;
  /**
   * The opened folder. Its weights stay in their files (hf.weights, a WeightReader): a run reads
   * them when it is built, so no copy of the model is kept between runs.
   */
  hf: OpenedHfModel;
  tokenizer: Tokenizer;
  identity: Identity;
  /** The matmul sweep's choice, one line (describeMatmulChoice). */
  matmul?: string;
}

/** The worker's run: grpo's Run and what only the page needs of it. */
export interface ActiveRun {
  run: Run;
  /** The latest checkpoint of this run saved or restored: what recover() resumes from after a
   * device loss, and what the 'device-lost' event offers. */
  lastCheckpoint: CheckpointInfo | null;
}

export const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class WorkerContext {
  engine: Engine | null = null;
  engineError: { reason: string; remedy: string } | null = null;
  model: LoadedModel | null = null;
  run: ActiveRun | null = null;
  status: TrainerStatus = 'no-model';
  pauseRequested = false;
  lost = false;
  /** Why the GPU is taken by a recipe (recipe-service), or null: the playground then waits. */
  recipeBusy: () => string | null = () => null;
  /** The run's metrics as they arrive, into IndexedDB: the worker is their only writer. */
  readonly history: RunHistoryWriter;
  #listener: ((event: TrainerEvent) => void) | null = null;
  #storage: Promise<GrpoStorage> | null = null;
  /** applyOptions calls made while a step ran: applied (or refused) at the step's end, in order. */
  #queuedOptions: {
    config: Config;
    done: (state: RunState) => void;
    fail: (err: unknown) => void;
  }[] = [];

  constructor(readonly options: TrainerApiOptions) {
    this.history = new RunHistoryWriter(
      () => this.storage(),
      (event) => this.emit(event),
    );
  }

  setListener(callback: ((event: TrainerEvent) => void) | null): void {
    this.#listener = callback;
  }

  emit(event: TrainerEvent): void {
    try {
      this.#listener?.(event);
    } catch {
      // A closed page must not stop training; events are best-effort.
    }
  }

  setStatus(next: TrainerStatus): void {
    this.status = next;
    this.emit({
      type: 'status',
      status: next,
      step: this.run?.run.stepCount ?? 0,
      steps: this.run?.run.config.steps ?? 0,
    });
  }

  storage(): Promise<GrpoStorage> {
    if (!this.#storage) {
      const opened = (this.options.openStorage ?? (() => GrpoStorage.open()))();
      this.#storage = opened;
      opened.catch(() => (this.#storage = null));
    }
    return this.#storage;
  }

  async getEngine(): Promise<Engine> {
    if (this.engine && !this.engine.gpu.lost) return this.engine;
    const engine = await (this.options.createEngine ?? (() => createEngine()))();
    this.engine = engine;
    engine.gpu.onDeviceLost((event) => {
      this.lost = true;
      this.pauseRequested = true;
      this.setStatus('lost');
      this.emit({
        type: 'device-lost',
        reason: event.reason,
        message: event.message || 'the GPU device was lost',
        lastCheckpoint: this.run?.lastCheckpoint ?? null,
      });
    });
    return engine;
  }

  sandboxFactory(): SandboxFactory {
    return (this.options.sandboxFactory ?? (() => browserSandboxFactory()))();
  }

  sourceFor(choice: ModelChoice): ModelSource {
    if (this.options.modelSource) return this.options.modelSource(choice);
    if (choice.kind === 'bundled') return urlSource(this.bundledUrl(choice.name));
    if (choice.kind === 'url') return urlSource(choice.url);
    const paths = choice.paths;
    const files =
      paths && paths.length === choice.files.length
        ? choice.files.map((f, i) => ({
            name: f.name,
            size: f.size,
            arrayBuffer: () => f.arrayBuffer(),
            webkitRelativePath: paths[i],
          }))
        : choice.files;
    return filesSource(files, choice.label ?? `${choice.files.length} selected files`);
  }

  private bundledUrl(name?: BundledName): string {
    const models =
      this.options.modelsUrl ??
      `${(import.meta.env?.BASE_URL as string | undefined) ?? '/'}models/`;
    return `${models.endsWith('/') ? models : `${models}/`}${name ?? DEFAULT_BUNDLED}/`;
  }

  /** The memory plan of `c` on a model of `config`; `weights` (the reader, or 'prequantised'
   * from config.json) plan the frozen base as the run stores it (planRunMemory). */
  async planFor(
    config: LlamaConfig,
    c: Config,
    weights?: Parameters<typeof planRunMemory>[4],
  ): Promise<PlanSummary> {
    const engine = await this.getEngine();
    const { limits } = engine.device;
    return planSummary(
      planRunMemory(config, c, limits, this.options.budgetBytes, weights, engine.pipelines.tuning),
    );
  }

  requireRun(): ActiveRun {
    if (this.lost) throw new Error('The GPU device was lost: resume from a checkpoint first.');
    if (!this.run) throw new Error('Load a model and configure a run first.');
    return this.run;
  }

  requireModel(what = 'Load a model first.'): LoadedModel {
    if (!this.model) throw new Error(what);
    return this.model;
  }

  /** Refuses while a step or a load is under way: `doing` says what waits ("Pause training …"). */
  requireIdle(doing: string): void {
    if (this.status === 'running') throw new Error(doing);
  }

  disposeRun(): void {
    if (!this.run) return;
    this.run.run.destroy();
    this.run = null;
  }

  /** A Run on the loaded model whose hooks stream its progress to the page, store its metrics and
   * its checkpoints in IndexedDB. The previous run is freed only once the new task and rewards are
   * built, so a bad JSONL or reward leaves it in place. */
  async buildRun(
    config: Config,
    jsonlText: string | undefined,
    ids: { id: string; name: string },
  ): Promise<ActiveRun> {
    const m = this.requireModel();
    const engine = await this.getEngine();
    const active = { lastCheckpoint: null } as ActiveRun;
    active.run = await Run.create({
      engine,
      config,
      model: {
        config: m.hf.config,
        // The reader: the run streams the weights into the GPU tensor by tensor, as stored (16-bit
        // stays 16-bit, a 4-bit checkpoint NF4), after beforeAllocate has freed the previous run,
        // so the host holds one tensor at a time, never the whole model.
        weights: m.hf.weights,
        tokenizer: m.tokenizer,
      },
      runId: ids.id,
      runName: ids.name,
      modelIdentity: m.identity,
      taskText: jsonlText,
      sandboxFactory: this.sandboxFactory(),
      recordLogpAfterUpdate: true,
      budgetBytes: this.options.budgetBytes,
      beforeAllocate: () => this.disposeRun(),
      hooks: {
        // The step's sub-progress (grpo/step-progress.ts), streamed as 'phase' events.
        onProgress: (progress) => this.emit({ type: 'phase', progress }),
        onStep: (report, { elapsedMs }) => {
          // The one crossing of a step report: the event. api.step() returns only its number.
          this.emit({ type: 'step', report: this.withPieces(report, elapsedMs) });
          this.history.record(this.historyMeta(active), {
            step: report.step,
            metrics: report.metrics,
          });
        },
        onCheckpoint: (payload, { automatic }) => this.storeCheckpoint(active, payload, automatic),
        onEval: (record, best) => this.emit({ type: 'eval', record, best }),
        onBestLoaded: (loaded, lastStep) =>
          this.emit({ type: 'best-loaded', best: loaded.best, lastStep }),
      },
    });
    return active;
  }

  /** Restores a checkpoint into a fresh run built on the loaded model. */
  async restoredRun(
    loaded: CheckpointPayload,
    jsonlText: string | undefined,
    ids: { id: string; name: string },
    history?: ActiveRun['run']['history'],
    config: Config = resolveConfig(loaded.config),
  ): Promise<ActiveRun> {
    const r = await this.buildRun(config, jsonlText, ids);
    r.run.restore(loaded, history);
    return r;
  }

  /** Makes `r` the worker's run: its history is what the run log holds from now on. */
  adopt(r: ActiveRun): RunState {
    this.run = r;
    this.history.adopt(this.historyMeta(r), r.run.history);
    return runState(r);
  }

  private historyMeta(r: ActiveRun) {
    return {
      id: r.run.id,
      name: r.run.name ?? r.run.id,
      config: r.run.config as unknown as Record<string, unknown>,
    };
  }

  /** A new run's id and default name: task · model · the options that differ from defaults
   * (grpo/run-name.ts; storage adds the date only when another run has the name). */
  newRunIds(config: Config): { id: string; name: string } {
    return {
      id: crypto.randomUUID(),
      name: defaultRunName(config, this.model?.identity.name ?? 'model'),
    };
  }

  withPieces(report: StepReport, elapsedMs: number): UiStepReport {
    const tokenizer = this.requireModel().tokenizer;
    return {
      ...report,
      elapsedMs,
      groups: report.groups.map((g) => ({
        ...g,
        completions: g.completions.map((c) => ({ ...c, pieces: tokenizer.tokenStrings(c.tokens) })),
      })),
    };
  }

  /** Stores a checkpoint in IndexedDB. An automatic save that fails is reported and training
   * goes on; a user's Save that fails throws after its event. */
  async storeCheckpoint(
    r: ActiveRun,
    payload: CheckpointPayload,
    automatic: boolean,
  ): Promise<void> {
    try {
      const record = await (await this.storage()).saveCheckpoint(payload);
      const info = checkpointInfo(record, r.run.name ?? r.run.id);
      r.lastCheckpoint = info;
      this.emit({ type: 'checkpoint-saved', checkpoint: info, automatic });
    } catch (err) {
      const quota = err instanceof StorageQuotaError;
      this.emit({
        type: 'checkpoint-failed',
        step: payload.step,
        message: message(err),
        quota,
        candidates: quota ? err.candidates : [],
        automatic,
      });
      if (!automatic) {
        // The event above already told the page (with the candidates to delete); the name lets
        // the page's save action know it need not report the same failure twice.
        const reported = new Error(message(err));
        reported.name = CHECKPOINT_FAILURE_REPORTED;
        throw reported;
      }
    }
  }

  /** One step of the run; a failure is also reported as an event (the page may be running). */
  async oneStep(r: ActiveRun): Promise<number> {
    try {
      await r.run.step();
      return r.run.stepCount;
    } catch (err) {
      this.emit({
        type: 'error',
        message: message(err),
        diverged: err instanceof TrainingDivergedError,
      });
      throw err;
    }
  }

  /** Options asked for while a step ran wait here until it ends (queueOptions / applyQueued). */
  queueOptions(config: Config): Promise<RunState> {
    return new Promise((done, fail) => this.#queuedOptions.push({ config, done, fail }));
  }

  applyQueuedOptions(r: ActiveRun): void {
    const queued = this.#queuedOptions;
    this.#queuedOptions = [];
    for (const q of queued) {
      try {
        r.run.applyLiveOptions(q.config);
        q.done(runState(r));
      } catch (err) {
        q.fail(err);
      }
    }
    if (queued.length > 0) this.setStatus(this.status);
  }
}

export function planSummary(plan: MemoryPlan): PlanSummary {
  return {
    fits: plan.fits,
    peakBytes: plan.peakBytes,
    budgetBytes: plan.limits.totalBudget,
    byCategory: plan.byCategory,
    message: plan.message,
    suggestions: plan.suggestions,
  };
}

export function runState(r: ActiveRun): RunState {
  return {
    runId: r.run.id,
    runName: r.run.name ?? r.run.id,
    config: r.run.config,
    step: r.run.stepCount,
    history: r.run.history,
    plan: planSummary(r.run.plan),
    liveOptions: r.run.liveOptions,
    liveChanges: r.run.liveChanges,
  };
}

export function checkpointInfo(
  r: {
    id: string;
    runId: string;
    step: number;
    createdAt: number;
    bytes: number;
    metrics: FlatMetricsRow | null;
  },
  runName: string,
): CheckpointInfo {
  const reward = r.metrics?.reward;
  return {
    id: r.id,
    runId: r.runId,
    runName,
    step: r.step,
    createdAt: r.createdAt,
    bytes: r.bytes,
    reward: typeof reward === 'number' && Number.isFinite(reward) ? reward : null,
  };
}

export function modelInfo(m: LoadedModel): ModelInfo {
  return {
    label: m.label,
    config: m.hf.config,
    parameterCount: parameterCount(m.hf.config),
    storedDtypes: [...new Set(m.hf.weights.storedDtypes.values())],
    vocabSize: m.tokenizer.vocabSize,
    hasChatTemplate: m.tokenizer.hasChatTemplate,
    sha256: m.identity.sha256,
    matmul: m.matmul,
  };
}
