// Types shared between the playground views (Train, Inspector, Learn, Aha) and the trainer worker API.
import type { StepReport } from '../grpo/trainer';
import type { Config } from '../grpo/config';
import type { MetricsRow } from '../grpo/run';

export type { StepReport, Config, MetricsRow };
