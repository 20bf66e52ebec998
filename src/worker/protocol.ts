// What crosses the page ⇄ trainer-worker boundary: model choices, summaries, the step report with
// per-token strings, checkpoint rows, and the typed progress event union the worker streams to the
// page through one Comlink.proxy callback. Plain structured-clonable data only.
import type { CompletionRecord, GroupRecord, StepReport } from '../grpo/trainer';
import type { Config, ConfigInput, ConfigKey, LiveChange } from '../grpo/config';
import type { EvalReport } from '../train/evaluate';
import type { PhaseProgress } from '../grpo/step-progress';
import type { BestEval, EvalRecord } from '../train/eval-during-training';
import type { LlamaConfig } from '../core/model-config';
import type { MemoryCategory } from '../model/memory-plan';
import type { DeletionCandidate } from '../storage/errors';
import type { MetricsRow } from './types';
import type { BundledName } from '../core/bundled-models';

/** Where the model comes from. Files cross to the worker as File objects (structured clone);
 * dropped files carry their paths inside the drop (`paths[i]` for `files[i]`, lib/drop.ts). A
 * bundled model without a name is the default one (core/bundled-models.ts). */
export type ModelChoice =
  | { kind: 'bundled'; name?: BundledName }
  | { kind: 'url'; url: string }
  | { kind: 'files'; files: File[]; paths?: string[]; label?: string };

/** The memory plan the UI shows before loading (src/model/memory-plan.ts, trimmed). */
export interface PlanSummary {
  fits: boolean;
  peakBytes: number;
  budgetBytes: number;
  byCategory: Record<MemoryCategory, number>;
  message: string;
  suggestions: string[];
}

/** What the model panel shows once config.json has been read (weights not read yet). */
export interface ModelPreview {
  label: string;
  config: LlamaConfig;
  parameterCount: number;
  /** config.json declares a bitsandbytes 4-bit checkpoint: its projections stay NF4 (LoRA on a
   * 4-bit base) whatever dtype says, and the plan counts them so. */
  prequantised?: boolean;
  plan: PlanSummary;
}

export interface ModelInfo {
  label: string;
  config: LlamaConfig;
  parameterCount: number;
  /** dtypes the weights were stored in (they are trained in f32). */
  storedDtypes: string[];
  vocabSize: number;
  hasChatTemplate: boolean;
  /** SHA-256 of the loaded weights: the identity a checkpoint's reference must match. */
  sha256: string;
  /** Which matmul variants run and how they were chosen (src/kernels/matmul-sweep.ts). */
  matmul?: string;
}

/** A completion with its token strings, for per-token colouring in the inspector. */
export interface UiCompletion extends CompletionRecord {
  pieces: string[];
}
export interface UiGroup extends GroupRecord {
  completions: UiCompletion[];
}
export interface UiStepReport extends StepReport {
  groups: UiGroup[];
  /** Wall-clock milliseconds of trainer.trainStep() alone, timed by grpo's Run around the call
   * (sampling, rewards, update, metrics). The automatic checkpoint and the evaluation that may
   * follow the step are not counted, so the page's ETA built from these leaves them out. */
  elapsedMs: number;
}

export interface CheckpointInfo {
  id: string;
  runId: string;
  runName: string;
  step: number;
  createdAt: number;
  bytes: number;
  reward: number | null;
}

export interface StorageInfo {
  usage: number | null;
  quota: number | null;
  checkpointCount: number;
  checkpointBytes: number;
}

/** The name of the error a manual save throws after its 'checkpoint-failed' event. */
export const CHECKPOINT_FAILURE_REPORTED = 'CheckpointFailureReported';

export type TrainerStatus = 'no-model' | 'loading' | 'ready' | 'running' | 'paused' | 'lost';

// A step's phases come from grpo's Run (its onProgress hook); the page receives them as they are.
export type { PhaseProgress, StepPhase } from '../grpo/step-progress';

/** The trainer worker's progress stream (one Comlink.proxy callback receives every event). */
export type TrainerEvent =
  | { type: 'load-progress'; phase: string; file: string; loaded: number; total: number | null }
  | { type: 'status'; status: TrainerStatus; step: number; steps: number }
  | { type: 'step'; report: UiStepReport }
  /** Sub-progress of the step under way; null between steps. */
  | { type: 'phase'; progress: PhaseProgress | null }
  | { type: 'checkpoint-saved'; checkpoint: CheckpointInfo; automatic: boolean }
  | {
      type: 'checkpoint-failed';
      step: number;
      message: string;
      quota: boolean;
      candidates: DeletionCandidate[];
      /** An automatic save during training (true) or the user's Save (false). */
      automatic: boolean;
    }
  /** An evaluation during training (evalSteps) and the best one so far. */
  | { type: 'eval'; record: EvalRecord; best: BestEval }
  /** loadBestModelAtEnd: the policy now holds the weights of evaluation `best`, not of `lastStep`. */
  | { type: 'best-loaded'; best: BestEval; lastStep: number }
  /** The run's metrics rows of these steps are stored (the worker is run history's only writer). */
  | { type: 'history-saved'; runId: string; steps: number[] }
  /** A write of the run's metrics failed; its rows wait in the worker for the next step's write. */
  | { type: 'history-failed'; runId: string; quota: boolean; title: string; message: string }
  | { type: 'error'; message: string; diverged: boolean }
  | {
      type: 'device-lost';
      /** The loss reason ('destroyed', 'unknown') or the uncaptured GPU error's kind that ended
       * the device ('out-of-memory', 'validation', 'internal'; engine/device.ts). */
      reason: string;
      message: string;
      lastCheckpoint: CheckpointInfo | null;
    };

/** The run state after configure / reset / restore / applyOptions. */
export interface RunState {
  runId: string;
  runName: string;
  /** The config in force (live changes included). */
  config: Config;
  step: number;
  history: MetricsRow[];
  plan: PlanSummary;
  /** The options this run takes from its next step without a Reset (Run.liveOptions). */
  liveOptions?: ConfigKey[];
  /** The options changed in the middle of this run so far, oldest first (Run.liveChanges). */
  liveChanges?: LiveChange[];
}

export interface ChatOptions {
  maxNewTokens: number;
  temperature: number;
  /** Wrap the message in the run's prompt template (R1-Zero text or chat template). */
  useTemplate: boolean;
}

export interface ChatReply {
  prompt: string;
  text: string;
  tokens: number;
  truncated: boolean;
  /** The task's verdict on the reply when the message is one of the task's problems
   * (tasks/chat-problem.ts): the answer inside <answer>, right or wrong (null: not checkable),
   * and the reference answer when the problem has one. Absent for free text. */
  score?: { answer: string | null; correct: boolean | null; reference: string | null };
}

/** Compare's held-out prompts unless the page asks for another number, and its samples per prompt
 * (besides the greedy answer): pass@k and cons@k have this k. */
export const COMPARE_PROMPTS = 8;
export const COMPARE_SAMPLES = 2;

/** Before/after on the same held-out prompts and draws (src/train/evaluate.ts). */
export interface Comparison {
  step: number;
  before: EvalReport;
  after: EvalReport;
}

export interface ExportedFile {
  name: string;
  bytes: Uint8Array;
}

export type { ConfigInput };
