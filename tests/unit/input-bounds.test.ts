// Limits on numbers a user (or a shared config / URL) can set that would otherwise let one input
// stall or exhaust the app: the custom reward time limit.
import { describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../src/grpo/config';

describe('rewardTimeoutMs has a maximum', () => {
  it('accepts up to a minute', () => {
    expect(resolveConfig({ rewardTimeoutMs: 60_000 }).rewardTimeoutMs).toBe(60_000);
  });

  it('refuses more, naming the key and the limit', () => {
    let err: unknown;
    try {
      resolveConfig({ rewardTimeoutMs: 1e9 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).key).toBe('rewardTimeoutMs');
    expect((err as Error).message).toBe("config 'rewardTimeoutMs' must be ≤ 60000, got 1000000000");
  });
});
