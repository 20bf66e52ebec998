// What crosses the page ⇄ CPU-worker boundary (workers/cpu.worker.ts serves cpu-api.ts): the
// limits of one request, the request, the sampled groups and the load progress event. Plain
// structured-clonable data only, apart from cpu-api.ts so that the page reads the limits without
// loading the worker's model code (its CPU sampler imports helpers from the GPU sampler's module).
import type { ConfigInput } from '../grpo/config';
import type { LlamaConfig } from '../core/model-config';

/** The rewards the fallback scores with: the built-in rule rewards, equal weights. */
export const CPU_REWARDS = ['format', 'accuracy'] as const;
/** Upper bounds that keep one request a few seconds on a slow CPU. */
export const CPU_MAX_PROMPTS = 8;
export const CPU_MAX_SAMPLES = 4;
export const CPU_MAX_NEW_TOKENS = 128;

export interface CpuModelInfo {
  label: string;
  config: LlamaConfig;
  parameterCount: number;
  vocabSize: number;
}

export type CpuEvent = {
  type: 'load-progress';
  phase: string;
  file: string;
  loaded: number;
  total: number | null;
};

export interface CpuSampleRequest {
  /** The page's draft config: task, task options, template, sampling and seed are used. */
  config: Partial<ConfigInput>;
  /** The JSONL dataset when the task is 'jsonl'. */
  jsonlText?: string;
  /** Problems to draw from the task (1 … CPU_MAX_PROMPTS). */
  prompts: number;
  /** Completions per problem (1 … CPU_MAX_SAMPLES). */
  samples: number;
  /** Overrides config.temperature; 0 = greedy. */
  temperature?: number;
  /** Overrides config.maxCompletionLength (≤ CPU_MAX_NEW_TOKENS). */
  maxNewTokens?: number;
  /** Which draw of problems (0, 1, 2 …): the same draw and config give the same prompts and text. */
  draw?: number;
}

export interface CpuCompletion {
  text: string;
  tokens: number;
  /** Ended with EOS (false: cut at the token limit). */
  finished: boolean;
  /** Sum of the built-in rewards (format + accuracy, not-applicable counted 0). */
  total: number;
  /** format and accuracy: 1 / 0, null when not applicable (a problem without a reference). */
  rewards: Record<string, number | null>;
  reflects: boolean;
}

export interface CpuGroup {
  problem: { id: string; question: string; reference: string | null };
  /** The prompt exactly as the model saw it (templated). */
  prompt: string;
  completions: CpuCompletion[];
}

export interface CpuSampleResult {
  groups: CpuGroup[];
  /** Means over every completion (NaN when no completion had the reward). */
  means: Record<string, number>;
  elapsedMs: number;
  tokens: number;
}
