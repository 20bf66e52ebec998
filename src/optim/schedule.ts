// Learning-rate schedules with the semantics of transformers' get_*_schedule_with_warmup, so a run
// here and its TRL export use the same learning rate at every optimizer step. The schedule counts
// optimizer steps, as TRL's max_steps does: a run of `steps` sampled batches with μ =
// numIterations optimizer steps each has steps·μ of them (docs/grpo.md "Steps and the schedule").

export type LrScheduler = 'constant' | 'linear' | 'cosine';

export interface ScheduleOptions {
  scheduler: LrScheduler;
  learningRate: number;
  warmupSteps: number;
  /** Total optimizer steps of the run (linear and cosine decay to 0 at this step). */
  totalSteps: number;
}

/** The learning rate used by optimizer step `step` (0-based), as transformers computes it. */
export function learningRateAt(step: number, o: ScheduleOptions): number {
  if (step < o.warmupSteps) return (o.learningRate * step) / Math.max(1, o.warmupSteps);
  if (o.scheduler === 'constant') return o.learningRate;
  const decaySteps = Math.max(1, o.totalSteps - o.warmupSteps);
  const progress = Math.min(1, (step - o.warmupSteps) / decaySteps);
  if (o.scheduler === 'linear') return o.learningRate * Math.max(0, 1 - progress);
  return o.learningRate * Math.max(0, 0.5 * (1 + Math.cos(Math.PI * progress)));
}

/** The run options the schedule depends on (a subset of src/grpo/config.ts's Config). */
export interface RunScheduleConfig {
  lrScheduler: LrScheduler;
  learningRate: number;
  /** Sampled batches (generation rounds) of the run. */
  steps: number;
  /** μ: optimizer steps per sampled batch. */
  numIterations: number;
  /** Warmup in optimizer steps; wins over warmupRatio when > 0. */
  warmupSteps: number;
  /** Warmup as a fraction of the run's optimizer steps. */
  warmupRatio: number;
}

/** Optimizer steps of a run: steps·μ (TRL's max_steps for the same run). */
export function optimizerStepsOf(c: Pick<RunScheduleConfig, 'steps' | 'numIterations'>): number {
  return c.steps * c.numIterations;
}

/** The schedule of a run over its steps·μ optimizer steps. */
export function runSchedule(c: RunScheduleConfig): ScheduleOptions {
  const totalSteps = optimizerStepsOf(c);
  return {
    scheduler: c.lrScheduler,
    learningRate: c.learningRate,
    warmupSteps: c.warmupSteps > 0 ? c.warmupSteps : Math.ceil(c.warmupRatio * totalSteps),
    totalSteps,
  };
}
