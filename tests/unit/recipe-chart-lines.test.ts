// The Recipes view's small texts and lines (src/app/lib/recipe-view.ts): the loss chart draws one
// line per stage, so no segment joins an SFT stage's last cross-entropy to a GRPO stage's first
// policy loss; a stage description counts "1 prompt", not "1 prompts".
import { describe, expect, it } from 'vitest';
import { describeStage, stageSeries } from '../../src/app/lib/recipe-view';
import type { TimelineRow } from '../../src/recipes/recipe-spec';
import { TWO_STAGE } from '../support/two-stage-recipe';

const row = (step: number, stage: number, metrics: Record<string, number>): TimelineRow => ({
  step,
  stage,
  stageStep: stage === 0 ? step : step - 2,
  metrics,
});

describe('recipe view', () => {
  it('draws a metric as one line per stage that logs it', () => {
    const rows = [
      row(1, 0, { loss: 2 }),
      row(2, 0, { loss: 1.5 }),
      row(3, 1, { loss: 0.1, reward: 0.5 }),
      row(4, 1, { loss: -0.2, reward: 0.75 }),
    ];
    const loss = stageSeries(TWO_STAGE, rows, 'loss');
    expect(loss.map((s) => s.label)).toEqual(['cold-start (sft)', 'rl (grpo)']);
    expect(loss.map((s) => s.points.map((p) => [p.x, p.y]))).toEqual([
      [
        [1, 2],
        [2, 1.5],
      ],
      [
        [3, 0.1],
        [4, -0.2],
      ],
    ]);
    // A stage without the metric has no line.
    expect(stageSeries(TWO_STAGE, rows, 'reward').map((s) => s.label)).toEqual(['rl (grpo)']);
    expect(stageSeries(TWO_STAGE, [], 'loss')).toEqual([]);
  });

  it('counts prompts in the singular when there is one', () => {
    expect(describeStage(TWO_STAGE, 1)).toContain('(aha preset, 4 completions × 1 prompt)');
    const three = {
      ...TWO_STAGE,
      stages: [
        TWO_STAGE.stages[0],
        { ...TWO_STAGE.stages[1], options: { numGenerations: 2, perStepPrompts: 3 } },
      ],
    } as typeof TWO_STAGE;
    expect(describeStage(three, 1)).toContain('(aha preset, 2 completions × 3 prompts)');
  });
});
