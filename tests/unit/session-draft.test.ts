// The options form's draft config (src/app/session.svelte.ts): it keeps the user's nulls, so that
// epsilonHigh = null keeps following epsilon and rewardWeights = null keeps meaning "all 1" while
// the form edits other fields. The draft used to be a resolved Config cast to ConfigInput, which
// froze ε_high at its old value: editing ε made the clip range silently asymmetric.
import { describe, expect, it } from 'vitest';
import type * as Comlink from 'comlink';
import { Session } from '../../src/app/session.svelte';
import { defaultConfig, resolveConfig } from '../../src/grpo/config';
import type { TrainerApi } from '../../src/worker/trainer-api';

/** The constructor only keeps the API; these tests call nothing on it. */
const api = {} as Comlink.Remote<TrainerApi>;

describe('Session draft', () => {
  it('keeps epsilonHigh null, so the resolved ε_high follows an edited ε', () => {
    const session = new Session(api);
    session.options.draft.epsilon = 0.3;
    const config = resolveConfig(session.options.forWorker());
    expect(config.epsilon).toBe(0.3);
    expect(config.epsilonHigh).toBe(0.3);
  });

  it('shows ε_high and the reward weights as unset (null) in the form', () => {
    const session = new Session(api);
    expect(session.options.draft.epsilonHigh).toBeNull();
    expect(session.options.draft.rewardWeights).toBeNull();
  });

  it('keeps an explicit ε_high when the form sets one', () => {
    const session = new Session(api);
    session.options.draft.epsilonHigh = 0.28;
    session.options.draft.epsilon = 0.1;
    const config = resolveConfig(session.options.forWorker());
    expect(config.epsilonHigh).toBe(0.28);
    expect(config.epsilon).toBe(0.1);
  });

  it('keeps rewardWeights null, so adding a reward needs no weight', () => {
    const session = new Session(api);
    session.options.draft.rewards = ['format'];
    expect(resolveConfig(session.options.forWorker()).rewardWeights).toEqual([1]);
  });

  it('a preset keeps its nulls too', () => {
    const session = new Session(api);
    session.options.usePreset('aha');
    expect(session.options.draft.epsilonHigh).toBeNull();
    session.options.draft.epsilon = 0.25;
    expect(resolveConfig(session.options.forWorker()).epsilonHigh).toBe(0.25);
  });

  it("a run's resolved config comes back as a draft with implicit values implicit", async () => {
    const config = resolveConfig({ epsilon: 0.15 });
    const run = { runId: 'r', runName: 'n', config, step: 0, history: [], plan: null };
    const session = new Session({
      restoreProblem: async () => null,
      restoreCheckpoint: async () => run,
    } as unknown as Comlink.Remote<TrainerApi>);
    await session.checkpoints.restore('c');
    expect(session.options.draft.epsilonHigh).toBeNull();
    expect(session.options.draft.rewardWeights).toBeNull();
    session.options.draft.epsilon = 0.2;
    expect(resolveConfig(session.options.forWorker()).epsilonHigh).toBe(0.2);
    expect(defaultConfig().epsilonHigh).toBe(0.2);
  });

  it('configError follows the draft', () => {
    const session = new Session(api);
    expect(session.options.configError).toBeNull();
    session.options.draft.epsilon = NaN; // an emptied number field
    expect(session.options.configError).toMatch(/epsilon/);
    session.options.draft.epsilon = 0.1;
    expect(session.options.configError).toBeNull();
    expect(session.options.dirty).toBe(true); // no run yet
  });
});
