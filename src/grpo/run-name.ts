// A new run's default name, readable in a runs table and a chart legend: its task, its model and
// the options it sets away from their defaults (the same "differs from the default" rule as the
// shareable URL, configToUrlParams), e.g. 'countdown · tiny-reasoner · lr=3e-5, beta=0.04'.
// The date is no part of it: storage adds it only to tell two runs of the same name apart
// (storage/run-history.ts untakenName). The user can rename a run and keep notes on it.
import { configToUrlParams, type Config } from './config';

/** Longest default name (the storage accepts 200; a table cell and a tooltip read 80 well). */
export const RUN_NAME_MAX = 80;
/** Longest value shown for one option (a JSON list or a long path is cut with an ellipsis). */
const VALUE_MAX = 16;

/** Options every name states anyway (task, model) or that make a poor name (reward code). */
const LEFT_OUT = new Set(['task', 'model', 'customRewards']);

/** Short spellings of the options runs vary most, as TRL writes them where shorter. */
const SHORT: Record<string, string> = {
  learningRate: 'lr',
  numGenerations: 'G',
  perStepPrompts: 'B',
  maxCompletionLength: 'maxLen',
  gradientAccumulationSteps: 'accum',
};

const cut = (text: string, max: number) =>
  text.length > max ? `${text.slice(0, max - 1)}…` : text;

/** A number as short as it reads: 3e-5, not 0.00003. */
function shortValue(value: string): string {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) return value;
  return n !== 0 && Math.abs(n) < 1e-3 ? n.toExponential() : value;
}

/** The options of `config` that differ from the defaults, as 'key=value' parts in schema order;
 * the task's own options that differ from its defaults by their own names ('maxNumber=10'). */
export function changedOptionParts(config: Config): string[] {
  const parts: string[] = [];
  for (const [key, value] of configToUrlParams(config)) {
    if (LEFT_OUT.has(key)) continue;
    if (key === 'taskOptions') {
      for (const [k, v] of Object.entries(JSON.parse(value) as Record<string, unknown>))
        parts.push(
          `${k}=${cut(shortValue(typeof v === 'string' ? v : JSON.stringify(v)), VALUE_MAX)}`,
        );
      continue;
    }
    parts.push(`${SHORT[key] ?? key}=${cut(shortValue(value), VALUE_MAX)}`);
  }
  return parts;
}

/**
 * 'task · model · options that differ', at most RUN_NAME_MAX characters: the options are taken in
 * schema order as long as they fit (a long one is passed over for shorter ones after it), and the
 * rest are counted ('+3 more') rather than cut mid-way. `modelName` is the loaded model's name.
 */
export function defaultRunName(config: Config, modelName: string): string {
  const head = [config.task, cut(modelName.trim() || 'model', 32)].join(' · ');
  const parts = changedOptionParts(config);
  if (parts.length === 0) return head;
  const shown: string[] = [];
  const fits = (list: string[], left: number) =>
    `${head} · ${[...list, ...(left > 0 ? [`+${left} more`] : [])].join(', ')}`.length <=
    RUN_NAME_MAX;
  for (const part of parts) {
    const left = parts.length - shown.length - 1;
    if (fits([...shown, part], left)) shown.push(part);
  }
  const rest = parts.length - shown.length;
  const tail = [
    ...shown,
    ...(rest > 0 ? [shown.length ? `+${rest} more` : `+${rest} options`] : []),
  ];
  return `${head} · ${tail.join(', ')}`;
}
