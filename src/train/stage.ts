// The one interface of a training stage: what the GRPO loop (Run, run.ts) and the SFT loop
// (SftRun, sft.ts) both offer whoever drives them, so a driver that needs no more than stepping,
// saving and resuming (the recipe runner, recipe.ts; the interface test) is written once and never
// asks which loop it holds. Each loop keeps its own richer API beside it (Run's live options,
// evaluations and full StepReport; SftRun's learning-rate schedule) for the front ends that use it.
// A stage's checkpoint is the shared CheckpointPayload (src/train/checkpoint.ts and storage), so the
// stores, the file codec and resume handle both kinds alike; only what is inside its `rng` record
// and tensors is the loop's own, and each loop's restore() refuses another loop's payload.
import type { CheckpointPayload } from '../storage/checkpoints';
import type { MetricsRow } from '../core/metrics-row';
import type { MemoryPlan } from '../model/memory-plan';
import type { LoraOptions } from '../core/lora';
import type { GpuLlama } from '../model/llama';

/** One step as every driver sees it: the step's metrics row and whether its update was skipped
 * (a non-finite loss or gradient; the weights did not change). Run's StepReport is this and more. */
export interface StageStepResult extends MetricsRow {
  /** Why the update was skipped, or null when it was applied. */
  skipped: string | null;
}

/** What a stage tells the code that built it. Each may be async: the stage waits for it. */
export interface StageHooks {
  /** After each step, before any checkpoint of that step. `elapsedMs`: the step's own time. */
  onStep?(result: StageStepResult, info: { elapsedMs: number }): void | Promise<void>;
  /** A checkpoint to store: due by the stage's save policy (`automatic`) or asked for through
   * save(). Without this hook a stage reads nothing back from the GPU to save. */
  onCheckpoint?(payload: CheckpointPayload, info: { automatic: boolean }): void | Promise<void>;
}

/** What a training stage has trained: a full fine-tune's parameters, or a LoRA stage's adapters
 * with their options, by Hugging Face / PEFT name. */
export type TrainedWeights =
  | { kind: 'full'; weights: Map<string, Float32Array> }
  | { kind: 'lora'; lora: LoraOptions; adapters: Map<string, Float32Array> };

/** readTrained() of a stage whose policy is `policy`. */
export async function readTrainedOf(policy: GpuLlama): Promise<TrainedWeights> {
  return policy.lora
    ? { kind: 'lora', lora: policy.lora, adapters: await policy.readAdapters() }
    : { kind: 'full', weights: await policy.readParameters() };
}

export interface TrainingStage {
  /** Completed steps (applied or skipped). */
  readonly stepCount: number;
  /** The steps the stage trains in all (its config's). */
  readonly totalSteps: number;
  /** The stage's GPU memory plan, as checked before it allocated (its frozen base's storage in
   * plan.input.dtype). */
  readonly plan: MemoryPlan;
  /** Whether all of totalSteps are done. */
  readonly finished: boolean;
  /** Every completed step's metrics row (restore() keeps those up to the checkpoint). */
  readonly history: readonly MetricsRow[];
  /** One step: an optimizer step (SFT) or a GRPO step (sample, reward, update), then the hooks
   * and the checkpoint the save policy asks for. */
  step(): Promise<StageStepResult>;
  /** Steps until finished or `stop()` says so (asked before each step). */
  runUntil(stop?: () => boolean): Promise<'finished' | 'stopped'>;
  /** The current state as a checkpoint: weights, optimizer moments and step, the loop's counters
   * and data position, and the metrics so far. restore() of it continues the stage exactly. */
  snapshot(): Promise<CheckpointPayload>;
  /** Continues from a snapshot of a stage built the same way (same start weights and data):
   * `history` is the metrics history to keep up to its step, by default the one it stored. */
  restore(payload: CheckpointPayload, history?: readonly MetricsRow[]): void;
  /** Hands snapshot() to the onCheckpoint hook the stage was built with (none: nothing is read).
   * `automatic` tells the hook whether the save policy or a caller asked. */
  save(automatic?: boolean): Promise<void>;
  /** The policy's parameters now (GpuLlama.readParameters, by Hugging Face name; a LoRA run's
   * adapters merged in): what the stage has trained, as one model. */
  readWeights(): Promise<Map<string, Float32Array>>;
  /** What the stage trains, read back: every parameter, or under LoRA only the adapters (the base
   * stays as the stage stored it), so a recipe hands a LoRA stage's end on without reading the
   * whole model (src/recipes/merged-weights.ts). */
  readTrained(): Promise<TrainedWeights>;
  /** Frees the stage's GPU buffers (and any sandboxes); the stage is unusable after. */
  destroy(): void;
}

/** The runUntil() of every stage: steps until `stage` is finished or `stop()` says so. */
export async function stepUntil(
  stage: Pick<TrainingStage, 'finished' | 'step'>,
  stop: () => boolean,
): Promise<'finished' | 'stopped'> {
  while (!stage.finished) {
    if (stop()) return 'stopped';
    await stage.step();
  }
  return 'finished';
}
