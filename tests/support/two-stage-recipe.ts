// The two-stage recipe the recipe tests run in the worker (tests/kernels/recipe-worker.test.ts)
// and in the page (tests/e2e/recipe.spec.ts): SFT for 2 steps on 8 cold-start traces (batch 4,
// one epoch), then GRPO for 2 steps, each stage checkpointed at every step, so that a pause after
// timeline step 3 resumes from the GRPO stage's first checkpoint. OVERSIZED: one that does not fit.
import type { Recipe } from '../../src/recipes/recipe-spec';

export const TWO_STAGE: Recipe = {
  name: 'two-stage',
  seed: 1,
  stages: [
    {
      kind: 'sft',
      name: 'cold-start',
      data: { coldStart: { count: 8 } },
      options: {
        perDeviceTrainBatchSize: 4,
        numTrainEpochs: 1,
        learningRate: 3e-4,
        maxLength: 128,
        saveSteps: 1,
      },
    },
    {
      kind: 'grpo',
      name: 'rl',
      options: {
        steps: 2,
        saveSteps: 1,
        numGenerations: 4,
        perStepPrompts: 1,
        maxCompletionLength: 48,
      },
    },
  ],
};

/** TWO_STAGE with a GRPO stage far too large for the test device (16,384 sequences a step: its
 * KV cache alone is over 5 GiB against SwiftShader's 4 GiB budget): the recipe's preflight
 * refuses it before the SFT stage runs. */
export const OVERSIZED: Recipe = {
  ...TWO_STAGE,
  name: 'oversized',
  stages: [
    TWO_STAGE.stages[0],
    {
      kind: 'grpo',
      name: 'rl',
      options: { steps: 1, perStepPrompts: 256, numGenerations: 64, maxCompletionLength: 100 },
    },
  ],
};
