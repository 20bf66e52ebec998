// The page's side of live options (src/app/lib/pending.ts and session.svelte.ts): changed options
// split into those the next step applies and those that need a Reset (from the one list in
// config.ts, or the run's own list, which leaves beta out without a reference policy); the config a
// Step sends (the run's, with only the live options taken from the form); how a change reads; and
// the session on a fake worker: Step with a live change pending applies it (applyOptions) and then
// steps, with no Reset, while an option that needs a Reset stays pending; during Run, Apply sends a
// change to the running run.
import { describe, expect, it, vi } from 'vitest';
import type * as Comlink from 'comlink';
import { Session } from '../../src/app/session.svelte';
import { PLAYGROUND_DEFAULTS } from '../../src/app/stores/shell';
import {
  changesByStep,
  describeChange,
  splitPending,
  withOptions,
} from '../../src/app/lib/pending';
import {
  LIVE_OPTION_KEYS,
  resolveConfig,
  type Config,
  type ConfigKey,
  type LiveChange,
} from '../../src/grpo/config';
import type { RunState, TrainerEvent } from '../../src/worker/protocol';
import type { TrainerApi } from '../../src/worker/trainer-api';

const BASE = resolveConfig(PLAYGROUND_DEFAULTS);

describe('pending options: live or Reset', () => {
  it('splits the changed options by the live list, in schema order', () => {
    const draft = resolveConfig({
      ...PLAYGROUND_DEFAULTS,
      numGenerations: 8,
      learningRate: 1e-3,
      beta: 0.1,
      temperature: 0.5,
      maxCompletionLength: 64,
    });
    expect(splitPending(BASE, draft)).toEqual({
      live: ['temperature', 'learningRate', 'beta'],
      reset: ['numGenerations', 'maxCompletionLength'],
    });
    // A run without a reference policy does not list beta: it waits for a Reset.
    const noBeta = LIVE_OPTION_KEYS.filter((k) => k !== 'beta');
    expect(splitPending(BASE, draft, noBeta)).toEqual({
      live: ['temperature', 'learningRate'],
      reset: ['numGenerations', 'maxCompletionLength', 'beta'],
    });
    expect(splitPending(BASE, BASE)).toEqual({ live: [], reset: [] });
  });

  it('a Step sends the run config with only the live options of the form', () => {
    const draft = resolveConfig({
      ...PLAYGROUND_DEFAULTS,
      numGenerations: 8,
      learningRate: 1e-3,
      rewards: ['format', 'custom:len'],
      customRewards: { len: 'const reward = () => 1;' },
    });
    const { live } = splitPending(BASE, draft);
    // (Two rewards before and after: their weights stay [1, 1].)
    expect(live).toEqual(['rewards', 'customRewards', 'learningRate']);
    const next = withOptions(BASE, draft, live);
    expect(next).toEqual({
      ...BASE,
      learningRate: 1e-3,
      rewards: ['format', 'custom:len'],
      customRewards: { len: 'const reward = () => 1;' },
      rewardWeights: [1, 1],
    });
    expect(next.numGenerations).toBe(BASE.numGenerations);
    // A copy: editing the form afterwards does not reach the config sent.
    draft.rewards.push('accuracy');
    expect(next.rewards).toEqual(['format', 'custom:len']);
    expect(splitPending(next, draft).reset).toEqual(['numGenerations']);
  });

  it('describes changes by key and value, custom code by id, grouped by step', () => {
    expect(describeChange({ key: 'learningRate', from: 3e-4, to: 1e-3 })).toBe(
      'learningRate 0.0003 → 0.001',
    );
    expect(describeChange({ key: 'rewards', from: ['format'], to: ['format', 'custom:len'] })).toBe(
      'rewards [format] → [format, custom:len]',
    );
    expect(
      describeChange({
        key: 'customRewards',
        from: { a: 'x', b: 'y', c: 'z' },
        to: { a: 'x', b: 'y2', d: 'w' },
      }),
    ).toBe('customRewards b edited, −c, +d');
    const changes: LiveChange[] = [
      { step: 2, key: 'learningRate', from: 0.01, to: 0.001 },
      { step: 2, key: 'temperature', from: 1, to: 0.7 },
      { step: 5, key: 'steps', from: 10, to: 20 },
    ];
    expect(changesByStep(changes)).toEqual([
      { step: 2, changes: changes.slice(0, 2) },
      { step: 5, changes: changes.slice(2) },
    ]);
  });
});

// ---- the session, on a fake worker --------------------------------------------------------

/** A fake worker whose run takes live options as Run.applyLiveOptions does (the live keys only). */
async function fakeSession(liveOptions: ConfigKey[] = [...LIVE_OPTION_KEYS]) {
  let listener: ((e: TrainerEvent) => void) | null = null;
  const calls: string[] = [];
  const sent: Config[] = [];
  let config = BASE;
  let step = 0;
  let changes: LiveChange[] = [];
  let endRun = () => {};
  const state = (): RunState =>
    ({
      runId: 'r1',
      runName: 'r1',
      config,
      step,
      history: [],
      plan: null,
      liveOptions,
      liveChanges: changes,
    }) as unknown as RunState;
  const api = {
    setListener: async (cb: (e: TrainerEvent) => void) => void (listener = cb),
    probeAdapter: async () => ({ ok: false, reason: 'test', remedy: 'none' }),
    listCheckpoints: async () => [],
    storageInfo: async () => ({ usage: null, quota: null, checkpointCount: 0, checkpointBytes: 0 }),
    loadModel: async () => {
      calls.push('loadModel');
      return { model: { label: 'm' }, run: state() };
    },
    configure: async () => {
      calls.push('configure');
      return state();
    },
    applyOptions: async (next: Config) => {
      calls.push('applyOptions');
      sent.push(next);
      for (const key of Object.keys(next) as ConfigKey[])
        if (JSON.stringify(next[key]) !== JSON.stringify(config[key]))
          changes = [...changes, { step: step + 1, key, from: config[key], to: next[key] }];
      config = next;
      return state();
    },
    // Run goes on until Pause, as the worker's does; the page learns of it from status events.
    run: () => {
      calls.push('run');
      listener!({ type: 'status', status: 'running', step, steps: config.steps });
      return new Promise<void>((resolve) => (endRun = resolve));
    },
    pause: async () => {
      calls.push('pause');
      listener!({ type: 'status', status: 'paused', step, steps: config.steps });
      endRun();
    },
    step: async () => {
      calls.push('step');
      step += 1;
      listener!({
        type: 'step',
        report: { step, metrics: {}, groups: [], skipped: null, elapsedMs: 1 },
      } as unknown as TrainerEvent);
    },
  };
  const session = new Session(api as unknown as Comlink.Remote<TrainerApi>);
  await session.init();
  await session.model.load();
  return { session, calls, sent };
}

describe('session: Step applies the live options, no Reset', () => {
  it('applies a new learning rate before the next step and records it; numGenerations waits', async () => {
    const { session, calls, sent } = await fakeSession();
    await session.training.stepOnce();
    expect(calls).toEqual(['loadModel', 'step']);
    session.options.draft.learningRate = 1e-3;
    session.options.draft.numGenerations = 8;
    expect(session.options.pendingLive).toEqual(['learningRate']);
    expect(session.options.pendingReset).toEqual(['numGenerations']);

    await session.training.stepOnce();
    expect(calls).toEqual(['loadModel', 'step', 'applyOptions', 'step']);
    expect(sent[0].learningRate).toBe(1e-3);
    expect(sent[0].numGenerations).toBe(BASE.numGenerations);
    expect(session.training.applied?.learningRate).toBe(1e-3);
    expect(session.training.liveChanges).toEqual([
      { step: 2, key: 'learningRate', from: BASE.learningRate, to: 1e-3 },
    ]);
    expect(session.options.pendingLive).toEqual([]);
    expect(session.options.pendingReset).toEqual(['numGenerations']);
    expect(session.training.step).toBe(2);

    // Nothing live pending: Step just steps.
    await session.training.stepOnce();
    expect(calls.slice(4)).toEqual(['step']);
  });

  it('Run applies them too; more steps raise the target Run trains to', async () => {
    const { session, calls } = await fakeSession();
    await session.training.stepOnce();
    session.options.draft.steps = BASE.steps + 10;
    expect(session.options.targetSteps).toBe(BASE.steps + 10);
    expect(session.training.applied?.steps).toBe(BASE.steps);
    const run = session.training.run();
    await vi.waitFor(() => expect(session.training.status).toBe('running'));
    expect(calls).toEqual(['loadModel', 'step', 'applyOptions', 'run']);
    expect(session.training.applied?.steps).toBe(BASE.steps + 10);
    await session.training.pause();
    await run;
  });

  it('during Run, Apply sends the changed options to the run; stopped, it leaves them to Step', async () => {
    const { session, calls, sent } = await fakeSession();
    await session.training.stepOnce();
    session.options.draft.learningRate = 1e-3;
    await session.training.applyNow();
    expect(calls).toEqual(['loadModel', 'step']);
    expect(session.options.pendingLive).toEqual(['learningRate']);

    // Run applies the pending change before it starts; a change made while it runs waits for Apply.
    const run = session.training.run();
    await vi.waitFor(() => expect(session.training.status).toBe('running'));
    expect(calls).toEqual(['loadModel', 'step', 'applyOptions', 'run']);
    session.options.draft.temperature = 0.5;
    session.options.draft.numGenerations = 8;
    expect(session.options.pendingLive).toEqual(['temperature']);
    await session.training.applyNow();
    expect(calls).toEqual(['loadModel', 'step', 'applyOptions', 'run', 'applyOptions']);
    expect(sent[1].temperature).toBe(0.5);
    expect(sent[1].learningRate).toBe(1e-3);
    expect(sent[1].numGenerations).toBe(BASE.numGenerations);
    expect(session.training.applied?.temperature).toBe(0.5);
    expect(session.options.pendingLive).toEqual([]);
    expect(session.options.pendingReset).toEqual(['numGenerations']);
    expect(session.training.liveChanges.map((c) => [c.step, c.key, c.to])).toEqual([
      [2, 'learningRate', 1e-3],
      [2, 'temperature', 0.5],
    ]);
    await session.training.pause();
    await run;
  });

  it('without a reference policy, beta waits for a Reset and Step sends nothing', async () => {
    const { session, calls } = await fakeSession(LIVE_OPTION_KEYS.filter((k) => k !== 'beta'));
    await session.training.stepOnce();
    session.options.draft.beta = 0.1;
    expect(session.options.pendingLive).toEqual([]);
    expect(session.options.pendingReset).toEqual(['beta']);
    await session.training.stepOnce();
    expect(calls).toEqual(['loadModel', 'step', 'step']);
  });
});
