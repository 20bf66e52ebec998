// The Aha panel's integrity checks (src/app/aha/integrity.ts): waiting for enough steps, every
// difference from the aha preset, custom rewards that pay for reflection words (scored in the real
// QuickJS sandbox on completions that differ only by a marker; scanned when they cannot run), base
// rates and the expected duration.
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/grpo/config';
import { tryCustomReward } from '../../src/rewards/custom-reward';
import { PRESETS } from '../../src/grpo/presets';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { accuracyReward } from '../../src/rewards/rewards';
import {
  AHA_VERDICT_STEPS,
  baseRates,
  controlWord,
  differenceText,
  expectedMinutes,
  insertWord,
  integrity,
  judgeProbe,
  presetDifferences,
  probeBases,
  probeCustomRewards,
  probeInputs,
  PROBE_MARKERS,
  PROBE_PROBLEM,
  scanSource,
  shapeDifferences,
  stepsNeeded,
  type TryReward,
} from '../../src/app/aha/integrity';
import type { MetricsRow } from '../../src/worker/types';

const sandboxTry: TryReward = (source, inputs, timeoutMs) =>
  tryCustomReward(source, inputs, timeoutMs, nodeSandboxFactory());

const WAIT_REWARD = `function reward({ completion }) { return completion.includes('wait') ? 1 : 0; }`;

function aha(overrides: Record<string, unknown> = {}) {
  return resolveConfig({ ...PRESETS.aha, ...overrides });
}

function rows(n: number): MetricsRow[] {
  return Array.from({ length: n }, (_, i) => ({ step: i + 1, metrics: {} }));
}

describe('the run against the aha preset', () => {
  it('the preset itself, or with a reference seed, differs in nothing', () => {
    expect(presetDifferences(aha())).toEqual([]);
    expect(presetDifferences(aha({ seed: 3 }))).toEqual([]);
  });

  it('lists every differing key with both values', () => {
    const d = presetDifferences(aha({ learningRate: 1e-3, seed: 7, numGenerations: 8 }));
    expect(d.map(differenceText)).toEqual([
      'numGenerations: 8 (preset 16)',
      'learningRate: 0.001 (preset 0.0006)',
      'seed: 7 (preset 1)',
    ]);
  });

  it('task options differ option by option', () => {
    const d = presetDifferences(
      aha({ taskOptions: { ...PRESETS.aha.taskOptions, excludeHeldOut: 0, maxTarget: 50 } }),
    );
    expect(d.map(differenceText)).toEqual([
      'taskOptions.maxTarget: 50 (preset 100)',
      'taskOptions.excludeHeldOut: 0 (preset 1)',
    ]);
  });

  it('shows custom rewards by id and lists as lists', () => {
    const d = presetDifferences(
      aha({
        rewards: ['format', 'accuracy', 'custom:wait'],
        customRewards: { wait: WAIT_REWARD },
      }),
    );
    expect(d.map(differenceText)).toEqual([
      'rewards: [format, accuracy, custom:wait] (preset [format, accuracy])',
      'customRewards: {wait} (preset {})',
      'rewardWeights: [1, 1, 1] (preset [1, 1])',
    ]);
  });

  it('the step shape: only the keys that set a step’s time', () => {
    expect(shapeDifferences(aha({ learningRate: 1e-3 }))).toEqual([]);
    expect(shapeDifferences(aha({ numGenerations: 8, maxCompletionLength: 40 }))).toEqual([
      'numGenerations',
      'maxCompletionLength',
    ]);
  });
});

describe('custom rewards that pay for reflection', () => {
  it('pairs differ only by the marker (a neutral word of its length in the control)', () => {
    expect(controlWord('check again')).toBe('zzzzz zzzzz');
    expect(insertWord('<think>a</think><answer>b</answer>', 'wait')).toBe(
      '<think>a. wait </think><answer>b</answer>',
    );
    expect(insertWord('no tags', 'wait')).toBe('wait no tags');
    const { inputs, cases } = probeInputs(probeBases(), ['wait']);
    // Two fixed bases × ('wait', 'Wait') × (control, variant).
    expect(inputs).toHaveLength(8);
    expect(inputs[cases[0].variant].completion).toBe(
      '<think>6 + 4 = 10, 10 * 2 = 20. wait </think><answer>(6 + 4) * 2</answer>',
    );
    expect(inputs[cases[0].control].completion).toBe(
      '<think>6 + 4 = 10, 10 * 2 = 20. zzzz </think><answer>(6 + 4) * 2</answer>',
    );
    // The fixed bases answer the probe problem rightly and wrongly (accuracy 1 and 0).
    const acc = accuracyReward();
    expect(probeBases().map((b) => acc.compute(b))).toEqual([1, 0]);
    // The run's own reflecting completions are no base.
    const own = [
      { completion: 'let me try again', prompt: '', problem: PROBE_PROBLEM },
      { completion: 'plain', prompt: '', problem: PROBE_PROBLEM },
    ];
    expect(probeBases(own).map((b) => b.completion)[2]).toBe('plain');
    expect(probeBases(own)).toHaveLength(3);
    expect(PROBE_MARKERS).toContain('backward');
    expect(PROBE_MARKERS).toContain('check again');
  });

  it('judges weighted differences: pays, penalises (negative weight), neutral', () => {
    const cases = [
      { marker: 'wait', control: 0, variant: 1 },
      { marker: 'recheck', control: 2, variant: 3 },
    ];
    const results = [{ value: 0 }, { value: 1 }, { value: 0 }, { value: 0 }];
    expect(judgeProbe('custom:w', 1, results, cases)).toMatchObject({
      kind: 'pays',
      markers: ['wait'],
      gain: 1,
    });
    expect(judgeProbe('custom:w', -0.5, results, cases)).toMatchObject({
      kind: 'penalises',
      markers: ['wait'],
      gain: 0.5,
    });
    expect(judgeProbe('custom:w', 1, [{ value: 2 }, { value: 2 }], cases.slice(0, 1)).kind).toBe(
      'neutral',
    );
  });

  it('the sandbox scores a "wait" reward as paying, a length penalty as neutral', async () => {
    const config = aha({
      rewards: ['format', 'accuracy', 'custom:wait', 'custom:short'],
      customRewards: {
        wait: WAIT_REWARD,
        short: 'function reward({ completion }) { return -completion.length / 100; }',
      },
    });
    const probes = await probeCustomRewards(config, sandboxTry);
    expect(probes.map((p) => [p.name, p.method, p.kind, p.markers, p.gain])).toEqual([
      ['custom:wait', 'scored', 'pays', ['wait'], 1],
      ['custom:short', 'scored', 'neutral', [], 0],
    ]);
  });

  it('a reward that cannot run is scanned for the marker words', async () => {
    const config = aha({
      rewards: ['format', 'accuracy', 'custom:broken'],
      customRewards: {
        broken: `function reward({ completion }) { return completion.includes('Check again') ? oops() : 0 } }`,
      },
    });
    const [p] = await probeCustomRewards(config, sandboxTry);
    expect(p.method).toBe('scanned');
    expect(p.kind).toBe('pays');
    expect(p.markers).toEqual(['check again']);
    expect(p.error).toMatch(/SyntaxError/);
    expect(scanSource("s.includes('WAIT') || /backward/.test(s)")).toEqual(['wait', 'backward']);
    expect(scanSource('const awaited = 1; waiter()')).toEqual([]);
    const unreachable: TryReward = () => Promise.reject(new Error('no Web Worker here'));
    const [q] = await probeCustomRewards(
      aha({ rewards: ['custom:w'], customRewards: { w: WAIT_REWARD } }),
      unreachable,
    );
    expect(q).toMatchObject({ method: 'scanned', kind: 'pays', markers: ['wait'] });
    expect(q.error).toBe('no Web Worker here');
  });
});

describe('the verdict’s frame', () => {
  it('a run differing in learningRate with a reflection-paying reward: both named', async () => {
    const config = aha({
      learningRate: 1e-3,
      rewards: ['format', 'accuracy', 'custom:wait'],
      customRewards: { wait: WAIT_REWARD },
    });
    const probes = await probeCustomRewards(config, sandboxTry);
    const r = integrity(rows(40), config, probes);
    expect(r.needed).toBe(0);
    expect(r.bought.map((p) => p.name)).toEqual(['custom:wait']);
    expect(r.lines).toEqual([
      'A custom reward pays for reflection words: custom:wait (scored on completions that differ only by the word, adding it is worth up to 1 reward (“wait”)). Rising reflection is then bought, not an aha.',
      'This run differs from the aha preset in 4 settings: rewards: [format, accuracy, custom:wait] (preset [format, accuracy]); customRewards: {wait} (preset {}); rewardWeights: [1, 1, 1] (preset [1, 1]); learningRate: 0.001 (preset 0.0006).',
    ]);
  });

  it('fewer than 30 steps: waiting, with how many more are needed', () => {
    expect(AHA_VERDICT_STEPS).toBe(30);
    expect(stepsNeeded(rows(3))).toBe(27);
    expect(stepsNeeded(rows(31))).toBe(0);
    const r = integrity(rows(3), aha(), []);
    expect(r.lines).toEqual([
      'Waiting: 27 more steps needed before a verdict (3 of 30).',
      'This run uses the aha preset’s settings.',
    ]);
    expect(integrity(rows(29), null, []).lines).toEqual([
      'Waiting: 1 more step needed before a verdict (29 of 30).',
    ]);
  });
});

describe('base rates and duration', () => {
  const history: MetricsRow[] = [
    {
      step: 2,
      metrics: {
        reflection_rate: 0.5,
        accuracy: 0.5,
        'reflection/accuracy_reflecting': 0.75,
        'reflection/accuracy_not_reflecting': 0.25,
        'reflection/count_reflecting': 16,
        'reflection/count_not_reflecting': 16,
      },
    },
    {
      step: 1,
      metrics: {
        reflection_rate: 0.125,
        accuracy: 0.25,
        'reflection/accuracy_reflecting': 0.5,
        'reflection/accuracy_not_reflecting': 0.2142857142857143,
        'reflection/count_reflecting': 4,
        'reflection/count_not_reflecting': 28,
      },
    },
  ];

  it('the first step beside the selected one (the latest without one)', () => {
    const b = baseRates(history)!;
    expect(b.start).toEqual({
      step: 1,
      rate: 0.125,
      accuracy: 0.25,
      accuracyReflecting: 0.5,
      accuracyNotReflecting: 0.2142857142857143,
      countReflecting: 4,
      countNotReflecting: 28,
    });
    expect(b.now.step).toBe(2);
    expect(b.now.accuracyReflecting).toBe(0.75);
    expect(baseRates(history, 1)!.now.step).toBe(1);
    expect(baseRates(history, 99)!.now.step).toBe(2);
    expect(baseRates([])).toBeNull();
  });

  it('95 steps of 7.5 s are 11.875 min; the first step’s compile adds', () => {
    expect(expectedMinutes(7500, 95)).toBe(11.875);
    expect(expectedMinutes(7500, 95, 30_000)).toBe(12.375);
  });
});
