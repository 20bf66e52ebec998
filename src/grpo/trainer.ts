// The GRPO trainer. One step reads top to bottom, as docs/grpo.md states the algorithm:
//   sample B prompts × G completions → rewards → advantages → (reference log-probs when β > 0)
//   → μ iterations of: policy forward, log-prob gather, GRPO loss, backward, clip, AdamW → metrics.
// Everything numeric runs on the GPU; the step reads back only what the metrics and the step report
// need (tokens, the per-token log-probs for the inspector, and a few scalars) at its end.
//
// Legend: B prompts per step, G completions per prompt, N = B·G sequences, L completion width.
import type { Engine } from '../engine/engine';
import { packBatch, type PackedBatch } from '../model/batch';
import type { LlamaConfig } from '../core/model-config';
import { GpuLlama, type GpuLlamaOptions } from '../model/llama';
import { frozenDtypeOf, isStreamed, type WeightSource } from '../model/parameters';
import { Sampler, type SampleResult } from '../model/sampler';
import { GpuAdamW } from '../optim/adamw';
import { learningRateAt, runSchedule } from '../optim/schedule';
import type { Problem, PromptTemplate, Task } from '../tasks/types';
import { trainEvalStream, type ProblemStream } from '../tasks/index';
import { promptTooLongError } from '../tasks/jsonl';
import { mixSeeds } from '../core/rng';
import { loraTargets, type LoraOptions } from '../core/lora';
import { loraOptionsOf, type Config } from './config';
import {
  reflectionMarkers,
  reflectionMetrics,
  reflectionSummary,
  reflects,
  thinkText,
} from '../rewards/reflection';
import { scoreCompletionsBatched } from '../rewards/custom-reward';
import { completionMetrics } from './completion-metrics';
import { PolicyObjective } from './policy-objective';
import { type CompletionReward, type RewardFunction } from '../rewards/rewards';
import { guardGroupStatistics, rewardMetrics, stepAdvantages } from './step-rewards';

/** The part of a tokenizer the trainer needs (src/formats/tokenizer.ts implements it). */
export interface TrainerTokenizer {
  readonly eosTokenIds: number[];
  readonly padTokenId: number;
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  encodeChat?(
    messages: { role: string; content: string }[],
    options?: { addGenerationPrompt?: boolean; enableThinking?: boolean },
  ): number[];
  applyChatTemplate?(
    messages: { role: string; content: string }[],
    options?: { addGenerationPrompt?: boolean; enableThinking?: boolean },
  ): string;
}

export interface TrainerSetup {
  engine: Engine;
  /** A resolved config (src/grpo/config.ts resolveConfig). */
  config: Config;
  modelConfig: LlamaConfig;
  /** Initial weights in Hugging Face names (16-bit or NF4 as a checkpoint ships them may be
   * given); also the frozen reference policy when β > 0. A reader (streamed) is read tensor by
   * tensor into the GPU: build the trainer with GrpoTrainer.create then. */
  weights: WeightSource;
  tokenizer: TrainerTokenizer;
  task: Task;
  /** One per config.rewards entry, in that order. */
  rewardFunctions: RewardFunction[];
  /**
   * Also score the step's completions with the updated weights (one more forward pass) so a
   * report shows how each sampled token's log-prob moved: the Learn view's last panel.
   */
  recordLogpAfterUpdate?: boolean;
}

export interface CompletionRecord {
  text: string;
  tokens: number[];
  /** Hit maxCompletionLength without EOS. */
  truncated: boolean;
  reward: CompletionReward;
  advantage: number;
  reflects: boolean;
  /** Per completion token: log-prob under the policy before this step's update, … */
  logp: number[];
  /** … under the sampling policy (equal to logp when μ = 1), … */
  oldLogp: number[];
  /** … under the reference policy (only when β > 0). */
  refLogp: number[] | null;
  /** Whether each token counted in the loss (mask). */
  counted: boolean[];
  /** … under the policy after this step's update (only with TrainerSetup.recordLogpAfterUpdate). */
  logpAfter: number[] | null;
  /**
   * With μ = numIterations > 1: the log-probs each later pass scored (entry k is pass k + 2's,
   * under the weights the passes before it moved), so Learn can recompute every pass's loss and
   * clip ratios, not only the first's. Absent at μ = 1 and in reports older than it.
   */
  laterPassLogp?: number[][];
}

export interface GroupRecord {
  problem: Problem;
  /** The exact prompt text after templating. */
  prompt: string;
  promptTokens: number;
  completions: CompletionRecord[];
}

/**
 * One of the update's μ passes as the trainer computed it (docs/grpo.md §6: the logged loss is
 * the mean of the passes', the logged clip ratios and kl average every pass's micro-batches).
 * Token-weighted over the whole batch, like the first_pass/* metrics.
 */
export interface PassRecord {
  /** The pass's policy loss, without the entropy bonus. */
  loss: number;
  clipRatioLow: number;
  clipRatioHigh: number;
  clipRatioRegion: number;
  /** Mean k3 over the counted tokens; null when β = 0 (no reference). */
  kl: number | null;
  gradNorm: number;
  learningRate: number;
}

export interface StepReport {
  step: number;
  metrics: Record<string, number>;
  /** Each pass of the update, in order (absent in reports older than it). */
  passes?: PassRecord[];
  groups: GroupRecord[];
  /** Why the update was skipped (non-finite loss or gradient), or null when it was applied. */
  skipped: string | null;
}

/** Several non-finite updates in a row: the run stops with this error. */
export class TrainingDivergedError extends Error {
  override name = 'TrainingDivergedError';
}

/** Consecutive skipped updates after which the run stops. */
export const MAX_CONSECUTIVE_SKIPS = 3;

/** The prompt the model sees, as text and token ids: the task's R1-Zero text, or its chat
 * messages through the tokenizer's chat template (instruct models), with the config's thinking
 * switch (`enableThinking`; null leaves the template's default). */
export function renderPrompt(
  task: Task,
  tokenizer: TrainerTokenizer,
  problem: Problem,
  template: PromptTemplate,
  options: { enableThinking?: boolean | null } = {},
): { text: string; ids: number[] } {
  const formatted = task.formatPrompt(problem, template);
  if (formatted.kind === 'text')
    return { text: formatted.text, ids: tokenizer.encode(formatted.text) };
  if (!tokenizer.encodeChat || !tokenizer.applyChatTemplate) {
    throw new Error(
      "template 'chat' needs a tokenizer with a chat template; use template 'r1-zero' for base models",
    );
  }
  const chat = { addGenerationPrompt: true, enableThinking: options.enableThinking ?? undefined };
  return {
    text: tokenizer.applyChatTemplate(formatted.messages, chat),
    ids: tokenizer.encodeChat(formatted.messages, chat),
  };
}

/** Everything a checkpoint needs to continue a run exactly (with the run's initial weights). */
export interface TrainerSnapshot {
  step: number;
  numTokens: number;
  promptCursor: number;
  consecutiveSkips: number;
  optimizerStep: number;
  /** Policy weights in Hugging Face names (LoRA: the adapters only, PEFT names). */
  weights: Map<string, Float32Array>;
  /** AdamW moments: optimizer.exp_avg.<name>, optimizer.exp_avg_sq.<name>. */
  optimizer: Map<string, Float32Array>;
}

/** The checks a trainer's setup must pass before any GPU buffer is allocated. */
function checkSetup({ config, rewardFunctions }: TrainerSetup): void {
  if (config.numGenerations < 2)
    throw new Error('numGenerations must be ≥ 2: GRPO compares completions within a group');
  const N = config.perStepPrompts * config.numGenerations;
  if (N % config.gradientAccumulationSteps !== 0) {
    throw new Error(
      `gradientAccumulationSteps (${config.gradientAccumulationSteps}) must divide B·G = ${N}`,
    );
  }
  if (rewardFunctions.length !== config.rewards.length) {
    throw new Error(
      `${config.rewards.length} rewards configured but ${rewardFunctions.length} functions given`,
    );
  }
}

/**
 * How the policy and the reference copy load. LoRA (usePeft): adapters initialised as PEFT does
 * from the run's seed, base frozen; the reference policy is then the policy with its adapters off,
 * so no second copy is loaded (reference null). A full fine-tune with β > 0 loads a frozen copy.
 */
function modelOptions({ config, modelConfig, weights }: TrainerSetup): {
  policy: GpuLlamaOptions;
  reference: GpuLlamaOptions | null;
} {
  const lora = loraOptionsOf(config);
  // The reference copy only scores: checkpointed, its forward keeps layer inputs only.
  const checkpointing = {
    gradientCheckpointing: config.gradientCheckpointing,
    logitsMemoryBytes: config.logitsMemoryMiB * 2 ** 20,
  };
  return {
    policy: {
      lora: lora ? { ...lora, seed: config.seed } : undefined,
      // config dtype: how the frozen base is stored (a full fine-tune keeps every weight f32).
      frozenDtype: lora ? frozenDtypeOf(config.dtype, modelConfig, weights) : 'f32',
      // dtype nf4 (QLoRA): TRL's use_bnb_nested_quant double-quantises the block scales.
      nf4: { nested: config.useBnbNestedQuant },
      ...checkpointing,
    },
    reference: config.beta > 0 && !lora ? checkpointing : null,
  };
}

export class GrpoTrainer {
  readonly policy: GpuLlama;
  private readonly reference: GpuLlama | null;
  readonly sampler: Sampler;
  private readonly optimizer: GpuAdamW;
  private readonly objective: PolicyObjective;
  private readonly markers: string[];
  /** Completed steps (applied or skipped). */
  step = 0;
  /** Told as a step enters sampling, rewards and the update: the worker's progress line. */
  onPhase: ((phase: 'sampling' | 'rewards' | 'update') => void) | null = null;
  /** Tokens seen so far (prompt + completion), TRL's num_tokens. */
  numTokens = 0;
  private consecutiveSkips = 0;
  private promptCursor = 0;
  private problems: { train: ProblemStream; eval: Problem[] };
  /** Whether the loss has a reference policy (built with β > 0: a frozen copy, or under LoRA the
   * policy with its adapters off); without one β can only stay 0 (applyConfig). */
  readonly hasReference: boolean;

  /**
   * Builds the trainer; with streamed weights (a reader) the policy and, for a full fine-tune with
   * β > 0, the reference copy are each uploaded tensor by tensor (GpuLlama.loadStreamed), so the
   * host holds one tensor at a time, never the whole model. A Map of weights builds as the
   * constructor does.
   */
  static async create(setup: TrainerSetup): Promise<GrpoTrainer> {
    const { weights } = setup;
    if (!isStreamed(weights)) return new GrpoTrainer(setup);
    checkSetup(setup);
    const options = modelOptions(setup);
    const policy = await GpuLlama.loadStreamed(
      setup.engine,
      setup.modelConfig,
      weights,
      options.policy,
    );
    let reference: GpuLlama | null = null;
    try {
      if (options.reference) {
        reference = await GpuLlama.loadStreamed(
          setup.engine,
          setup.modelConfig,
          weights,
          options.reference,
        );
      }
      return new GrpoTrainer(setup, { policy, reference });
    } catch (err) {
      policy.destroy();
      reference?.destroy();
      throw err;
    }
  }

  // Not readonly: applyConfig swaps in a new config and reward functions between steps.
  /** `models`: the policy and reference already built (GrpoTrainer.create); else both are loaded
   * from setup.weights, which must then be a Map. */
  constructor(
    private setup: TrainerSetup,
    models?: { policy: GpuLlama; reference: GpuLlama | null },
  ) {
    const { engine, config, modelConfig, weights } = setup;
    checkSetup(setup);
    const lora = loraOptionsOf(config);
    if (models) {
      this.policy = models.policy;
      this.reference = models.reference;
    } else {
      if (isStreamed(weights)) throw new Error('streamed weights build with GrpoTrainer.create');
      const options = modelOptions(setup);
      this.policy = GpuLlama.load(engine, modelConfig, weights, options.policy);
      this.reference = options.reference
        ? GpuLlama.load(engine, modelConfig, weights, options.reference)
        : null;
    }
    this.sampler = new Sampler(engine, this.policy);
    this.optimizer = new GpuAdamW(engine, this.policy, {
      beta1: config.adamBeta1,
      beta2: config.adamBeta2,
      eps: config.adamEpsilon,
      weightDecay: config.weightDecay,
      maxGradNorm: config.maxGradNorm,
    });
    const reference = config.beta > 0 && lora ? this.policy : this.reference;
    this.hasReference = reference !== null;
    this.objective = new PolicyObjective(engine, this.policy, reference, this.optimizer);
    this.markers = reflectionMarkers(setup.task.reflectionMarkers ?? []);
    this.problems = trainEvalStream(
      setup.task,
      config.seed,
      config.steps * config.perStepPrompts,
      config.evalPrompts,
    );
  }

  get config(): Config {
    return this.setup.config;
  }

  /**
   * The learning rate of optimizer step `optimizerStep` (default: the next one). The schedule
   * runs over steps·μ optimizer steps (docs/grpo.md "Steps and the schedule"), so each of a step's
   * μ passes takes its own rate and the last sampled batch still trains at a non-zero rate.
   */
  learningRateAt(optimizerStep: number = this.optimizer.stepCount): number {
    return learningRateAt(optimizerStep, runSchedule(this.config));
  }

  /** The learning rate of the next optimizer step. */
  get learningRate(): number {
    return this.learningRateAt();
  }

  /** The prompt as text and token ids (R1-Zero template or the model's chat template). */
  renderPrompt(problem: Problem): { text: string; ids: number[] } {
    const { config } = this.setup;
    return renderPrompt(this.setup.task, this.setup.tokenizer, problem, config.template, config);
  }

  /**
   * The next B training problems, skipping prompts longer than maxPromptLength. The stream is
   * the run's training split (trainEvalStream, drawn as needed: the same prompts the TRL export
   * writes to train.jsonl), cycled when a run outlasts it; it depends only on (seed, position), so a restored
   * run continues it exactly.
   */
  private nextProblems(): { problem: Problem; text: string; ids: number[] }[] {
    const { config } = this.setup;
    const train = this.problems.train;
    if (train.length === 0)
      throw new Error(`task '${this.setup.task.name}' produced no training prompts`);
    const out: { problem: Problem; text: string; ids: number[] }[] = [];
    let shortest = Infinity; // for the error: how far the limit is from the data
    for (let scanned = 0; out.length < config.perStepPrompts; scanned++) {
      if (scanned >= train.length && out.length === 0) {
        throw promptTooLongError(config.maxPromptLength, shortest);
      }
      const problem = train.at(this.promptCursor % train.length);
      this.promptCursor += 1;
      const rendered = this.renderPrompt(problem);
      shortest = Math.min(shortest, rendered.ids.length);
      if (rendered.ids.length <= config.maxPromptLength) out.push({ problem, ...rendered });
    }
    return out;
  }

  /**
   * A new config and reward functions for the steps to come (Run.applyLiveOptions checks which
   * options may change; this checks what the trainer itself needs). Every option the trainer reads
   * per step (sampling, reward weights, the loss, the schedule) follows at once; a new `steps`
   * rebuilds the problem stream as a run built with it would have it (the position in it kept), so
   * a checkpoint saved after the change restores into exactly this run.
   */
  applyConfig(config: Config, rewardFunctions: RewardFunction[]): void {
    const before = this.setup.config;
    if (rewardFunctions.length !== config.rewards.length) {
      throw new Error(
        `${config.rewards.length} rewards configured but ${rewardFunctions.length} functions given`,
      );
    }
    if (config.beta > 0 && !this.hasReference) {
      throw new Error(
        'beta > 0 needs the reference policy, which this run was built without (beta 0): Reset to apply it',
      );
    }
    this.setup = { ...this.setup, config, rewardFunctions };
    if (config.steps !== before.steps) {
      this.problems = trainEvalStream(
        this.setup.task,
        config.seed,
        config.steps * config.perStepPrompts,
        config.evalPrompts,
      );
    }
  }

  /** Held-out problems of this run (disjoint from the training prompts). */
  get evalProblems(): Problem[] {
    return this.problems.eval;
  }

  /**
   * Tells onPhase, and tags the engine's counters (the update refines its own phase into
   * reference, update and optimizer: policy-objective.ts).
   */
  private enterPhase(phase: 'sampling' | 'rewards' | 'update'): void {
    this.setup.engine.counters.phase = phase;
    this.onPhase?.(phase);
  }

  /** One GRPO step. Throws TrainingDivergedError after MAX_CONSECUTIVE_SKIPS non-finite updates. */
  async trainStep(): Promise<StepReport> {
    try {
      return await this.stepOnce();
    } finally {
      this.setup.engine.counters.phase = 'other';
    }
  }

  /** trainStep's body (trainStep puts the counters back in phase 'other' however it ends). */
  private async stepOnce(): Promise<StepReport> {
    const started = performance.now();
    const { config, tokenizer, rewardFunctions } = this.setup;
    const G = config.numGenerations;
    const prompts = this.nextProblems();

    // 1. Sample G completions per prompt with the current policy.
    this.enterPhase('sampling');
    const promptIds = prompts.flatMap((p) => Array.from({ length: G }, () => p.ids));
    const sampled: SampleResult = await this.sampler.generate(promptIds, {
      maxNewTokens: config.maxCompletionLength,
      temperature: config.temperature,
      topK: config.topK,
      topP: config.topP,
      minP: config.minP ?? 0,
      repetitionPenalty: config.repetitionPenalty ?? 1,
      seed: mixSeeds(config.seed, 0x5a3e),
      stream: this.step,
      eosTokenIds: tokenizer.eosTokenIds,
    });
    const sampleSeconds = (performance.now() - started) / 1000;

    // 2. Rewards on the decoded text (custom JS rewards run sandboxed, one round trip each).
    this.enterPhase('rewards');
    const texts = sampled.completions.map((ids) =>
      tokenizer.decode(ids, { skipSpecialTokens: true }),
    );
    const rewards = await scoreCompletionsBatched(
      rewardFunctions,
      config.rewardWeights,
      texts.map((completion, i) => ({
        completion,
        prompt: prompts[Math.floor(i / G)].text,
        problem: prompts[Math.floor(i / G)].problem,
      })),
    );

    // 3. Advantages within each group (docs/grpo.md §2); an unscorable completion (no reward
    // function scored it) is left out of its group's statistics and gets A = 0 (§1).
    // multiObjectiveAggregation 'normalize_then_sum' (GDPO) normalises each function first (§2).
    const rewardNames = rewardFunctions.map((f) => f.name);
    const rewardWeights = config.rewardWeights ?? rewardNames.map(() => 1);
    const gdpo = config.multiObjectiveAggregation === 'normalize_then_sum';
    // A statistic that overflows (a group's std of ±1.7e308) is its reward's failure (§1).
    guardGroupStatistics(
      rewards,
      rewardNames,
      rewardWeights,
      G,
      config.scaleRewards,
      config.multiObjectiveAggregation,
      this.step + 1,
    );
    const advantages = stepAdvantages(
      rewards,
      rewardNames,
      rewardWeights,
      G,
      config.scaleRewards,
      config.multiObjectiveAggregation,
    );

    // 4. The training batch: left-padded prompts, completions from column P.
    const truncated = sampled.finished.map((f) => !f);
    const batch = packBatch(promptIds, sampled.completions, {
      padId: tokenizer.padTokenId,
      maskedOut: config.maskTruncatedCompletions ? truncated : undefined,
    });
    this.enterPhase('update');
    const update = await this.update(batch, advantages, sampled.logps);

    // 5. Metrics (docs/grpo.md §6) and the step report.
    const lengths = sampled.completions.map((c) => c.length);
    const reflection = reflectionSummary(
      texts.map((completion, i) => {
        const accuracy = rewards[i].perFunction.accuracy;
        return {
          completion,
          correct: accuracy === undefined || accuracy === null ? null : accuracy > 0,
          length: lengths[i],
        };
      }),
      this.markers,
    );
    const promptTokens = promptIds.reduce((s, p) => s + p.length, 0);
    const completionTokens = lengths.reduce((s, l) => s + l, 0);
    this.numTokens += promptTokens + completionTokens;
    const stepSeconds = (performance.now() - started) / 1000;
    const metrics: Record<string, number> = {
      ...rewardMetrics(
        rewards,
        rewardNames,
        G,
        config.scaleRewards,
        gdpo ? { weights: rewardWeights } : null,
      ),
      // TRL's completions/* (0 for the terminated lengths when no completion terminated).
      ...completionMetrics(lengths, sampled.finished),
      // loss, grad_norm, learning_rate, kl, entropy, clip_ratio/* (TRL's row for the μ optimizer
      // steps) and the project's first_pass/* values (docs/grpo.md §6).
      ...update.metrics,
      num_tokens: this.numTokens,
      step_time: stepSeconds,
      ...reflectionMetrics(reflection),
      tokens_per_second: completionTokens / sampleSeconds,
    };
    const groups: GroupRecord[] = prompts.map((p, b) => ({
      problem: p.problem,
      prompt: p.text,
      promptTokens: p.ids.length,
      completions: Array.from({ length: G }, (_, g) => {
        const i = b * G + g;
        const len = lengths[i];
        const row = (a: Float32Array) => Array.from(a.subarray(i * batch.L, i * batch.L + len));
        return {
          text: texts[i],
          tokens: sampled.completions[i],
          truncated: truncated[i],
          reward: rewards[i],
          advantage: advantages[i],
          reflects: reflects(thinkText(texts[i]), this.markers),
          logp: row(update.logp),
          oldLogp: row(update.oldLogp),
          refLogp: update.refLogp ? row(update.refLogp) : null,
          logpAfter: update.logpAfter ? row(update.logpAfter) : null,
          counted: row(batch.mask).map((m) => m > 0),
          ...(update.passes.length > 1
            ? { laterPassLogp: update.passes.slice(1).map((p) => row(p.logp)) }
            : {}),
        };
      }),
    }));
    this.step += 1;
    if (update.skipped) {
      this.consecutiveSkips += 1;
      if (this.consecutiveSkips >= MAX_CONSECUTIVE_SKIPS) {
        // When no update of the run was ever finite, the step size is not what to blame: the
        // weights it started from (a restored checkpoint, or a model file) already give NaN.
        const neverFinite = this.consecutiveSkips === this.step;
        throw new TrainingDivergedError(
          `${this.consecutiveSkips} updates in a row had a non-finite loss or gradient norm (last: ${update.skipped}); ` +
            (neverFinite
              ? 'no update of this run has been finite, so the starting weights are the likely cause: ' +
                'check the model or checkpoint for NaN/Inf values (model files are checked at load), ' +
                'or lower learningRate if they are fine.'
              : 'the weights were kept at the last good step. Lower learningRate or set maxGradNorm.'),
        );
      }
    } else {
      this.consecutiveSkips = 0;
    }
    const passes: PassRecord[] = update.passes.map((p) => ({
      loss: p.policyLoss,
      clipRatioLow: p.clipRatioLow,
      clipRatioHigh: p.clipRatioHigh,
      clipRatioRegion: p.clipRatioRegion,
      kl: config.beta > 0 ? p.meanKl : null,
      gradNorm: p.gradNorm,
      learningRate: p.learningRate,
    }));
    return { step: this.step, metrics, passes, groups, skipped: update.skipped };
  }

  /**
   * μ iterations over the batch (forward → gather → loss → backward per micro-batch → clip →
   * AdamW), each at its own scheduled learning rate; the GPU work is the policy objective's.
   */
  private update(batch: PackedBatch, advantages: Float64Array, samplingLogps: Float32Array[]) {
    const { config, recordLogpAfterUpdate = false } = this.setup;
    return this.objective.update(
      config,
      batch,
      advantages,
      samplingLogps,
      (optimizerStep) => this.learningRateAt(optimizerStep),
      recordLogpAfterUpdate,
    );
  }

  /**
   * A supervised "cold start" step (as R1 does before RL, in miniature): cross-entropy on the
   * completion tokens of `examples` (prompt tokens masked, EOS appended), one AdamW step with the
   * same kernels, clip and NaN guard as GRPO. Returns the mean token loss before the update.
   */
  async supervisedStep(
    examples: readonly { problem: Problem; completion: string }[],
  ): Promise<{ loss: number; gradNorm: number; tokens: number; skipped: string | null }> {
    const { tokenizer } = this.setup;
    if (examples.length === 0) throw new Error('supervisedStep needs at least one example');
    const prompts = examples.map((e) => this.renderPrompt(e.problem).ids);
    const eos = tokenizer.eosTokenIds[0];
    const completions = examples.map((e) => [
      ...tokenizer.encode(e.completion, { addSpecialTokens: false }),
      ...(eos === undefined ? [] : [eos]),
    ]);
    const batch = packBatch(prompts, completions, { padId: tokenizer.padTokenId });
    return this.objective.supervised(batch, this.learningRate);
  }

  /** The state to save in a checkpoint. Sampling needs no RNG state: its draws are keyed by step. */
  async snapshot(): Promise<TrainerSnapshot> {
    const counters = this.setup.engine.counters;
    const before = counters.enter('checkpoint');
    try {
      return await this.snapshotState();
    } finally {
      counters.phase = before;
    }
  }

  /** snapshot()'s reads, counted as the checkpoint phase. */
  private async snapshotState(): Promise<TrainerSnapshot> {
    return {
      step: this.step,
      numTokens: this.numTokens,
      promptCursor: this.promptCursor,
      consecutiveSkips: this.consecutiveSkips,
      optimizerStep: this.optimizer.stepCount,
      // LoRA: the adapters only (the base is frozen: the trainer is built with it).
      weights: this.policy.lora
        ? await this.policy.readAdapters()
        : await this.policy.readParameters(),
      optimizer: await this.optimizer.readState(),
    };
  }

  /**
   * Replaces the policy's LoRA adapters (an imported PEFT adapter). The run must have been built
   * with the same r, α, targets and rslora: anything else would train another adapter's shape
   * or scale. The optimizer's moments are left as they are (zero on a fresh run).
   */
  setAdapters(options: LoraOptions, adapters: ReadonlyMap<string, Float32Array>): void {
    const own = this.policy.lora;
    if (!own)
      throw new Error('This run does not use LoRA (usePeft is off): adapters cannot be set.');
    const mismatch = (
      [
        ['loraR', own.r, options.r],
        ['loraAlpha', own.alpha, options.alpha],
        ['useRslora', own.useRslora, options.useRslora],
        [
          'loraTargetModules',
          loraTargets(own.targetModules).join(','),
          loraTargets(options.targetModules).join(','),
        ],
      ] as const
    ).find(([, a, b]) => a !== b);
    if (mismatch) {
      throw new Error(
        `The adapter's ${mismatch[0]} (${mismatch[2]}) differs from this run's (${mismatch[1]}).`,
      );
    }
    this.policy.writeAdapters(adapters);
  }

  /** Continues from a snapshot; the trainer must have been built with the run's initial weights. */
  restore(snapshot: TrainerSnapshot): void {
    if (this.policy.lora) this.policy.writeAdapters(snapshot.weights);
    else this.policy.writeParameters(snapshot.weights);
    this.optimizer.writeState(snapshot.optimizer, snapshot.optimizerStep);
    this.step = snapshot.step;
    this.numTokens = snapshot.numTokens;
    this.promptCursor = snapshot.promptCursor;
    this.consecutiveSkips = snapshot.consecutiveSkips;
  }

  destroy(): void {
    this.policy.destroy();
    this.reference?.destroy();
    this.optimizer.destroy();
  }
}
