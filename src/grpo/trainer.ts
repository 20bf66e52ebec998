// The GRPO trainer. One step reads top to bottom, as ../shared/GRPO.md states the algorithm:
//   sample B prompts × G completions → rewards → advantages → (reference log-probs when β > 0)
//   → μ iterations of: policy forward, log-prob gather, GRPO loss, backward, clip, AdamW → metrics.
// Everything numeric runs on the GPU; the step reads back only what the metrics and the step report
// need (tokens, the per-token log-probs for the inspector, and a few scalars) at its end.
//
// Legend: B prompts per step, G completions per prompt, N = B·G sequences, L completion width.
import { createStorageBuffer, readF32, writeBuffer } from '../engine/buffers';
import type { Engine } from '../engine/engine';
import { AddKernel } from '../kernels/add';
import { CrossEntropyKernel, crossEntropyRowWeights } from '../kernels/cross-entropy';
import { decodeGrpoLossOut, GRPO_LOSS_OUT, GrpoLossKernel } from '../kernels/grpo-loss';
import { LogprobGatherBackwardKernel, LogprobGatherKernel } from '../kernels/logprob';
import { packBatch, type PackedBatch } from '../model/batch';
import type { LlamaConfig } from '../core/model-config';
import { GpuLlama } from '../model/llama';
import { Sampler, type SampleResult } from '../model/sampler';
import { GpuAdamW } from '../optim/adamw';
import { learningRateAt } from '../optim/schedule';
import type { Problem, PromptTemplate, Task } from '../tasks/types';
import { trainEvalProblems } from '../tasks/index';
import { mixSeeds } from '../core/rng';
import { computeAdvantages } from './advantages';
import type { Config } from './config';
import {
  reflectionMarkers,
  reflectionMetrics,
  reflectionSummary,
  reflects,
  thinkText,
} from './reflection';
import { scoreCompletionsBatched } from './custom-reward';
import { rewardMetrics, type CompletionReward, type RewardFunction } from './rewards';

const F32 = 4;

/** The part of a tokenizer the trainer needs (src/formats/tokenizer.ts implements it). */
export interface TrainerTokenizer {
  readonly eosTokenIds: number[];
  readonly padTokenId: number;
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  encodeChat?(
    messages: { role: string; content: string }[],
    options?: { addGenerationPrompt?: boolean },
  ): number[];
  applyChatTemplate?(
    messages: { role: string; content: string }[],
    options?: { addGenerationPrompt?: boolean },
  ): string;
}

export interface TrainerSetup {
  engine: Engine;
  /** A resolved config (src/grpo/config.ts resolveConfig). */
  config: Config;
  modelConfig: LlamaConfig;
  /** Initial weights in Hugging Face names; also the frozen reference policy when β > 0. */
  weights: ReadonlyMap<string, Float32Array>;
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
}

export interface GroupRecord {
  problem: Problem;
  /** The exact prompt text after templating. */
  prompt: string;
  promptTokens: number;
  completions: CompletionRecord[];
}

export interface StepReport {
  step: number;
  metrics: Record<string, number>;
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
 * messages through the tokenizer's chat template (instruct models). */
export function renderPrompt(
  task: Task,
  tokenizer: TrainerTokenizer,
  problem: Problem,
  template: PromptTemplate,
): { text: string; ids: number[] } {
  const formatted = task.formatPrompt(problem, template);
  if (formatted.kind === 'text')
    return { text: formatted.text, ids: tokenizer.encode(formatted.text) };
  if (!tokenizer.encodeChat || !tokenizer.applyChatTemplate) {
    throw new Error(
      "template 'chat' needs a tokenizer with a chat template; use template 'r1-zero' for base models",
    );
  }
  return {
    text: tokenizer.applyChatTemplate(formatted.messages, { addGenerationPrompt: true }),
    ids: tokenizer.encodeChat(formatted.messages, { addGenerationPrompt: true }),
  };
}

/** Everything a checkpoint needs to continue a run exactly (with the run's initial weights). */
export interface TrainerSnapshot {
  step: number;
  numTokens: number;
  promptCursor: number;
  consecutiveSkips: number;
  optimizerStep: number;
  /** Policy weights in Hugging Face names. */
  weights: Map<string, Float32Array>;
  /** AdamW moments: optimizer.exp_avg.<name>, optimizer.exp_avg_sq.<name>. */
  optimizer: Map<string, Float32Array>;
}

export class GrpoTrainer {
  readonly policy: GpuLlama;
  private readonly reference: GpuLlama | null;
  readonly sampler: Sampler;
  private readonly optimizer: GpuAdamW;
  private readonly gather: LogprobGatherKernel;
  private readonly gatherBackward: LogprobGatherBackwardKernel;
  private readonly loss: GrpoLossKernel;
  private readonly add: AddKernel;
  private readonly crossEntropy: CrossEntropyKernel;
  private readonly markers: string[];
  /** Completed steps (applied or skipped). */
  step = 0;
  /** Tokens seen so far (prompt + completion), TRL's num_tokens. */
  numTokens = 0;
  private consecutiveSkips = 0;
  private promptCursor = 0;
  private readonly problems: { train: Problem[]; eval: Problem[] };

  constructor(private readonly setup: TrainerSetup) {
    const { engine, config, modelConfig, weights } = setup;
    if (config.numGenerations < 2)
      throw new Error('numGenerations must be ≥ 2: GRPO compares completions within a group');
    const N = config.perStepPrompts * config.numGenerations;
    if (N % config.gradientAccumulationSteps !== 0) {
      throw new Error(
        `gradientAccumulationSteps (${config.gradientAccumulationSteps}) must divide B·G = ${N}`,
      );
    }
    if (setup.rewardFunctions.length !== config.rewards.length) {
      throw new Error(
        `${config.rewards.length} rewards configured but ${setup.rewardFunctions.length} functions given`,
      );
    }
    this.policy = GpuLlama.load(engine, modelConfig, weights);
    this.reference = config.beta > 0 ? GpuLlama.load(engine, modelConfig, weights) : null;
    this.sampler = new Sampler(engine, this.policy);
    this.optimizer = new GpuAdamW(engine, this.policy, {
      beta1: config.adamBeta1,
      beta2: config.adamBeta2,
      eps: config.adamEpsilon,
      weightDecay: config.weightDecay,
      maxGradNorm: config.maxGradNorm,
    });
    const { device, pipelines } = engine;
    this.gather = new LogprobGatherKernel(device, pipelines);
    this.gatherBackward = new LogprobGatherBackwardKernel(device, pipelines);
    this.loss = new GrpoLossKernel(device, pipelines);
    this.add = new AddKernel(device, pipelines);
    this.crossEntropy = new CrossEntropyKernel(device, pipelines);
    this.markers = reflectionMarkers(setup.task.reflectionMarkers ?? []);
    this.problems = trainEvalProblems(
      setup.task,
      config.seed,
      config.steps * config.perStepPrompts,
      config.evalPrompts,
    );
  }

  get config(): Config {
    return this.setup.config;
  }

  /** The learning rate of the next optimizer step. */
  get learningRate(): number {
    const c = this.config;
    const warmupSteps = c.warmupSteps > 0 ? c.warmupSteps : Math.ceil(c.warmupRatio * c.steps);
    return learningRateAt(this.optimizer.stepCount, {
      scheduler: c.lrScheduler,
      learningRate: c.learningRate,
      warmupSteps,
      totalSteps: c.steps,
    });
  }

  /** The prompt as text and token ids (R1-Zero template or the model's chat template). */
  renderPrompt(problem: Problem): { text: string; ids: number[] } {
    return renderPrompt(this.setup.task, this.setup.tokenizer, problem, this.setup.config.template);
  }

  /**
   * The next B training problems, skipping prompts longer than maxPromptLength. The stream is
   * the run's training split (trainEvalProblems: the same prompts the TRL export writes to
   * train.jsonl), cycled when a run outlasts it; it depends only on (seed, position), so a restored
   * run continues it exactly.
   */
  private nextProblems(): { problem: Problem; text: string; ids: number[] }[] {
    const { config } = this.setup;
    const train = this.problems.train;
    if (train.length === 0)
      throw new Error(`task '${this.setup.task.name}' produced no training prompts`);
    const out: { problem: Problem; text: string; ids: number[] }[] = [];
    for (let scanned = 0; out.length < config.perStepPrompts; scanned++) {
      if (scanned >= train.length && out.length === 0) {
        throw new Error(
          `no training prompt fits maxPromptLength = ${config.maxPromptLength} tokens`,
        );
      }
      const problem = train[this.promptCursor % train.length];
      this.promptCursor += 1;
      const rendered = this.renderPrompt(problem);
      if (rendered.ids.length <= config.maxPromptLength) out.push({ problem, ...rendered });
    }
    return out;
  }

  /** Held-out problems of this run (disjoint from the training prompts). */
  get evalProblems(): Problem[] {
    return this.problems.eval;
  }

  /** One GRPO step. Throws TrainingDivergedError after MAX_CONSECUTIVE_SKIPS non-finite updates. */
  async trainStep(): Promise<StepReport> {
    const started = performance.now();
    const { config, tokenizer, rewardFunctions } = this.setup;
    const G = config.numGenerations;
    const prompts = this.nextProblems();
    const B = prompts.length;
    const N = B * G;

    // 1. Sample G completions per prompt with the current policy.
    const promptIds = prompts.flatMap((p) => Array.from({ length: G }, () => p.ids));
    const sampled: SampleResult = await this.sampler.generate(promptIds, {
      maxNewTokens: config.maxCompletionLength,
      temperature: config.temperature,
      topK: config.topK,
      topP: config.topP,
      seed: mixSeeds(config.seed, 0x5a3e),
      stream: this.step,
      eosTokenIds: tokenizer.eosTokenIds,
    });
    const sampleSeconds = (performance.now() - started) / 1000;

    // 2. Rewards on the decoded text (custom JS rewards run sandboxed, one round trip each).
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

    // 3. Advantages within each group (GRPO.md §2).
    const advantages = computeAdvantages(
      rewards.map((r) => r.total),
      G,
      config.scaleRewards,
    );

    // 4. The training batch: left-padded prompts, completions from column P.
    const truncated = sampled.finished.map((f) => !f);
    const batch = packBatch(promptIds, sampled.completions, {
      padId: tokenizer.padTokenId,
      maskedOut: config.maskTruncatedCompletions ? truncated : undefined,
    });
    const update = await this.update(batch, advantages, sampled.logps);

    // 5. Metrics (GRPO.md §6) and the step report.
    const lengths = sampled.completions.map((c) => c.length);
    const terminated = lengths.filter((_, i) => sampled.finished[i]);
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
        rewardFunctions.map((f) => f.name),
        G,
      ),
      'completions/mean_length': completionTokens / N,
      'completions/min_length': Math.min(...lengths),
      'completions/max_length': Math.max(...lengths),
      'completions/clipped_ratio': truncated.filter(Boolean).length / N,
      'completions/mean_terminated_length': terminated.length
        ? terminated.reduce((s, l) => s + l, 0) / terminated.length
        : 0,
      ...(config.beta > 0 ? { kl: update.meanKl } : {}),
      entropy: update.entropy,
      'clip_ratio/low_mean': update.clipRatioLow,
      'clip_ratio/high_mean': update.clipRatioHigh,
      'clip_ratio/region_mean': update.clipRatioRegion,
      loss: update.loss,
      grad_norm: update.gradNorm,
      learning_rate: update.learningRate,
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
        };
      }),
    }));
    this.step += 1;
    if (update.skipped) {
      this.consecutiveSkips += 1;
      if (this.consecutiveSkips >= MAX_CONSECUTIVE_SKIPS) {
        throw new TrainingDivergedError(
          `${this.consecutiveSkips} updates in a row had a non-finite loss or gradient norm (last: ${update.skipped}); ` +
            'the weights were kept at the last good step. Lower learningRate or set maxGradNorm.',
        );
      }
    } else {
      this.consecutiveSkips = 0;
    }
    return { step: this.step, metrics, groups, skipped: update.skipped };
  }

  /**
   * μ iterations over the batch, each: forward → gather → loss → backward (per micro-batch) →
   * clip → AdamW. Returns the statistics of the first iteration (the one TRL logs per step).
   */
  private async update(
    batch: PackedBatch,
    advantages: Float64Array,
    samplingLogps: Float32Array[],
  ) {
    const { config, engine } = this.setup;
    const { device } = engine;
    const { N, L, T, P } = batch;
    const V = this.setup.modelConfig.vocabSize;
    const invT = 1 / config.temperature;
    const GA = config.gradientAccumulationSteps;
    const Nm = N / GA; // sequences per micro-batch
    const rows = Nm * L; // completion tokens per micro-batch
    const activeTokens = batch.mask.reduce((s, m) => s + m, 0);
    const OUT = GRPO_LOSS_OUT.length;

    // (N, L) sampling-policy log-probs: the old log-probs when μ > 1.
    const oldHost = new Float32Array(N * L);
    samplingLogps.forEach((lp, n) => oldHost.set(lp.subarray(0, Math.min(lp.length, L)), n * L));
    const owned: GPUBuffer[] = [];
    const buf = (name: string, bytes: number) => {
      const b = createStorageBuffer(device, bytes, `step.${name}`);
      owned.push(b);
      return b;
    };
    // Whole-batch per-token buffers, (N, L) or (N).
    const targets = buf('targets', N * L * 4);
    const mask = buf('mask', N * L * F32);
    const adv = buf('advantages', N * F32);
    const oldLogp = buf('oldLogp', N * L * F32);
    const logp = buf('logp', N * L * F32);
    const entropy = buf('entropy', N * L * F32);
    const refLogp = this.reference ? buf('refLogp', N * L * F32) : null;
    const lossOut = buf('lossOut', GA * OUT * F32); // (GA, 8) loss statistics per micro-batch
    // Micro-batch buffers, (Nm, L) or (Nm).
    const mTargets = buf('micro.targets', rows * 4);
    const mMask = buf('micro.mask', rows * F32);
    const mAdv = buf('micro.advantages', Nm * F32);
    const mOld = buf('micro.oldLogp', rows * F32);
    const mRef = refLogp ? buf('micro.refLogp', rows * F32) : null;
    const mLogp = buf('micro.logp', rows * F32);
    const mEntropy = buf('micro.entropy', rows * F32);
    const mLse = buf('micro.lse', rows * F32);
    const mDLogp = buf('micro.dLogp', rows * F32);
    const mDLogpScaled = buf('micro.dLogpScaled', rows * F32);
    const mLossOut = buf('micro.lossOut', OUT * F32);
    const dLogits = buf('micro.dLogits', rows * V * F32); // (Nm·L, V)
    writeBuffer(device, targets, batch.targets);
    writeBuffer(device, mask, batch.mask);
    writeBuffer(device, adv, Float32Array.from(advantages));
    writeBuffer(device, oldLogp, oldHost);

    const head = { start: P - 1, count: L };
    const tokenOffset = (m: number) => m * rows * F32; // byte offset of micro-batch m in (N, L) buffers
    /** Uploads micro-batch m's (Nm, T) slice and copies its per-token inputs into the micro buffers. */
    const loadMicro = (enc: GPUCommandEncoder, model: GpuLlama, m: number) => {
      const seq = (a: Uint32Array) => a.subarray(m * Nm * T, (m + 1) * Nm * T);
      enc.copyBufferToBuffer(targets, tokenOffset(m), mTargets, 0, rows * 4);
      enc.copyBufferToBuffer(mask, tokenOffset(m), mMask, 0, rows * F32);
      enc.copyBufferToBuffer(adv, m * Nm * F32, mAdv, 0, Nm * F32);
      return model.uploadBatch(
        seq(batch.tokens),
        batch.keyStart.subarray(m * Nm, (m + 1) * Nm),
        seq(batch.positions),
        Nm,
        T,
      );
    };

    /** Micro-batch m through `model`, then its completion log-probs and entropies into mLogp/mEntropy. */
    const scoreMicro = async (enc: GPUCommandEncoder, model: GpuLlama, m: number) => {
      const state = await model.forward(enc, loadMicro(enc, model, m), head);
      await this.gather.encode(enc, {
        logits: state.logits,
        targets: mTargets,
        logp: mLogp,
        entropy: mEntropy,
        lse: mLse,
        R: rows,
        V,
        invTemperature: invT,
      });
      return state;
    };

    // Reference log-probs (β > 0) from the frozen starting weights.
    if (this.reference && refLogp) {
      const reference = this.reference;
      for (let m = 0; m < GA; m++) {
        await engine.run(async (enc) => {
          await scoreMicro(enc, reference, m);
          enc.copyBufferToBuffer(mLogp, 0, refLogp, tokenOffset(m), rows * F32);
        }, 'reference');
      }
    }

    let firstIteration: {
      loss: number;
      clipRatioLow: number;
      clipRatioHigh: number;
      clipRatioRegion: number;
      meanKl: number;
      gradNorm: number;
      logp: Float32Array;
      entropy: number;
    } | null = null;
    let skipped: string | null = null;
    const learningRate = this.learningRate;
    for (let iteration = 0; iteration < config.numIterations && !skipped; iteration++) {
      await engine.run((enc) => this.policy.zeroGradients(enc), 'zero-grad');
      for (let m = 0; m < GA; m++) {
        await engine.run(async (enc) => {
          const state = await scoreMicro(enc, this.policy, m);
          if (mRef && refLogp) enc.copyBufferToBuffer(refLogp, tokenOffset(m), mRef, 0, rows * F32);
          if (config.numIterations > 1)
            enc.copyBufferToBuffer(oldLogp, tokenOffset(m), mOld, 0, rows * F32);
          enc.copyBufferToBuffer(mLogp, 0, logp, tokenOffset(m), rows * F32);
          enc.copyBufferToBuffer(mEntropy, 0, entropy, tokenOffset(m), rows * F32);
          await this.loss.encode(enc, {
            logp: mLogp,
            // μ = 1: old = the current log-probs, detached (ρ = 1, non-zero gradient; GRPO.md §3).
            oldLogp: config.numIterations > 1 ? mOld : mLogp,
            refLogp: mRef,
            advantages: mAdv,
            mask: mMask,
            dLogp: mDLogp,
            out: mLossOut,
            N: Nm,
            L,
            lossType: config.lossType,
            epsilonLow: config.epsilon,
            epsilonHigh: config.epsilonHigh,
            beta: config.beta,
            maxCompletionLength: config.maxCompletionLength,
            activeTokensInBatch: activeTokens,
          });
          enc.copyBufferToBuffer(mLossOut, 0, lossOut, m * OUT * F32, OUT * F32);
          // Every loss type but dapo is a mean over its micro-batch: micro-batches are averaged.
          let gradLogp = mDLogp;
          if (GA > 1 && config.lossType !== 'dapo') {
            enc.clearBuffer(mDLogpScaled);
            await this.add.encode(enc, { a: mDLogpScaled, b: mDLogp, count: rows, alpha: 1 / GA });
            gradLogp = mDLogpScaled;
          }
          await this.gatherBackward.encode(enc, {
            logits: state.logits,
            targets: mTargets,
            lse: mLse,
            gradLogp,
            dLogits,
            R: rows,
            V,
            invTemperature: invT,
          });
          await this.policy.backward(enc, state, dLogits);
        }, 'policy');
      }
      // Clip and AdamW on the GPU; the update is skipped there when the norm is not finite.
      await engine.run((enc) => this.optimizer.encodeStep(enc, learningRate), 'optimizer');
      const gradStats = await this.optimizer.readStats();
      const outs = await readF32(device, lossOut, GA * OUT);
      let loss = 0;
      let tokens = 0;
      const sums = { clipRatioLow: 0, clipRatioHigh: 0, clipRatioRegion: 0, meanKl: 0 };
      for (let m = 0; m < GA; m++) {
        const { loss: l, stats } = decodeGrpoLossOut(outs.subarray(m * OUT, (m + 1) * OUT));
        loss += config.lossType === 'dapo' ? l : l / GA;
        // Token-weighted means across micro-batches: what one batch would give.
        tokens += stats.activeTokens;
        sums.clipRatioLow += stats.clipRatioLow * stats.activeTokens;
        sums.clipRatioHigh += stats.clipRatioHigh * stats.activeTokens;
        sums.clipRatioRegion += stats.clipRatioRegion * stats.activeTokens;
        sums.meanKl += stats.meanKl * stats.activeTokens;
      }
      if (!Number.isFinite(loss)) skipped = `loss = ${loss}`;
      else if (!gradStats.finite) skipped = `grad_norm = ${gradStats.norm}`;
      // A non-finite loss with a finite norm cannot happen (the loss's gradient flows into the
      // norm), but the optimizer's own check is the one that guards the weights.
      if (gradStats.finite) this.optimizer.commitStep();
      if (iteration === 0) {
        const entropyHost = await readF32(device, entropy, N * L);
        let entropySum = 0;
        for (let i = 0; i < entropyHost.length; i++) entropySum += entropyHost[i] * batch.mask[i];
        const w = Math.max(tokens, 1);
        firstIteration = {
          loss,
          clipRatioLow: sums.clipRatioLow / w,
          clipRatioHigh: sums.clipRatioHigh / w,
          clipRatioRegion: sums.clipRatioRegion / w,
          meanKl: sums.meanKl / w,
          gradNorm: gradStats.norm,
          logp: await readF32(device, logp, N * L),
          entropy: entropySum / Math.max(activeTokens, 1),
        };
      }
    }
    const refHost = refLogp ? await readF32(device, refLogp, N * L) : null;
    let afterHost: Float32Array | null = null;
    if (this.setup.recordLogpAfterUpdate) {
      for (let m = 0; m < GA; m++) {
        await engine.run(async (enc) => {
          await scoreMicro(enc, this.policy, m);
          enc.copyBufferToBuffer(mLogp, 0, logp, tokenOffset(m), rows * F32);
        }, 'logp-after-update');
      }
      afterHost = await readF32(device, logp, N * L);
    }
    for (const b of owned) b.destroy();
    const first = firstIteration!;
    return {
      ...first,
      learningRate,
      skipped,
      oldLogp: config.numIterations > 1 ? oldHost : first.logp,
      refLogp: refHost,
      logpAfter: afterHost,
    };
  }

  /**
   * A supervised "cold start" step (as R1 does before RL, in miniature): cross-entropy on the
   * completion tokens of `examples` (prompt tokens masked, EOS appended), one AdamW step with the
   * same kernels, clip and NaN guard as GRPO. Returns the mean token loss before the update.
   */
  async supervisedStep(
    examples: readonly { problem: Problem; completion: string }[],
  ): Promise<{ loss: number; gradNorm: number; tokens: number; skipped: string | null }> {
    const { engine, tokenizer } = this.setup;
    const { device } = engine;
    if (examples.length === 0) throw new Error('supervisedStep needs at least one example');
    const prompts = examples.map((e) => this.renderPrompt(e.problem).ids);
    const eos = tokenizer.eosTokenIds[0];
    const completions = examples.map((e) => [
      ...tokenizer.encode(e.completion, { addSpecialTokens: false }),
      ...(eos === undefined ? [] : [eos]),
    ]);
    const batch = packBatch(prompts, completions, { padId: tokenizer.padTokenId });
    const { N, T, P, L } = batch;
    const V = this.setup.modelConfig.vocabSize;
    const rows = N * L;
    const tokens = batch.mask.reduce((a, m) => a + m, 0);
    const targets = createStorageBuffer(device, rows * 4, 'sft.targets');
    const rowWeights = createStorageBuffer(device, rows * F32, 'sft.rowWeights');
    const loss = createStorageBuffer(device, F32, 'sft.loss');
    const dLogits = createStorageBuffer(device, rows * V * F32, 'sft.dLogits');
    writeBuffer(device, targets, batch.targets);
    writeBuffer(device, rowWeights, crossEntropyRowWeights(batch.mask));
    const gpuBatch = this.policy.uploadBatch(batch.tokens, batch.keyStart, batch.positions, N, T);
    await engine.run(async (enc) => {
      this.policy.zeroGradients(enc);
      const state = await this.policy.forward(enc, gpuBatch, { start: P - 1, count: L });
      await this.crossEntropy.encode(enc, {
        logits: state.logits,
        targets,
        rowWeights,
        loss,
        dLogits,
        R: rows,
        V,
      });
      await this.policy.backward(enc, state, dLogits);
      await this.optimizer.encodeStep(enc, this.learningRate);
    }, 'supervised');
    const stats = await this.optimizer.readStats();
    const [lossValue] = await readF32(device, loss, 1);
    for (const b of [targets, rowWeights, loss, dLogits]) b.destroy();
    const skipped = !Number.isFinite(lossValue)
      ? `loss = ${lossValue}`
      : stats.finite
        ? null
        : `grad_norm = ${stats.norm}`;
    if (stats.finite) this.optimizer.commitStep();
    return { loss: lossValue, gradNorm: stats.norm, tokens, skipped };
  }

  /** The state to save in a checkpoint. Sampling needs no RNG state: its draws are keyed by step. */
  async snapshot(): Promise<TrainerSnapshot> {
    return {
      step: this.step,
      numTokens: this.numTokens,
      promptCursor: this.promptCursor,
      consecutiveSkips: this.consecutiveSkips,
      optimizerStep: this.optimizer.stepCount,
      weights: await this.policy.readParameters(),
      optimizer: await this.optimizer.readState(),
    };
  }

  /** Continues from a snapshot; the trainer must have been built with the run's initial weights. */
  restore(snapshot: TrainerSnapshot): void {
    this.policy.writeParameters(snapshot.weights);
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
