// Named configurations. 'aha' is the bundled tiny reasoner on its Countdown setting with rule
// rewards only (format + accuracy), as R1-Zero: the preset `npm run aha` and the playground use.
// Sized so that `npm run aha` (three seeds, held-out evaluation included) finishes within 45
// minutes on a 2-core machine without a GPU. Each setting was chosen on the held-out selection
// prompts by a rule fixed before its runs; the runs, rules and numbers are in
// docs/aha/selection.md.
import { AHA_REPORT_PROMPTS, TINY_COUNTDOWN_OPTIONS } from '../tasks/traces';
import type { ConfigInput } from './config';

export const PRESETS = {
  aha: {
    model: 'bundled',
    task: 'countdown',
    // The held-out problems of the model card and of `npm run aha`'s evaluation never train.
    taskOptions: { ...TINY_COUNTDOWN_OPTIONS, excludeHeldOut: 1 } as Record<string, number>,
    template: 'r1-zero',
    rewards: ['format', 'accuracy'],
    // 16 completions of 2 prompts (32 sequences per step): docs/aha/selection.md.
    numGenerations: 16,
    perStepPrompts: 2,
    maxPromptLength: 32,
    maxCompletionLength: 80, // the model's careful traces take up to 80 tokens
    temperature: 1.0,
    learningRate: 6e-4,
    // Linear decay to 0 (TRL's default), chosen over 'constant': docs/aha/selection.md.
    lrScheduler: 'linear',
    warmupSteps: 0,
    beta: 0,
    lossType: 'dapo',
    scaleRewards: 'group',
    maxGradNorm: 1.0,
    steps: 95,
    saveSteps: 10,
    evalPrompts: AHA_REPORT_PROMPTS,
    seed: 1,
  },
} satisfies Record<string, Partial<ConfigInput>>;

export type PresetName = keyof typeof PRESETS;
