// The trainer options as the Train view shows them: grouped, with the schema's one-line help and the
// Learn-page topic that explains each one.
import { CONFIG_SCHEMA, type ConfigKey, type FieldSpec } from '../../grpo/config';

export interface OptionGroup {
  title: string;
  keys: ConfigKey[];
}

/** Options edited in the generic form (model, task, template and rewards have their own panels). */
export const OPTION_GROUPS: OptionGroup[] = [
  {
    title: 'Sampling',
    keys: [
      'numGenerations',
      'perStepPrompts',
      'maxCompletionLength',
      'maxPromptLength',
      'temperature',
      'topP',
      'topK',
      'minP',
      'repetitionPenalty',
    ],
  },
  {
    title: 'GRPO objective',
    keys: [
      'lossType',
      'epsilon',
      'epsilonHigh',
      'delta',
      'importanceSamplingLevel',
      'topEntropyQuantile',
      'entropyCoef',
      'sapoTemperaturePos',
      'sapoTemperatureNeg',
      'beta',
      'numIterations',
      'scaleRewards',
      'multiObjectiveAggregation',
      'maskTruncatedCompletions',
    ],
  },
  {
    title: 'Optimizer',
    keys: [
      'learningRate',
      'lrScheduler',
      'warmupSteps',
      'warmupRatio',
      'weightDecay',
      'maxGradNorm',
      'adamBeta1',
      'adamBeta2',
      'adamEpsilon',
      'gradientAccumulationSteps',
    ],
  },
  {
    title: 'Run',
    keys: [
      'steps',
      'saveSteps',
      'seed',
      'evalPrompts',
      'evalSteps',
      'evalGenerations',
      'loadBestModelAtEnd',
      'rewardTimeoutMs',
      'loggingSteps',
    ],
  },
  {
    title: 'Memory',
    keys: ['gradientCheckpointing', 'logitsMemoryMiB'],
  },
  {
    title: 'LoRA (PEFT)',
    keys: [
      'usePeft',
      'loraR',
      'loraAlpha',
      'loraTargetModules',
      'useRslora',
      'loraDropout',
      'dtype',
      'useBnbNestedQuant',
    ],
  },
];

/** Learn-page section per option (the element id of that section in src/app/learn/LearnView). */
export const OPTION_TOPIC: Partial<Record<ConfigKey, string>> = {
  numGenerations: 'group',
  perStepPrompts: 'group',
  maxCompletionLength: 'group',
  maxPromptLength: 'group',
  temperature: 'group',
  topP: 'group',
  topK: 'group',
  minP: 'group',
  repetitionPenalty: 'group',
  lossType: 'loss-types',
  maskTruncatedCompletions: 'loss-types',
  epsilon: 'clipping',
  epsilonHigh: 'clipping',
  delta: 'clipping',
  importanceSamplingLevel: 'clipping',
  entropyCoef: 'update',
  topEntropyQuantile: 'clipping',
  sapoTemperaturePos: 'loss-types',
  sapoTemperatureNeg: 'loss-types',
  beta: 'kl',
  numIterations: 'clipping',
  scaleRewards: 'advantages',
  multiObjectiveAggregation: 'rewards',
  learningRate: 'update',
  lrScheduler: 'update',
  warmupSteps: 'update',
  warmupRatio: 'update',
  weightDecay: 'update',
  maxGradNorm: 'update',
  adamBeta1: 'update',
  adamBeta2: 'update',
  adamEpsilon: 'update',
  gradientAccumulationSteps: 'update',
  rewards: 'rewards',
  rewardWeights: 'rewards',
  customRewards: 'rewards',
  template: 'group',
  task: 'rewards',
};

export interface OptionView {
  key: ConfigKey;
  help: string;
  kind: 'int' | 'number' | 'boolean' | 'string' | 'enum' | 'string[]' | 'number[]' | 'object';
  nullable: boolean;
  values: readonly string[];
  min?: number;
  max?: number;
  trl: string | null;
  topic: string | null;
}

export function optionView(key: ConfigKey): OptionView {
  const spec = CONFIG_SCHEMA[key] as FieldSpec<unknown> & {
    type: {
      kind: OptionView['kind'];
      nullable?: boolean;
      values?: readonly string[];
      min?: number;
      max?: number;
    };
  };
  return {
    key,
    help: spec.help,
    kind: spec.type.kind,
    nullable: !!spec.type.nullable,
    values: spec.type.values ?? [],
    min: spec.type.min,
    max: spec.type.max,
    trl: spec.trl,
    topic: OPTION_TOPIC[key] ?? null,
  };
}

/** The form label of a key: 'maxCompletionLength' → 'max completion length'. */
export function optionLabel(key: string): string {
  return key.replace(/([A-Z])/g, ' $1').toLowerCase();
}
