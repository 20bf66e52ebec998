// Memory plan: how many bytes a GRPO run needs on the GPU before any buffer is created, so the UI
// can say "does not fit: shorten completions to 192" instead of the device failing mid-step.
// Counts parameters, gradients, AdamW moments, the frozen reference copy (β > 0), the KV cache of
// group sampling and the activations of one training forward + backward, all f32, and checks each
// buffer against the device's per-buffer limits (tensors too big for one storage binding must be
// split; the plan says which).
//
// Legend: N sequences per step (B prompts × G group), M sequences per training micro-batch,
// Tp prompt length, Tc completion length, T = Tp + Tc, C hidden, I intermediate, V vocab,
// L layers, H heads, Hkv kv-heads, D head dim, P parameter count.
//
// The activation model is deliberately conservative (a "fits" here should fit in practice): every
// per-layer tensor the backward pass needs is kept, attention probabilities are materialised
// (M, H, T, T), logits exist for completion positions only (as TRL's logits_to_keep) and their
// gradient is a separate buffer. Sampling and training never run at the same time, so their
// transient buffers share memory: peak = persistent + max(sampling, training).

import { formatBytes } from '../core/format';
import { numel, parameterSpecs, type LlamaConfig } from '../core/model-config';

const F32 = 4;

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

export interface MemoryPlanInput {
  config: LlamaConfig;
  /** B prompts per step. */
  numPrompts: number;
  /** G completions per prompt. */
  groupSize: number;
  /** Tp: longest prompt in tokens. */
  promptLength: number;
  /** Tc: maximum completion length in tokens. */
  completionLength: number;
  /** KL coefficient; β > 0 keeps a frozen reference copy of the weights. */
  beta: number;
  /** Sequences per training forward/backward (gradient accumulation); default N (no split). */
  microBatch?: number;
}

export type MemoryCategory =
  'parameters' | 'gradients' | 'optimizer' | 'reference' | 'grpo' | 'sampling' | 'training';

export interface PlannedBuffer {
  name: string;
  category: MemoryCategory;
  /** Shape of one buffer, f32. */
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
  input: Required<MemoryPlanInput>;
  limits: DeviceMemoryLimits;
  buffers: PlannedBuffer[];
  /** Bytes per category (count × bytes summed). */
  byCategory: Record<MemoryCategory, number>;
  /** Parameters, gradients, optimizer, reference and GRPO per-token buffers: alive all run. */
  persistentBytes: number;
  samplingBytes: number;
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

/** Every buffer the run needs, without judging fit. */
export function planBuffers(input: Required<MemoryPlanInput>): PlannedBuffer[] {
  const { config, promptLength: Tp, completionLength: Tc, microBatch: M } = input;
  const N = input.numPrompts * input.groupSize;
  const T = Tp + Tc;
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
  const add = (name: string, category: MemoryCategory, shape: number[], count = 1) =>
    out.push({ name, category, shape, bytes: numel(shape) * F32, count });

  for (const spec of parameterSpecs(config)) {
    add(spec.name, 'parameters', spec.shape);
    add(spec.name, 'gradients', spec.shape);
    add(`${spec.name} (AdamW m, v)`, 'optimizer', spec.shape, 2);
    if (input.beta > 0) add(`${spec.name} (reference)`, 'reference', spec.shape);
  }
  // Per-token GRPO buffers (N, Tc): tokens, mask, logp, old logp, ref logp, advantages-per-token,
  // loss terms and dlogp: eight words per completion token.
  add('grpo per-token buffers', 'grpo', [N, Tc], 8);

  // Sampling: the KV cache for all N sequences, the prefill's transient activations (N·Tp tokens
  // through one layer at a time), attention scores of the prefill, last-position logits.
  add('kv cache (k and v, per layer)', 'sampling', [N, T, Hkv * D], 2 * L);
  add('prefill hidden states (x, norm, attn out, residual)', 'sampling', [N, Tp, C], 4);
  add('prefill q', 'sampling', [N, Tp, H * D]);
  add('prefill mlp (gate, up)', 'sampling', [N, Tp, I], 2);
  add('prefill attention scores', 'sampling', [N, H, Tp, Tp]);
  add('sampling logits', 'sampling', [N, V], 2);

  // Training: one micro-batch of M sequences of length T, everything backward needs per layer.
  add('layer inputs, norms, residuals', 'training', [M, T, C], 4 * L);
  add('rmsnorm inverse rms', 'training', [M, T], 2 * L);
  add('q (rotated) and attention output', 'training', [M, T, H * D], 2 * L);
  add('k, v (rotated)', 'training', [M, T, Hkv * D], 2 * L);
  add('attention probabilities', 'training', [M, H, T, T], L);
  add('mlp gate, up, silu(gate)·up', 'training', [M, T, I], 3 * L);
  add('final norm output and inverse rms', 'training', [M, T, C + 1]);
  add('logits (completion positions)', 'training', [M, Tc, V]);
  add('logits gradient', 'training', [M, Tc, V]);
  // Backward workspace for one layer at a time.
  add('backward: residual and norm gradients', 'training', [M, T, C], 2);
  add('backward: q, k, v gradients', 'training', [M, T, (H + 2 * Hkv) * D]);
  add('backward: attention score gradient', 'training', [M, H, T, T]);
  add('backward: mlp gradients', 'training', [M, T, I], 2);
  return out;
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
  for (const b of buffers) byCategory[b.category] += b.bytes * b.count;
  const persistent =
    byCategory.parameters +
    byCategory.gradients +
    byCategory.optimizer +
    byCategory.reference +
    byCategory.grpo;
  return {
    byCategory,
    persistent,
    sampling: byCategory.sampling,
    training: byCategory.training,
    peak: persistent + Math.max(byCategory.sampling, byCategory.training),
  };
}

function resolve(input: MemoryPlanInput): Required<MemoryPlanInput> {
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
  return { ...input, microBatch };
}

const peakOf = (input: Required<MemoryPlanInput>) => totals(planBuffers(input)).peak;

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

/** The memory plan for a run on a device: totals, fit, buffers to split, and what to change. */
export function planMemory(planInput: MemoryPlanInput, limits: DeviceMemoryLimits): MemoryPlan {
  const input = resolve(planInput);
  const buffers = planBuffers(input);
  const t = totals(buffers);
  const fits = t.peak <= limits.totalBudget;

  // A parameter's gradient, moments and reference copy have its shape: report the name once.
  const oversized: OversizedBuffer[] = [];
  const seen = new Set<string>();
  for (const b of buffers) {
    const key = b.name.replace(/ \((AdamW m, v|reference)\)$/, '');
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

  const suggestions: string[] = [];
  const N = input.numPrompts * input.groupSize;
  const budget = limits.totalBudget;
  if (!fits) {
    const weightsOnly = t.byCategory.parameters + t.byCategory.gradients + t.byCategory.optimizer;
    if (weightsOnly > budget) {
      suggestions.push(
        `pick a smaller model: its parameters, gradients and AdamW moments alone need ` +
          `${formatBytes(weightsOnly)} (16 bytes per parameter)`,
      );
    }
    if (input.beta > 0 && peakOf({ ...input, beta: 0 }) <= budget) {
      suggestions.push(
        `set β = 0 (no KL term): saves the reference copy of the weights (${formatBytes(t.byCategory.reference)})`,
      );
    }
    if (input.microBatch > 1) {
      const m = largestFitting(
        1,
        input.microBatch - 1,
        (v) => peakOf({ ...input, microBatch: v }) <= budget,
      );
      if (m !== null) {
        suggestions.push(
          `train in micro-batches of ${m} sequences instead of ${input.microBatch} (gradient accumulation; same result, more passes)`,
        );
      }
    }
    if (input.groupSize > 2) {
      const g = largestFitting(
        2,
        input.groupSize - 1,
        (v) =>
          peakOf({
            ...input,
            groupSize: v,
            microBatch: Math.min(input.microBatch, input.numPrompts * v),
          }) <= budget,
      );
      if (g !== null)
        suggestions.push(`use a smaller group: G = ${g} instead of ${input.groupSize}`);
    }
    if (input.numPrompts > 1) {
      const b = largestFitting(
        1,
        input.numPrompts - 1,
        (v) =>
          peakOf({
            ...input,
            numPrompts: v,
            microBatch: Math.min(input.microBatch, v * input.groupSize),
          }) <= budget,
      );
      if (b !== null)
        suggestions.push(`use fewer prompts per step: B = ${b} instead of ${input.numPrompts}`);
    }
    if (input.completionLength > 1) {
      const c = largestFitting(
        1,
        input.completionLength - 1,
        (v) => peakOf({ ...input, completionLength: v }) <= budget,
      );
      if (c !== null) {
        suggestions.push(
          `use shorter completions: at most ${c} tokens instead of ${input.completionLength}`,
        );
      }
    }
    if (suggestions.length === 0) {
      suggestions.push(
        'no single change fits: combine a smaller group, shorter completions and micro-batches, or pick a smaller model',
      );
    }
  }

  const parts = [
    ['parameters', t.byCategory.parameters],
    ['gradients', t.byCategory.gradients],
    ['AdamW moments', t.byCategory.optimizer],
    ['reference copy', t.byCategory.reference],
    ['KV cache + sampling', t.sampling],
    [`training activations (micro-batch ${input.microBatch})`, t.training],
  ] as const;
  const breakdown = parts
    .filter(([, bytes]) => bytes > 0)
    .map(([label, bytes]) => `${label} ${formatBytes(bytes)}`)
    .join(', ');
  const activationPhase =
    t.training >= t.sampling ? 'training activations' : 'the KV cache and sampling';
  let message: string;
  if (fits) {
    message =
      `Fits: peak ${formatBytes(t.peak)} of ${formatBytes(budget)} ` +
      `(${formatBytes(budget - t.peak)} to spare; ${breakdown}).`;
  } else {
    message =
      `Does not fit: N = ${input.numPrompts}×${input.groupSize} = ${N} sequences of ` +
      `${input.promptLength} + ${input.completionLength} tokens need ${formatBytes(t.peak)} at peak, ` +
      `the budget is ${formatBytes(budget)} (${breakdown}; the peak is set by ${activationPhase}). ` +
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
      `which the engine does not do: lower the micro-batch or the completion length: ${describe(byUser)}.`;
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
