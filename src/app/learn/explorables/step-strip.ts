// The numbers of the step strip (top of Learn): the selected step's group as one picture, sample →
// reward → advantage → update, one row per completion. The update column is the real push the
// step's loss gives each completion's log-probs, −Σ_t ∂L/∂log π_t (docs/grpo.md §5), from the f64
// reference grpoLossRef (src/ref/grpo_loss.ts) on the step's batch as one micro-batch, and, when
// the report has them, how far the update then moved the completion's tokens (mean Δ log π).
// Pure: no DOM. Completion text is untrusted model output: the component renders it as text.
import { grpoLossRef } from '../../../ref/grpo_loss';
import type { Config } from '../../../grpo/config';
import type { StepReport } from '../../../grpo/trainer';
import { allCompletions, flatten } from '../derive';

export type StripConfig = Pick<
  Config,
  'lossType' | 'epsilon' | 'epsilonHigh' | 'beta' | 'maxCompletionLength'
> &
  Partial<
    Pick<Config, 'importanceSamplingLevel' | 'delta' | 'sapoTemperaturePos' | 'sapoTemperatureNeg'>
  >;

export interface StripRow {
  index: number;
  text: string;
  tokens: number;
  reward: number;
  advantage: number;
  /** −Σ_t ∂L/∂log π_t over the completion's tokens: > 0 makes the completion more likely. */
  push: number;
  /** Mean log π_after − log π over its counted tokens; null without logpAfter. */
  moved: number | null;
}

/** One row per completion of group `groupIndex`; the push is computed over the whole step. */
export function stepStrip(report: StepReport, groupIndex: number, config: StripConfig): StripRow[] {
  const group = report.groups[groupIndex];
  if (!group) return [];
  const everything = allCompletions(report);
  const b = flatten(everything);
  const { dLogp } = grpoLossRef({
    logp: b.logp,
    oldLogp: b.oldLogp,
    refLogp: b.refLogp,
    advantages: b.advantages,
    mask: b.mask,
    N: b.N,
    L: b.L,
    lossType: config.lossType,
    epsilonLow: config.epsilon,
    epsilonHigh: config.epsilonHigh,
    beta: config.beta,
    maxCompletionLength: config.maxCompletionLength,
    importanceSamplingLevel: config.importanceSamplingLevel,
    delta: config.delta,
    sapoTemperaturePos: config.sapoTemperaturePos,
    sapoTemperatureNeg: config.sapoTemperatureNeg,
  });
  const G = group.completions.length;
  return group.completions.map((c, j) => {
    const i = groupIndex * G + j;
    let push = 0;
    let moved = 0;
    let n = 0;
    c.logp.forEach((lp, t) => {
      if (!c.counted[t]) return;
      push -= dLogp[i * b.L + t];
      if (c.logpAfter) moved += c.logpAfter[t] - lp;
      n++;
    });
    return {
      index: j,
      text: c.text,
      tokens: c.tokens.length,
      reward: c.reward.total,
      advantage: c.advantage,
      push,
      moved: c.logpAfter && n ? moved / n : null,
    };
  });
}
