// The whole-model comparisons with other libraries (forward, sampling, training step), shared by
// the page and the Node driver: which models, which workloads, and the shape of the results.
//
// Two models, each served by the driver from memory under /bench-models/<id>/ (weights as
// safetensors for our engine, the same weights exported by src/export/onnx-export.ts as a plain ONNX
// graph for onnxruntime-web and as a transformers.js folder with past_key_values):
//  - tiny-reasoner: the bundled model (public/models/tiny-reasoner; 354K parameters, 205K in the
//    committed results of 2026-11-24 and before);
//  - llama-100m: a ~100M-parameter Llama config (C = 768, 12 layers, 12 heads over 4 kv-heads,
//    I = 2048, V = 32000, tied embeddings) with seeded random weights (src/model/init.ts).
// Workloads are small because WebGPU may be SwiftShader (CPU emulation) on the benchmark machine;
// the 100M model runs fewer times (its counts are in the table and the JSON). Every figure has at
// least one warm-up run, --quick included. Our engine runs twice, once per kernel path (paths.ts).
//
// Legend: N sequences, T tokens per sequence, B prompts, G completions per prompt.

import { OUR_ENGINE } from './paths';

/** A Hugging Face config.json for a model with random weights. */
export const LLAMA_100M_CONFIG = {
  architectures: ['LlamaForCausalLM'],
  hidden_size: 768,
  intermediate_size: 2048,
  num_hidden_layers: 12,
  num_attention_heads: 12,
  num_key_value_heads: 4,
  head_dim: 64,
  vocab_size: 32000,
  max_position_embeddings: 256,
  rope_theta: 10000,
  rms_norm_eps: 1e-5,
  tie_word_embeddings: true,
};

export interface Runs {
  /**
   * Untimed runs before the measured ones. forward: after the checked first run (which compiles
   * the kernels); sampling: after the greedy check run; training: including the two checked steps.
   */
  warmup: number;
  runs: number;
}

export interface ForwardWorkload extends Runs {
  N: number;
  T: number;
}

export interface SamplingWorkload extends Runs {
  B: number;
  G: number;
  promptTokens: number;
  newTokens: number;
  /** New tokens of the untimed greedy run that compares the engines' tokens. */
  greedyCheckTokens: number;
}

export interface TrainingWorkload extends Runs {
  N: number;
  T: number;
  learningRate: number;
}

export interface BenchModel {
  /** Folder name under /bench-models/ (and transformers.js's model id). */
  id: string;
  source: { kind: 'bundled'; dir: string } | { kind: 'random'; config: object; seed: number };
  forward: ForwardWorkload;
  sampling: SamplingWorkload;
  training: TrainingWorkload;
}

export const BENCH_MODELS: BenchModel[] = [
  {
    id: 'tiny-reasoner',
    source: { kind: 'bundled', dir: 'public/models/tiny-reasoner' },
    forward: { N: 16, T: 64, warmup: 1, runs: 5 },
    sampling: {
      B: 2,
      G: 8,
      promptTokens: 16,
      newTokens: 32,
      greedyCheckTokens: 16,
      warmup: 1,
      runs: 5,
    },
    training: { N: 16, T: 32, learningRate: 1e-3, warmup: 2, runs: 5 },
  },
  {
    id: 'llama-100m',
    source: { kind: 'random', config: LLAMA_100M_CONFIG, seed: 100 },
    forward: { N: 2, T: 32, warmup: 1, runs: 3 },
    sampling: {
      B: 1,
      G: 8,
      promptTokens: 8,
      newTokens: 8,
      greedyCheckTokens: 2,
      warmup: 1,
      runs: 3,
    },
    training: { N: 2, T: 16, learningRate: 1e-3, warmup: 2, runs: 3 },
  },
];

/**
 * Warm-up runs every figure gets before its measured runs: the first run compiles pipelines and
 * sizes buffers, and the check run differs from the timed ones (sampling checks greedy tokens with
 * fewer of them), so neither stands in for a warm-up. Training's warm-up counts its two checked
 * steps, which are the timed step itself.
 */
export const MIN_WARMUP = { forward: 1, sampling: 1, training: 2 } as const;

/** --quick: two measured runs of each (a smoke run, but a spread to show), warm-ups kept. */
export function quickModel(m: BenchModel): BenchModel {
  const q = <W extends Runs>(w: W, minWarmup: number): W => ({
    ...w,
    warmup: Math.max(minWarmup, Math.min(w.warmup, 1)),
    runs: 2,
  });
  return {
    ...m,
    forward: q(m.forward, MIN_WARMUP.forward),
    sampling: q(m.sampling, MIN_WARMUP.sampling),
    training: q(m.training, MIN_WARMUP.training),
  };
}

export const FORWARD_ENGINES = [
  OUR_ENGINE.gpu,
  OUR_ENGINE.emulation,
  'ort-webgpu',
  'ort-wasm',
] as const;
export const SAMPLING_ENGINES = [
  OUR_ENGINE.gpu,
  OUR_ENGINE.emulation,
  'transformers.js-webgpu',
  'transformers.js-wasm',
] as const;
export const TRAINING_ENGINES = [OUR_ENGINE.gpu, OUR_ENGINE.emulation, 'tfjs-webgpu'] as const;
export type ModelEngine =
  | (typeof FORWARD_ENGINES)[number]
  | (typeof SAMPLING_ENGINES)[number]
  | (typeof TRAINING_ENGINES)[number];

/** Largest max|ours − reference| / max|reference| on the logits before a forward is timed. */
export const LOGITS_REL_TOLERANCE = 1e-3;
/** Largest |ours − tfjs| / |tfjs| on the training loss before and after the first update. */
export const LOSS_REL_TOLERANCE = 1e-3;

/** One engine's timings on one model: wall seconds per measured run, warm-up excluded. */
export interface EngineRun {
  engine: ModelEngine;
  seconds: number[];
  /** Set when the engine failed or its check did not pass: then no figure is reported. */
  error?: string;
}

export interface ForwardRun extends EngineRun {
  /** max|logits − reference| / max|reference|, reference = ort-wasm (CPU) on the same batch. */
  relError: number;
}

export interface SamplingRun extends EngineRun {
  /** Sequences whose greedy tokens equal ours (untimed check run) on the first of our paths to run
   * (the GPU path when both run); that path compares to itself. */
  greedyMatches: number;
}

export interface TrainingRun extends EngineRun {
  /** Mean cross-entropy before the first update and after it (first two steps), checked against
   * the first of our paths to run (the GPU path when both run). */
  losses: number[];
}

export interface ModelBenchResult<R extends EngineRun, W> {
  model: string;
  label: string;
  parameters: number;
  workload: W;
  runs: R[];
  notes: string[];
}
