// Types shared between the playground views (Train, Inspector, Learn, Aha) and the trainer worker API.
import type { StepReport } from '../grpo/trainer';
import type { Config } from '../grpo/config';

/** One row of the metrics history: the step number and that step's GRPO.md §6 metrics. */
export type MetricsRow = { step: number; metrics: Record<string, number> };

export type { StepReport, Config };
