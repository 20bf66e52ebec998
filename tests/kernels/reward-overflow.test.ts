// Issue 33, item 3, through the trainer (the loop the CLI and the page share): a custom reward
// returning ±1.7e308 alternately used to train nothing and say nothing (the group's std overflowed
// to Infinity, every advantage became 0 and reward_error_frac stayed 0). Now the step reports the
// reward as failing with a 'non-finite' error that names it and the step, the CLI's step line
// shows it, and the advantages are finite. Tiny shapes: 2 prompts × 2 completions, one step.
import { describe, expect, it } from 'vitest';
import type { RewardFunction } from '../../src/rewards/rewards';
import { stepLine } from '../../src/cli/_train';
import { makeTrainer } from '../support/tiny-trainer';

describe('a reward whose group statistics overflow', () => {
  it('±1.7e308 alternately: a non-finite error naming the reward and the step, not silence', async () => {
    let calls = 0;
    const alternating: RewardFunction = {
      name: 'custom:huge',
      compute: () => (calls++ % 2 === 0 ? 1.7e308 : -1.7e308),
    };
    const trainer = await makeTrainer(
      {
        rewards: ['custom:huge'],
        // The config's copy of the code; the trainer runs `alternating` (in-thread) instead.
        customRewards: { huge: 'function reward() { return 0; }' },
        perStepPrompts: 2,
        numGenerations: 2,
        steps: 2,
      },
      alternating,
    );
    try {
      const report = await trainer.trainStep();
      const completions = report.groups.flatMap((g) => g.completions);
      expect(report.metrics.reward_error_frac).toBe(1);
      for (const c of completions) {
        expect(c.reward.errors).toHaveLength(1);
        expect(c.reward.errors[0]).toMatchObject({ reward: 'custom:huge', kind: 'non-finite' });
        expect(c.reward.errors[0].message).toMatch(/^step 1: returned -?1\.7e\+308; .*reward std/);
        expect(c.advantage).toBe(0);
      }
      expect(stepLine(report, 2)).toMatch(
        /REWARD ERRORS: custom:huge failed on 4\/4 \(non-finite: step 1: returned/,
      );
    } finally {
      trainer.destroy();
    }
  });
});
