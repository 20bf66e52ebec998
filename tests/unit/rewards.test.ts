// Built-in rewards (docs/grpo.md §1): format regex edge cases, accuracy via the task verifier,
// language consistency (R1 §2.3.3) in its target script, weights, not-applicable and failing
// rewards, step metrics.
import { describe, expect, it } from 'vitest';
import {
  accuracyReward,
  combineOutcomes,
  createRewardFunctions,
  extractAnswer,
  formatOk,
  formatReward,
  languageConsistencyRewardFunction,
  scoreCompletions,
  scoreCompletionSync,
  type RewardFunction,
  type RewardInput,
} from '../../src/rewards/rewards';
import type { Problem } from '../../src/tasks/types';
import { rewardMetrics } from '../../src/grpo/step-rewards';

const countdown: Problem = {
  id: 'c',
  task: 'countdown',
  question: 'q',
  reference: '44 + 19 + 35',
  verifier: { kind: 'countdown', nums: [44, 19, 35], target: 98 },
};
const noRef: Problem = {
  id: 'n',
  task: 'jsonl',
  question: 'q',
  reference: null,
  verifier: { kind: 'none' },
};
const input = (completion: string, problem: Problem = countdown): RewardInput => ({
  completion,
  prompt: 'p',
  problem,
});

describe('format reward', () => {
  it.each([
    ['<think>x</think><answer>1</answer>', true],
    [' <think>\nreason\n</think>\n<answer> 44+19+35 </answer>\n', true],
    ['<think></think><answer></answer>', true],
    ['<think>a < b > c</think> \t<answer>x</answer>', true],
    ['<think>ünïcödé 🤔</think><answer>✓</answer>', true],
    ['<think>x</think><answer>1</answer> trailing', false],
    ['<think>x</think><answer>1</answer>.', false],
    ['lead <think>x</think><answer>1</answer>', false],
    ['<think>x</think> mid <answer>1</answer>', false],
    ['<answer>1</answer><think>x</think>', false],
    ['<think>x</think><answer>1</answer><answer>2</answer>', false],
    ['<think><think>x</think></think><answer>1</answer>', false],
    ['<think>x</think><answer><answer>1</answer></answer>', false],
    ['<think>x<answer>1</answer>', false],
    ['<think>x</think><answer>1', false],
    ['<THINK>x</THINK><ANSWER>1</ANSWER>', false],
    ['<think>x</think><answer>1</answer>\u00a0', false], // NBSP is not ASCII whitespace
    ['\u2003<think>x</think><answer>1</answer>', false], // nor EM SPACE
    ['', false],
  ])('%j → %s', (completion, ok) => {
    expect(formatOk(completion)).toBe(ok);
    expect(formatReward.compute(input(completion))).toBe(ok ? 1 : 0);
  });
});

describe('answer extraction and accuracy', () => {
  it('takes the last <answer> pair, non-greedy', () => {
    expect(extractAnswer('<answer>1</answer> then <answer>2</answer>')).toBe('2');
    expect(extractAnswer('<answer><answer>5</answer></answer>')).toBe('<answer>5');
    expect(extractAnswer('<answer>\n7\n</answer>')).toBe('\n7\n');
    expect(extractAnswer('<answer>unclosed')).toBeNull();
  });

  it('scores 1 correct, 0 wrong or missing, null without a reference', () => {
    const acc = accuracyReward();
    expect(acc.compute(input('<think>t</think><answer>44 + 19 + 35</answer>'))).toBe(1);
    expect(acc.compute(input('no tags 44 + 19 + 35'))).toBe(0);
    expect(acc.compute(input('<answer>44 + 19</answer>'))).toBe(0);
    expect(acc.compute(input('<answer>44+19+35</answer> junk after'))).toBe(1); // accuracy ignores format
    expect(acc.compute(input('<answer>44 + 19 + 35</answer>', noRef))).toBeNull();
    // The task's own verify is used when given.
    expect(accuracyReward({ verify: () => true }).compute(input('<answer>anything</answer>'))).toBe(
      1,
    );
  });
});

describe('combination', () => {
  const fns = createRewardFunctions(['format', 'accuracy']);

  it('sums weighted rewards', () => {
    const r = scoreCompletionSync(
      fns,
      [0.5, 2],
      input('<think>t</think><answer>44 + 19 + 35</answer>'),
    );
    expect(r).toEqual({ total: 2.5, perFunction: { format: 1, accuracy: 1 }, errors: [] });
    const w = scoreCompletionSync(fns, null, input('<think>t</think><answer>1</answer>'));
    expect(w.total).toBe(1);
  });

  it('counts not-applicable as 0 and reports it as null', () => {
    const r = scoreCompletionSync(fns, [1, 1], input('<think>t</think><answer>1</answer>', noRef));
    expect(r).toEqual({ total: 1, perFunction: { format: 1, accuracy: null }, errors: [] });
  });

  it('turns throws, NaN, ±Inf and non-numbers into 0 with an error record', () => {
    const bad = (name: string, v: () => unknown): RewardFunction => ({
      name,
      compute: () => v() as number,
    });
    const broken = [
      bad('custom:throws', () => {
        throw new TypeError('boom');
      }),
      bad('custom:nan', () => NaN),
      bad('custom:inf', () => -Infinity),
      bad('custom:str', () => '1'),
      bad('custom:undef', () => undefined),
      bad('custom:ok', () => 0.25),
    ];
    const r = scoreCompletionSync(broken, [1, 1, 1, 1, 1, 4], input('x'));
    expect(r.total).toBe(1);
    expect(r.perFunction).toEqual({
      'custom:throws': 0,
      'custom:nan': 0,
      'custom:inf': 0,
      'custom:str': 0,
      'custom:undef': 0,
      'custom:ok': 0.25,
    });
    expect(r.errors.map((e) => [e.reward, e.kind])).toEqual([
      ['custom:throws', 'threw'],
      ['custom:nan', 'non-finite'],
      ['custom:inf', 'non-finite'],
      ['custom:str', 'invalid'],
      ['custom:undef', 'invalid'],
    ]);
    expect(r.errors[0].message).toBe('TypeError: boom');
    expect(combineOutcomes(['x'], null, [{ error: 'slow', timedOut: true }]).errors[0].kind).toBe(
      'timeout',
    );
  });

  it('awaits asynchronous rewards and catches their rejections', async () => {
    const slow: RewardFunction = { name: 'custom:a', compute: async () => 0.5 };
    const fail: RewardFunction = {
      name: 'custom:b',
      compute: async () => Promise.reject(new Error('no')),
    };
    const [r] = await scoreCompletions([slow, fail], null, [input('x')]);
    expect(r.total).toBe(0.5);
    expect(r.errors).toEqual([{ reward: 'custom:b', kind: 'threw', message: 'Error: no' }]);
    expect(scoreCompletionSync([slow], null, input('x')).errors[0].message).toMatch(/Promise/);
  });

  it('rejects mismatched weights, duplicate and unknown names', () => {
    expect(() => scoreCompletionSync(fns, [1], input('x'))).toThrow(
      /rewardWeights has 1 entries for 2/,
    );
    expect(() => createRewardFunctions(['format', 'format'])).toThrow(/unique/);
    expect(() => createRewardFunctions(['length'])).toThrow(/unknown reward 'length'/);
    expect(() => createRewardFunctions(['custom:mine'])).toThrow(/reward worker/);
  });
});

describe('language_consistency reward', () => {
  const score = (
    completion: string,
    script: Parameters<typeof languageConsistencyRewardFunction>[0],
  ) => languageConsistencyRewardFunction(script).compute(input(completion));

  it("is the share of the think text's words in the target script", () => {
    // 5 words with a letter (numbers and '+' are not words): 'so', 'add', 'then' Latin; 'потом',
    // 'проверим' Cyrillic. The answer's 'seven' is outside the chain of thought.
    const mixed = '<think>so 3 + 4: add, потом проверим then</think><answer>seven</answer>';
    expect(score(mixed, 'Latin')).toBe(3 / 5);
    expect(score(mixed, 'Cyrillic')).toBe(2 / 5);
    expect(score(mixed, 'Han')).toBe(0);
    // A word mixing scripts counts for neither; Japanese accepts kana and kanji in one word.
    expect(score('<think>helloмир world</think>', 'Latin')).toBe(1 / 2);
    expect(score('<think>計算します check</think>', 'Hiragana')).toBe(1 / 2);
    expect(score('<think>計算します check</think>', 'Han')).toBe(0);
    expect(score('<think>先加后减 then 检查</think>', 'Han')).toBe(2 / 3);
    // Accents and apostrophes stay inside a Latin word.
    expect(score("<think>l'été déjà fini</think>", 'Latin')).toBe(1);
  });

  it('is null (not applicable) when the chain of thought has no word with a letter', () => {
    expect(score('<think>3 + 4 = 7</think><answer>7</answer>', 'Latin')).toBeNull();
    expect(score('', 'Latin')).toBeNull();
    // Without tags the whole text before <answer> is the chain of thought.
    expect(score('add them <answer>7</answer>', 'Latin')).toBe(1);
  });

  it('is created by name with the configured script (Latin by default) and enters the total', () => {
    const [latin] = createRewardFunctions(['language_consistency']);
    const [han] = createRewardFunctions(['language_consistency'], undefined, undefined, {
      languageScript: 'Han',
    });
    const text = '<think>先加 then check</think><answer>44 + 19 + 35</answer>';
    expect(latin.name).toBe('language_consistency');
    expect(latin.compute(input(text))).toBe(2 / 3);
    expect(han.compute(input(text))).toBe(1 / 3);
    const fns = createRewardFunctions(['accuracy', 'language_consistency']);
    const r = scoreCompletionSync(fns, [1, 0.5], input(text));
    expect(r.perFunction).toEqual({ accuracy: 1, language_consistency: 2 / 3 });
    expect(r.total).toBe(1 + 0.5 * (2 / 3));
    const m = rewardMetrics(
      [r, scoreCompletionSync(fns, [1, 0.5], input('<think>1 + 2</think><answer>3</answer>'))],
      ['accuracy', 'language_consistency'],
      2,
    );
    expect(m['rewards/language_consistency/mean']).toBe(2 / 3);
    expect(m['rewards/language_consistency/na_frac']).toBe(0.5);
  });
});

describe('rewardMetrics', () => {
  it('reports TRL-named metrics with hand-worked values', () => {
    const fns = createRewardFunctions(['format', 'accuracy']);
    const good = '<think>t</think><answer>44 + 19 + 35</answer>';
    const fmt = '<think>t</think><answer>1</answer>';
    const results = [
      scoreCompletionSync(fns, null, input(good)), // 2
      scoreCompletionSync(fns, null, input(fmt)), // 1
      scoreCompletionSync(fns, null, input('x', noRef)), // 0, accuracy n/a
      scoreCompletionSync(fns, null, input('x', noRef)), // 0, accuracy n/a
    ];
    const m = rewardMetrics(results, ['format', 'accuracy'], 2);
    expect(m.reward).toBe(0.75);
    // TRL's reward_std: the unbiased std of all N totals [2, 1, 0, 0] (was the mean of the
    // group stds, √0.5 / 2, before the code followed TRL; docs/grpo.md §6).
    expect(m.reward_std).toBeCloseTo(Math.sqrt(2.75 / 3), 15);
    expect(m.frac_reward_zero_std).toBe(0.5);
    expect(m['rewards/format/mean']).toBe(0.5);
    expect(m['rewards/format/std']).toBeCloseTo(Math.sqrt(1 / 3), 15);
    expect(m['rewards/accuracy/mean']).toBe(0.5); // over the 2 applicable
    expect(m['rewards/accuracy/std']).toBeCloseTo(Math.SQRT1_2, 15);
    expect(m['rewards/accuracy/na_frac']).toBe(0.5);
    expect(m.accuracy).toBe(0.5);
    expect(m.format_rate).toBe(0.5);
    expect(m.reward_error_frac).toBe(0);
  });
});
