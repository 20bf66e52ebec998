// Supervised fine-tuning as a stage of its own (R1's "cold start" before RL, in miniature): TRL
// SFTTrainer's loop over a tokenised dataset (src/train/sft-data.ts) on the GPU objective's
// supervised step (PolicyObjective.supervised: completion-masked mean cross-entropy, one clipped
// AdamW step with the NaN guard). Options (sft-config.ts) carry TRL SFTConfig's names in camelCase;
// the metrics of each optimizer step are TRL's: loss, mean_token_accuracy, num_tokens (cumulative),
// learning_rate, grad_norm, epoch.
//
// Data order: epoch e visits the examples in a Fisher–Yates permutation drawn from
// mulberry32(mixSeeds(seed, e)), so the order is a function of (seed, epoch) and a checkpoint need
// only store (epoch, cursor) to continue it exactly. One optimizer step takes the next
// perDeviceTrainBatchSize · gradientAccumulationSteps examples of the epoch (fewer at its end: the
// epoch's last step is smaller, as a dataloader's last batch), in one packed batch, so the loss is
// Σ loss tokens / their number over the whole step (TRL's token-mean with num_items_in_batch).
// Gradient accumulation is therefore a memory choice TRL makes that this loop does not: the GA
// micro-batches are packed into one batch of the same loss.
//
// The loop is a TrainingStage (stage.ts) as the GRPO Run is (src/train/run.ts): set up once, step(),
// hooks onStep and onCheckpoint, snapshot() / restore() of a CheckpointPayload (weights, AdamW
// moments, optimizer step, data cursor, counters in its `rng` record). A full fine-tune trains every
// weight; with usePeft the policy carries LoRA adapters as a GRPO run's (PEFT's initialisation from
// the seed), the base frozen in the config's dtype (nf4: QLoRA), and a checkpoint holds the adapters
// and their moments only, as a GRPO LoRA run's does (docs/grpo.md, LoRA). A 4-bit checkpoint
// trains only so, as transformers refuses to fine-tune a quantised model without adapters.
import type { Engine } from '../engine/engine';
import { mixSeeds, mulberry32, seed32 } from '../core/rng';
import { numel, parameterSpecs, type LlamaConfig } from '../core/model-config';
import { loraAdapterSpecs, mergeLoraAdapters } from '../core/lora';
import { packBatch, type PackedBatch } from '../model/batch';
import { GpuLlama, type GpuLlamaOptions } from '../model/llama';
import {
  checkQuantisedBase,
  frozenDtypeOf,
  isStreamed,
  type StreamedWeights,
  type WeightTensor,
} from '../model/parameters';
import { EXP_AVG_PREFIX, EXP_AVG_SQ_PREFIX, GpuAdamW } from '../optim/adamw';
import { learningRateAt, runSchedule } from '../optim/schedule';
import type { CheckpointPayload, CheckpointTensor } from '../storage/checkpoints';
import type { Identity } from '../storage/db';
import { fromStoredMetrics, toStoredMetrics } from './checkpoint';
import { PolicyObjective } from '../grpo/policy-objective';
import type { MetricsRow } from '../core/metrics-row';
import { sftLoraOptions, type SftConfig } from './sft-config';
import { deviceMemoryLimits, planMemory, type MemoryPlan } from '../model/memory-plan';
import type { KernelTuning } from '../engine/pipelines';
import { defaultMemoryBudget, PLAN_DTYPE } from './run';
import {
  readTrainedOf,
  stepUntil,
  type StageHooks,
  type StageStepResult,
  type TrainedWeights,
  type TrainingStage,
} from './stage';
import { tokenizeSftRow, type SftExample, type SftRow, type SftTokenizeOptions } from './sft-data';
import {
  MAX_CONSECUTIVE_SKIPS,
  TrainingDivergedError,
  type TrainerTokenizer,
} from '../grpo/trainer';

/** The tokenise options of a config (sft-data.ts). */
const sftTokenizeOptions = (c: SftConfig): SftTokenizeOptions => ({
  completionOnlyLoss: c.completionOnlyLoss,
  assistantOnlyLoss: c.assistantOnlyLoss,
  maxLength: c.maxLength,
});

/** Tokenises parsed rows; rows without a loss token after truncation are dropped (their lines). */
export function tokenizeSftDataset(
  rows: readonly SftRow[],
  tokenizer: TrainerTokenizer,
  config: SftConfig,
): { examples: SftExample[]; dropped: number[] } {
  const examples: SftExample[] = [];
  const dropped: number[] = [];
  for (const row of rows) {
    const example = tokenizeSftRow(row, tokenizer, sftTokenizeOptions(config));
    if (example) examples.push(example);
    else dropped.push(row.line);
  }
  return { examples, dropped };
}

/** Examples per optimizer step. */
const examplesPerStep = (c: SftConfig) => c.perDeviceTrainBatchSize * c.gradientAccumulationSteps;

/** Optimizer steps of a run over n examples: maxSteps, or ⌈epochs · steps per epoch⌉. */
function sftTotalSteps(c: SftConfig, n: number): number {
  if (c.maxSteps > 0) return c.maxSteps;
  return Math.ceil(c.numTrainEpochs * Math.ceil(n / examplesPerStep(c)));
}

/** Epoch `epoch`'s visiting order of n examples: a function of (seed, epoch) only. */
export function epochOrder(seed: number, epoch: number, n: number): Uint32Array {
  const next = mulberry32(mixSeeds(seed32(seed), epoch));
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/** A fingerprint of the tokenised data (FNV-1a over every example's tokens and mask), so a resume
 * on other data, or the same file tokenised with other options, is refused. */
function sftDataHash(examples: readonly SftExample[]): number {
  let h = 0x811c9dc5;
  const mix = (x: number) => {
    h = Math.imul(h ^ (x >>> 0), 0x01000193) >>> 0;
  };
  for (const e of examples) {
    mix(e.prompt.length);
    for (const t of e.prompt) mix(t);
    mix(e.completion.length);
    for (const t of e.completion) mix(t);
    for (const m of e.mask) mix(m);
  }
  return h;
}

/** The packed batch of some examples with each example's own loss mask (holes included). */
function packSftBatch(examples: readonly SftExample[], padId: number): PackedBatch {
  const batch = packBatch(
    examples.map((e) => e.prompt),
    examples.map((e) => e.completion),
    { padId },
  );
  const { L } = batch;
  batch.mask.fill(0);
  examples.forEach((e, n) => batch.mask.set(e.mask, n * L));
  return batch;
}

/** One optimizer step's TRL metrics and whether its update was skipped: a stage's step result. */
export type SftStepReport = StageStepResult;

/** A stage's hooks: onStep after each optimizer step, onCheckpoint for each checkpoint to store
 * (src/train/checkpoint.ts checkpointToFiles writes it as files). */
export type SftHooks = StageHooks;

/**
 * The memory plan of an SFT stage (src/model/memory-plan.ts, objective 'sft'): its step packs
 * perDeviceTrainBatchSize · gradientAccumulationSteps examples into one batch as wide as the
 * longest prompt plus the longest completion, which the plan takes from the whole dataset (any
 * step is at most that). Under LoRA the frozen base is planned as the stage stores it.
 */
export function planSftMemory(
  model: LlamaConfig,
  config: SftConfig,
  examples: readonly SftExample[],
  weights: ReadonlyMap<string, WeightTensor> | StreamedWeights,
  limits: Pick<GPUSupportedLimits, 'maxBufferSize' | 'maxStorageBufferBindingSize'>,
  budgetBytes = defaultMemoryBudget(limits),
  kernels?: KernelTuning,
): MemoryPlan {
  checkExamples(examples);
  const lora = sftLoraOptions(config);
  const batch = Math.min(examplesPerStep(config), examples.length);
  // A loop, not Math.max(...): a dataset may have more examples than a call takes arguments.
  const widest = (part: (e: SftExample) => number) =>
    examples.reduce((most, e) => Math.max(most, part(e)), 1);
  // Under LoRA the base as the stage stores it (the weights decide 'auto' and a 4-bit checkpoint).
  const frozen = lora ? frozenDtypeOf(config.dtype, model, weights) : 'f32';
  return planMemory(
    {
      config: model,
      objective: 'sft',
      numPrompts: batch,
      groupSize: 1,
      promptLength: widest((e) => e.prompt.length),
      completionLength: widest((e) => e.completion.length),
      beta: 0,
      microBatch: batch,
      lora: lora ? { r: lora.r, targetModules: lora.targetModules } : null,
      dtype: PLAN_DTYPE[frozen],
      gradientCheckpointing: config.gradientCheckpointing,
      logitsMemoryMiB: config.logitsMemoryMiB,
      kernels,
    },
    deviceMemoryLimits(limits, budgetBytes),
  );
}

export interface SftSetup {
  engine: Engine;
  runId: string;
  runName?: string;
  /** The initial weights' identity: a checkpoint's base model. */
  modelIdentity?: Identity;
  config: SftConfig;
  /** The initial weights: a Map, or a reader streamed into the GPU tensor by tensor (SftRun.create;
   * a full fine-tune widens a 16-bit tensor to f32 on its way, one at a time; a LoRA stage stores
   * the frozen base as its dtype says, a 4-bit checkpoint's projections staying NF4). */
  model: { config: LlamaConfig; weights: ReadonlyMap<string, WeightTensor> | StreamedWeights };
  examples: readonly SftExample[];
  padTokenId: number;
  hooks?: SftHooks;
  /** Refuse to allocate (throw the plan's message) when the memory plan does not fit. */
  mustFit?: boolean;
  /** GPU bytes the memory plan may use (default defaultMemoryBudget). */
  budgetBytes?: number;
}

/** The stage's memory plan on its engine (planSftMemory); throws its message when it must fit
 * and does not, before any buffer is made. */
function planOf(setup: SftSetup): MemoryPlan {
  const { engine } = setup;
  const plan = planSftMemory(
    setup.model.config,
    setup.config,
    setup.examples,
    setup.model.weights,
    engine.device.limits,
    setup.budgetBytes,
    engine.pipelines.tuning,
  );
  if (setup.mustFit && !plan.fits) throw new Error(plan.message);
  return plan;
}

/** The checkpoint's `rng` record keys of the SFT loop's state. */
const STATE_KEYS = ['sft.epoch', 'sft.cursor', 'sft.numTokens', 'sft.consecutiveSkips'] as const;

function checkExamples(examples: readonly SftExample[]): void {
  if (examples.length === 0) throw new Error('SFT: the dataset has no example with a loss token');
}

/** How the policy loads: LoRA adapters from the run's seed on a frozen base stored in `dtype`
 * (the GRPO trainer's rule), or every weight f32 and trained. A 4-bit base without LoRA throws. */
function policyOptions({ config, model }: SftSetup): GpuLlamaOptions {
  checkQuantisedBase(config, model.weights);
  const memory = {
    gradientCheckpointing: config.gradientCheckpointing,
    logitsMemoryBytes: config.logitsMemoryMiB * 2 ** 20,
  };
  const lora = sftLoraOptions(config);
  if (!lora) return memory;
  return {
    ...memory,
    lora: { ...lora, seed: config.seed },
    frozenDtype: frozenDtypeOf(config.dtype, model.config, model.weights),
    nf4: { nested: config.useBnbNestedQuant },
  };
}

export class SftRun implements TrainingStage {
  readonly config: SftConfig;
  readonly policy: GpuLlama;
  readonly totalSteps: number;
  /** The memory plan of this stage on its device (planSftMemory). */
  readonly plan: MemoryPlan;
  history: MetricsRow[] = [];
  hooks: SftHooks;
  /** Completed optimizer steps (applied or skipped). */
  stepCount = 0;
  /** Tokens seen (whole sequences), TRL's num_tokens. */
  numTokens = 0;
  private epoch = 0;
  /** The next position in the epoch's order. */
  private cursor = 0;
  private consecutiveSkips = 0;
  private order: { epoch: number; order: Uint32Array } | null = null;
  private readonly optimizer: GpuAdamW;
  private readonly objective: PolicyObjective;
  private readonly dataHash: number;

  /**
   * Builds the run; with a reader for weights (the command line) the policy is uploaded tensor by
   * tensor (GpuLlama.loadStreamed), so the host never holds the whole model. A Map of weights
   * (recipes, which read f32 weights between stages) builds as the constructor does.
   */
  static async create(setup: SftSetup): Promise<SftRun> {
    const { weights } = setup.model;
    if (!isStreamed(weights)) return new SftRun(setup);
    checkExamples(setup.examples);
    const options = policyOptions(setup);
    const plan = planOf(setup);
    const policy = await GpuLlama.loadStreamed(setup.engine, setup.model.config, weights, options);
    try {
      return new SftRun(setup, policy, plan);
    } catch (err) {
      policy.destroy();
      throw err;
    }
  }

  /** `policy`: already built (SftRun.create); else loaded from setup.model.weights, a Map. */
  constructor(
    private readonly setup: SftSetup,
    policy?: GpuLlama,
    plan?: MemoryPlan,
  ) {
    const { engine, config, model, examples } = setup;
    checkExamples(examples);
    this.plan = plan ?? planOf(setup);
    this.config = config;
    this.hooks = setup.hooks ?? {};
    this.totalSteps = sftTotalSteps(config, examples.length);
    this.dataHash = sftDataHash(examples);
    if (policy) this.policy = policy;
    else if (isStreamed(model.weights))
      throw new Error('SFT: streamed weights build with SftRun.create');
    else this.policy = GpuLlama.load(engine, model.config, model.weights, policyOptions(setup));
    this.optimizer = new GpuAdamW(engine, this.policy, {
      beta1: config.adamBeta1,
      beta2: config.adamBeta2,
      eps: config.adamEpsilon,
      weightDecay: config.weightDecay,
      maxGradNorm: config.maxGradNorm,
    });
    this.objective = new PolicyObjective(engine, this.policy, null, this.optimizer);
  }

  get finished(): boolean {
    return this.stepCount >= this.totalSteps;
  }

  /** The learning rate of optimizer step `step` (0-based), transformers' schedule over the run. */
  learningRateAt(step: number): number {
    const c = this.config;
    return learningRateAt(
      step,
      runSchedule({
        lrScheduler: c.lrSchedulerType,
        learningRate: c.learningRate,
        steps: this.totalSteps,
        numIterations: 1,
        warmupSteps: c.warmupSteps,
        warmupRatio: c.warmupRatio,
      }),
    );
  }

  private orderOf(epoch: number): Uint32Array {
    if (this.order?.epoch !== epoch) {
      this.order = {
        epoch,
        order: epochOrder(this.config.seed, epoch, this.setup.examples.length),
      };
    }
    return this.order.order;
  }

  /** One optimizer step on the next examples. Throws TrainingDivergedError after
   * MAX_CONSECUTIVE_SKIPS non-finite updates in a row. */
  async step(): Promise<SftStepReport> {
    if (this.finished) throw new Error(`SFT: all ${this.totalSteps} steps are done`);
    const { examples, padTokenId } = this.setup;
    const n = examples.length;
    const started = performance.now();
    const order = this.orderOf(this.epoch);
    const take = Math.min(examplesPerStep(this.config), n - this.cursor);
    const chosen = Array.from(order.subarray(this.cursor, this.cursor + take), (i) => examples[i]);
    const batch = packSftBatch(chosen, padTokenId);
    const learningRate = this.learningRateAt(this.stepCount);
    const update = await this.objective.supervised(batch, learningRate);
    this.cursor += take;
    if (this.cursor >= n) {
      this.epoch += 1;
      this.cursor = 0;
    }
    this.numTokens += chosen.reduce((s, e) => s + e.tokens, 0);
    this.stepCount += 1;
    this.consecutiveSkips = update.skipped ? this.consecutiveSkips + 1 : 0;
    const report: SftStepReport = {
      step: this.stepCount,
      metrics: {
        loss: update.loss,
        mean_token_accuracy: update.accuracy,
        num_tokens: this.numTokens,
        learning_rate: learningRate,
        grad_norm: update.gradNorm,
        epoch: this.epoch + this.cursor / n,
      },
      skipped: update.skipped,
    };
    this.history.push({ step: report.step, metrics: report.metrics });
    if (this.consecutiveSkips >= MAX_CONSECUTIVE_SKIPS) {
      throw new TrainingDivergedError(
        `SFT: ${this.consecutiveSkips} updates in a row were skipped (last: ${update.skipped}); lower the learning rate`,
      );
    }
    await this.hooks.onStep?.(report, { elapsedMs: performance.now() - started });
    const due = report.step % this.config.saveSteps === 0 || report.step === this.totalSteps;
    if (due && this.hooks.onCheckpoint) await this.save(true);
    return report;
  }

  /** Steps until the run is done or `stop()` says so (checked before each step). */
  runUntil(stop: () => boolean = () => false): Promise<'finished' | 'stopped'> {
    return stepUntil(this, stop);
  }

  /** The parameters that train: every weight, or a LoRA stage's adapters (PEFT names). */
  private trainedSpecs() {
    const { config } = this.setup.model;
    const lora = this.policy.lora;
    return lora ? loraAdapterSpecs(config, lora) : parameterSpecs(config);
  }

  /** The current state as a checkpoint payload (the trained weights, their moments, counters,
   * data cursor); a LoRA stage's holds its adapters only, the frozen base being its start. */
  async snapshot(): Promise<CheckpointPayload> {
    const weights = this.policy.lora
      ? await this.policy.readAdapters()
      : await this.policy.readParameters();
    const moments = await this.optimizer.readState();
    const specs = this.trainedSpecs();
    const tensors: CheckpointTensor[] = specs.map((s) => ({
      name: s.name,
      shape: s.shape,
      data: weights.get(s.name)!,
    }));
    for (const prefix of [EXP_AVG_PREFIX, EXP_AVG_SQ_PREFIX]) {
      for (const s of specs)
        tensors.push({
          name: prefix + s.name,
          shape: s.shape,
          data: moments.get(prefix + s.name)!,
        });
    }
    const identity = this.setup.modelIdentity ?? { name: '', sha256: '' };
    return {
      runId: this.setup.runId,
      runName: this.setup.runName,
      step: this.stepCount,
      tensors,
      rng: {
        'sft.epoch': [this.epoch],
        'sft.cursor': [this.cursor],
        'sft.numTokens': [this.numTokens],
        'sft.consecutiveSkips': [this.consecutiveSkips],
        'sft.examples': [this.setup.examples.length],
        'sft.dataHash': [this.dataHash],
        shuffle: `mulberry32(mixSeeds(seed ${this.config.seed}, epoch)) per epoch: no state`,
      },
      config: { stage: 'sft', ...this.config },
      adapter: this.policy.lora,
      modelConfig: this.setup.model.config,
      modelIdentity: identity,
      referenceIdentity: null,
      tokenizerIdentity: null,
      metricsSoFar: toStoredMetrics(this.history),
      optimizerStep: this.optimizer.stepCount,
    };
  }

  /** Hands the current state to onCheckpoint (`automatic`: due by saveSteps). */
  async save(automatic = false): Promise<void> {
    if (!this.hooks.onCheckpoint) return;
    await this.hooks.onCheckpoint(await this.snapshot(), { automatic });
  }

  /** The model trained so far (a recipe stage's end weights): the policy's parameters, with a
   * LoRA stage's adapters merged in (W + s·B·A), as the next stage and the exports need. */
  async readWeights(): Promise<Map<string, Float32Array>> {
    const base = await this.policy.readParameters();
    const lora = this.policy.lora;
    if (!lora) return base;
    return mergeLoraAdapters(this.setup.model.config, base, lora, await this.policy.readAdapters());
  }

  /** TrainingStage.readTrained: the policy's parameters, or a LoRA stage's adapters. */
  readTrained(): Promise<TrainedWeights> {
    return readTrainedOf(this.policy);
  }

  /**
   * Continues from a checkpoint of this loop on the same data (refused otherwise): weights, AdamW
   * moments and step, the data cursor and counters, and the metrics history up to its step
   * (default: the one the checkpoint stored, as Run's; a checkpoint read from files stores none).
   */
  restore(
    payload: CheckpointPayload,
    history: readonly MetricsRow[] = fromStoredMetrics(payload.metricsSoFar),
  ): void {
    const value = (key: string) => {
      const v = payload.rng[key];
      if (!Array.isArray(v) || typeof v[0] !== 'number')
        throw new Error(
          `checkpoint at step ${payload.step} has no '${key}': not an SFT checkpoint`,
        );
      return v[0];
    };
    if (
      value('sft.examples') !== this.setup.examples.length ||
      value('sft.dataHash') !== this.dataHash
    ) {
      throw new Error(
        `checkpoint at step ${payload.step} was trained on other data (or other tokenisation options): resume needs the same dataset`,
      );
    }
    const weights = new Map<string, Float32Array>();
    const moments = new Map<string, Float32Array>();
    for (const t of payload.tensors)
      (t.name.startsWith('optimizer.') ? moments : weights).set(t.name, t.data);
    for (const spec of this.trainedSpecs()) {
      if (weights.get(spec.name)?.length !== numel(spec.shape))
        throw new Error(`checkpoint at step ${payload.step}: ${spec.name} is missing or misshapen`);
    }
    if (this.policy.lora) this.policy.writeAdapters(weights);
    else this.policy.writeParameters(weights);
    this.optimizer.writeState(moments, payload.optimizerStep);
    const [epoch, cursor, numTokens, skips] = STATE_KEYS.map(value);
    this.epoch = epoch;
    this.cursor = cursor;
    this.numTokens = numTokens;
    this.consecutiveSkips = skips;
    this.stepCount = payload.step;
    this.history = history.filter((row) => row.step <= payload.step);
  }

  destroy(): void {
    this.optimizer.destroy();
    this.policy.destroy();
  }
}
