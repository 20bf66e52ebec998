// The policy objective on the GPU: what one GRPO update (docs/grpo.md §3–§5) and one supervised
// cold-start step encode. An update is μ iterations over the step's batch, each: per micro-batch
// policy forward → log-prob gather → clipped loss + KL → gather backward → model backward, then
// gradient clip + AdamW. The step's buffers live in a Workspace made for the call and destroyed in
// `finally`, so a step that throws leaves no GPU memory behind.
//
// The LM head's logits exist one row chunk at a time (GpuLlama.headChunks, sized by
// logitsMemoryMiB): the gather runs per chunk into the per-token vectors, the loss once over them,
// and backward recomputes each chunk's logits for its dLogits, so no (Nm·L, V) tensor is made.
//
// Legend: N = B·G sequences, T columns, P prompt width, L completion width, V vocab,
// GA micro-batches (gradientAccumulationSteps), Nm = N / GA sequences per micro-batch,
// k rows of one head chunk.
import { readF32, writeBuffer } from '../engine/buffers';
import type { Engine, Readback, RunOptions } from '../engine/engine';
import { Workspace } from '../engine/workspace';
import { AddKernel } from '../kernels/add';
import { CrossEntropyKernel, crossEntropyRowWeights } from '../kernels/cross-entropy';
import {
  decodeGrpoLossOut,
  EntropyMaskKernel,
  GRPO_LOSS_OUT,
  GrpoLossKernel,
} from '../kernels/grpo-loss';
import { LogprobGatherBackwardKernel, LogprobGatherKernel } from '../kernels/logprob';
import type { PackedBatch } from '../model/batch';
import type { RowChunk } from '../model/head-chunks';
import type { GpuLlama, HeadState } from '../model/llama';
import type { GpuAdamW, GradStats } from '../optim/adamw';
import { normalisesByBatchTokens } from '../core/loss-definitions';
import {
  entropyBonus,
  loggedLossMetrics,
  microBatchMetrics,
  policyLossMetric,
  type MicroBatchMetrics,
} from './loss-metrics';
import type { Config } from './config';

const F32 = 4;
const OUT = GRPO_LOSS_OUT.length; // loss statistics per micro-batch

/** One of the μ passes (optimizer steps) of an update. */
export interface PassReport {
  /** The pass's aggregated loss (§4), summed over micro-batches as the gradient is. */
  loss: number;
  /** The same without the entropy bonus (= loss when entropyCoef is 0; docs/grpo.md §5). */
  policyLoss: number;
  gradNorm: number;
  /** The learning rate this pass's AdamW step used. */
  learningRate: number;
  /**
   * The pass's clip ratios and mean k3 (0 when β = 0), token-weighted over the whole batch as the
   * first_pass/* metrics are: what Learn compares, pass by pass, with the report's log-probs.
   */
  clipRatioLow: number;
  clipRatioHigh: number;
  clipRatioRegion: number;
  meanKl: number;
  /** TRL's loss metrics of each micro-batch, in order (docs/grpo.md §6). */
  microBatches: MicroBatchMetrics[];
  logp: Float32Array; // (N, L) the pass's log-probs (before its own optimizer step)
  entropy: Float32Array; // (N, L) the pass's per-position entropies
}

/**
 * What an update reports. `metrics` is TRL's log row for the update's μ optimizer steps as TRL
 * writes it with logging_steps = μ (docs/grpo.md §6): `loss` the mean of the passes' losses,
 * `grad_norm` and `learning_rate` the last pass's, and kl, entropy and the clip ratios the
 * NaN-skipping mean of their per-micro-batch values over all μ·GA micro-batches. The project-only
 * `first_pass/…` values are the first pass's, token-weighted over the whole batch (the Learn view
 * recomputes them from the report's log-probs).
 */
export interface PolicyUpdate {
  metrics: Record<string, number>;
  passes: PassReport[];
  /** Why the update was skipped (non-finite loss or gradient), or null when it was applied. */
  skipped: string | null;
  logp: Float32Array; // (N, L) under the policy before the update
  oldLogp: Float32Array; // (N, L) under the sampling policy
  refLogp: Float32Array | null; // (N, L) under the reference policy (β > 0)
  logpAfter: Float32Array | null; // (N, L) after the update (when asked for)
}

/** A supervised step's result (see PolicyObjective.supervised). */
export interface SupervisedUpdate {
  loss: number;
  /** TRL's mean_token_accuracy: the share of loss tokens whose argmax prediction is the target. */
  accuracy: number;
  gradNorm: number;
  tokens: number;
  skipped: string | null;
}

/** The step's buffers: whole-batch per-token (N, L) or (N), and one micro-batch's (Nm, L). */
function stepBuffers(
  ws: Workspace,
  N: number,
  L: number,
  GA: number,
  kl: boolean,
  entropyBonus = false,
  entropyMask = false,
) {
  const Nm = N / GA;
  const rows = Nm * L;
  const b = (name: string, bytes: number) => ws.get(`step.${name}`, bytes);
  return {
    targets: b('targets', N * L * 4), // u32 (N, L)
    mask: b('mask', N * L * F32), // (N, L)
    advantages: b('advantages', N * F32), // (N)
    oldLogp: b('oldLogp', N * L * F32), // (N, L)
    logp: b('logp', N * L * F32), // (N, L)
    entropy: b('entropy', N * L * F32), // (N, L)
    refLogp: kl ? b('refLogp', N * L * F32) : null, // (N, L)
    gradEntropy: entropyBonus ? b('gradEntropy', N * L * F32) : null, // (N, L) ∂loss/∂H
    lossOut: b('lossOut', GA * OUT * F32), // (GA, OUT)
    micro: {
      targets: b('micro.targets', rows * 4), // u32 (Nm, L)
      mask: b('micro.mask', rows * F32), // (Nm, L)
      advantages: b('micro.advantages', Nm * F32), // (Nm)
      oldLogp: b('micro.oldLogp', rows * F32), // (Nm, L)
      refLogp: kl ? b('micro.refLogp', rows * F32) : null, // (Nm, L)
      gradEntropy: entropyBonus ? b('micro.gradEntropy', rows * F32) : null, // (Nm, L)
      entropyMask: entropyMask ? b('micro.entropyMask', rows * F32) : null, // (Nm, L) 0/1
      logp: b('micro.logp', rows * F32), // (Nm, L)
      entropy: b('micro.entropy', rows * F32), // (Nm, L)
      lse: b('micro.lse', rows * F32), // (Nm, L)
      dLogp: b('micro.dLogp', rows * F32), // (Nm, L)
      dLogpScaled: b('micro.dLogpScaled', rows * F32), // (Nm, L)
      lossOut: b('micro.lossOut', OUT * F32), // (OUT)
    },
  };
}
type StepBuffers = ReturnType<typeof stepBuffers>;

/** Sums of the first iteration's loss statistics over micro-batches. */
interface IterationStats {
  loss: number;
  clipRatioLow: number;
  clipRatioHigh: number;
  clipRatioRegion: number;
  meanKl: number;
  gradNorm: number;
}

/** The models, optimizer and kernels the objective encodes with. */
interface ObjectiveParts {
  engine: Engine;
  policy: GpuLlama;
  optimizer: GpuAdamW;
  gather: LogprobGatherKernel;
  gatherBackward: LogprobGatherBackwardKernel;
  loss: GrpoLossKernel;
  entropyMask: EntropyMaskKernel;
  add: AddKernel;
}

export class PolicyObjective {
  private readonly parts: ObjectiveParts;
  private readonly crossEntropy: CrossEntropyKernel;
  /** Every pipeline an update encodes with, compiled (started at construction). */
  private readonly ready: Promise<unknown>;

  constructor(
    private readonly engine: Engine,
    private readonly policy: GpuLlama,
    /**
     * The reference policy (β > 0): a frozen copy of the starting weights, or `policy` itself when
     * it has LoRA adapters (scored with them off: the base model), or null.
     */
    private readonly reference: GpuLlama | null,
    private readonly optimizer: GpuAdamW,
  ) {
    const { device, pipelines } = engine;
    this.parts = {
      engine,
      policy,
      optimizer,
      gather: new LogprobGatherKernel(device, pipelines),
      gatherBackward: new LogprobGatherBackwardKernel(device, pipelines),
      loss: new GrpoLossKernel(device, pipelines),
      entropyMask: new EntropyMaskKernel(device, pipelines),
      add: new AddKernel(device, pipelines),
    };
    this.crossEntropy = new CrossEntropyKernel(device, pipelines);
    const { gather, gatherBackward, loss, entropyMask, add } = this.parts;
    this.ready = Promise.all([
      policy.ready,
      reference === policy ? undefined : reference?.ready,
      optimizer.ready,
      gather.prepare(policy.config.vocabSize),
      gatherBackward.prepare(),
      loss.prepare(),
      entropyMask.prepare(),
      add.prepare(),
    ]);
    this.ready.catch(() => {}); // reported by update(), not as an unhandled rejection
  }

  /**
   * μ iterations over the batch, each: forward → gather → loss → backward (per micro-batch) →
   * clip → AdamW. `learningRate` is a rate or the schedule: a function of the optimizer's step
   * count, evaluated before each of the μ optimizer steps (each pass is a step of the schedule,
   * docs/grpo.md "Steps and the schedule"). samplingLogps are the sampler's per-token log-probs
   * (the old log-probs when μ > 1). With `recordLogpAfter`, one more forward scores the updated
   * policy.
   */
  async update(
    config: Config,
    batch: PackedBatch,
    advantages: Float64Array,
    samplingLogps: Float32Array[],
    learningRate: number | ((optimizerStep: number) => number),
    recordLogpAfter = false,
  ): Promise<PolicyUpdate> {
    const lrAt = () =>
      typeof learningRate === 'number' ? learningRate : learningRate(this.optimizer.stepCount);
    const { N, L } = batch;
    await this.ready;
    // (N, L) sampling-policy log-probs: the old log-probs when μ > 1.
    const oldHost = new Float32Array(N * L);
    samplingLogps.forEach((lp, n) => oldHost.set(lp.subarray(0, Math.min(lp.length, L)), n * L));
    const ws = new Workspace(this.engine.device);
    try {
      const GA = config.gradientAccumulationSteps;
      // The entropy bonus (docs/grpo.md §5): its ∂loss/∂H depends on the mask only.
      const entropyCoef = config.entropyCoef;
      const bonusOf = (entropy: ArrayLike<number>) =>
        entropyBonus({
          entropy,
          mask: batch.mask,
          N,
          L,
          GA,
          lossType: config.lossType,
          entropyCoef,
        });
      const buffers = stepBuffers(
        ws,
        N,
        L,
        GA,
        this.reference !== null,
        entropyCoef !== 0,
        config.topEntropyQuantile < 1,
      );
      const { device } = this.engine;
      writeBuffer(device, buffers.targets, batch.targets);
      writeBuffer(device, buffers.mask, batch.mask);
      writeBuffer(device, buffers.advantages, Float32Array.from(advantages));
      writeBuffer(device, buffers.oldLogp, oldHost);
      if (buffers.gradEntropy) {
        const grad = bonusOf(new Float32Array(N * L)).gradEntropy;
        writeBuffer(device, buffers.gradEntropy, Float32Array.from(grad));
      }
      const step = new Step(this.parts, config, batch, buffers, ws);
      // The engine's counters (counters.ts) split the update into the reference log-probs, the
      // passes' forward + backward, and clip + AdamW with the statistics read back.
      const counters = this.engine.counters;
      // Submissions go out without waiting, in queue order (each micro-batch's writeBuffer
      // uploads reach the GPU after the submissions before them); the host waits once per pass,
      // for the pass's statistics, which the next pass's learning rate and AdamW step count need.
      const noWait = { wait: false } as const;
      const tokens = N * L * F32;

      // Reference log-probs (β > 0) from the frozen starting weights (LoRA: adapters off); the
      // host's copy comes back with the first pass's statistics.
      if (this.reference && buffers.refLogp) {
        counters.phase = 'reference';
        const adaptersOff = this.reference === this.policy;
        if (adaptersOff && !this.policy.lora)
          throw new Error('the policy is its own reference only with LoRA adapters');
        for (let m = 0; m < GA; m++) {
          await step.scoreInto(
            this.reference,
            m,
            buffers.refLogp,
            'reference',
            adaptersOff,
            noWait,
          );
        }
      }
      let refHost: Float32Array | null = null;
      counters.phase = 'update';
      // The advantages as the loss kernel sees them (f32), for the host-side metrics.
      const advF32 = Float32Array.from(advantages);
      const Nm = N / GA;
      const passes: PassReport[] = [];
      let first: IterationStats | null = null;
      let skipped: string | null = null;
      for (let iteration = 0; iteration < config.numIterations && !skipped; iteration++) {
        const lr = lrAt();
        await this.engine.run((enc) => this.policy.zeroGradients(enc), 'zero-grad', noWait);
        for (let m = 0; m < GA; m++) {
          await this.engine.run((enc) => step.lossAndBackward(enc, m), 'policy', noWait);
        }
        // Clip and AdamW on the GPU (the update is skipped there when the norm is not finite),
        // and in the same submission the pass's results: the one wait of the pass.
        counters.phase = 'optimizer';
        const readRefs = buffers.refLogp !== null && refHost === null;
        const [gradBytes, lossBytes, logpBytes, entropyBytes, refBytes] = await this.engine.run(
          (enc) => this.optimizer.encodeStep(enc, lr),
          'optimizer',
          {
            read: [
              this.optimizer.statsRange,
              step.lossOutRange,
              { buffer: buffers.logp, bytes: tokens },
              { buffer: buffers.entropy, bytes: tokens },
              ...(readRefs ? [{ buffer: buffers.refLogp!, bytes: tokens }] : []),
            ],
          },
        );
        if (readRefs) refHost = new Float32Array(refBytes);
        const stats = step.iterationStats(this.optimizer.decodeStats(gradBytes), lossBytes);
        counters.phase = 'update';
        if (!Number.isFinite(stats.loss)) skipped = `loss = ${stats.loss}`;
        else if (!stats.finite) skipped = `grad_norm = ${stats.gradNorm}`;
        // A non-finite loss with a finite norm cannot happen (the loss's gradient flows into the
        // norm), but the optimizer's own check is the one that guards the weights.
        if (stats.finite) this.optimizer.commitStep();
        if (iteration === 0) first = stats;
        const logp = new Float32Array(logpBytes);
        const entropy = new Float32Array(entropyBytes);
        const old = config.numIterations > 1 ? oldHost : logp; // μ = 1: ρ = 1 (§3)
        const microBatches: MicroBatchMetrics[] = [];
        for (let m = 0; m < GA; m++) {
          const rows = (a: Float32Array) => a.subarray(m * Nm * L, (m + 1) * Nm * L);
          microBatches.push(
            microBatchMetrics({
              logp: rows(logp),
              oldLogp: rows(old),
              refLogp: refHost ? rows(refHost) : null,
              entropy: rows(entropy),
              advantages: advF32.subarray(m * Nm, (m + 1) * Nm),
              mask: batch.mask.subarray(m * Nm * L, (m + 1) * Nm * L),
              N: Nm,
              L,
              epsilonLow: config.epsilon,
              epsilonHigh: config.epsilonHigh,
              beta: config.beta,
              importanceSamplingLevel: config.importanceSamplingLevel,
              delta: config.delta,
              lossType: config.lossType,
            }),
          );
        }
        passes.push({
          // With the entropy bonus, the pass's loss is TRL's: policy loss − entropyCoef · H.
          loss: entropyCoef !== 0 ? stats.loss + bonusOf(entropy).term : stats.loss,
          policyLoss: stats.loss,
          gradNorm: stats.gradNorm,
          learningRate: lr,
          clipRatioLow: stats.clipRatioLow,
          clipRatioHigh: stats.clipRatioHigh,
          clipRatioRegion: stats.clipRatioRegion,
          meanKl: stats.meanKl,
          microBatches,
          logp,
          entropy,
        });
      }
      let afterHost: Float32Array | null = null;
      if (recordLogpAfter) {
        for (let m = 0; m < GA; m++) {
          // The last micro-batch's submission brings the whole (N, L) back.
          const last = m === GA - 1;
          const [bytes] = await step.scoreInto(
            this.policy,
            m,
            buffers.logp,
            'logp-after-update',
            false,
            last ? { read: [{ buffer: buffers.logp, bytes: tokens }] } : noWait,
          );
          if (last) afterHost = new Float32Array(bytes);
        }
      }
      const head = first!;
      const last = passes[passes.length - 1];
      const metrics: Record<string, number> = {
        loss: passes.reduce((s, p) => s + p.loss, 0) / passes.length,
        grad_norm: last.gradNorm,
        learning_rate: last.learningRate,
        ...loggedLossMetrics(
          passes.flatMap((p) => p.microBatches),
          config.beta,
          config.lossType,
        ),
        ...(entropyCoef !== 0
          ? {
              policy_loss:
                passes.reduce(
                  (s, p) => s + policyLossMetric(p.policyLoss, config.lossType, GA),
                  0,
                ) / passes.length,
              entropy_coef: entropyCoef,
            }
          : {}),
        // The first pass's policy loss (without the entropy bonus): what Learn recomputes.
        'first_pass/loss': head.loss,
        ...(config.beta > 0 ? { 'first_pass/kl': head.meanKl } : {}),
        'first_pass/clip_ratio/low_mean': head.clipRatioLow,
        'first_pass/clip_ratio/high_mean': head.clipRatioHigh,
        'first_pass/clip_ratio/region_mean': head.clipRatioRegion,
      };
      return {
        metrics,
        passes,
        skipped,
        logp: passes[0].logp,
        oldLogp: config.numIterations > 1 ? oldHost : passes[0].logp,
        refLogp: refHost,
        logpAfter: afterHost,
      };
    } catch (err) {
      // Submissions made without waiting may still use the step's buffers: let them finish.
      await this.engine.device.queue.onSubmittedWorkDone().catch(() => {});
      throw err;
    } finally {
      ws.destroy();
    }
  }

  /**
   * A supervised step: cross-entropy on the completion tokens of `batch` (its mask), one AdamW
   * step at `learningRate` with the same clip and NaN guard as GRPO. Returns the mean token loss
   * and the token accuracy before the update. A mask with zeros inside a completion (SFT's
   * assistant-only loss) takes those tokens out of the loss, the gradient and the accuracy.
   */
  async supervised(batch: PackedBatch, learningRate: number): Promise<SupervisedUpdate> {
    const { device } = this.engine;
    const { N, T, P, L } = batch;
    const V = this.policy.config.vocabSize;
    const rows = N * L;
    const tokens = batch.mask.reduce((a, m) => a + m, 0);
    await this.ready;
    await this.parts.gather.prepare(V, true); // the variant with the `correct` output
    const ws = new Workspace(device);
    try {
      const targets = ws.get('sft.targets', rows * 4); // u32 (N, L)
      const rowWeights = ws.get('sft.rowWeights', rows * F32); // (N, L)
      const loss = ws.get('sft.loss', F32); // (1)
      const logp = ws.get('sft.logp', rows * F32); // (N, L)
      const entropy = ws.get('sft.entropy', rows * F32); // (N, L)
      const lse = ws.get('sft.lse', rows * F32); // (N, L)
      const correct = ws.get('sft.correct', rows * F32); // (N, L) 1 where argmax = target
      const accuracy = ws.get('sft.accuracy', F32); // (1) −(Σ mask·correct) / Σ mask
      writeBuffer(device, targets, batch.targets);
      writeBuffer(device, rowWeights, crossEntropyRowWeights(batch.mask));
      const policy = this.policy;
      const { gather, gatherBackward } = this.parts;
      const gpuBatch = policy.uploadBatch(batch.tokens, batch.keyStart, batch.positions, N, T);
      await this.engine.run((enc) => {
        policy.zeroGradients(enc);
        // The cross-entropy kernel's three parts, the head's logits one row chunk at a time.
        const state = policy.forwardToHead(enc, gpuBatch, { start: P - 1, count: L });
        const chunks = policy.headChunks(rows);
        for (const chunk of chunks) {
          const logits = policy.chunkLogits(enc, state, chunk);
          const r = new ChunkRows(ws, enc, chunk, rows);
          gather.encode(enc, {
            logits,
            targets: r.in(targets, 'targets'),
            logp: r.out(logp, 'logp'),
            entropy: r.out(entropy, 'entropy'),
            lse: r.out(lse, 'lse'),
            correct: r.out(correct, 'correct'),
            R: chunk.rows,
            V,
          });
          r.done();
        }
        this.crossEntropy.encodeLoss(enc, { rowWeights, logp, loss, R: rows });
        // rowWeights = −mask / count, so the same product over `correct` is −accuracy.
        this.crossEntropy.encodeLoss(enc, { rowWeights, logp: correct, loss: accuracy, R: rows });
        const dLogitsOf = (chunk: RowChunk, logits: GPUBuffer, dLogits: GPUBuffer) => {
          const r = new ChunkRows(ws, enc, chunk, rows);
          gatherBackward.encode(enc, {
            logits,
            targets: r.in(targets, 'targets'),
            lse: r.in(lse, 'lse'),
            gradLogp: r.in(rowWeights, 'rowWeights'),
            dLogits,
            R: chunk.rows,
            V,
          });
        };
        policy.backward(enc, state, { chunks, dLogitsOf });
        this.optimizer.encodeStep(enc, learningRate);
      }, 'supervised');
      const stats = await this.optimizer.readStats();
      const [lossValue] = await readF32(device, loss, 1);
      const [negAccuracy] = await readF32(device, accuracy, 1);
      const skipped = !Number.isFinite(lossValue)
        ? `loss = ${lossValue}`
        : stats.finite
          ? null
          : `grad_norm = ${stats.norm}`;
      if (stats.finite) this.optimizer.commitStep();
      return { loss: lossValue, accuracy: -negAccuracy, gradNorm: stats.norm, tokens, skipped };
    } finally {
      ws.destroy();
    }
  }
}

/**
 * Per-token (rows) buffers as the kernels of one head chunk see them: the buffer itself when the
 * chunk is every row, else its k rows in a (k) scratch buffer of `ws`: copied in for inputs,
 * copied back by done() for outputs. Elements are 4 bytes (f32 or u32).
 */
class ChunkRows {
  private readonly whole: boolean;
  private readonly outputs: { scratch: GPUBuffer; full: GPUBuffer }[] = [];

  constructor(
    private readonly ws: Workspace,
    private readonly enc: GPUCommandEncoder,
    private readonly chunk: RowChunk,
    totalRows: number,
  ) {
    this.whole = chunk.start === 0 && chunk.rows === totalRows;
  }

  /** Rows of an input, as a (k) buffer. */
  in(full: GPUBuffer, name: string): GPUBuffer {
    if (this.whole) return full;
    const scratch = this.scratch(name);
    this.enc.copyBufferToBuffer(full, this.chunk.start * 4, scratch, 0, this.chunk.rows * 4);
    return scratch;
  }

  /** A (k) buffer for an output's rows; done() copies it into `full`. */
  out(full: GPUBuffer, name: string): GPUBuffer {
    if (this.whole) return full;
    const scratch = this.scratch(name);
    this.outputs.push({ scratch, full });
    return scratch;
  }

  /** Copies the outputs' rows into place (after the kernels that write them are encoded). */
  done(): void {
    for (const { scratch, full } of this.outputs)
      this.enc.copyBufferToBuffer(scratch, 0, full, this.chunk.start * 4, this.chunk.rows * 4);
  }

  private scratch(name: string): GPUBuffer {
    return this.ws.get(`chunk.${name}`, this.chunk.rows * 4); // (k)
  }
}

/** One update's encoding over its batch and buffers: micro-batch loading, scoring, the loss. */
class Step {
  private readonly Nm: number; // sequences per micro-batch
  private readonly rows: number; // completion tokens per micro-batch, Nm·L
  private readonly activeTokens: number; // counted completion tokens in the whole batch
  private readonly invTemperature: number;
  private readonly head: { start: number; count: number };

  constructor(
    private readonly parts: ObjectiveParts,
    private readonly config: Config,
    private readonly batch: PackedBatch,
    private readonly b: StepBuffers,
    private readonly ws: Workspace,
  ) {
    this.Nm = batch.N / config.gradientAccumulationSteps;
    this.rows = this.Nm * batch.L;
    this.activeTokens = batch.mask.reduce((s, m) => s + m, 0);
    this.invTemperature = 1 / config.temperature;
    this.head = { start: batch.P - 1, count: batch.L };
  }

  /** Byte offset of micro-batch m in the (N, L) buffers. */
  private tokenOffset(m: number): number {
    return m * this.rows * F32;
  }

  /** Uploads micro-batch m's (Nm, T) slice and copies its per-token inputs into the micro buffers. */
  private loadMicro(enc: GPUCommandEncoder, model: GpuLlama, m: number) {
    const { Nm, rows, batch, b } = this;
    const T = batch.T;
    const seq = (a: Uint32Array) => a.subarray(m * Nm * T, (m + 1) * Nm * T);
    enc.copyBufferToBuffer(b.targets, this.tokenOffset(m), b.micro.targets, 0, rows * 4);
    enc.copyBufferToBuffer(b.mask, this.tokenOffset(m), b.micro.mask, 0, rows * F32);
    enc.copyBufferToBuffer(b.advantages, m * Nm * F32, b.micro.advantages, 0, Nm * F32);
    const keyStart = batch.keyStart.subarray(m * Nm, (m + 1) * Nm);
    return model.uploadBatch(seq(batch.tokens), keyStart, seq(batch.positions), Nm, T);
  }

  /**
   * Micro-batch m through `model`, then its completion log-probs, entropies and log-sum-exps
   * (micro.logp …), gathered from the head's logits one row chunk at a time.
   */
  private scoreMicro(
    enc: GPUCommandEncoder,
    model: GpuLlama,
    m: number,
  ): { state: HeadState; chunks: RowChunk[] } {
    const state = model.forwardToHead(enc, this.loadMicro(enc, model, m), this.head);
    const { micro } = this.b;
    const chunks = model.headChunks(this.rows);
    for (const chunk of chunks) {
      const logits = model.chunkLogits(enc, state, chunk); // (k, V)
      const r = new ChunkRows(this.ws, enc, chunk, this.rows);
      this.parts.gather.encode(enc, {
        logits,
        targets: r.in(micro.targets, 'targets'),
        logp: r.out(micro.logp, 'logp'),
        entropy: r.out(micro.entropy, 'entropy'),
        lse: r.out(micro.lse, 'lse'),
        R: chunk.rows,
        V: model.config.vocabSize,
        invTemperature: this.invTemperature,
      });
      r.done();
    }
    return { state, chunks };
  }

  /**
   * Scores micro-batch m with `model` into its rows of `into` (N, L), in one submission (`options`:
   * engine.run's); with `adaptersOff`, as the base model (LoRA adapters skipped).
   */
  scoreInto(
    model: GpuLlama,
    m: number,
    into: GPUBuffer,
    label: string,
    adaptersOff = false,
    options?: RunOptions,
  ): Promise<ArrayBuffer[]> {
    return this.parts.engine.run(
      (enc) => {
        const score = () => this.scoreMicro(enc, model, m);
        if (adaptersOff) model.withAdaptersDisabled(score);
        else score();
        enc.copyBufferToBuffer(this.b.micro.logp, 0, into, this.tokenOffset(m), this.rows * F32);
      },
      label,
      options,
    );
  }

  /** Micro-batch m: forward, log-probs, the GRPO loss and its gradient, backward into the grads. */
  lossAndBackward(enc: GPUCommandEncoder, m: number): void {
    const { config, rows, b } = this;
    const { micro } = b;
    const { policy, loss, add, gatherBackward } = this.parts;
    const GA = config.gradientAccumulationSteps;
    const at = this.tokenOffset(m);
    const { state, chunks } = this.scoreMicro(enc, policy, m);
    if (micro.refLogp && b.refLogp)
      enc.copyBufferToBuffer(b.refLogp, at, micro.refLogp, 0, rows * F32);
    if (micro.gradEntropy && b.gradEntropy)
      enc.copyBufferToBuffer(b.gradEntropy, at, micro.gradEntropy, 0, rows * F32);
    if (config.numIterations > 1)
      enc.copyBufferToBuffer(b.oldLogp, at, micro.oldLogp, 0, rows * F32);
    enc.copyBufferToBuffer(micro.logp, 0, b.logp, at, rows * F32);
    enc.copyBufferToBuffer(micro.entropy, 0, b.entropy, at, rows * F32);
    // topEntropyQuantile < 1: this micro-batch's high-entropy tokens, from this forward's
    // entropies, as TRL's get_high_entropy_mask (docs/grpo.md §3).
    if (micro.entropyMask) {
      this.parts.entropyMask.encode(enc, {
        entropy: micro.entropy,
        mask: micro.mask,
        out: micro.entropyMask,
        M: rows,
        topEntropyQuantile: config.topEntropyQuantile,
      });
    }
    loss.encode(enc, {
      logp: micro.logp,
      // μ = 1: old = the current log-probs, detached (ρ = 1, non-zero gradient; docs/grpo.md §3).
      oldLogp: config.numIterations > 1 ? micro.oldLogp : micro.logp,
      refLogp: micro.refLogp,
      advantages: micro.advantages,
      mask: micro.mask,
      dLogp: micro.dLogp,
      out: micro.lossOut,
      N: this.Nm,
      L: this.batch.L,
      lossType: config.lossType,
      epsilonLow: config.epsilon,
      epsilonHigh: config.epsilonHigh,
      beta: config.beta,
      maxCompletionLength: config.maxCompletionLength,
      activeTokensInBatch: this.activeTokens,
      // Objective variants (docs/grpo.md §3): GSPO sequence ratios, two-sided clipping, the
      // high-entropy token mask.
      importanceSamplingLevel: config.importanceSamplingLevel,
      delta: config.delta,
      entropyMask: micro.entropyMask,
      sapoTemperaturePos: config.sapoTemperaturePos,
      sapoTemperatureNeg: config.sapoTemperatureNeg,
    });
    enc.copyBufferToBuffer(micro.lossOut, 0, b.lossOut, m * OUT * F32, OUT * F32);
    // Every loss type but dapo and cispo is a mean over its micro-batch: micro-batches are
    // averaged (§4).
    let gradLogp = micro.dLogp;
    if (GA > 1 && !normalisesByBatchTokens(config.lossType)) {
      enc.clearBuffer(micro.dLogpScaled);
      add.encode(enc, { a: micro.dLogpScaled, b: micro.dLogp, count: rows, alpha: 1 / GA });
      gradLogp = micro.dLogpScaled;
    }
    // Backward per head chunk: the chunk's logits (recomputed when there are several chunks)
    // → its dLogits (k, V) → the head's backward; then the rest of the model.
    const dLogitsOf = (chunk: RowChunk, logits: GPUBuffer, dLogits: GPUBuffer) => {
      const r = new ChunkRows(this.ws, enc, chunk, rows);
      const { gradEntropy } = micro;
      gatherBackward.encode(enc, {
        logits,
        targets: r.in(micro.targets, 'targets'),
        lse: r.in(micro.lse, 'lse'),
        gradLogp: r.in(gradLogp, 'gradLogp'),
        // The entropy bonus flows into the logits through H (docs/grpo.md §5).
        entropyGrad: gradEntropy
          ? {
              entropy: r.in(micro.entropy, 'entropy'),
              gradEntropy: r.in(gradEntropy, 'gradEntropy'),
            }
          : undefined,
        dLogits,
        R: chunk.rows,
        V: policy.config.vocabSize,
        invTemperature: this.invTemperature,
      });
    };
    policy.backward(enc, state, { chunks, dLogitsOf });
  }

  /** Where the micro-batches' loss statistics are: read with the gradient statistics. */
  get lossOutRange(): Readback {
    return { buffer: this.b.lossOut, bytes: this.config.gradientAccumulationSteps * OUT * F32 };
  }

  /**
   * The iteration's loss statistics (token-weighted over micro-batches) and gradient norm, from
   * the optimizer's statistics and the bytes of lossOutRange.
   */
  iterationStats(
    gradStats: GradStats,
    lossBytes: ArrayBuffer,
  ): IterationStats & { finite: boolean } {
    const GA = this.config.gradientAccumulationSteps;
    const outs = new Float32Array(lossBytes);
    let loss = 0;
    let tokens = 0;
    const sums = { clipRatioLow: 0, clipRatioHigh: 0, clipRatioRegion: 0, meanKl: 0 };
    for (let m = 0; m < GA; m++) {
      const { loss: l, stats } = decodeGrpoLossOut(outs.subarray(m * OUT, (m + 1) * OUT));
      loss += normalisesByBatchTokens(this.config.lossType) ? l : l / GA;
      // Token-weighted means across micro-batches: what one batch would give.
      tokens += stats.activeTokens;
      sums.clipRatioLow += stats.clipRatioLow * stats.activeTokens;
      sums.clipRatioHigh += stats.clipRatioHigh * stats.activeTokens;
      sums.clipRatioRegion += stats.clipRatioRegion * stats.activeTokens;
      sums.meanKl += stats.meanKl * stats.activeTokens;
    }
    const w = Math.max(tokens, 1);
    return {
      loss,
      clipRatioLow: sums.clipRatioLow / w,
      clipRatioHigh: sums.clipRatioHigh / w,
      clipRatioRegion: sums.clipRatioRegion / w,
      meanKl: sums.meanKl / w,
      gradNorm: gradStats.norm,
      finite: gradStats.finite,
    };
  }
}
