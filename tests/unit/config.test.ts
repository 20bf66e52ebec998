// The run Config: defaults, validation naming the key, CLI flags, --help, URL round trip.
import { describe, expect, it } from 'vitest';
import {
  CONFIG_KEYS,
  CONFIG_SCHEMA,
  ConfigError,
  configFromUrlParams,
  configHelp,
  configToUrlParams,
  defaultConfig,
  draftFromConfig,
  isHelpRequested,
  parseCliArgs,
  resolveConfig,
  resolveDraft,
} from '../../src/grpo/config';

describe('resolveConfig', () => {
  it('fills commented defaults and resolves implicit fields', () => {
    const c = defaultConfig();
    expect(c.numGenerations).toBe(8);
    expect(c.beta).toBe(0);
    expect(c.epsilon).toBe(0.2);
    expect(c.epsilonHigh).toBe(0.2);
    expect(c.numIterations).toBe(1);
    expect(c.lossType).toBe('dapo');
    expect(c.scaleRewards).toBe('group');
    expect(c.maxGradNorm).toBe(1);
    expect(c.rewards).toEqual(['format', 'accuracy']);
    expect(c.rewardWeights).toEqual([1, 1]);
    expect(c.taskOptions).toEqual({
      numbers: 3,
      minNumber: 1,
      maxNumber: 100,
      minTarget: 1,
      maxTarget: 100,
      excludeHeldOut: 0,
    });
    expect(resolveConfig({ epsilon: 0.1 }).epsilonHigh).toBe(0.1);
    expect(resolveConfig({ epsilon: 0.1, epsilonHigh: 0.28 }).epsilonHigh).toBe(0.28);
  });

  it('does not share default objects between resolutions', () => {
    const a = defaultConfig();
    a.rewards.push('x');
    expect(defaultConfig().rewards).toEqual(['format', 'accuracy']);
  });

  it.each([
    [
      { num_generations: 4 },
      /unknown config key 'num_generations' \(did you mean 'numGenerations'\?\)/,
    ],
    [{ max_steps: 4 }, /did you mean 'steps'/],
    [{ numGenerations: '8' }, /'numGenerations' must be an integer/],
    [{ numGenerations: 1 }, /'numGenerations' must be ≥ 2/],
    [{ temperature: 0 }, /'temperature' must be > 0/],
    [{ topP: 1.5 }, /'topP' must be ≤ 1/],
    [{ lossType: 'ppo' }, /'lossType' must be one of 'grpo', 'bnpo', 'dr_grpo', 'dapo'/],
    [{ maskTruncatedCompletions: 'yes' }, /'maskTruncatedCompletions' must be true or false/],
    [{ rewards: ['format', 'length'] }, /unknown reward 'length'/],
    [{ rewards: ['custom:mine'] }, /custom:<id> needs customRewards/],
    [{ rewards: [] }, /at least one/],
    [{ rewardWeights: [1] }, /'rewardWeights' has 1 entries for 2 rewards/],
    [{ task: 'chess' }, /'task' must be one of/],
    [{ taskOptions: { numbrs: 4 } }, /taskOptions.numbrs: unknown option of task 'countdown'/],
    [{ taskOptions: { numbers: 'four' } }, /taskOptions.numbers must be a number/],
    [
      { perStepPrompts: 3, numGenerations: 3, gradientAccumulationSteps: 2 },
      /must divide perStepPrompts·numGenerations = 9/,
    ],
    [{ warmupRatio: 1 }, /'warmupRatio' must be < 1/],
    [{ loadBestModelAtEnd: true }, /'loadBestModelAtEnd' needs periodic evaluation.*evalSteps = 0/],
    [
      { loadBestModelAtEnd: true, evalSteps: 5, evalPrompts: 0 },
      /'loadBestModelAtEnd' needs periodic evaluation.*evalPrompts = 0/,
    ],
    [{ evalGenerations: 0 }, /'evalGenerations' must be ≥ 1/],
    [{ epsilonHigh: 'x' }, /'epsilonHigh' must be a number or null/],
    [[], /must be a JSON object/],
  ])('rejects %j', (partial, message) => {
    expect(() => resolveConfig(partial)).toThrow(ConfigError);
    expect(() => resolveConfig(partial)).toThrow(message);
  });

  it('objective and sampling variants: TRL names, ranges, and the refused entropy bonus + top-entropy mix', () => {
    const c = resolveConfig({
      importanceSamplingLevel: 'sequence',
      delta: 4,
      entropyCoef: 0.01,
      topEntropyQuantile: 1,
    });
    expect([c.importanceSamplingLevel, c.delta, c.entropyCoef]).toEqual(['sequence', 4, 0.01]);
    const d = defaultConfig();
    expect([d.importanceSamplingLevel, d.delta, d.entropyCoef, d.topEntropyQuantile]).toEqual([
      'token',
      null,
      0,
      1,
    ]);
    expect(() => resolveConfig({ importanceSamplingLevel: 'group' as never })).toThrow(ConfigError);
    expect(() => resolveConfig({ delta: 0 })).toThrow(ConfigError);
    expect(() => resolveConfig({ topEntropyQuantile: 1.5 })).toThrow(ConfigError);
    expect(() => resolveConfig({ entropyCoef: 0.01, topEntropyQuantile: 0.2 })).toThrow(
      /not supported/,
    );
    expect(resolveConfig({ minP: 0.1 }).minP).toBe(0.1);
    expect(defaultConfig().minP).toBeNull();
    expect(() => resolveConfig({ minP: 1.5 })).toThrow(ConfigError);
    expect(
      resolveConfig({ multiObjectiveAggregation: 'normalize_then_sum' }).multiObjectiveAggregation,
    ).toBe('normalize_then_sum');
    const flags = parseCliArgs(['--importance_sampling_level', 'sequence', '--delta', '2']);
    expect(flags).toMatchObject({ importanceSamplingLevel: 'sequence', delta: 2 });
  });

  it('accepts custom rewards with weights and other tasks with their options', () => {
    const c = resolveConfig({
      rewards: ['format', 'custom:len'],
      customRewards: { len: '({completion}) => completion.length / 100' },
      rewardWeights: [1, 0.5],
      task: 'arithmetic',
      taskOptions: { digits: 5 },
    });
    expect(c.rewardWeights).toEqual([1, 0.5]);
    expect(c.taskOptions).toEqual({ digits: 5, operations: '+-*' });
  });

  it('every field has a help line and a default that passes validation', () => {
    for (const key of CONFIG_KEYS) {
      expect(CONFIG_SCHEMA[key].help.length).toBeGreaterThan(5);
      expect(() => resolveConfig({ [key]: CONFIG_SCHEMA[key].default })).not.toThrow();
    }
  });
});

describe('parseCliArgs', () => {
  it('accepts kebab, snake, TRL names, = and space forms, booleans and lists', () => {
    const p = parseCliArgs([
      '--num-generations',
      '4',
      '--max_completion_length=128',
      '--max_steps',
      '10',
      '--lr-scheduler-type',
      'cosine',
      '--learning-rate',
      '3e-6',
      '--mask-truncated-completions',
      '--rewards',
      'format,accuracy',
      '--reward-weights',
      '0.5, 2',
      '--task-options',
      '{"numbers":4}',
      '--epsilon-high',
      'null',
      '--beta=-0',
      '--help',
    ]);
    expect(p).toEqual({
      numGenerations: 4,
      maxCompletionLength: 128,
      steps: 10,
      lrScheduler: 'cosine',
      learningRate: 3e-6,
      maskTruncatedCompletions: true,
      rewards: ['format', 'accuracy'],
      rewardWeights: [0.5, 2],
      taskOptions: { numbers: 4 },
      epsilonHigh: null,
      beta: -0,
    });
    expect(parseCliArgs(['--no-mask-truncated-completions'])).toEqual({
      maskTruncatedCompletions: false,
    });
    expect(parseCliArgs(['--mask_truncated_completions=false'])).toEqual({
      maskTruncatedCompletions: false,
    });
    expect(resolveConfig(parseCliArgs(['--num-generations', '4'])).numGenerations).toBe(4);
    expect(isHelpRequested(['--steps', '3', '-h'])).toBe(true);
    expect(isHelpRequested(['--steps', '3'])).toBe(false);
  });

  it('rejects unknown flags, bad values and missing values naming the option', () => {
    expect(() => parseCliArgs(['--num-gens', '4'])).toThrow(/unknown option --num-gens/);
    expect(() => parseCliArgs(['--numgenerations', '4'])).toThrow(/did you mean --num-generations/);
    expect(() => parseCliArgs(['--num-generations', '4.5'])).toThrow(
      /^--num-generations must be an integer/,
    );
    expect(() => parseCliArgs(['--temperature', 'hot'])).toThrow(/^--temperature must be a number/);
    expect(() => parseCliArgs(['--loss-type', 'ppo'])).toThrow(/^--loss-type must be one of/);
    expect(() => parseCliArgs(['--steps'])).toThrow(/--steps needs a value/);
    expect(() => parseCliArgs(['steps'])).toThrow(/unexpected argument/);
    expect(() => parseCliArgs(['--task-options', '{bad'])).toThrow(
      /^--task-options must be an object/,
    );
    expect(() => parseCliArgs(['--no-steps'])).toThrow(/unknown option --no-steps/);
  });

  it('--help lists every option with its default and TRL name', () => {
    const help = configHelp();
    for (const key of CONFIG_KEYS) {
      const flag = key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
      expect(help).toMatch(new RegExp(`--${flag}\\b.*\\(default: `));
    }
    expect(help).toMatch(
      /--num-generations <int> +G: completions sampled per prompt.*\(default: 8; at most 1024\) \[TRL num_generations\]/,
    );
    expect(help).toContain('--loss-type <grpo|bnpo|dr_grpo|dapo|cispo|sapo>');
  });
});

describe('URL parameters', () => {
  it('keep only non-default fields and round-trip', () => {
    expect(configToUrlParams(defaultConfig()).toString()).toBe('');
    const c = resolveConfig({
      numGenerations: 4,
      temperature: 0.7,
      rewards: ['format', 'accuracy', 'custom:x'],
      customRewards: { x: 'return 1 & 2, "é"' },
      rewardWeights: [1, 2, 0.5],
      taskOptions: { numbers: 4 },
      maskTruncatedCompletions: true,
      epsilonHigh: 0.28,
      model: 'HuggingFaceTB/SmolLM2-135M',
    });
    const params = configToUrlParams(c);
    expect([...params.keys()].sort()).toEqual(
      [
        'customRewards',
        'epsilonHigh',
        'maskTruncatedCompletions',
        'model',
        'numGenerations',
        'rewardWeights',
        'rewards',
        'taskOptions',
        'temperature',
      ].sort(),
    );
    expect(params.get('taskOptions')).toBe('{"numbers":4}');
    expect(resolveConfig(configFromUrlParams(params.toString()))).toEqual(c);
  });

  it('rejects unknown parameters and bad values', () => {
    expect(() => configFromUrlParams('numGen=4')).toThrow(/unknown URL parameter 'numGen'/);
    expect(() => configFromUrlParams('steps=abc')).toThrow(/'steps' must be an integer/);
  });
});

describe('resolveDraft / draftFromConfig (the form draft keeps nulls)', () => {
  it('fills and checks like resolveConfig but keeps epsilonHigh and rewardWeights null', () => {
    const draft = resolveDraft({ epsilon: 0.1, numGenerations: 4 });
    expect(draft.epsilonHigh).toBeNull();
    expect(draft.rewardWeights).toBeNull();
    expect(draft.steps).toBe(defaultConfig().steps);
    expect(draft.taskOptions).toEqual(defaultConfig().taskOptions);
    expect(() => resolveDraft({ numGen: 4 })).toThrow(/unknown config key 'numGen'/);
    const edited = { ...draft, epsilon: 0.3 };
    expect(resolveConfig(edited).epsilonHigh).toBe(0.3);
  });

  it('turns implicit values of a resolved config back into nulls', () => {
    const draft = draftFromConfig(resolveConfig({ epsilon: 0.15 }));
    expect(draft.epsilonHigh).toBeNull();
    expect(draft.rewardWeights).toBeNull();
    const explicit = draftFromConfig(resolveConfig({ epsilonHigh: 0.28, rewardWeights: [1, 2] }));
    expect(explicit.epsilonHigh).toBe(0.28);
    expect(explicit.rewardWeights).toEqual([1, 2]);
    expect(resolveConfig(draft)).toEqual(resolveConfig({ epsilon: 0.15 }));
  });
});
