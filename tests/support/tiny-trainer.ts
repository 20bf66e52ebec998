// A tiny GRPO setup for trainer tests: a character tokenizer, short fixed prompts, a 2-layer random
// Llama, and a reward the random model earns about one time in ten ("starts with 'a'").
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import type { RewardFunction } from '../../src/rewards/rewards';
import { GrpoTrainer, type StepReport } from '../../src/grpo/trainer';
import type { LlamaConfig } from '../../src/core/model-config';
import { initLlamaWeights } from '../../src/model/init';
import type { Problem, Task } from '../../src/tasks/types';
import { testEngine } from '../kernels/harness';
import { CharTokenizer } from './char-tokenizer';

export const tokenizer = new CharTokenizer('abcdefgh?');

// Prompts are one of a few short strings; nothing to verify (the reward below looks at the text).
export const echoTask: Task = {
  name: 'echo',
  description: 'short fixed prompts for trainer tests',
  generate(seed: number, count: number): Problem[] {
    return Array.from({ length: count }, (_, i) => ({
      id: `echo-${seed}-${i}`,
      task: 'echo',
      question: ['ab?', 'cd?', 'efg?', 'h?'][(i + seed) % 4],
      reference: null,
      verifier: { kind: 'none' },
    }));
  },
  formatPrompt: (problem) => ({ kind: 'text', text: problem.question }),
  verify: () => null,
};

export const modelConfig: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
  vocabSize: tokenizer.vocabSize,
  maxPositions: 64,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  attentionBias: false,
  bosTokenId: null,
  eosTokenIds: [0],
};

/** 1 when the completion starts with 'a': a token the random model picks ~1/10 of the time. */
export const startsWithA: RewardFunction = {
  name: 'custom:starts_with_a',
  compute: ({ completion }) => (completion.startsWith('a') ? 1 : 0),
};

export function config(overrides: Partial<ConfigInput> = {}) {
  return resolveConfig({
    rewards: ['custom:starts_with_a'],
    customRewards: {
      starts_with_a:
        "function reward({ completion }) { return completion.startsWith('a') ? 1 : 0; }",
    },
    perStepPrompts: 4,
    numGenerations: 8,
    maxCompletionLength: 3,
    maxPromptLength: 8,
    temperature: 1,
    learningRate: 2e-2,
    lrScheduler: 'constant',
    steps: 30,
    seed: 7,
    ...overrides,
  });
}

export async function makeTrainer(
  overrides: Partial<ConfigInput> = {},
  reward: RewardFunction | RewardFunction[] = startsWithA,
  recordLogpAfterUpdate = false,
  task: Task = echoTask,
) {
  const engine = await testEngine();
  return new GrpoTrainer({
    engine,
    config: config(overrides),
    modelConfig,
    weights: initLlamaWeights(modelConfig, 1),
    tokenizer,
    task,
    rewardFunctions: Array.isArray(reward) ? reward : [reward],
    recordLogpAfterUpdate,
  });
}

// Metrics that measure time, not the algorithm.
const TIMING = new Set(['step_time', 'tokens_per_second']);
export const algorithmic = (r: StepReport) =>
  Object.fromEntries(Object.entries(r.metrics).filter(([k]) => !TIMING.has(k)));
