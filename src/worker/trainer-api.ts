// The API the trainer worker exposes over comlink. Everything here runs inside the worker, which
// owns the GPU device: model loading (with the memory plan first), a thin facade over grpo's Run
// (the training loop the CLI shares: src/grpo/run.ts), its checkpoints in IndexedDB, pause/resume,
// chat, before/after evaluation and export. The page only sees plain, structured-clonable results
// and a stream of typed events (protocol.ts TrainerEvent) delivered through one callback.
// Dependencies are injectable so Node tests drive the same code.
import { type AdapterSummary } from '../engine/device';
import { createEngine, type Engine } from '../engine/engine';
import { WebGpuUnavailableError } from '../engine/errors';
import { checkBaseModel, weightsIdentity } from '../grpo/checkpoint';
import { resolveConfig, type Config, type ConfigInput } from '../grpo/config';
import { customRewardCode, withoutCustomRewards, type CustomCodeConsent } from '../grpo/reward-id';
import { evaluate, type EvalReport } from '../grpo/evaluate';
import { browserSandboxFactory } from '../grpo/reward-sandbox-browser';
import type { SandboxFactory } from '../grpo/reward-sandbox';
import { planRunMemory, Run } from '../grpo/run';
import { scoreCompletions } from '../grpo/score-completions';
import { TrainingDivergedError, type StepReport } from '../grpo/trainer';
import { exportHfFolder } from '../export/hf-export';
import { CONFIG_FILE, loadHfFolder, type LoadedHfModel } from '../formats/hf-folder';
import {
  filesSource,
  parseJsonFile,
  urlSource,
  type ModelSource,
  type ReadProgress,
} from '../formats/model-source';
import { exportOnnx } from '../export/onnx-export';
import {
  exportPeftAdapter,
  loraConfigFields,
  parsePeftAdapter,
  PEFT_CONFIG_FILE,
  PEFT_WEIGHTS_FILE,
  type LoraWeights,
} from '../export/peft-adapter';
import { Sampler } from '../model/sampler';
import { loadTokenizer, type Tokenizer } from '../formats/tokenizer';
import { parameterCount, parseHfConfig, type LlamaConfig } from '../core/model-config';
import type { MemoryPlan } from '../model/memory-plan';
import type { CheckpointPayload } from '../storage/checkpoints';
import { GrpoStorage } from '../storage/index';
import type { Identity, MetricsRow as StoredMetricsRow } from '../storage/db';
import { StorageQuotaError } from '../storage/errors';
import type { StorageNotice } from '../storage/notices';
import { CHECKPOINT_FAILURE_REPORTED, COMPARE_PROMPTS, COMPARE_SAMPLES } from './protocol';
import { checkChatLength, sampleChatReply } from './chat';
import { timeDevice } from './warmup';
import { createRecipeApi } from './recipe-api';
import { problemForMessage } from '../tasks/chat-problem';
import { extractAnswer } from '../grpo/rewards';
import { estimateStep, type DeviceTiming, type StepEstimate } from '../grpo/step-estimate';
import type {
  ChatOptions,
  ChatReply,
  CheckpointInfo,
  Comparison,
  ExportedFile,
  ModelChoice,
  ModelInfo,
  ModelPreview,
  PlanSummary,
  RunState,
  StorageInfo,
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
  /** URL of the bundled model folder (default /models/tiny-reasoner/ under the app's base). */
  bundledUrl?: string;
  /** Overrides how a ModelChoice becomes a ModelSource (tests). */
  modelSource?: (choice: ModelChoice) => ModelSource;
  /** GPU bytes a run may plan for (WebGPU reports no free memory); default 4 × maxBufferSize. */
  budgetBytes?: number;
}

/** Held-out prompts used by the before/after comparison (greedy + k samples each). */
export { COMPARE_PROMPTS, COMPARE_SAMPLES };

interface LoadedModel {
  label: string;
  hf: LoadedHfModel;
  tokenizer: Tokenizer;
  identity: Identity;
}

/** The worker's run: grpo's Run and what only the page needs of it. */
interface ActiveRun {
  run: Run;
  /** The latest checkpoint of this run saved or restored: what recover() resumes from after a
   * device loss, and what the 'device-lost' event offers. */
  lastCheckpoint: CheckpointInfo | null;
  /** The last step's report as the page received it (api.step() returns it). */
  lastReport?: UiStepReport;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function createTrainerApi(options: TrainerApiOptions = {}) {
  const bundledUrl =
    options.bundledUrl ??
    `${(import.meta.env?.BASE_URL as string | undefined) ?? '/'}models/tiny-reasoner/`;
  let engine: Engine | null = null;
  let engineError: { reason: string; remedy: string } | null = null;
  let listener: ((event: TrainerEvent) => void) | null = null;
  let model: LoadedModel | null = null;
  let run: ActiveRun | null = null;
  let status: TrainerStatus = 'no-model';
  let pauseRequested = false;
  let lost = false;
  let storage: Promise<GrpoStorage> | null = null;

  const emit = (event: TrainerEvent) => {
    try {
      listener?.(event);
    } catch {
      // A closed page must not stop training; events are best-effort.
    }
  };
  const setStatus = (next: TrainerStatus) => {
    status = next;
    emit({
      type: 'status',
      status,
      step: run?.run.stepCount ?? 0,
      steps: run?.run.config.steps ?? 0,
    });
  };

  const getStorage = () => {
    if (!storage) {
      storage = (options.openStorage ?? (() => GrpoStorage.open()))();
      storage.catch(() => (storage = null));
    }
    return storage;
  };

  async function getEngine(): Promise<Engine> {
    if (engine && !engine.gpu.lost) return engine;
    engine = await (options.createEngine ?? (() => createEngine()))();
    engine.gpu.onDeviceLost((event) => {
      lost = true;
      pauseRequested = true;
      setStatus('lost');
      emit({
        type: 'device-lost',
        message: `${event.reason}: ${event.message || 'the GPU device was lost'}`,
        lastCheckpoint: run?.lastCheckpoint ?? null,
      });
    });
    return engine;
  }

  function sourceFor(choice: ModelChoice): ModelSource {
    if (options.modelSource) return options.modelSource(choice);
    if (choice.kind === 'bundled') return urlSource(bundledUrl);
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

  async function planFor(config: LlamaConfig, c: Config): Promise<PlanSummary> {
    const limits = (await getEngine()).device.limits;
    return planSummary(planRunMemory(config, c, limits, options.budgetBytes));
  }

  function planSummary(plan: MemoryPlan): PlanSummary {
    return {
      fits: plan.fits,
      peakBytes: plan.peakBytes,
      budgetBytes: plan.limits.totalBudget,
      byCategory: plan.byCategory,
      message: plan.message,
      suggestions: plan.suggestions,
    };
  }

  function checkpointInfo(
    r: {
      id: string;
      runId: string;
      step: number;
      createdAt: number;
      bytes: number;
      metrics: StoredMetricsRow | null;
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

  /** applyOptions calls made while a step ran: applied (or refused) at the step's end, in order. */
  let queuedOptions: {
    config: Config;
    done: (state: RunState) => void;
    fail: (err: unknown) => void;
  }[] = [];

  function applyQueuedOptions(r: ActiveRun) {
    const queued = queuedOptions;
    queuedOptions = [];
    for (const q of queued) {
      try {
        r.run.applyLiveOptions(q.config);
        q.done(runState(r));
      } catch (err) {
        q.fail(err);
      }
    }
    if (queued.length > 0) setStatus(status);
  }

  function disposeRun() {
    if (!run) return;
    run.run.destroy();
    run = null;
  }

  /** A Run on the loaded model whose hooks stream its progress to the page and store its
   * checkpoints in IndexedDB. The previous run is freed only once the new task and rewards are
   * built, so a bad JSONL or reward leaves it in place. */
  async function buildRun(
    config: Config,
    jsonlText: string | undefined,
    ids: { id: string; name: string },
  ): Promise<ActiveRun> {
    if (!model) throw new Error('Load a model first.');
    const m = model;
    const e = await getEngine();
    const active = { lastCheckpoint: null } as ActiveRun;
    active.run = new Run({
      engine: e,
      config,
      model: { config: m.hf.config, weights: m.hf.tensors, tokenizer: m.tokenizer },
      runId: ids.id,
      runName: ids.name,
      modelIdentity: m.identity,
      taskText: jsonlText,
      sandboxFactory: (options.sandboxFactory ?? (() => browserSandboxFactory()))(),
      recordLogpAfterUpdate: true,
      budgetBytes: options.budgetBytes,
      beforeAllocate: disposeRun,
      hooks: {
        // The step's sub-progress (grpo/step-progress.ts), streamed as 'phase' events.
        onProgress: (progress) => emit({ type: 'phase', progress }),
        onStep: (report, { elapsedMs }) => {
          active.lastReport = withPieces(report, elapsedMs);
          emit({ type: 'step', report: active.lastReport });
        },
        onCheckpoint: (payload, { automatic }) => storeCheckpoint(active, payload, automatic),
        onEval: (record, best) => emit({ type: 'eval', record, best }),
        onBestLoaded: (loaded, lastStep) =>
          emit({ type: 'best-loaded', best: loaded.best, lastStep }),
      },
    });
    return active;
  }

  function runState(r: ActiveRun): RunState {
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

  function requireRun(): ActiveRun {
    if (lost) throw new Error('The GPU device was lost: resume from a checkpoint first.');
    if (!run) throw new Error('Load a model and configure a run first.');
    return run;
  }

  function withPieces(report: StepReport, elapsedMs: number): UiStepReport {
    const tokenizer = model!.tokenizer;
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
  async function storeCheckpoint(
    r: ActiveRun,
    payload: CheckpointPayload,
    automatic: boolean,
  ): Promise<void> {
    try {
      const record = await (await getStorage()).saveCheckpoint(payload);
      const info = checkpointInfo(record, r.run.name ?? r.run.id);
      r.lastCheckpoint = info;
      emit({ type: 'checkpoint-saved', checkpoint: info, automatic });
    } catch (err) {
      const quota = err instanceof StorageQuotaError;
      emit({
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

  /** One step of the Run; a failure is also reported as an event (the page may be running). */
  async function oneStep(r: ActiveRun): Promise<UiStepReport> {
    try {
      await r.run.step();
      return r.lastReport!;
    } catch (err) {
      emit({
        type: 'error',
        message: message(err),
        diverged: err instanceof TrainingDivergedError,
      });
      throw err;
    }
  }

  /** Restores a checkpoint into a fresh run built on the loaded model. */
  async function restoredRun(
    loaded: CheckpointPayload,
    jsonlText: string | undefined,
    ids: { id: string; name: string },
    history?: ActiveRun['run']['history'],
    config: Config = resolveConfig(loaded.config),
  ): Promise<ActiveRun> {
    const r = await buildRun(config, jsonlText, ids);
    r.run.restore(loaded, history);
    return r;
  }

  // Multi-stage recipes (recipe-api.ts) on the loaded model, with this worker's device and storage.
  const recipeApi = createRecipeApi({
    getEngine,
    getStorage,
    model: () => model,
    sandboxFactory: () => (options.sandboxFactory ?? (() => browserSandboxFactory()))(),
    busy: () =>
      status === 'running' || status === 'loading'
        ? 'The playground run is using the GPU: pause it (or wait for the model to load) first.'
        : null,
  });

  return {
    ...recipeApi,

    /** The page's single event callback (wrap it in Comlink.proxy). */
    setListener(callback: ((event: TrainerEvent) => void) | null): void {
      listener = callback;
    },

    /** Acquires (once) the worker's GPU device and describes the adapter. */
    async probeAdapter(): Promise<AdapterProbe> {
      if (engineError) return { ok: false, ...engineError };
      try {
        return { ok: true, adapter: (await getEngine()).gpu.adapter };
      } catch (err) {
        if (err instanceof WebGpuUnavailableError) {
          engineError = {
            reason: err.message.replace(err.remedy, '').trim(),
            remedy: err.remedy,
          };
        } else {
          engineError = {
            reason: message(err),
            remedy: 'Reload the page; if it persists, restart the browser.',
          };
        }
        return { ok: false, ...engineError };
      }
    },

    status(): { status: TrainerStatus; step: number; model: ModelInfo | null } {
      return { status, step: run?.run.stepCount ?? 0, model: model ? modelInfo(model) : null };
    },

    /** Reads only config.json and plans memory for `config`: shown before any weight is read. */
    async previewModel(choice: ModelChoice, config: Partial<ConfigInput>): Promise<ModelPreview> {
      const source = sourceFor(choice);
      const json = parseJsonFile(await source.read(CONFIG_FILE), CONFIG_FILE);
      const llama = parseHfConfig(json, CONFIG_FILE);
      return {
        label: source.label,
        config: llama,
        parameterCount: parameterCount(llama),
        plan: await planFor(llama, resolveConfig(config)),
      };
    },

    /**
     * How long one step of `config` on the model of `choice` takes on this device, before any
     * weight is read: a random model of its config decodes the step's B·G sequences and its
     * matrix products run on a block of rows, timed on the GPU (warmup.ts), scaled to a step
     * (grpo/step-estimate.ts). Shown by the first-run screen before its first click.
     */
    async estimateStep(
      choice: ModelChoice,
      config: Partial<ConfigInput>,
    ): Promise<{ timing: DeviceTiming; estimate: StepEstimate }> {
      const resolved = resolveConfig(config);
      const json = parseJsonFile(await sourceFor(choice).read(CONFIG_FILE), CONFIG_FILE);
      const llama = parseHfConfig(json, CONFIG_FILE);
      if (status === 'running') throw new Error('Pause training to time the device.');
      const timing = await timeDevice(await getEngine(), llama, {
        rows: resolved.perStepPrompts * resolved.numGenerations,
        // The playground's prompts fill most of maxPromptLength; a step pads them to the longest.
        promptTokens: resolved.maxPromptLength,
        temperature: resolved.temperature,
        topK: resolved.topK,
        topP: resolved.topP,
      });
      return { timing, estimate: estimateStep(timing, resolved) };
    },

    /** The memory plan of `config` on a model of `llama` (a previewed config.json): the page
     * re-plans with it as the options change, before any weight is read. */
    async planMemory(llama: LlamaConfig, config: Partial<ConfigInput>): Promise<PlanSummary> {
      return planFor(llama, resolveConfig(config));
    },

    /** Loads weights and tokenizer (progress events), then builds a run with `config`. */
    async loadModel(
      choice: ModelChoice,
      config: Partial<ConfigInput>,
      jsonlText?: string,
    ): Promise<{ model: ModelInfo; run: RunState }> {
      if (status === 'running') throw new Error('Pause training before loading another model.');
      const resolved = resolveConfig(config);
      const source = sourceFor(choice);
      const previous = status;
      setStatus('loading');
      try {
        const hf = await loadHfFolder(source, {
          onProgress: (p: ReadProgress & { phase: string }) =>
            emit({ type: 'load-progress', ...p }),
        });
        const plan = await planFor(hf.config, resolved);
        if (!plan.fits) throw new Error(`The model does not fit: ${plan.message}`);
        const tokenizer = await loadTokenizer(hf.tokenizerFiles, {
          eosTokenIds: hf.generation.eosTokenIds,
        });
        const label = choice.kind === 'bundled' ? 'tiny-reasoner (bundled)' : source.label;
        disposeRun();
        model = { label, hf, tokenizer, identity: await weightsIdentity(label, hf.tensors) };
        lost = false;
        run = await buildRun(resolved, jsonlText, newRunIds(resolved));
        setStatus('ready');
        return { model: modelInfo(model), run: runState(run) };
      } catch (err) {
        setStatus(model ? (previous === 'loading' ? 'ready' : previous) : 'no-model');
        throw err;
      }
    },

    /** A new run (step 0, the loaded weights) with `config`. */
    async configure(config: Partial<ConfigInput>, jsonlText?: string): Promise<RunState> {
      if (status === 'running') throw new Error('Pause training before changing the run.');
      const resolved = resolveConfig(config);
      run = await buildRun(resolved, jsonlText, newRunIds(resolved));
      setStatus('ready');
      return runState(run);
    },

    /** One GRPO step. */
    async step(): Promise<UiStepReport> {
      const r = requireRun();
      if (status === 'running') throw new Error('Already running.');
      const recipe = recipeApi.recipeBusy();
      if (recipe) throw new Error(recipe);
      setStatus('running');
      try {
        return await oneStep(r);
      } finally {
        applyQueuedOptions(r);
        if (!lost) setStatus('paused');
      }
    },

    /**
     * The options of `config` that can change in the middle of the run (Run.liveOptions), applied
     * from its next step without a Reset; any other difference from the run's config is refused
     * with its names. While a step runs (Step or Run) they wait for its end: the promise settles
     * once they are applied, before the next step starts (or when training stops).
     */
    async applyOptions(config: Partial<ConfigInput>): Promise<RunState> {
      const r = requireRun();
      const next = resolveConfig(config);
      if (status === 'running')
        return new Promise((done, fail) => queuedOptions.push({ config: next, done, fail }));
      r.run.applyLiveOptions(next);
      // The status event carries the step count against the (maybe changed) steps.
      setStatus(status);
      return runState(r);
    },

    /** Runs until config.steps, pause() or an error; returns when it stops. */
    async run(): Promise<{ step: number; stopped: 'paused' | 'finished' | 'error' | 'lost' }> {
      const r = requireRun();
      if (status === 'running') throw new Error('Already running.');
      const recipe = recipeApi.recipeBusy();
      if (recipe) throw new Error(recipe);
      pauseRequested = false;
      setStatus('running');
      let stopped: 'paused' | 'finished' | 'error' | 'lost' = 'paused';
      try {
        const end = await r.run.runUntil(() => {
          // Between steps: options asked for during the last one apply from the next.
          applyQueuedOptions(r);
          return pauseRequested;
        });
        if (end === 'finished') stopped = 'finished';
      } catch {
        stopped = lost ? 'lost' : 'error';
      }
      applyQueuedOptions(r);
      if (lost) stopped = 'lost';
      else setStatus('paused');
      return { step: r.run.stepCount, stopped };
    },

    /** Stops the run loop after the current step. */
    pause(): void {
      pauseRequested = true;
    },

    /** Back to step 0 with the loaded weights and the same config (a new run id). */
    async reset(jsonlText?: string): Promise<RunState> {
      if (status === 'running') throw new Error('Pause training before resetting.');
      const config = requireRun().run.config;
      run = await buildRun(config, jsonlText, newRunIds(config));
      setStatus('ready');
      return runState(run);
    },

    // ---- checkpoints ---------------------------------------------------------------------
    async saveCheckpoint(): Promise<CheckpointInfo> {
      const r = requireRun();
      const before = r.lastCheckpoint;
      await r.run.save(false);
      if (!r.lastCheckpoint || r.lastCheckpoint === before)
        throw new Error('The checkpoint was not saved.');
      return r.lastCheckpoint;
    },

    async listCheckpoints(): Promise<CheckpointInfo[]> {
      const s = await getStorage();
      const runs = new Map((await s.listRuns()).map((r) => [r.id, r.name]));
      const records = await s.listCheckpoints();
      return records
        .map((c) => checkpointInfo(c, runs.get(c.runId) ?? c.runId))
        .sort((a, b) => b.createdAt - a.createdAt);
    },

    /** Why this checkpoint cannot be restored on the loaded model (naming both models), or null:
     * the page asks this before its discard question, so a refusal costs the user nothing. */
    async restoreProblem(id: string): Promise<string | null> {
      if (!model) return 'Load the model this checkpoint was trained from first.';
      try {
        checkBaseModel(await (await getStorage()).checkpointBase(id), model.identity, model.label);
        return null;
      } catch (err) {
        return message(err);
      }
    },

    /** Continues a saved run: the same base model must be loaded (it is the reference policy). */
    async restoreCheckpoint(
      id: string,
      jsonlText?: string,
      consent?: CustomCodeConsent,
    ): Promise<RunState> {
      if (status === 'running') throw new Error('Pause training before restoring.');
      if (!model) throw new Error('Load the model this checkpoint was trained from first.');
      const s = await getStorage();
      const loaded = await s.loadCheckpoint(id);
      checkBaseModel(loaded, model.identity, model.label);
      // Custom reward code from storage runs only with the page's consent (none asked: left out).
      const code = customRewardCode(loaded.config);
      const allowed = Object.keys(code).length === 0 || (!!consent && (await consent(code)));
      const config = resolveConfig(allowed ? loaded.config : withoutCustomRewards(loaded.config));
      const runRecord = await s.getRun(loaded.runId);
      const name = runRecord?.name ?? loaded.runName ?? loaded.runId;
      const r = await restoredRun(loaded, jsonlText, { id: loaded.runId, name }, undefined, config);
      lost = false;
      r.lastCheckpoint = checkpointInfo(loaded, name);
      run = r;
      setStatus('paused');
      return runState(r);
    },

    async renameRun(runId: string, name: string): Promise<void> {
      await (await getStorage()).renameRun(runId, name);
      if (run?.run.id === runId) run.run.name = name.trim();
    },

    async deleteCheckpoint(id: string): Promise<void> {
      await (await getStorage()).deleteCheckpoint(id);
      if (run?.lastCheckpoint?.id === id) run.lastCheckpoint = null;
    },

    async exportCheckpoint(id: string): Promise<{ blob: Blob; fileName: string }> {
      return (await getStorage()).exportCheckpointBlob(id);
    },

    async importCheckpoint(file: Blob): Promise<CheckpointInfo> {
      const result = await (
        await getStorage()
      ).importCheckpoint(file, {
        fileName: (file as File).name || undefined,
      });
      return checkpointInfo(result.checkpoint, result.run.name);
    },

    async storageInfo(): Promise<StorageInfo> {
      const report = await (await getStorage()).storageUsage();
      return {
        usage: report.known ? report.usageBytes : null,
        quota: report.known ? report.quotaBytes : null,
        checkpointCount: report.checkpointCount,
        checkpointBytes: report.checkpointBytes,
      };
    },

    /** Stored rows left out because they could not be read (schema upgrade, run listings), for
     * the page's banner; each until dismissed. */
    async storageNotices(): Promise<StorageNotice[]> {
      return (await getStorage()).storageNotices();
    },

    /** Dismisses the notices with these keys (default all); returns how many were dismissed. */
    async dismissStorageNotices(keys?: string[]): Promise<number> {
      return (await getStorage()).dismissStorageNotices(keys);
    },

    /** After a device loss: a new device, the run rebuilt, and its latest checkpoint restored. */
    async recover(jsonlText?: string): Promise<RunState | null> {
      engine = null;
      lost = false;
      if (!model || !run) {
        // Nothing was loaded on the lost device: a new one is all it takes.
        await getEngine();
        setStatus('no-model');
        return null;
      }
      const { run: old, lastCheckpoint: ckpt } = run;
      const ids = { id: old.id, name: old.name ?? old.id };
      const fresh = ckpt
        ? await restoredRun(
            await (await getStorage()).loadCheckpoint(ckpt.id),
            jsonlText,
            ids,
            old.history,
            // The run's own config: custom code declined at restore stays out after a device loss.
            old.config,
          )
        : await buildRun(old.config, jsonlText, ids);
      fresh.lastCheckpoint = ckpt;
      run = fresh;
      setStatus(fresh.run.stepCount > 0 ? 'paused' : 'ready');
      return runState(fresh);
    },

    /**
     * Test hook (reached from the page only with ?test-hooks=1): teacher-forced log-probs of
     * `completions` after `prompts` (token ids) under the run's current policy, through the
     * update's scoring kernels (grpo/score-completions.ts). Changes nothing in the run.
     */
    async scoreCompletions(prompts: number[][], completions: number[][]): Promise<Float32Array[]> {
      const r = requireRun().run;
      if (status === 'running') throw new Error('Pause training first.');
      return scoreCompletions(await getEngine(), r.trainer.policy, prompts, completions, {
        padId: model!.tokenizer.padTokenId,
        temperature: r.config.temperature,
      });
    },

    /**
     * Test hook (reached from the page only with ?test-hooks=1): a stored checkpoint as the parity
     * tests compare it, loaded and verified: each tensor's SHA-256 (weights or adapters, AdamW
     * moments), the optimizer step, the adapter config and the metrics rows it carries.
     */
    async checkpointDigest(id: string) {
      const c = await (await getStorage()).loadCheckpoint(id);
      return {
        step: c.step,
        optimizerStep: c.optimizerStep,
        adapter: c.adapter,
        tensorSha256: c.tensorSha256,
        metricsSoFar: c.metricsSoFar,
      };
    },

    /**
     * Test hook (reached from the page only with ?test-hooks=1): destroys the GPU device the way a
     * driver reset would end it, so the engine's typed 'device-lost' event and the resume path run.
     */
    async loseDevice(): Promise<void> {
      if (!engine || engine.gpu.lost) throw new Error('There is no GPU device to lose.');
      if (status === 'running') throw new Error('Pause training first.');
      // device.destroy() directly: GpuContext.destroy() marks the loss as ours and stays silent.
      engine.gpu.device.destroy();
    },

    // ---- try the weights -----------------------------------------------------------------
    async chat(text: string, opts: ChatOptions): Promise<ChatReply> {
      const r = requireRun().run;
      if (status === 'running') throw new Error('Pause training to chat with the model.');
      const tokenizer = model!.tokenizer;
      let prompt = text;
      let ids: number[];
      if (opts.useTemplate) {
        const rendered = r.trainer.renderPrompt({
          id: 'chat',
          task: r.task.name,
          question: text,
          reference: null,
          verifier: { kind: 'none' },
        });
        prompt = rendered.text;
        ids = rendered.ids;
      } else {
        ids = tokenizer.encode(text);
      }
      checkChatLength(ids, model!.hf.config.maxPositions);
      const maxNew = Math.max(
        1,
        Math.min(opts.maxNewTokens, model!.hf.config.maxPositions - ids.length),
      );
      const reply = await sampleChatReply(r.trainer.sampler, tokenizer, prompt, ids, opts, maxNew);
      // A task prompt is scored by the task's own verifier, as a training completion would be.
      const problem = problemForMessage(text, r.task, r.trainer.evalProblems);
      if (problem) {
        const answer = extractAnswer(reply.text);
        const correct = answer === null ? false : r.task.verify(answer, problem);
        reply.score = { answer, correct, reference: problem.reference };
      }
      return reply;
    },

    /** The base weights and the current ones on the same held-out prompts and draws. */
    async compare(prompts = COMPARE_PROMPTS): Promise<Comparison> {
      const r = requireRun().run;
      if (status === 'running') throw new Error('Pause training to compare.');
      if (!(Number.isInteger(prompts) && prompts >= 1))
        throw new RangeError(`Compare needs a whole number of prompts ≥ 1, got ${prompts}.`);
      const problems = r.trainer.evalProblems.slice(0, prompts);
      if (problems.length === 0)
        throw new Error('This run has no held-out prompts (evalPrompts = 0).');
      const ctx = r.evalContext;
      const evalOptions = {
        k: COMPARE_SAMPLES,
        temperature: r.config.temperature,
        topP: r.config.topP,
        topK: r.config.topK,
        minP: r.config.minP ?? 0,
        repetitionPenalty: r.config.repetitionPenalty ?? 1,
        maxCompletionLength: r.config.maxCompletionLength,
        seed: r.config.seed,
      };
      const policy = r.trainer.policy;
      let before: EvalReport;
      if (policy.lora) {
        // LoRA: the base is the same weights with the adapters off (swapping base weights in
        // would leave the adapters on).
        const base = new Sampler(await getEngine(), policy, { adapters: false });
        before = await evaluate({ ...ctx, sampler: base }, problems, evalOptions);
        return { step: r.trainer.step, before, after: await evaluate(ctx, problems, evalOptions) };
      }
      const current = await policy.readParameters();
      try {
        r.trainer.policy.writeParameters(model!.hf.tensors);
        before = await evaluate(ctx, problems, evalOptions);
      } finally {
        r.trainer.policy.writeParameters(current);
      }
      const after = await evaluate(ctx, problems, evalOptions);
      return { step: r.trainer.step, before, after };
    },

    /**
     * The current weights as a Hugging Face folder or an ONNX file (a LoRA run's adapters merged
     * in), or a LoRA run's adapter as a PEFT folder ('peft': adapter_config.json and
     * adapter_model.safetensors).
     */
    async exportModel(format: 'hf' | 'onnx' | 'peft'): Promise<ExportedFile[]> {
      const r = requireRun().run;
      const policy = r.trainer.policy;
      const tensors = await policy.readParameters();
      const lora: LoraWeights | null = policy.lora
        ? { options: policy.lora, adapters: await policy.readAdapters() }
        : null;
      const m = model!;
      if (format === 'peft') {
        if (!lora) throw new Error('This run trains every weight (usePeft is off): no adapter.');
        const files = exportPeftAdapter({
          config: m.hf.config,
          lora,
          baseModelNameOrPath: m.label,
        });
        return [...files].map(([name, bytes]) => ({ name, bytes }));
      }
      if (format === 'onnx') {
        return [{ name: 'model.onnx', bytes: exportOnnx({ config: m.hf.config, tensors, lora }) }];
      }
      const files = exportHfFolder({
        config: m.hf.config,
        tensors,
        lora,
        tokenizerFiles: m.hf.tokenizerFiles,
        generation: m.hf.generation,
      });
      return [...files].map(([name, bytes]) => ({ name, bytes }));
    },

    /**
     * Loads a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) onto the loaded
     * base model: checked against it, then a new run (step 0) with the adapter's LoRA settings
     * and the run's other options starts from the adapter's weights.
     */
    async importAdapter(
      files: readonly { name: string; bytes: Uint8Array }[],
      jsonlText?: string,
    ): Promise<RunState> {
      if (status === 'running') throw new Error('Pause training before loading an adapter.');
      if (!model) throw new Error('Load the adapter’s base model first.');
      const named = (file: string) => {
        const hit = files.find((f) => f.name.split('/').pop() === file);
        if (!hit)
          throw new Error(
            `${file} is missing: choose both ${PEFT_CONFIG_FILE} and ${PEFT_WEIGHTS_FILE}.`,
          );
        return hit.bytes;
      };
      const adapter = parsePeftAdapter(
        { config: named(PEFT_CONFIG_FILE), weights: named(PEFT_WEIGHTS_FILE) },
        model.hf.config,
      );
      const base = run?.run.config ?? resolveConfig({});
      const config = resolveConfig({ ...base, ...loraConfigFields(adapter.options) });
      const r = await buildRun(config, jsonlText, newRunIds(config));
      r.run.trainer.setAdapters(adapter.options, adapter.adapters);
      run = r;
      lost = false;
      setStatus('ready');
      return runState(r);
    },
  };

  function modelInfo(m: LoadedModel): ModelInfo {
    return {
      label: m.label,
      config: m.hf.config,
      parameterCount: parameterCount(m.hf.config),
      storedDtypes: [...new Set(m.hf.storedDtypes.values())],
      vocabSize: m.tokenizer.vocabSize,
      hasChatTemplate: m.tokenizer.hasChatTemplate,
      sha256: m.identity.sha256,
    };
  }

  function newRunIds(config: Config): { id: string; name: string } {
    const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
    return { id: crypto.randomUUID(), name: `${config.task} · ${when}` };
  }
}

export type TrainerApi = ReturnType<typeof createTrainerApi>;
