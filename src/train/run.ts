// The one GRPO training loop, shared by the trainer worker (src/worker/trainer-api.ts) and the
// command line (src/cli): set up once (task, rewards, trainer, evaluation during training, memory
// plan), then per step: train → save policy → eval policy → load the best weights at the end.
// Front ends see the loop through hooks, in the manner of TRL's TrainerCallback (on_step_end,
// on_save, on_evaluate, on_train_end; onProgress for the phases within a step), and add only their
// own I/O: files and stdout in the CLI, IndexedDB, progress events and pause/resume in the
// worker. The loop is drivable one step at a time (`step()`, the playground's Step button) or
// until a stop condition (`runUntil()`); it is a TrainingStage (stage.ts), as the SFT loop is, so
// the recipe runner drives both alike.
import type { MetricsRow } from '../core/metrics-row';
import type { Engine } from '../engine/engine';
import type { KernelTuning } from '../engine/pipelines';
import type { LlamaConfig } from '../core/model-config';
import {
  deviceMemoryLimits,
  planMemory,
  type MemoryPlan,
  type MemoryPlanInput,
  type WeightDtype,
} from '../model/memory-plan';
import {
  checkQuantisedBase,
  frozenDtypeOf,
  isStreamed,
  type WeightSource,
} from '../model/parameters';
import { createTask } from '../tasks/index';
import type { Task } from '../tasks/types';
import type { CheckpointPayload } from '../storage/checkpoints';
import type { Identity } from '../storage/db';
import { mergeLoraAdapters } from '../core/lora';
import {
  fromStoredMetrics,
  liveChangesOf,
  payloadToSnapshot,
  snapshotToPayload,
  toStoredMetrics,
} from './checkpoint';
import {
  changedKeys,
  LIVE_OPTION_KEYS,
  loraOptionsOf,
  resolveConfig,
  type Config,
  type ConfigKey,
  type LiveChange,
} from '../grpo/config';
import {
  createCustomRewards,
  customRewardResolver,
  disposeCustomRewards,
} from '../rewards/custom-reward';
import { EvalDuringTraining, type BestEval, type EvalRecord } from './eval-during-training';
import { trainerEvalContext, type EvalContext } from './evaluate';
import type { SandboxFactory } from '../rewards/reward-sandbox';
import { createRewardFunctions, type RewardFunction } from '../rewards/rewards';
import {
  readTrainedOf,
  stepUntil,
  type StageHooks,
  type TrainedWeights,
  type TrainingStage,
} from './stage';
import { StepProgress, type PhaseProgress } from '../grpo/step-progress';
import {
  GrpoTrainer,
  type StepReport,
  type TrainerSetup,
  type TrainerTokenizer,
} from '../grpo/trainer';

/** One row of the metrics history: the step number and that step's docs/grpo.md §6 metrics. */

/** The save policy: every `saveSteps` steps, and after the last step so the final weights are
 * always saved (TRL's save_strategy="steps" also saves at the end of training). */
export function checkpointDue(step: number, config: Pick<Config, 'saveSteps' | 'steps'>): boolean {
  return step % config.saveSteps === 0 || step === config.steps;
}

/** GPU bytes a run may plan for when the front end sets no budget: WebGPU reports no free memory,
 * so 4 × the largest single buffer stands in for it. */
export function defaultMemoryBudget(limits: Pick<GPUSupportedLimits, 'maxBufferSize'>): number {
  return limits.maxBufferSize * 4;
}

/**
 * The memory plan of `config` on a model (src/model/memory-plan.ts), the same for every front end:
 * prompts capped at the model's positions (a longer prompt cannot be sampled), and the training
 * micro-batch of gradient accumulation (B·G / gradientAccumulationSteps sequences).
 */
export function planRunMemory(
  model: LlamaConfig,
  config: Config,
  limits: Pick<GPUSupportedLimits, 'maxBufferSize' | 'maxStorageBufferBindingSize'>,
  budgetBytes = defaultMemoryBudget(limits),
  /** The weights (a Map or a reader), when known: under LoRA the base is then planned as the
   * trainer stores it (frozenDtypeOf): 'auto' keeps their 16-bit format, and a pre-quantised
   * (bitsandbytes) checkpoint stays NF4 whatever dtype says; 'prequantised' says the latter from
   * config.json's quantization_config before any weight is read. Without them 'auto' is planned
   * as float32. */
  weights?: WeightSource | 'prequantised',
  /** The device's kernel variants (engine.pipelines.tuning); default a GPU's (memory-plan.ts). */
  kernels?: KernelTuning,
): MemoryPlan {
  const frozen =
    !weights || !config.usePeft
      ? undefined
      : weights === 'prequantised'
        ? 'nf4'
        : PLAN_DTYPE[frozenDtypeOf(config.dtype, model, weights)];
  const input = { ...runPlanInput(model, config, frozen), kernels };
  return planMemory(
    frozen ? { ...input, dtype: frozen } : input,
    deviceMemoryLimits(limits, budgetBytes),
  );
}

/** The memory plan's name of a stored weight dtype. */
export const PLAN_DTYPE = { f32: 'float32', bf16: 'bfloat16', f16: 'float16', nf4: 'nf4' } as const;

/**
 * What the memory plan needs of a run's config (planRunMemory; `npm run plan` too). dtype 'auto'
 * keeps the checkpoint's format, which only its tensors tell: `autoDtype` is that answer (the
 * trainer's frozenDtypeOf), float32 when not given.
 */
export function runPlanInput(
  model: LlamaConfig,
  config: Config,
  autoDtype: WeightDtype = 'float32',
): MemoryPlanInput {
  const sequences = config.perStepPrompts * config.numGenerations;
  const lora = loraOptionsOf(config);
  return {
    config: model,
    numPrompts: config.perStepPrompts,
    groupSize: config.numGenerations,
    promptLength: Math.min(config.maxPromptLength, model.maxPositions),
    completionLength: config.maxCompletionLength,
    beta: config.beta,
    microBatch: sequences / config.gradientAccumulationSteps,
    lora: lora ? { r: lora.r, targetModules: lora.targetModules } : null,
    gradientCheckpointing: config.gradientCheckpointing,
    dtype: config.dtype === 'auto' ? autoDtype : config.dtype,
    logitsMemoryMiB: config.logitsMemoryMiB,
  };
}

/** What the front ends hear from the loop; each may be async (the loop waits for it), except
 * onProgress, which is told synchronously as GPU work is submitted. A stage's hooks (StageHooks)
 * are RunHooks: onStep then hears the StageStepResult part of each StepReport. */
export interface RunHooks extends StageHooks {
  /** The phase of the step under way, as it changes (src/grpo/step-progress.ts): sampling k/N
   * tokens, rewards, reference, forward + backward i/μ, optimizer i/μ, re-scoring, then the
   * step's checkpoint and evaluation; null once the step is over (or failed). */
  onProgress?(progress: PhaseProgress | null): void;
  /** After each training step, before its checkpoint and evaluation. `elapsedMs`: wall-clock time
   * of trainer.trainStep() alone (sampling, rewards, update, metrics). */
  onStep?(report: StepReport, info: { elapsedMs: number }): void | Promise<void>;
  /** A checkpoint to store (src/train/checkpoint.ts encodes it): due by the save policy
   * (`automatic`) or asked for through save(). Without this hook nothing is read back to save. */
  onCheckpoint?(payload: CheckpointPayload, info: { automatic: boolean }): void | Promise<void>;
  /** An evaluation during training (evalSteps) and the best one so far. */
  onEval?(record: EvalRecord, best: BestEval): void | Promise<void>;
  /** loadBestModelAtEnd after the last step: the policy now holds the weights of `best`
   * (`weights`: every parameter, or a LoRA run's adapters). */
  onBestLoaded?(
    loaded: { best: BestEval; weights: Map<string, Float32Array> },
    lastStep: number,
  ): void | Promise<void>;
}

export interface RunModel {
  config: LlamaConfig;
  /** The run's initial weights (16-bit or NF4 as a checkpoint ships them may be given): also
   * the frozen reference policy when β > 0. A reader (src/formats/hf-folder.ts WeightReader) is
   * streamed into the GPU tensor by tensor: build the run with Run.create then. */
  weights: WeightSource;
  tokenizer: TrainerTokenizer;
}

export interface RunSetup {
  engine: Engine;
  /** Names the run in its checkpoints. */
  runId: string;
  runName?: string;
  /** The initial weights' identity (weightsIdentity): a checkpoint's base and reference model. */
  modelIdentity?: Identity;
  /** A resolved config (resolveConfig). */
  config: Config;
  model: RunModel;
  /** The JSONL text of task 'jsonl' (the CLI reads taskOptions.path; the page a chosen file). */
  taskText?: string;
  /** The task that scores rewards and evaluations when it is not the training task: the aha
   * command trains on the preset's task (held-out problems excluded) and scores with Countdown. */
  scoringTask?: Task;
  /** Where custom reward code runs (QuickJS in a worker per source: a module worker in the browser, worker_threads in Node). */
  sandboxFactory: SandboxFactory;
  /** Also score each step's completions after the update (the Learn view). */
  recordLogpAfterUpdate?: boolean;
  /** GPU bytes the memory plan may use (default defaultMemoryBudget). */
  budgetBytes?: number;
  /** Refuse to allocate (throw the plan's message) when the memory plan does not fit. */
  mustFit?: boolean;
  /** Called once the task and rewards are built and before any GPU buffer is: the front end frees
   * its previous run here, so a bad task or reward leaves that run in place. */
  beforeAllocate?: () => void;
  hooks?: RunHooks;
}

/** Run.create's mark for a constructor that leaves the trainer to it. */
const STREAMED = Symbol('streamed');

/** The options whose change rebuilds the reward functions (custom rewards in new sandboxes). */
const REWARD_KEYS: readonly ConfigKey[] = ['rewards', 'customRewards', 'rewardTimeoutMs'];

export class Run implements TrainingStage {
  readonly id: string;
  /** The run's display name (renaming a run changes it). */
  name: string | undefined;
  readonly task: Task;
  // Set once the trainer is built: in the constructor, or after it by Run.create (streamed).
  trainer!: GrpoTrainer;
  evals!: EvalDuringTraining;
  evalContext!: EvalContext;
  readonly plan: MemoryPlan;
  /** Every completed step's metrics (restore() keeps those up to the checkpoint). */
  history: MetricsRow[] = [];
  hooks: RunHooks;
  /** The options changed in the middle of this run (applyLiveOptions), oldest first; a checkpoint
   * keeps them with the config in force, and restore() brings them back. */
  liveChanges: LiveChange[] = [];
  #config: Config;
  #rewards: RewardFunction[];
  /** A step is under way: live options wait for its end. */
  #stepping = false;
  private readonly scoring: Task;
  private readonly sandboxFactory: SandboxFactory;
  private readonly model: Pick<RunModel, 'config' | 'tokenizer'>;
  private readonly modelIdentity: Identity | null;
  private readonly progress = new StepProgress((p) => this.hooks.onProgress?.(p));

  /** `deferred` (Run.create only): stop before the trainer, which create builds by streaming. */
  constructor(setup: RunSetup, deferred?: typeof STREAMED) {
    const { config, model } = setup;
    // Every GPU submission of the run passes its label to the step's progress (a wrapper: the
    // engine itself may be shared with other work, chat or tests).
    const engine: Engine = {
      ...setup.engine,
      run: (record, label, options) => {
        this.progress.gpuWork(label, options?.count);
        return setup.engine.run(record, label, options);
      },
    };
    this.id = setup.runId;
    this.name = setup.runName;
    // Only what the run reads later: not the weights, so a Map given here is free once uploaded.
    this.model = { config: model.config, tokenizer: model.tokenizer };
    this.modelIdentity = setup.modelIdentity ?? null;
    this.#config = config;
    this.sandboxFactory = setup.sandboxFactory;
    this.hooks = setup.hooks ?? {};
    checkQuantisedBase(config, model.weights);
    this.plan = planRunMemory(
      model.config,
      config,
      engine.device.limits,
      setup.budgetBytes,
      model.weights,
      engine.pipelines.tuning,
    );
    if (setup.mustFit && !this.plan.fits) throw new Error(this.plan.message);
    this.task = createTask(config.task, config.taskOptions, { text: setup.taskText });
    this.scoring = setup.scoringTask ?? this.task;
    this.#rewards = this.buildRewards(config);
    this.#engine = engine;
    try {
      setup.beforeAllocate?.();
      if (deferred === STREAMED) return;
      if (isStreamed(model.weights))
        throw new Error('a streamed model builds its run with Run.create');
      this.attach(new GrpoTrainer(this.trainerSetup(engine, setup)));
    } catch (err) {
      disposeCustomRewards(this.#rewards);
      throw err;
    }
  }

  /**
   * Builds a run. With a reader for weights (the page's loaded model, the command line) the
   * policy, and a full fine-tune's reference copy with β > 0, are uploaded tensor by tensor
   * (GrpoTrainer.create → GpuLlama.loadStreamed) after beforeAllocate has freed the previous run,
   * so the host holds at most one tensor as stored; a Map of weights builds as the constructor.
   */
  static async create(setup: RunSetup): Promise<Run> {
    if (!isStreamed(setup.model.weights)) return new Run(setup);
    const run = new Run(setup, STREAMED);
    try {
      run.attach(await GrpoTrainer.create(run.trainerSetup(run.#engine!, setup)));
    } catch (err) {
      disposeCustomRewards(run.#rewards);
      throw err;
    }
    return run;
  }

  #engine: Engine | null = null;

  private trainerSetup(engine: Engine, setup: RunSetup): TrainerSetup {
    return {
      engine,
      config: setup.config,
      modelConfig: setup.model.config,
      weights: setup.model.weights,
      tokenizer: setup.model.tokenizer,
      task: this.task,
      rewardFunctions: this.#rewards,
      recordLogpAfterUpdate: setup.recordLogpAfterUpdate,
    };
  }

  private attach(trainer: GrpoTrainer): void {
    this.trainer = trainer;
    this.trainer.onPhase = (phase) =>
      this.progress.trainer(phase, this.stepCount + 1, this.#config);
    this.evalContext = trainerEvalContext(this.trainer, this.model.tokenizer, this.scoring);
    this.evals = new EvalDuringTraining(this.trainer, this.evalContext, this.#config);
  }

  /** The config in force: the one the run was built with and any live changes since. */
  get config(): Config {
    return this.#config;
  }

  /** One per config.rewards entry, in that order. */
  get rewards(): RewardFunction[] {
    return this.#rewards;
  }

  /** The reward functions of `config` (custom ones each in a sandbox of their own). */
  private buildRewards(config: Config): RewardFunction[] {
    const custom = createCustomRewards(config.customRewards, {
      timeoutMs: config.rewardTimeoutMs,
      sandboxFactory: this.sandboxFactory,
    });
    let rewards: RewardFunction[];
    try {
      rewards = createRewardFunctions(
        config.rewards,
        this.scoring,
        customRewardResolver(custom),
        config,
      );
    } catch (err) {
      disposeCustomRewards(custom);
      throw err;
    }
    // Custom rewards defined but not listed in config.rewards would keep an idle sandbox alive.
    disposeCustomRewards(custom.filter((f) => !rewards.includes(f)));
    return rewards;
  }

  /** The options this run can change in the middle (LIVE_OPTION_KEYS; beta only while it has its
   * reference policy). */
  get liveOptions(): ConfigKey[] {
    return LIVE_OPTION_KEYS.filter((key) => key !== 'beta' || this.trainer.hasReference);
  }

  /**
   * Applies `next` from the next step on, without a rebuild: the options in `liveOptions` may
   * differ from the config in force, nothing else (the error names the ones that need a Reset).
   * Changed rewards are rebuilt (custom code in new sandboxes, the old ones stopped); the trainer
   * takes the new config at once (the learning-rate schedule with the new peak, sampling, the loss,
   * reward weights); `steps` may not go below the steps already trained. Each change is recorded
   * in `liveChanges` and returned. Between steps only.
   */
  applyLiveOptions(next: Config): LiveChange[] {
    if (this.#stepping) throw new Error('A step is under way: options apply between steps.');
    // The same checks as any config (unknown keys, types, cross-field rules).
    next = resolveConfig(next);
    const keys = changedKeys(this.#config, next);
    if (keys.length === 0) return [];
    const live = this.liveOptions;
    const rebuild = keys.filter((key) => !live.includes(key));
    if (rebuild.length > 0) {
      throw new Error(
        `${rebuild.join(', ')} cannot change in the middle of a run: Reset to apply ${rebuild.length === 1 ? 'it' : 'them'}.`,
      );
    }
    if (next.steps < this.stepCount) {
      throw new Error(
        `steps (${next.steps}) cannot be below the ${this.stepCount} steps already trained.`,
      );
    }
    const rewards = keys.some((key) => REWARD_KEYS.includes(key))
      ? this.buildRewards(next)
      : this.#rewards;
    try {
      this.trainer.applyConfig(next, rewards);
    } catch (err) {
      if (rewards !== this.#rewards) disposeCustomRewards(rewards);
      throw err;
    }
    if (rewards !== this.#rewards) disposeCustomRewards(this.#rewards);
    const step = this.stepCount + 1;
    const changes = keys.map((key) => ({ step, key, from: this.#config[key], to: next[key] }));
    this.#rewards = rewards;
    this.#config = next;
    this.evals.config = next;
    this.liveChanges = [...this.liveChanges, ...changes];
    return changes;
  }

  /** Completed steps. */
  get stepCount(): number {
    return this.trainer.step;
  }

  /** The configured number of steps (config.steps; a live change may move it). */
  get totalSteps(): number {
    return this.config.steps;
  }

  /** Whether the configured number of steps has been trained. */
  get finished(): boolean {
    return this.trainer.step >= this.config.steps;
  }

  /**
   * Continues from a checkpoint (the run must have been built on its base model): its trainer
   * state, and the metrics history up to its step (default: the one the checkpoint stored).
   */
  restore(
    payload: CheckpointPayload,
    history: readonly MetricsRow[] = fromStoredMetrics(payload.metricsSoFar),
  ): void {
    this.trainer.restore(payloadToSnapshot(payload));
    this.history = history.filter((row) => row.step <= payload.step);
    this.liveChanges = liveChangesOf(payload);
  }

  /**
   * One step of the loop, in the order every front end relies on: train, then the checkpoint the
   * save policy asks for, then the evaluation evalSteps asks for, then (after the last step) the
   * best evaluation's weights. The last step's checkpoint therefore keeps the last step's
   * weights, not the loaded best ones. onProgress follows it phase by phase and ends with null.
   */
  async step(): Promise<StepReport> {
    if (this.#stepping) throw new Error('A step is already under way.');
    this.#stepping = true;
    try {
      const started = performance.now();
      const report = await this.trainer.trainStep();
      const elapsedMs = performance.now() - started;
      this.history.push({ step: report.step, metrics: report.metrics });
      await this.hooks.onStep?.(report, { elapsedMs });
      if (checkpointDue(report.step, this.config) && this.hooks.onCheckpoint) {
        this.progress.after(report.step, 'checkpoint');
        await this.save(true);
      }
      if (this.evals.due(report.step)) {
        this.progress.after(report.step, 'eval');
        const record = await this.evals.run(report.step);
        await this.hooks.onEval?.(record, this.evals.best!);
      }
      if (report.step === this.config.steps) {
        const loaded = this.evals.loadBest();
        if (loaded) await this.hooks.onBestLoaded?.(loaded, report.step);
      }
      return report;
    } finally {
      this.#stepping = false;
      this.progress.idle();
    }
  }

  /** Steps until the configured steps are done or `stop()` says so (checked before each step). */
  runUntil(stop: () => boolean = () => false): Promise<'finished' | 'stopped'> {
    return stepUntil(this, stop);
  }

  /** The current state as a checkpoint payload (the codec's: trainer snapshot, config in force,
   * live changes, metrics so far). */
  async snapshot(): Promise<CheckpointPayload> {
    if (!this.modelIdentity) throw new Error('Run: saving a checkpoint needs setup.modelIdentity');
    return snapshotToPayload(await this.trainer.snapshot(), {
      runId: this.id,
      runName: this.name,
      config: this.config,
      modelConfig: this.model.config,
      modelIdentity: this.modelIdentity,
      // The run's initial weights: restoring needs them loaded (the frozen reference, β > 0).
      referenceIdentity: this.modelIdentity,
      tokenizerIdentity: null,
      metricsSoFar: toStoredMetrics(this.history),
      liveChanges: this.liveChanges,
    });
  }

  /** Hands the current state to onCheckpoint (a user's Save when `automatic` is false). */
  async save(automatic = false): Promise<void> {
    if (!this.hooks.onCheckpoint) return;
    await this.hooks.onCheckpoint(await this.snapshot(), { automatic });
  }

  /** The model the run has trained (a recipe stage's end weights): the policy's parameters, with
   * a LoRA run's adapters merged in (W + s·B·A, as the exported model), since the base alone is
   * the frozen start and the next stage, the comparison and the final model need the training. */
  async readWeights(): Promise<Map<string, Float32Array>> {
    const policy = this.trainer.policy;
    const base = await policy.readParameters();
    if (!policy.lora) return base;
    return mergeLoraAdapters(policy.config, base, policy.lora, await policy.readAdapters());
  }

  /** TrainingStage.readTrained: the policy's parameters, or a LoRA run's adapters. */
  readTrained(): Promise<TrainedWeights> {
    return readTrainedOf(this.trainer.policy);
  }

  /** Frees the GPU buffers and the custom rewards' sandboxes. */
  destroy(): void {
    disposeCustomRewards(this.#rewards);
    this.trainer.destroy();
  }
}
