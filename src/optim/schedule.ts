// Learning-rate schedules with the semantics of transformers' get_*_schedule_with_warmup, so a run
// here and its TRL export use the same learning rate at every optimizer step.

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
