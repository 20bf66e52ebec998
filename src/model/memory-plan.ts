// Memory plan: how many bytes a GRPO run needs on the GPU before any buffer is created, so the UI
// and `npm run plan` can say "does not fit: turn on gradient checkpointing" instead of the device
// failing mid-step. The plan lists the buffers the code really allocates (the engine counts the
// same storage buffers: tests/kernels/memory-plan-measured.test.ts holds the plan to within 10% of
// the measured peak), and checks each against the device's per-buffer limits.
//
// Legend: N sequences per step (B prompts × G group), M sequences per training micro-batch,
// P prompt width, Tc completion width, T = P + Tc, C hidden, I intermediate, V vocab, L layers,
// H heads, Hkv kv-heads, D head dim, r LoRA rank.
//
// What lives when (src/model/llama.ts, sampler.ts, grpo/policy-objective.ts, optim/adamw.ts):
// - all run: the weights (f32 when they train; frozen ones, the base under LoRA, packed 16-bit
//   when dtype says so), gradients and AdamW moments of what trains (every parameter, or only the
//   LoRA adapters), the reference copy (full fine-tune with β > 0 only: with LoRA the reference is
//   the policy with its adapters off), and each model's workspace: named scratch buffers kept
//   between steps and grown to the largest shape asked for (the KV cache and the decoder's scratch
//   of sampling, the training activations and the backward scratch).
// - one sampling call: the prompt, position and token-history buffers of Sampler.generate.
// - one update: the step's per-token buffers and dLogits (policy-objective.ts' Workspace),
//   freed when the update ends; plus the kernels' per-call scratch.
// peak = run + max(sampling call, update).

import { formatBytes } from '../core/format';
import { hasQkNorm, numel, parameterSpecs, type LlamaConfig } from '../core/model-config';
import { gradNormPartialsLength } from '../kernels/grad-norm';
import { GRPO_LOSS_OUT } from '../kernels/grpo-loss';
import { loraAdapterSpecs } from '../core/lora';
import { DEFAULT_LOGITS_MEMORY_BYTES, headChunkRows } from './head-chunks';
import { DEFAULT_TUNING, type KernelTuning } from '../engine/pipelines';
import { logprobGatherPlan } from '../kernels/logprob';
import { matmulPartialsBytes, type MatmulShape } from '../kernels/matmul';
import { weightGradientParts } from '../kernels/rmsnorm';
import { sampleSplitChunk } from '../kernels/sampling';
import { headShapes, linearShapes, loraShapes } from './matmul-products';

const F32 = 4;
const MiB = 2 ** 20;

export interface DeviceMemoryLimits {
  /** GPUDevice.limits.maxBufferSize: the largest single buffer that can be created. */
  maxBufferSize: number;
  /** GPUDevice.limits.maxStorageBufferBindingSize: the largest range one binding can see. */
  maxStorageBufferBindingSize: number;
  /** Bytes the run may use in total (WebGPU does not report free memory: the user's setting). */
  totalBudget: number;
}

/** Limits of a WebGPU device with a chosen total budget. */
export function deviceMemoryLimits(
  limits: Pick<GPUSupportedLimits, 'maxBufferSize' | 'maxStorageBufferBindingSize'>,
  totalBudget: number,
): DeviceMemoryLimits {
  return {
    maxBufferSize: limits.maxBufferSize,
    maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
    totalBudget,
  };
}

/**
 * How frozen weights are stored: f32, 16-bit packed two per u32 word, or 4-bit NF4 (QLoRA: the
 * decoder's projections only; see nf4MatrixBytes).
 */
export type WeightDtype = 'float32' | 'bfloat16' | 'float16' | 'nf4';

/** LoRA as the plan needs it (src/ref/lora.ts LoraOptions). */
export interface PlanLora {
  r: number;
  /** 'all-linear' or projection names, as loraTargetModules. */
  targetModules: 'all-linear' | readonly string[];
}

export interface MemoryPlanInput {
  config: LlamaConfig;
  /** B prompts per step. */
  numPrompts: number;
  /** G completions per prompt. */
  groupSize: number;
  /** P: longest prompt in tokens. */
  promptLength: number;
  /** Tc: maximum completion length in tokens. */
  completionLength: number;
  /** KL coefficient; β > 0 without LoRA keeps a frozen reference copy of the weights. */
  beta: number;
  /** Sequences per training forward/backward (gradient accumulation); default N (no split). */
  microBatch?: number;
  /** LoRA adapters (base frozen), or null/absent for a full fine-tune. */
  lora?: PlanLora | null;
  /** Storage of the frozen weights (the base under LoRA). Default float32. */
  dtype?: WeightDtype;
  /** Keep only each layer's input in the training forward; recompute in backward. */
  gradientCheckpointing?: boolean;
  /**
   * MiB the (rows, V) logits and their gradient may take at once; rows go through the head in
   * chunks that fit (config logitsMemoryMiB; 0: one row at a time). Default 256.
   */
  logitsMemoryMiB?: number;
  /**
   * The kernel variants the device runs (engine.pipelines.tuning): the GPU path's split-K and
   * row-split partials are planned from them. Default: a GPU's (DEFAULT_TUNING); a software
   * adapter's emulation path (avoidBarriers) has none.
   */
  kernels?: KernelTuning;
  /**
   * What trains: a GRPO run (sampling, then the clipped loss; default) or an SFT stage (no
   * sampling: one packed batch of numPrompts examples, groupSize 1, of up to promptLength +
   * completionLength tokens through the cross-entropy step, src/train/sft.ts).
   */
  objective?: 'grpo' | 'sft';
}

/** A MemoryPlanInput with every optional field decided. */
export type ResolvedPlanInput = Required<Omit<MemoryPlanInput, 'lora'>> & {
  lora: PlanLora | null;
};

export type MemoryCategory =
  'parameters' | 'gradients' | 'optimizer' | 'reference' | 'grpo' | 'sampling' | 'training';

/** When a buffer is alive: the whole run (kept once allocated), one sampling call, one update. */
export type MemoryPhase = 'run' | 'sampling' | 'update';

export interface PlannedBuffer {
  name: string;
  category: MemoryCategory;
  phase: MemoryPhase;
  /** Shape of one buffer (elements). */
  shape: number[];
  /** Bytes of one buffer. */
  bytes: number;
  /** How many buffers of this shape (e.g. one per layer). */
  count: number;
}

export interface OversizedBuffer {
  name: string;
  category: MemoryCategory;
  bytes: number;
  /** The limit it exceeds: one binding (split into ranges) or one buffer (split into buffers). */
  limit: 'maxStorageBufferBindingSize' | 'maxBufferSize';
  limitBytes: number;
  /** Parts needed if split evenly. */
  parts: number;
  /**
   * GpuLlama stores it as row chunks by itself (the embedding table and the LM head, with their
   * gradients and moments); anything else (activations) must be made smaller instead.
   */
  splitByModel: boolean;
}

export interface MemoryPlan {
  input: ResolvedPlanInput;
  limits: DeviceMemoryLimits;
  buffers: PlannedBuffer[];
  /** Bytes per category (count × bytes summed, whatever the phase). */
  byCategory: Record<MemoryCategory, number>;
  /** Buffers alive all run: weights, gradients, moments, reference, the models' workspaces. */
  persistentBytes: number;
  /** Buffers of one sampling call (freed when it returns). */
  samplingBytes: number;
  /** Buffers of one update (freed when it returns). */
  trainingBytes: number;
  /** persistent + max(sampling, training). */
  peakBytes: number;
  fits: boolean;
  /** Buffers that must be split (reported once per name, against the tightest limit exceeded). */
  oversized: OversizedBuffer[];
  /** What to change, most effective first (empty when it fits). */
  suggestions: string[];
  /** One paragraph for the user: fits (and how much room), or what does not fit and what to change. */
  message: string;
}

function checkPositiveInt(value: number, name: string, min = 1) {
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(`memory plan: ${name} must be an integer ≥ ${min}, got ${value}`);
  }
}

const align4 = (bytes: number) => Math.max(4, Math.ceil(bytes / 4) * 4);

/**
 * Bytes per element of frozen weights stored as `dtype`: 4 or 2. NF4 stores only the decoder's
 * projections in 4 bits (frozenMatrixBytes); its embedding and LM head are bf16, 2 bytes.
 */
export const dtypeBytes = (dtype: WeightDtype) => (dtype === 'float32' ? 4 : 2);

/** NF4's block: one f32 absmax per 64 weights (bitsandbytes' blocksize, src/ref/nf4.ts). */
const NF4_BLOCK = 64;

/**
 * Bytes of one NF4 weight of `count` elements as the engine stores it: ONE buffer holding the
 * packed 4-bit codes (two per byte, padded to whole u32 words: ceil(count/8) words) followed by
 * the f32 absmax of every block of 64 (ceil(count/64) words; nested statistics are expanded to
 * f32 at load, so they cost the same).
 */
export const nf4MatrixBytes = (count: number) =>
  Math.ceil(count / 8) * 4 + Math.ceil(count / NF4_BLOCK) * 4;

/** The (V, C) tables that NF4 leaves 16-bit (bitsandbytes quantises only the decoder's Linear layers). */
const NF4_SKIPPED = new Set(['model.embed_tokens.weight', 'lm_head.weight']);

/**
 * Bytes of frozen 2-D parameter `name` with `count` elements stored as `dtype`: 4 or 2 bytes a
 * value (16-bit values packed two per word), or under NF4 the codes and block scales of a
 * projection and bf16 for the embedding and LM head.
 */
export function frozenMatrixBytes(name: string, count: number, dtype: WeightDtype): number {
  if (dtype === 'nf4') return NF4_SKIPPED.has(name) ? align4(count * 2) : nf4MatrixBytes(count);
  return align4(count * dtypeBytes(dtype));
}

/**
 * Rows of the (rows, V) logits that go through the head at once (src/model/head-chunks.ts, the
 * model's own formula): the logits chunk and its gradient within `mib` MiB, one binding each.
 */
export function planLogitsChunkRows(
  rows: number,
  V: number,
  mib: number,
  maxBindingBytes = Infinity,
): number {
  return headChunkRows(mib * MiB, V, rows, maxBindingBytes);
}

/** Every buffer the run needs, without judging fit. */
export function planBuffers(
  input: ResolvedPlanInput,
  /** The largest storage binding (GpuLlama's maxBindingBytes): caps a logits chunk. */
  maxBindingBytes = Infinity,
): PlannedBuffer[] {
  const { config, promptLength: P, completionLength: Tc, microBatch: M, lora } = input;
  const N = input.numPrompts * input.groupSize;
  const T = P + Tc;
  const {
    hiddenSize: C,
    intermediateSize: I,
    vocabSize: V,
    numLayers: L,
    numHeads: H,
    numKvHeads: Hkv,
    headDim: D,
  } = config;
  const out: PlannedBuffer[] = [];
  const add = (
    name: string,
    category: MemoryCategory,
    phase: MemoryPhase,
    shape: number[],
    count = 1,
    elementBytes = F32,
  ) =>
    count > 0 &&
    out.push({
      name,
      category,
      phase,
      shape,
      bytes: align4(numel(shape) * elementBytes),
      count,
    });

  // Weights. A full fine-tune trains every parameter in f32; under LoRA the base is frozen and
  // stored as `dtype`, and only the adapters (f32) get gradients and moments.
  // Packed 16-bit storage covers the frozen matrices (projections, embedding, LM head); NF4 the
  // projections (the embedding and LM head bf16); norm weights and biases stay f32
  // (src/model/parameters.ts).
  const specs = parameterSpecs(config);
  for (const spec of specs) {
    if (lora && spec.shape.length === 2) {
      const bytes = frozenMatrixBytes(spec.name, numel(spec.shape), input.dtype);
      out.push({
        name: spec.name,
        category: 'parameters',
        phase: 'run',
        shape: spec.shape,
        bytes,
        count: 1,
      });
    } else add(spec.name, 'parameters', 'run', spec.shape);
  }
  const trainable = lora
    ? loraAdapterSpecs(config, { ...lora, alpha: 1, useRslora: false, dropout: 0 })
    : specs;
  for (const spec of trainable) {
    if (lora) add(spec.name, 'parameters', 'run', spec.shape);
    add(`${spec.name} (gradient)`, 'gradients', 'run', spec.shape);
    add(`${spec.name} (AdamW m, v)`, 'optimizer', 'run', spec.shape, 2);
  }
  add('grad-norm partials', 'optimizer', 'run', [gradNormPartialsLength(trainable.length)]);
  add('grad-norm result, AdamW no-clip scale', 'optimizer', 'run', [4], 2);
  const reference = input.beta > 0 && !lora;
  if (reference) {
    for (const spec of specs) add(`${spec.name} (reference)`, 'reference', 'run', spec.shape);
  }

  // Sampling (the policy's workspace, kept between steps): the KV cache of N sequences of T
  // columns, and one set of decoder scratch for the widest extend() (each layer reuses it;
  // layerScratch also allocates its own norm outputs, which extend() then replaces by xn). The
  // B distinct prompts are prefilled once each (Sampler's shared prefill) into a P-column cache
  // of their own and copied to their G sequences, so the prefill is B·P rows, a decode step N.
  const U = input.numPrompts;
  const shared = U < N;
  const sft = input.objective === 'sft';
  const qkNorm = hasQkNorm(config); // Qwen3: q/k projections kept before their per-head norms
  // SFT samples nothing: the widest forward is the training batch.
  const Rp = sft ? 0 : Math.max(U * P, N);
  if (!sft) {
    add('kv cache (k and v, per layer)', 'sampling', 'run', [N, T, Hkv * D], 2 * L);
    add('kv cache key starts', 'sampling', 'run', [N]);
    if (shared) {
      add(
        'shared prefill kv cache (k and v, per layer)',
        'sampling',
        'run',
        [U, P, Hkv * D],
        2 * L,
      );
      add('shared prefill key starts', 'sampling', 'run', [U]);
    }
    add('decoder scratch: x, x2, norm outputs', 'sampling', 'run', [Rp, C], 5);
    add('decoder scratch: inverse rms', 'sampling', 'run', [Rp], 3);
    add(
      'decoder scratch: q before and after rotary, attention out',
      'sampling',
      'run',
      [Rp, H * D],
      3,
    );
    add('decoder scratch: k before and after rotary, v', 'sampling', 'run', [Rp, Hkv * D], 3);
    add('decoder scratch: attention log-sum-exp', 'sampling', 'run', [Rp, H]);
    if (qkNorm) {
      add('decoder scratch: q, k before q_norm / k_norm', 'sampling', 'run', [Rp, (H + Hkv) * D]);
      add('decoder scratch: q_norm / k_norm inverse rms', 'sampling', 'run', [Rp, H + Hkv]);
    }
    add('decoder scratch: mlp gate, up, silu(gate)·up', 'sampling', 'run', [Rp, I], 3);
    add('decoder scratch: last column and its logits', 'sampling', 'run', [N, C + V]);
    // Sampler.generate's own buffers, freed when it returns.
    add('sampler: prompt tokens and positions', 'sampling', 'sampling', [U, P], 2);
    if (shared) add('sampler: prefill logits of every sequence', 'sampling', 'sampling', [N, V]);
    add('sampler: next token, its log-prob and position', 'sampling', 'sampling', [N], 3);
    add('sampler: token and log-prob history', 'sampling', 'sampling', [Tc, N], 2);
  }

  // Training forward and backward of one micro-batch of M sequences × T columns (the model's
  // workspace, kept). Logits exist for the Tc completion columns only (TRL's logits_to_keep), in
  // chunks of rows when logitsMemoryMiB bounds them.
  const R = M * T;
  const rows = M * Tc;
  const chunkRows = planLogitsChunkRows(rows, V, input.logitsMemoryMiB, maxBindingBytes);
  const chunked = chunkRows < rows;
  const trainingActivations = (category: MemoryCategory, prefix: string) => {
    add(`${prefix}batch tokens and positions`, category, 'run', [M, T], 2);
    add(`${prefix}batch key starts`, category, 'run', [M]);
    add(`${prefix}residual stream act.x0…x${L}`, category, 'run', [R, C], L + 1);
    // Per layer, or one shared set with checkpointing (recomputed in backward).
    const sets = input.gradientCheckpointing ? 1 : L;
    const per = input.gradientCheckpointing ? ' (one shared set, recomputed)' : ' (per layer)';
    add(`${prefix}norm outputs, attention residual${per}`, category, 'run', [R, C], 3 * sets);
    add(`${prefix}inverse rms${per}`, category, 'run', [R], 2 * sets);
    add(
      `${prefix}q before and after rotary, attention out${per}`,
      category,
      'run',
      [R, H * D],
      3 * sets,
    );
    add(`${prefix}k before and after rotary, v${per}`, category, 'run', [R, Hkv * D], 3 * sets);
    add(`${prefix}attention log-sum-exp${per}`, category, 'run', [M, H, T], sets);
    if (qkNorm) {
      add(`${prefix}q, k before q_norm / k_norm${per}`, category, 'run', [R, (H + Hkv) * D], sets);
      add(`${prefix}q_norm / k_norm inverse rms${per}`, category, 'run', [R, H + Hkv], sets);
    }
    add(`${prefix}mlp gate, up, silu(gate)·up${per}`, category, 'run', [R, I], 3 * sets);
    add(`${prefix}final norm output`, category, 'run', [R, C]);
    add(`${prefix}final inverse rms`, category, 'run', [R]);
    add(`${prefix}head input (completion columns)`, category, 'run', [rows, C]);
    add(`${prefix}logits (one chunk of completion rows)`, category, 'run', [chunkRows, V]);
    if (chunked) add(`${prefix}head input of one chunk`, category, 'run', [chunkRows, C]);
  };
  trainingActivations('training', '');
  if (input.gradientCheckpointing && L > 1) {
    add('recomputed layer output', 'training', 'run', [R, C]);
  }
  // Backward scratch, shared by every layer.
  add('backward: head input gradient', 'training', 'run', [rows, C]);
  add('logits gradient (one chunk of completion rows)', 'training', 'run', [chunkRows, V]);
  add('backward: final norm, residual and norm gradients', 'training', 'run', [R, C], 3);
  add('backward: mlp gradients', 'training', 'run', [R, I], 3);
  add(
    'backward: q, attention out gradients (before and after rotary)',
    'training',
    'run',
    [R, H * D],
    3,
  );
  add('backward: k (before and after rotary), v gradients', 'training', 'run', [R, Hkv * D], 3);
  add('backward: attention rowsum(dO∘O)', 'training', 'run', [R, H]);
  if (lora) {
    // x·Aᵀ (recomputed in backward) and its gradient, for the widest use: prefill or training.
    add('LoRA x·Aᵀ', 'training', 'run', [Math.max(Rp, R), lora.r]);
    add('LoRA gradient of x·Aᵀ', 'training', 'run', [R, lora.r]);
  } else {
    // The embedding backward's token index (per call): ids, offsets, row order.
    add('embedding backward token index (per call)', 'training', 'update', [R], 3);
  }
  // The reference copy scores in its own workspace: a forward without backward.
  if (reference) trainingActivations('reference', 'reference forward: ');
  gpuKernelScratch(input, { U, N, Rp, R, chunkRows }, add);

  if (sft) {
    // The supervised step's per-token buffers (policy-objective.ts supervised): targets, row
    // weights, logp, entropy, lse, correct; the loss and accuracy; a chunk's rows of each.
    add('per-token: targets, weights, logp, entropy, lse, correct', 'grpo', 'update', [rows], 6);
    add('loss and accuracy', 'grpo', 'update', [1], 2);
    add('loss partial sums (per call)', 'grpo', 'update', [M, 8]);
    if (chunked) add('one chunk of per-token rows', 'grpo', 'update', [chunkRows], 6);
    return out;
  }
  // The update's per-token buffers (policy-objective.ts stepBuffers), freed after the update.
  const kl = input.beta > 0;
  add('per-token: targets, mask, old logp, logp, entropy', 'grpo', 'update', [N, Tc], kl ? 6 : 5);
  add('per-sequence advantages, loss statistics', 'grpo', 'update', [N + 2 * GRPO_LOSS_OUT.length]);
  add(
    'micro-batch per-token: targets, mask, old logp, logp, entropy, lse, dlogp ×2',
    'grpo',
    'update',
    [rows],
    kl ? 9 : 8,
  );
  add('micro-batch advantages, loss statistics', 'grpo', 'update', [M + GRPO_LOSS_OUT.length]);
  add('loss partial sums (per call)', 'grpo', 'update', [M, 8]);
  if (chunked) {
    // One chunk's rows of targets, logp, entropy, lse and the logp gradient (policy-objective.ts
    // ChunkRows), when the chunk is not every row.
    add('one chunk of per-token rows', 'grpo', 'update', [chunkRows], 5);
  }
  return out;
}

const MATMUL_DTYPE = { float32: 'f32', bfloat16: 'bf16', float16: 'f16', nf4: 'nf4' } as const;

/**
 * The GPU path's per-call partials (src/engine/memory.ts runScratch): one buffer per kernel for a
 * whole sampling call or update, as large as the kernel's largest call there. Split-K products
 * (decode-sized M, or a LoRA rank's rows of dA) and the row-split reductions (sampling and the
 * log-prob gather over a long vocabulary, RMSNorm weight gradients over many rows). The emulation
 * path (avoidBarriers) takes none of them. A kernel whose calls grow within a run keeps the
 * smaller buffer until the run ends, which this does not count (the products of one forward or
 * backward come largest first, so little).
 */
function gpuKernelScratch(
  input: ResolvedPlanInput,
  rows: { U: number; N: number; Rp: number; R: number; chunkRows: number },
  add: (name: string, category: MemoryCategory, phase: MemoryPhase, shape: number[]) => unknown,
): void {
  const { config, lora, kernels: tuning } = input;
  const { hiddenSize: C, vocabSize: V, numHeads: H, numKvHeads: Hkv, headDim: D } = config;
  const { U, N, Rp, R, chunkRows } = rows;
  const frozen = lora ? MATMUL_DTYPE[input.dtype] : 'f32';
  // One layer's projections (every layer has the same) and which carry an adapter.
  const linears = parameterSpecs(config)
    .filter((s) => s.name.startsWith('model.layers.0.') && s.name.endsWith('_proj.weight'))
    .map((s) => ({
      name: s.name.slice(0, -'.weight'.length),
      outDim: s.shape[0],
      inDim: s.shape[1],
    }));
  const adapted = new Set(
    lora
      ? loraAdapterSpecs(config, { ...lora, alpha: 1, useRslora: false, dropout: 0 }).map((s) =>
          s.name.replace(/\.lora_[AB]\.weight$/, ''),
        )
      : [],
  );
  const r = lora?.r ?? 0;
  // The products GpuLlama encodes (src/model/matmul-products.ts); the frozen base's projections
  // and head read their stored dtype.
  const forward = (x: number): MatmulShape[] =>
    linears.flatMap((l) => {
      const own = linearShapes(l, x);
      const a = loraShapes(l, r, x);
      return [{ ...own.forward, bDtype: frozen }, ...(adapted.has(l.name) ? [a.down, a.up] : [])];
    });
  const backward = (x: number): MatmulShape[] =>
    linears.flatMap((l) => {
      const own = linearShapes(l, x);
      const a = loraShapes(l, r, x);
      return [
        { ...own.inputGrad, bDtype: frozen },
        ...(lora ? [] : [{ ...own.weightGrad, accumulate: true }]),
        ...(adapted.has(l.name) ? [a.dU, a.dB, a.dA, a.dX] : []),
      ];
    });
  const table = { rows: V, rowStart: 0 };
  const head = (x: number): MatmulShape => ({
    ...headShapes(table, C, V, x).forward,
    bDtype: frozen,
  });
  const largest = (shapes: MatmulShape[]) =>
    Math.max(0, ...shapes.map((shape) => matmulPartialsBytes(tuning, shape)));
  const words = (bytes: number) => [bytes / F32];

  // Sampling: the prefill's rows, a decode step's, and the head over the last column of each.
  if (input.objective === 'grpo') {
    const samplingMatmul = largest([...forward(Rp), ...forward(N), head(U), head(N)]);
    if (samplingMatmul > 0) {
      add(
        'GPU kernels: split-K partials (sampling)',
        'sampling',
        'sampling',
        words(samplingMatmul),
      );
    }
    const sampleChunk = sampleSplitChunk(tuning);
    if (sampleChunk > 0 && V > sampleChunk) {
      const parts = Math.ceil(V / sampleChunk);
      add('GPU kernels: sampling partials (rows × parts)', 'sampling', 'sampling', [N, parts, 6]);
    }
  }

  // Update: the training forward and backward of a micro-batch (the reference forward's products
  // are the same), the head over one chunk of completion rows.
  const headGrad: MatmulShape = { ...headShapes(table, C, V, chunkRows).inputGrad, bDtype: frozen };
  const updateMatmul = largest([...forward(R), ...backward(R), head(chunkRows), headGrad]);
  if (updateMatmul > 0) {
    add('GPU kernels: split-K partials (update)', 'training', 'update', words(updateMatmul));
  }
  const gather = logprobGatherPlan(V, tuning, false);
  if (gather.kind === 'split') {
    add('GPU kernels: log-prob gather partials', 'grpo', 'update', [chunkRows, gather.parts, 4]);
  }
  if (!lora) {
    // RMSNorm weight gradients (a full fine-tune trains the norms): the layer norms over R rows
    // of C, Qwen3's q/k norms over R·H rows of D.
    const norm = (n: number, width: number) => {
      const parts = weightGradientParts(n, tuning);
      return parts > 1 ? parts * width : 0;
    };
    const qk = hasQkNorm(config) ? Math.max(norm(R * H, D), norm(R * Hkv, D)) : 0;
    const normWords = Math.max(norm(R, C), qk);
    if (normWords > 0) {
      add('GPU kernels: RMSNorm weight-gradient partials', 'training', 'update', [normWords]);
    }
  }
}

interface Totals {
  byCategory: Record<MemoryCategory, number>;
  persistent: number;
  sampling: number;
  training: number;
  peak: number;
}

function totals(buffers: PlannedBuffer[]): Totals {
  const byCategory: Record<MemoryCategory, number> = {
    parameters: 0,
    gradients: 0,
    optimizer: 0,
    reference: 0,
    grpo: 0,
    sampling: 0,
    training: 0,
  };
  const byPhase: Record<MemoryPhase, number> = { run: 0, sampling: 0, update: 0 };
  for (const b of buffers) {
    byCategory[b.category] += b.bytes * b.count;
    byPhase[b.phase] += b.bytes * b.count;
  }
  return {
    byCategory,
    persistent: byPhase.run,
    sampling: byPhase.sampling,
    training: byPhase.update,
    peak: byPhase.run + Math.max(byPhase.sampling, byPhase.update),
  };
}

function resolve(input: MemoryPlanInput): ResolvedPlanInput {
  checkPositiveInt(input.numPrompts, 'numPrompts');
  checkPositiveInt(input.groupSize, 'groupSize');
  checkPositiveInt(input.promptLength, 'promptLength');
  checkPositiveInt(input.completionLength, 'completionLength');
  if (!(input.beta >= 0)) throw new RangeError(`memory plan: beta must be ≥ 0, got ${input.beta}`);
  const N = input.numPrompts * input.groupSize;
  const microBatch = input.microBatch ?? N;
  checkPositiveInt(microBatch, 'microBatch');
  if (microBatch > N) {
    throw new RangeError(`memory plan: microBatch (${microBatch}) exceeds N = B·G = ${N}`);
  }
  if (input.lora) checkPositiveInt(input.lora.r, 'lora.r');
  if (input.dtype === 'nf4' && !input.lora) {
    // As the config refuses it (src/grpo/config.ts): a 4-bit base cannot be fully fine-tuned.
    throw new RangeError(
      'memory plan: dtype nf4 needs LoRA (a 4-bit base cannot be fully fine-tuned)',
    );
  }
  const logitsMemoryMiB = input.logitsMemoryMiB ?? DEFAULT_LOGITS_MEMORY_BYTES / MiB;
  if (!(logitsMemoryMiB >= 0)) {
    throw new RangeError(`memory plan: logitsMemoryMiB must be ≥ 0, got ${logitsMemoryMiB}`);
  }
  return {
    ...input,
    microBatch,
    lora: input.lora ?? null,
    dtype: input.dtype ?? 'float32',
    gradientCheckpointing: input.gradientCheckpointing ?? false,
    logitsMemoryMiB,
    kernels: input.kernels ?? DEFAULT_TUNING,
    objective: input.objective ?? 'grpo',
  };
}

const peakOf = (input: ResolvedPlanInput, maxBindingBytes = Infinity) =>
  totals(planBuffers(input, maxBindingBytes)).peak;

/** Peak bytes of a plan input (no limits needed). */
export function planPeakBytes(input: MemoryPlanInput, maxBindingBytes = Infinity): number {
  return peakOf(resolve(input), maxBindingBytes);
}

/**
 * The largest micro-batch (a divisor of N = B·G, as gradient accumulation needs) whose peak fits
 * `budget` bytes, or null when not even one sequence at a time fits.
 */
export function chooseMicroBatch(
  input: MemoryPlanInput,
  budget: number,
  maxBindingBytes = Infinity,
): number | null {
  const N = input.numPrompts * input.groupSize;
  const base = resolve({ ...input, microBatch: 1 });
  for (let m = N; m >= 1; m--) {
    if (N % m === 0 && peakOf({ ...base, microBatch: m }, maxBindingBytes) <= budget) return m;
  }
  return null;
}

/** Largest value in [lo, hi] for which `fits(v)` holds, assuming monotonic; null if none. */
function largestFitting(lo: number, hi: number, fits: (v: number) => boolean): number | null {
  if (hi < lo || !fits(lo)) return null;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Parameters GpuLlama splits into row chunks when they exceed a binding (src/model/llama.ts). */
const SPLIT_BY_MODEL = new Set(['model.embed_tokens.weight', 'lm_head.weight']);

/** What to change when `input` does not fit `budget`, most effective first. */
function adviseChanges(
  input: ResolvedPlanInput,
  t: Totals,
  budget: number,
  maxBindingBytes: number,
): string[] {
  const suggestions: string[] = [];
  const fitsWith = (change: Partial<ResolvedPlanInput>) =>
    peakOf({ ...input, ...change }, maxBindingBytes) <= budget;
  const N = input.numPrompts * input.groupSize;
  const weightsOnly = t.byCategory.parameters + t.byCategory.gradients + t.byCategory.optimizer;
  if (weightsOnly > budget) {
    suggestions.push(
      input.lora
        ? `pick a smaller model: its weights and adapters alone need ${formatBytes(weightsOnly)}`
        : `pick a smaller model or train LoRA adapters (usePeft): the parameters, gradients and ` +
            `AdamW moments of a full fine-tune alone need ${formatBytes(weightsOnly)} (16 bytes per parameter)`,
    );
  }
  if (!input.lora) {
    const lora: PlanLora = { r: 16, targetModules: 'all-linear' };
    if (fitsWith({ lora })) {
      suggestions.push(
        'train LoRA adapters (usePeft, loraR 16, all-linear): the base model is frozen, with no ' +
          'gradients, moments or reference copy',
      );
    } else if (fitsWith({ lora, dtype: 'bfloat16' })) {
      suggestions.push(
        'train LoRA adapters (usePeft, loraR 16) on a bfloat16 base (dtype bfloat16)',
      );
    } else if (fitsWith({ lora, dtype: 'bfloat16', gradientCheckpointing: true })) {
      suggestions.push(
        'train LoRA adapters (usePeft, loraR 16) on a bfloat16 base with gradient checkpointing',
      );
    } else if (fitsWith({ lora, dtype: 'nf4' })) {
      suggestions.push(
        'train LoRA adapters (usePeft, loraR 16) on a 4-bit NF4 base (dtype nf4, QLoRA)',
      );
    } else if (fitsWith({ lora, dtype: 'nf4', gradientCheckpointing: true })) {
      suggestions.push(
        'train LoRA adapters (usePeft, loraR 16) on a 4-bit NF4 base (dtype nf4, QLoRA) with ' +
          'gradient checkpointing',
      );
    }
  } else if (input.dtype === 'float32' && fitsWith({ dtype: 'bfloat16' })) {
    suggestions.push(
      `store the frozen base as bfloat16 (dtype bfloat16): halves its ${formatBytes(t.byCategory.parameters)}`,
    );
  } else if (input.dtype !== 'nf4' && fitsWith({ dtype: 'nf4' })) {
    // Lossy, so only when 16-bit is not enough: about 0.5 byte a projection weight (4-bit codes
    // and an f32 scale per 64) instead of 2 or 4.
    const nf4 = peakOf({ ...input, dtype: 'nf4' }, maxBindingBytes);
    suggestions.push(
      `store the frozen base's projections as 4-bit NF4 (dtype nf4, QLoRA): peak ` +
        `${formatBytes(nf4)} instead of ${formatBytes(t.peak)}`,
    );
  }
  if (!input.gradientCheckpointing && fitsWith({ gradientCheckpointing: true })) {
    suggestions.push(
      "turn on gradient checkpointing: keeps each layer's input only and recomputes the layer in backward",
    );
  } else if (
    input.lora &&
    input.dtype !== 'nf4' &&
    !input.gradientCheckpointing &&
    !fitsWith({ dtype: 'nf4' }) &&
    fitsWith({ dtype: 'nf4', gradientCheckpointing: true })
  ) {
    suggestions.push(
      'store the frozen base as 4-bit NF4 (dtype nf4, QLoRA) and turn on gradient checkpointing',
    );
  }
  if (input.beta > 0 && !input.lora && fitsWith({ beta: 0 })) {
    suggestions.push(
      `set β = 0 (no KL term): saves the reference copy (${formatBytes(t.byCategory.reference)})`,
    );
  }
  const sft = input.objective === 'sft';
  // SFT packs its micro-batches into one batch (src/train/sft.ts): no micro-batch to lower.
  if (input.microBatch > 1 && !sft) {
    let m: number | null = null;
    for (let v = input.microBatch - 1; v >= 1 && m === null; v--) {
      if (N % v === 0 && fitsWith({ microBatch: v })) m = v;
    }
    if (m !== null) {
      suggestions.push(
        `train in micro-batches of ${m} sequences instead of ${input.microBatch} ` +
          `(gradientAccumulationSteps ${N / m}; same result, more passes)`,
      );
    }
  }
  if (input.logitsMemoryMiB > 16) {
    const mib = [128, 64, 32, 16].find(
      (v) => v < input.logitsMemoryMiB && fitsWith({ logitsMemoryMiB: v }),
    );
    if (mib) suggestions.push(`bound the logits to ${mib} MiB at a time (logitsMemoryMiB ${mib})`);
  }
  if (input.groupSize > 2) {
    const g = largestFitting(2, input.groupSize - 1, (v) =>
      fitsWith({ groupSize: v, microBatch: Math.min(input.microBatch, input.numPrompts * v) }),
    );
    if (g !== null) suggestions.push(`use a smaller group: G = ${g} instead of ${input.groupSize}`);
  }
  if (input.numPrompts > 1) {
    const b = largestFitting(1, input.numPrompts - 1, (v) =>
      fitsWith({ numPrompts: v, microBatch: Math.min(input.microBatch, v * input.groupSize) }),
    );
    if (b !== null) {
      suggestions.push(
        sft
          ? `train on fewer examples per step (per_device_train_batch_size × ` +
              `gradient_accumulation_steps): ${b} instead of ${input.numPrompts}`
          : `use fewer prompts per step: B = ${b} instead of ${input.numPrompts}`,
      );
    }
  }
  if (sft) {
    const longest = input.promptLength + input.completionLength;
    const cut = largestFitting(2, longest - 1, (v) =>
      fitsWith({
        promptLength: Math.min(input.promptLength, v - 1),
        completionLength: Math.max(1, v - Math.min(input.promptLength, v - 1)),
      }),
    );
    if (cut !== null)
      suggestions.push(`cut sequences to ${cut} tokens (max_length) instead of ${longest}`);
  } else if (input.completionLength > 1) {
    const c = largestFitting(1, input.completionLength - 1, (v) =>
      fitsWith({ completionLength: v }),
    );
    if (c !== null) {
      suggestions.push(
        `use shorter completions: at most ${c} tokens instead of ${input.completionLength}`,
      );
    }
  }
  if (suggestions.length === 0) {
    suggestions.push(
      'no single change fits: combine LoRA, a bfloat16 or NF4 base, checkpointing, a smaller ' +
        'group and shorter completions, or pick a smaller model',
    );
  }
  return suggestions;
}

/** The memory plan for a run on a device: totals, fit, buffers to split, and what to change. */
export function planMemory(planInput: MemoryPlanInput, limits: DeviceMemoryLimits): MemoryPlan {
  const input = resolve(planInput);
  const maxBinding = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const buffers = planBuffers(input, maxBinding);
  const t = totals(buffers);
  const fits = t.peak <= limits.totalBudget;

  // A parameter's gradient, moments and reference copy have its shape: report the name once.
  const oversized: OversizedBuffer[] = [];
  const seen = new Set<string>();
  for (const b of buffers) {
    const key = b.name.replace(/ \((gradient|AdamW m, v|reference)\)$/, '');
    if (seen.has(key)) continue;
    const limit =
      b.bytes > limits.maxBufferSize
        ? ('maxBufferSize' as const)
        : b.bytes > limits.maxStorageBufferBindingSize
          ? ('maxStorageBufferBindingSize' as const)
          : null;
    if (!limit) continue;
    seen.add(key);
    const limitBytes = limits[limit];
    oversized.push({
      name: key,
      category: b.category,
      bytes: b.bytes,
      limit,
      limitBytes,
      parts: Math.ceil(b.bytes / limitBytes),
      splitByModel: SPLIT_BY_MODEL.has(key),
    });
  }

  const budget = limits.totalBudget;
  const suggestions = fits ? [] : adviseChanges(input, t, budget, maxBinding);
  const N = input.numPrompts * input.groupSize;
  const parts = [
    [
      input.lora ? `weights (base ${input.dtype}) and adapters` : 'parameters',
      t.byCategory.parameters,
    ],
    ['gradients', t.byCategory.gradients],
    ['AdamW moments', t.byCategory.optimizer],
    ['reference copy', t.byCategory.reference],
    ['KV cache + sampling', t.byCategory.sampling],
    [`training activations (micro-batch ${input.microBatch})`, t.byCategory.training],
    [
      input.objective === 'sft' ? 'per-token loss buffers' : 'per-token GRPO buffers',
      t.byCategory.grpo,
    ],
  ] as const;
  const breakdown = parts
    .filter(([, bytes]) => bytes > 0)
    .map(([label, bytes]) => `${label} ${formatBytes(bytes)}`)
    .join(', ');
  let message: string;
  if (fits) {
    message =
      `Fits: peak ${formatBytes(t.peak)} of ${formatBytes(budget)} ` +
      `(${formatBytes(budget - t.peak)} to spare; ${breakdown}).`;
  } else if (input.objective === 'sft') {
    message =
      `Does not fit: a step of ${input.numPrompts} examples of up to ` +
      `${input.promptLength} + ${input.completionLength} tokens needs ${formatBytes(t.peak)} at peak, ` +
      `the budget is ${formatBytes(budget)} (${breakdown}). ` +
      `To fit: ${suggestions.join('; or ')}.`;
  } else {
    message =
      `Does not fit: N = ${input.numPrompts}×${input.groupSize} = ${N} sequences of ` +
      `${input.promptLength} + ${input.completionLength} tokens need ${formatBytes(t.peak)} at peak, ` +
      `the budget is ${formatBytes(budget)} (${breakdown}). ` +
      `To fit: ${suggestions.join('; or ')}.`;
  }
  const describe = (list: OversizedBuffer[]) =>
    list
      .map(
        (o) =>
          `${o.name} ${formatBytes(o.bytes)} > ${o.limit} ${formatBytes(o.limitBytes)} (${o.parts} parts)`,
      )
      .join('; ');
  const byModel = oversized.filter((o) => o.splitByModel);
  const byUser = oversized.filter((o) => !o.splitByModel);
  if (byModel.length > 0) {
    message +=
      ` ${byModel.length} tensor${byModel.length === 1 ? '' : 's'} exceed a per-buffer limit and must be split ` +
      `(the model stores them as row chunks automatically): ${describe(byModel)}.`;
  }
  if (byUser.length > 0) {
    message +=
      ` ${byUser.length} buffer${byUser.length === 1 ? '' : 's'} exceed a per-buffer limit and must be split, ` +
      `which the engine does not do: ${
        input.objective === 'sft'
          ? 'train on fewer examples per step or lower max_length'
          : 'lower the micro-batch or the completion length'
      }: ${describe(byUser)}.`;
  }

  return {
    input,
    limits,
    buffers,
    byCategory: t.byCategory,
    persistentBytes: t.persistent,
    samplingBytes: t.sampling,
    trainingBytes: t.training,
    peakBytes: t.peak,
    fits,
    oversized,
    suggestions,
    message,
  };
}
