// "No signal": whether the latest steps of a run gave GRPO anything to learn from, decided from the
// metrics rows alone (docs/grpo.md §6 names), and what the Train view says about it. GRPO learns
// only from differences inside a group (docs/grpo.md §2): when every group's rewards tie, every
// advantage is 0 and the step's update carries no reward signal; when every reward is 0 for several
// steps in a row, the run is not learning at all (an exported LoRA's lora_B stays all zeros).
// Pure: the Train view calls noSignal() on its history and shows the answer beside the charts.
import type { MetricsRow } from '../../core/metrics-row';

/** Steps in a row with every reward 0 before the note says the run is stuck rather than unlucky. */
export const ZERO_STEPS = 3;

/** A share of truncated completions at or above this names the completion budget as a cause. */
export const TRUNCATED_SHARE = 0.5;

/** The run's options the advice names (its config in force; all optional). */
export interface NoSignalContext {
  maxCompletionLength?: number;
  numGenerations?: number;
  temperature?: number;
  /** The reward functions of the run, by name ('format', 'accuracy', 'custom:…'). */
  rewards?: readonly string[];
}

export interface NoSignal {
  /** 'zero': every reward 0 for ≥ ZERO_STEPS steps; 'tie': the latest step's groups all tied. */
  kind: 'zero' | 'tie';
  /** The steps in a row (ending at the latest) that had the condition. */
  fromStep: number;
  toStep: number;
  title: string;
  /** What the numbers say, one sentence. */
  detail: string;
  /** The likely causes, those the numbers point at first. */
  causes: string[];
  /** What to try, in the same order. */
  tries: string[];
}

const finite = (v: number | undefined): v is number => typeof v === 'number' && Number.isFinite(v);
/** Float tolerance: TRL's is_std_zero (docs/grpo.md §2) and a reward mean of exactly 0. */
const EPS = 1e-9;

/** Every group's rewards tied this step: all advantages 0 (docs/grpo.md §2). */
export function allGroupsTie(m: Record<string, number>): boolean {
  return finite(m.frac_reward_zero_std) && m.frac_reward_zero_std >= 1 - EPS;
}

/** Every completion's reward was 0 this step (mean and spread 0; a lone score has a NaN std). */
export function allRewardsZero(m: Record<string, number>): boolean {
  if (!finite(m.reward) || Math.abs(m.reward) > EPS) return false;
  return !finite(m.reward_std) || Math.abs(m.reward_std) <= EPS;
}

/** How many rows, counted back from the last, satisfy `test`. */
function streak(rows: readonly MetricsRow[], test: (m: Record<string, number>) => boolean): number {
  let n = 0;
  for (let i = rows.length - 1; i >= 0 && test(rows[i].metrics); i--) n++;
  return n;
}

/** The mean of `key` over `rows` where it is finite, or NaN. */
function mean(rows: readonly MetricsRow[], key: string): number {
  const v = rows.map((r) => r.metrics[key]).filter(finite);
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : NaN;
}

const pct = (x: number) => `${Math.round(100 * x)}%`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * Whether the latest steps of `history` (oldest first) carry no reward signal, with the likely
 * causes and what to try; null when the latest step had signal (or there is no step yet).
 */
export function noSignal(
  history: readonly MetricsRow[],
  context: NoSignalContext = {},
): NoSignal | null {
  const last = history.at(-1);
  if (!last) return null;
  const zeros = streak(history, allRewardsZero);
  const ties = streak(history, allGroupsTie);
  const kind = zeros >= ZERO_STEPS ? 'zero' : ties >= 1 ? 'tie' : null;
  if (!kind) return null;
  const n = kind === 'zero' ? zeros : ties;
  const rows = history.slice(-n);
  const fromStep = rows[0].step;
  const toStep = last.step;
  const span = n === 1 ? `step ${toStep}` : `steps ${fromStep}–${toStep}`;

  const rewards = context.rewards ?? [];
  const format = mean(rows, 'rewards/format/mean');
  const accuracy = mean(rows, 'rewards/accuracy/mean');
  const truncated = mean(rows, 'completions/clipped_ratio');
  const errors = mean(rows, 'reward_error_frac');
  const maxLen = context.maxCompletionLength;
  const g = context.numGenerations;

  const causes: string[] = [];
  const tries: string[] = [];
  if (finite(errors) && errors > 0) {
    causes.push(
      `A reward function failed on ${pct(errors)} of the completions (a failure scores 0); the Inspect view shows the error beside each completion.`,
    );
    tries.push('Fix the reward function (Rewards panel: try it on a completion first).');
  }
  if (finite(truncated) && truncated >= TRUNCATED_SHARE) {
    causes.push(
      `The prompt leaves too little room, or the budget is too small: ${pct(truncated)} of the completions were cut at ${maxLen ? `${maxLen} tokens` : 'maxCompletionLength'} before they could answer.`,
    );
    tries.push(
      'Raise maxCompletionLength (within the model’s context), or shorten the prompt (fewer numbers, a shorter system prompt).',
    );
  }
  if (rewards.includes('format') && finite(format) && format <= EPS) {
    causes.push(
      'The format reward never fires: no completion wrote <think>…</think><answer>…</answer>, so the accuracy reward, which reads the <answer>, has nothing to check either.',
    );
    tries.push(
      'Teach the format first: a short SFT stage on formatted answers (Recipes view), or a model that already follows it.',
    );
  }
  if (kind === 'zero' || (finite(accuracy) && accuracy <= EPS)) {
    causes.push(
      'The task is out of the model’s reach: no sampled answer earned a reward, so no completion stands out from its group.',
    );
    tries.push(
      `Make the task easier (fewer or smaller numbers, smaller targets), or sample more per prompt (numGenerations${g ? `, now ${g}` : ''}) so that a rare right answer turns up.`,
    );
  }
  if (kind === 'tie' && !allRewardsZero(last.metrics)) {
    causes.push(
      'Each group’s completions all scored the same (all right, or the same partial score), so the rewards cannot tell them apart.',
    );
    tries.push(
      `Sample more varied completions (a higher temperature${context.temperature !== undefined ? `, now ${context.temperature}` : ''}, or more numGenerations), or use a reward that grades finer than right / wrong.`,
    );
  }

  const title =
    kind === 'zero'
      ? `No signal: every reward was 0 for ${plural(n, 'step')} (${span})`
      : `No signal at ${span}: every group’s completions scored alike`;
  const detail =
    kind === 'zero'
      ? 'With every reward 0, every advantage is 0 and the updates learn nothing from the rewards (a LoRA run with no signal since its start exports an all-zero lora_B).'
      : `frac_reward_zero_std is 1: in each group the rewards tied, so every advantage is 0 and ${n === 1 ? 'this step' : 'these steps'} learned nothing from the rewards.`;
  return { kind, fromStep, toStep, title, detail, causes, tries };
}
