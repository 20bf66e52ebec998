// The Train view's "no signal" note (src/app/lib/no-signal.ts) decided on metrics rows as the
// trainer logs them (docs/grpo.md §6): a step whose groups all tie, every reward 0 for ZERO_STEPS
// steps, the causes the numbers point at, and silence once a step has signal again.
import { describe, expect, it } from 'vitest';
import type { MetricsRow } from '../../src/core/metrics-row';
import {
  allGroupsTie,
  allRewardsZero,
  noSignal,
  TRUNCATED_SHARE,
  ZERO_STEPS,
} from '../../src/app/lib/no-signal';

/** A row of the default playground run (format + accuracy rewards); `m` overrides. */
function row(step: number, m: Record<string, number> = {}): MetricsRow {
  return {
    step,
    metrics: {
      reward: 0.75,
      reward_std: 0.5,
      frac_reward_zero_std: 0.5,
      'rewards/format/mean': 0.5,
      'rewards/accuracy/mean': 0.25,
      'completions/clipped_ratio': 0.25,
      reward_error_frac: 0,
      ...m,
    },
  };
}
const ZERO = {
  reward: 0,
  reward_std: 0,
  frac_reward_zero_std: 1,
  'rewards/format/mean': 0,
  'rewards/accuracy/mean': 0,
};
const CONTEXT = {
  rewards: ['format', 'accuracy'],
  maxCompletionLength: 80,
  numGenerations: 4,
  temperature: 1,
};

describe('noSignal', () => {
  it('says nothing before a step, or when the latest step had signal', () => {
    expect(noSignal([])).toBeNull();
    expect(noSignal([row(1), row(2)], CONTEXT)).toBeNull();
    // Signal came back after zero steps: the note goes.
    expect(noSignal([row(1, ZERO), row(2, ZERO), row(3, ZERO), row(4)], CONTEXT)).toBeNull();
  });

  it('flags at once a step whose groups all tie, naming the step', () => {
    const s = noSignal([row(1), row(2, { frac_reward_zero_std: 1, reward: 1, reward_std: 0 })], {
      ...CONTEXT,
      temperature: 0.7,
    });
    expect(s).toMatchObject({ kind: 'tie', fromStep: 2, toStep: 2 });
    expect(s!.title).toBe('No signal at step 2: every group’s completions scored alike');
    expect(s!.detail).toContain('frac_reward_zero_std is 1');
    // Rewards tied at a non-zero value: the rewards cannot tell the completions apart.
    expect(s!.causes.some((c) => c.includes('all scored the same'))).toBe(true);
    expect(s!.tries.some((t) => t.includes('now 0.7'))).toBe(true);
    // Format 0.5 and accuracy 0.25 on average: neither is named as the cause.
    expect(s!.causes.some((c) => c.includes('format reward never fires'))).toBe(false);
  });

  it('counts tied steps in a row from the latest', () => {
    const tie = { frac_reward_zero_std: 1 };
    const s = noSignal([row(1, tie), row(2), row(3, tie), row(4, tie)], CONTEXT);
    expect(s).toMatchObject({ kind: 'tie', fromStep: 3, toStep: 4 });
    expect(s!.title).toContain('steps 3–4');
  });

  it(`says the run is stuck after ${ZERO_STEPS} steps of all-zero rewards, with the causes`, () => {
    const two = noSignal([row(1), row(2, ZERO), row(3, ZERO)], CONTEXT);
    // Two zero steps are a tie (said at once), not yet the stuck-run note.
    expect(two?.kind).toBe('tie');
    const s = noSignal([row(1), row(2, ZERO), row(3, ZERO), row(4, ZERO)], CONTEXT);
    expect(s).toMatchObject({ kind: 'zero', fromStep: 2, toStep: 4 });
    expect(s!.title).toBe('No signal: every reward was 0 for 3 steps (steps 2–4)');
    expect(s!.detail).toContain('lora_B');
    expect(s!.causes).toHaveLength(2);
    expect(s!.causes[0]).toContain('The format reward never fires');
    expect(s!.causes[1]).toContain('out of the model’s reach');
    expect(s!.tries[1]).toContain('numGenerations, now 4');
    expect(s!.tries).toHaveLength(s!.causes.length);
  });

  it('names the completion budget when most completions were cut, and failing rewards first', () => {
    const cut = { ...ZERO, 'completions/clipped_ratio': 0.875, reward_error_frac: 0.25 };
    const s = noSignal([row(1, cut), row(2, cut), row(3, cut)], CONTEXT);
    expect(s?.kind).toBe('zero');
    expect(s!.causes[0]).toContain('A reward function failed on 25% of the completions');
    expect(s!.causes[1]).toContain('88% of the completions were cut at 80 tokens');
    expect(s!.tries[1]).toContain('Raise maxCompletionLength');
    // Below the share, truncation is not named.
    const fewCut = { ...ZERO, 'completions/clipped_ratio': TRUNCATED_SHARE - 0.01 };
    const t = noSignal([row(1, fewCut), row(2, fewCut), row(3, fewCut)], CONTEXT);
    expect(t!.causes.some((c) => c.includes('were cut'))).toBe(false);
  });

  it('does not blame a format reward the run does not use', () => {
    const custom = {
      reward: 0,
      reward_std: 0,
      frac_reward_zero_std: 1,
      'rewards/custom:zero/mean': 0,
    };
    const s = noSignal([row(1, custom), row(2, custom), row(3, custom)], {
      rewards: ['custom:zero'],
    });
    expect(s?.kind).toBe('zero');
    expect(s!.causes.map((c) => c.slice(0, 24))).toEqual(['The task is out of the m']);
  });
});

describe('the step tests', () => {
  it('tie: frac_reward_zero_std is 1 within float tolerance; a missing value is not a tie', () => {
    expect(allGroupsTie({ frac_reward_zero_std: 1 })).toBe(true);
    expect(allGroupsTie({ frac_reward_zero_std: 1 - 1e-12 })).toBe(true);
    expect(allGroupsTie({ frac_reward_zero_std: 0.75 })).toBe(false);
    expect(allGroupsTie({})).toBe(false);
    expect(allGroupsTie({ frac_reward_zero_std: NaN })).toBe(false);
  });

  it('all zero: mean 0 with no spread; a mean of 0 from ±1 rewards is not', () => {
    expect(allRewardsZero({ reward: 0, reward_std: 0 })).toBe(true);
    expect(allRewardsZero({ reward: 0, reward_std: NaN })).toBe(true);
    expect(allRewardsZero({ reward: 0, reward_std: 1.07 })).toBe(false);
    expect(allRewardsZero({ reward: 0.25, reward_std: 0 })).toBe(false);
    expect(allRewardsZero({ reward: NaN, reward_std: NaN })).toBe(false);
  });
});
