// Named configurations. 'aha' is the bundled tiny reasoner on its Countdown setting with rule
// rewards only (format + accuracy), as R1-Zero: the preset `npm run aha` and the playground use.
import { TINY_COUNTDOWN_OPTIONS } from '../tasks/traces';
import type { ConfigInput } from './config';

export const PRESETS = {
  aha: {
    model: 'bundled',
    task: 'countdown',
    taskOptions: TINY_COUNTDOWN_OPTIONS as Record<string, number>,
    template: 'r1-zero',
    rewards: ['format', 'accuracy'],
    numGenerations: 8,
    perStepPrompts: 8,
    maxPromptLength: 32,
    maxCompletionLength: 64,
    temperature: 1.0,
    learningRate: 1e-3,
    lrScheduler: 'constant',
    warmupSteps: 0,
    beta: 0,
    lossType: 'dapo',
    scaleRewards: 'group',
    maxGradNorm: 1.0,
    steps: 60,
    saveSteps: 20,
    evalPrompts: 200,
    seed: 1,
  },
} satisfies Record<string, Partial<ConfigInput>>;

export type PresetName = keyof typeof PRESETS;
