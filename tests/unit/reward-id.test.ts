// The one rule for reward ids (src/rewards/reward-id.ts) and where it applies: config resolution
// (CLI and config files), the shared URL's parser and the helpers that drop custom reward code.
// Before the rule, a config or a link could carry an id with a line break or a quote, which then
// reached metric keys, CSV columns and the TRL export's Python source.
import { describe, expect, it } from 'vitest';
import {
  REWARD_ID_PATTERN,
  checkRewardId,
  customRewardCode,
  rewardIdProblem,
  rewardIdsProblem,
  withoutCustomRewards,
} from '../../src/rewards/reward-id';
import { BUILTIN_REWARDS } from '../../src/rewards/rewards';
import {
  configFromUrlParams,
  configToUrlParams,
  resolveConfig,
  ConfigError,
} from '../../src/grpo/config';

const CODE = 'function reward({ completion }) { return completion.length / 100; }';

describe('rewardIdProblem', () => {
  it('accepts the built-ins and the ids in use', () => {
    for (const id of [...BUILTIN_REWARDS, 'len', 'starts_with_a', 'len-bonus', 'a', 'x9']) {
      expect(rewardIdProblem(id)).toBeNull();
      expect(REWARD_ID_PATTERN.test(id)).toBe(true);
    }
    expect(rewardIdProblem('a'.repeat(40))).toBeNull();
  });

  it('names the problem: line break, quote, space, length, case, first character', () => {
    expect(rewardIdProblem('len\nbonus')).toBe(
      `reward id "len\\nbonus" contains a line break (an id is a lower-case letter, then up to 39 lower-case letters, digits, '_' or '-')`,
    );
    expect(rewardIdProblem('a\r')).toMatch(/^reward id "a\\r" contains a line break/);
    expect(rewardIdProblem("it's")).toMatch(/^reward id "it's" contains a quote \(/);
    expect(rewardIdProblem('say"hi')).toMatch(/^reward id "say\\"hi" contains a quote \(/);
    expect(rewardIdProblem('a`b')).toMatch(/contains a quote/);
    expect(rewardIdProblem('a\tb')).toMatch(/contains a control character/);
    expect(rewardIdProblem('two words')).toMatch(/contains a space/);
    expect(rewardIdProblem('a'.repeat(41))).toMatch(/is 41 characters long, more than 40/);
    expect(rewardIdProblem('Brevity')).toMatch(/has upper-case letters/);
    expect(rewardIdProblem('9lives')).toMatch(/does not start with a lower-case letter/);
    expect(rewardIdProblem('_x')).toMatch(/does not start with a lower-case letter/);
    expect(rewardIdProblem('a.b')).toMatch(/contains "\."/);
    expect(rewardIdProblem('a<b>')).toMatch(/contains "<"/);
    expect(rewardIdProblem('')).toMatch(/^a reward id is empty/);
    expect(rewardIdProblem(3)).toBe('a reward id must be a string, got number');
  });

  it('keeps the message on one line whatever the id holds', () => {
    for (const id of ['a\nb', 'a\u2028b', 'x'.repeat(500) + '\n']) {
      const problem = rewardIdProblem(id)!;
      expect(problem).not.toMatch(/[\n\r\u2028]/);
      expect(problem.length).toBeLessThan(220);
    }
  });

  it('checkRewardId returns a valid id and throws the message otherwise', () => {
    expect(checkRewardId('brevity')).toBe('brevity');
    expect(() => checkRewardId('a"b')).toThrow(/reward id "a\\"b" contains a quote/);
  });
});

describe('rewardIdsProblem', () => {
  it('checks custom:<id> entries of rewards and the keys of customRewards', () => {
    expect(
      rewardIdsProblem({ rewards: ['format', 'custom:len'], customRewards: { len: CODE } }),
    ).toBeNull();
    expect(rewardIdsProblem({ rewards: ['custom:a\nb'] })).toEqual({
      key: 'rewards',
      message: expect.stringMatching(/^config 'rewards': reward id "a\\nb" contains a line break/),
    });
    expect(rewardIdsProblem({ customRewards: { "x'": CODE } })).toEqual({
      key: 'customRewards',
      message: expect.stringMatching(/^config 'customRewards': reward id "x'" contains a quote/),
    });
    // Unknown names without the prefix are config resolution's to report.
    expect(rewardIdsProblem({ rewards: ['nope'] })).toBeNull();
  });
});

describe('config resolution applies the rule', () => {
  it('rejects a line break or a quote in a custom id with a specific message', () => {
    const bad = (id: string) => () =>
      resolveConfig({ rewards: [`custom:${id}`], customRewards: { [id]: CODE } });
    expect(bad('len\nx')).toThrow(ConfigError);
    expect(bad('len\nx')).toThrow(/^config 'rewards': reward id "len\\nx" contains a line break/);
    expect(bad('len"x')).toThrow(/^config 'rewards': reward id "len\\"x" contains a quote/);
    // An unused entry of customRewards is checked too: its code would still be stored and shown.
    expect(() => resolveConfig({ customRewards: { 'Bad Id': CODE } })).toThrow(
      /^config 'customRewards': reward id "Bad Id" contains a space/,
    );
  });

  it('still resolves valid custom rewards', () => {
    const c = resolveConfig({
      rewards: ['format', 'custom:len-bonus'],
      customRewards: { 'len-bonus': CODE },
    });
    expect(c.rewards).toEqual(['format', 'custom:len-bonus']);
    expect(c.customRewards).toEqual({ 'len-bonus': CODE });
  });
});

describe('the shared URL parser applies the rule', () => {
  it('round-trips a valid custom reward', () => {
    const config = resolveConfig({
      rewards: ['format', 'custom:len'],
      customRewards: { len: CODE },
    });
    const back = configFromUrlParams(configToUrlParams(config).toString());
    expect(back.rewards).toEqual(['format', 'custom:len']);
    expect(back.customRewards).toEqual({ len: CODE });
  });

  it('rejects an id with a line break or a quote, naming it', () => {
    const params = new URLSearchParams();
    params.set('customRewards', JSON.stringify({ 'a\nb': CODE }));
    expect(() => configFromUrlParams(params)).toThrow(
      /^config 'customRewards': reward id "a\\nb" contains a line break/,
    );
    const quoted = new URLSearchParams({ rewards: `format,custom:x"y` });
    expect(() => configFromUrlParams(quoted)).toThrow(
      /^config 'rewards': reward id "x\\"y" contains a quote/,
    );
  });
});

describe('customRewardCode and withoutCustomRewards', () => {
  it('lists the code by id', () => {
    expect(customRewardCode({ customRewards: { a: 'x', b: 'y' } })).toEqual({ a: 'x', b: 'y' });
    expect(customRewardCode({})).toEqual({});
    expect(customRewardCode({ customRewards: null })).toEqual({});
  });

  it('drops the custom rewards with their weights and keeps every other field', () => {
    const out = withoutCustomRewards({
      rewards: ['format', 'custom:len', 'accuracy'],
      rewardWeights: [0.5, 2, 3],
      customRewards: { len: CODE },
      steps: 7,
    });
    expect(out).toEqual({
      rewards: ['format', 'accuracy'],
      rewardWeights: [0.5, 3],
      customRewards: {},
      steps: 7,
    });
    expect(resolveConfig(out).rewards).toEqual(['format', 'accuracy']);
  });

  it('falls back to the built-ins when only custom rewards were listed', () => {
    const out = withoutCustomRewards({
      rewards: ['custom:len'],
      rewardWeights: [2],
      customRewards: { len: CODE },
    });
    expect(out.rewards).toEqual(['format', 'accuracy']);
    expect(out.rewardWeights).toBeNull();
  });

  it('leaves rewardWeights unset when it was unset', () => {
    const out = withoutCustomRewards({
      rewards: ['format', 'custom:len'],
      customRewards: { len: CODE },
    });
    expect(out).toEqual({ rewards: ['format'], customRewards: {} });
  });
});
