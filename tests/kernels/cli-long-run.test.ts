// A run configured for a million steps (`npm run train -- --steps 1000000`) starts at once: the
// trainer draws its prompts as steps need them instead of building every step's prompts up front
// (4 million problems took minutes and gigabytes before the first step), and its first step trains
// on the same prompts as a short run with the same seed.
import { describe, expect, it } from 'vitest';
import { TRAIN_LOOKAHEAD } from '../../src/tasks/index';
import type { Task } from '../../src/tasks/types';
import { echoTask, makeTrainer } from '../support/tiny-trainer';

/** echoTask, remembering the largest count it was asked for. */
function countingTask(): { task: Task; largest: () => number } {
  let largest = 0;
  return {
    task: {
      ...echoTask,
      generate(seed, count) {
        largest = Math.max(largest, count);
        return echoTask.generate(seed, count);
      },
    },
    largest: () => largest,
  };
}

describe('a long run draws its prompts per step', () => {
  it('a million steps: at most the lookahead drawn, and the first step is a short run’s', async () => {
    const long = countingTask();
    const trainer = await makeTrainer({ steps: 1_000_000 }, undefined, false, long.task);
    try {
      expect(long.largest()).toBeLessThanOrEqual(TRAIN_LOOKAHEAD);
      const report = await trainer.trainStep();
      expect(report.groups.map((g) => g.problem.id)).toEqual(
        echoTask.generate(7, 4).map((p) => p.id),
      );
      expect(long.largest()).toBeLessThanOrEqual(TRAIN_LOOKAHEAD);
    } finally {
      trainer.destroy();
    }
    const short = countingTask();
    const shortTrainer = await makeTrainer({ steps: 3 }, undefined, false, short.task);
    try {
      const report = await shortTrainer.trainStep();
      expect(report.groups.map((g) => g.problem.id)).toEqual(
        echoTask.generate(7, 4).map((p) => p.id),
      );
    } finally {
      shortTrainer.destroy();
    }
  });
});
