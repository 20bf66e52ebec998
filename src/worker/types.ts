// Types shared between the playground views (Train, Inspector, Learn, Aha) and the trainer worker API.
import type { StepReport } from '../grpo/trainer';
import type { Config } from '../grpo/config';
import type { MetricsRow } from '../core/metrics-row';

export type { StepReport, Config, MetricsRow };
/** A stored row left out because it could not be read (trainer API storageNotices()). */
export type { StorageNotice } from '../storage/notices';
