// LoRA adapters with PEFT semantics (peft/tuners/lora/layer.py): on a chosen projection
// y = x·Wᵀ (+ b) becomes y = x·Wᵀ (+ b) + s·(x·Aᵀ)·Bᵀ, A (r, in), B (out, r), s = α / r (or α / √r
// with rslora). A starts as torch's kaiming_uniform_(a = √5), i.e. U(−1/√in, 1/√in); B starts at 0,
// so a fresh adapter leaves the model's outputs unchanged. Only A and B train; the base is frozen.
//
// This file is the adapters' layout, shared by every layer (the GPU model, checkpoints, exports,
// the memory plan and the CPU reference): the option checks, the adapter names and shapes, and the
// seeded initialisation. The f64 reference of one adapted projection is src/ref/lora.ts.
//
// Names follow PEFT's saved adapter keys without the `base_model.model.` prefix:
// `model.layers.{l}.self_attn.q_proj.lora_A.weight` (r, in), `….lora_B.weight` (out, r).

import { mulberry32, seed32 } from './rng';
import type { LlamaConfig, ParameterSpec } from './model-config';

/** The decoder's linear layers in PEFT's `all-linear` order (lm_head excluded, as PEFT does). */
export const LORA_PROJECTIONS = [
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
] as const;
export type LoraProjection = (typeof LORA_PROJECTIONS)[number];

/** PEFT LoraConfig's knobs that this project supports (TRL ModelConfig names in comments). */
export interface LoraOptions {
  r: number; // lora_r
  alpha: number; // lora_alpha
  /** lora_target_modules: 'all-linear' (or a list holding it) or projection names. */
  targetModules: 'all-linear' | readonly string[];
  useRslora: boolean; // use_rslora
  /** lora_dropout: only 0 is supported (a non-zero value is rejected, see checkLoraOptions). */
  dropout: number;
}

/** The largest lora_alpha an adapter may carry: 4 × the largest rank (1024). PEFT sets no bound,
 * but α / r scales every adapter's output, and an adapter_config.json with lora_alpha 1e308 (α / r
 * = 2.5e307) loaded and made every forward Infinity (issue 33). */
export const LORA_ALPHA_MAX = 4096;

/** Throws on options PEFT would reject or this project does not implement; returns the targets. */
export function checkLoraOptions(options: LoraOptions): LoraProjection[] {
  const { r, alpha, dropout } = options;
  if (!Number.isInteger(r) || r < 1)
    throw new RangeError(`lora_r must be an integer ≥ 1, got ${r}`);
  if (!Number.isFinite(alpha)) throw new RangeError(`lora_alpha must be finite, got ${alpha}`);
  if (dropout !== 0) {
    // Dropout on the adapter input would need a seeded mask per step kept for backward; until it
    // exists, a run asking for it fails instead of silently training without it.
    throw new RangeError(`lora_dropout ${dropout} is not supported: only 0 (no dropout)`);
  }
  return loraTargets(options.targetModules);
}

/** The projections an adapter goes on, in LORA_PROJECTIONS order. */
export function loraTargets(targetModules: LoraOptions['targetModules']): LoraProjection[] {
  const list = typeof targetModules === 'string' ? [targetModules] : [...targetModules];
  if (list.includes('all-linear')) return [...LORA_PROJECTIONS];
  if (list.length === 0) throw new RangeError('lora_target_modules is empty');
  for (const name of list) {
    if (!(LORA_PROJECTIONS as readonly string[]).includes(name)) {
      throw new RangeError(
        `lora_target_modules: unknown module '${name}' (one of ${LORA_PROJECTIONS.join(', ')} or 'all-linear')`,
      );
    }
  }
  return LORA_PROJECTIONS.filter((p) => list.includes(p));
}

/** s = α / r, or α / √r with rslora (PEFT's `scaling`). */
export function loraScaling(options: Pick<LoraOptions, 'r' | 'alpha' | 'useRslora'>): number {
  return options.useRslora ? options.alpha / Math.sqrt(options.r) : options.alpha / options.r;
}

/** The HF module path of a projection in layer l: model.layers.{l}.self_attn.q_proj … */
export function projectionPath(l: number, projection: LoraProjection): string {
  const block = LORA_PROJECTIONS.indexOf(projection) < 4 ? 'self_attn' : 'mlp';
  return `model.layers.${l}.${block}.${projection}`;
}

/** (in, out) features of a projection. */
export function projectionDims(config: LlamaConfig, projection: LoraProjection): [number, number] {
  const { hiddenSize: C, intermediateSize: I, numHeads: H, numKvHeads: Hkv, headDim: D } = config;
  switch (projection) {
    case 'q_proj':
      return [C, H * D];
    case 'k_proj':
    case 'v_proj':
      return [C, Hkv * D];
    case 'o_proj':
      return [H * D, C];
    case 'gate_proj':
    case 'up_proj':
      return [C, I];
    case 'down_proj':
      return [I, C];
  }
}

export const loraAName = (path: string) => `${path}.lora_A.weight`;
export const loraBName = (path: string) => `${path}.lora_B.weight`;

/** Every adapter tensor: per layer, per target projection, A (r, in) then B (out, r). */
export function loraAdapterSpecs(config: LlamaConfig, options: LoraOptions): ParameterSpec[] {
  const targets = checkLoraOptions(options);
  const specs: ParameterSpec[] = [];
  for (let l = 0; l < config.numLayers; l++) {
    for (const projection of targets) {
      const path = projectionPath(l, projection);
      const [inDim, outDim] = projectionDims(config, projection);
      specs.push({ name: loraAName(path), shape: [options.r, inDim] });
      specs.push({ name: loraBName(path), shape: [outDim, options.r] });
    }
  }
  return specs;
}

/**
 * Fresh adapters as PEFT initialises them: A ~ U(−1/√in, 1/√in) (kaiming_uniform_ with a = √5:
 * gain √(2/(1+5)), bound gain·√3/√fan_in = 1/√in), B = 0. Seeded (mulberry32), in spec order.
 */
export function initLoraAdapters(
  config: LlamaConfig,
  options: LoraOptions,
  seed: number,
): Map<string, Float32Array> {
  const next = mulberry32(seed32(seed));
  const out = new Map<string, Float32Array>();
  for (const spec of loraAdapterSpecs(config, options)) {
    const data = new Float32Array(spec.shape[0] * spec.shape[1]);
    if (spec.name.endsWith('.lora_A.weight')) {
      const bound = 1 / Math.sqrt(spec.shape[1]);
      for (let i = 0; i < data.length; i++) data[i] = (2 * next() - 1) * bound;
    }
    out.set(spec.name, data);
  }
  return out;
}

/**
 * The base weights with every adapter merged in: W + s·B·A for each adapted projection (a new
 * array), every other tensor passed through as given. Sums in f64, one rounding to f32 per weight.
 * What a LoRA run has trained, as one model: the exported folder (src/export/peft-adapter.ts
 * mergeLoraWeights checks a file's tensors first) and a recipe stage's end weights
 * (src/recipes/merged-weights.ts merges the same way one tensor at a time).
 */
export function mergeLoraAdapters(
  config: LlamaConfig,
  base: ReadonlyMap<string, Float32Array>,
  options: LoraOptions,
  adapters: ReadonlyMap<string, Float32Array>,
): Map<string, Float32Array> {
  const out = new Map(base);
  for (const [name, target] of loraMergeTargets(config, options)) {
    out.set(name, mergeLoraProjection(name, base.get(name), target, options, adapters));
  }
  return out;
}

/** An adapted projection: its adapters' path and its (in, out) dimensions. */
export interface LoraMergeTarget {
  path: string;
  inDim: number;
  outDim: number;
}

/** The projections `options` adapts, by weight name (`<path>.weight`). */
export function loraMergeTargets(
  config: LlamaConfig,
  options: LoraOptions,
): Map<string, LoraMergeTarget> {
  const out = new Map<string, LoraMergeTarget>();
  for (let l = 0; l < config.numLayers; l++) {
    for (const projection of loraTargets(options.targetModules)) {
      const path = projectionPath(l, projection);
      const [inDim, outDim] = projectionDims(config, projection);
      out.set(`${path}.weight`, { path, inDim, outDim });
    }
  }
  return out;
}

/** One projection W (out, in) with its adapters merged in: W + s·B·A, a new array (sums in f64,
 * one rounding to f32 per weight). */
export function mergeLoraProjection(
  name: string,
  W: Float32Array | undefined,
  { path, inDim, outDim }: LoraMergeTarget,
  options: LoraOptions,
  adapters: ReadonlyMap<string, Float32Array>,
): Float32Array {
  const { r } = options;
  const s = loraScaling(options);
  const A = adapters.get(loraAName(path)); // (r, in)
  const B = adapters.get(loraBName(path)); // (out, r)
  if (W?.length !== inDim * outDim || A?.length !== r * inDim || B?.length !== outDim * r)
    throw new Error(`mergeLoraAdapters: ${name} or its adapters missing or of the wrong size`);
  const merged = new Float32Array(W.length);
  const row = new Float64Array(inDim);
  for (let o = 0; o < outDim; o++) {
    row.fill(0);
    for (let k = 0; k < r; k++) {
      const b = B[o * r + k];
      if (b === 0) continue;
      for (let i = 0; i < inDim; i++) row[i] += b * A[k * inDim + i];
    }
    for (let i = 0; i < inDim; i++) merged[o * inDim + i] = W[o * inDim + i] + s * row[i];
  }
  return merged;
}
