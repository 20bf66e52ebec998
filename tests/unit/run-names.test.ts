// Runs told apart as a tracker tells them: a new run's default name (task · model · the options
// that differ from the defaults, src/grpo/run-name.ts), the legends' short texts that never show
// two runs the same (lib/overlay.ts distinctTags), several overlays each with its own dash, the
// wall-clock axis' minutes, and the Runs table's config columns and two-run diff (lib/run-table.ts).
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/grpo/config';
import { defaultRunName, RUN_NAME_MAX } from '../../src/grpo/run-name';
import {
  distinctTags,
  OVERLAY_TAG_MAX,
  relativeMinutes,
  withOverlay,
  type OverlaySeries,
} from '../../src/app/lib/overlay';
import { cellText, configDiff, varyingKeys } from '../../src/app/lib/run-table';

describe('default run names', () => {
  it('name the task, the model and the options that differ from the defaults', () => {
    expect(defaultRunName(resolveConfig({}), 'tiny-reasoner')).toBe('countdown · tiny-reasoner');
    expect(
      defaultRunName(
        resolveConfig({ learningRate: 3e-5, beta: 0.04, numGenerations: 4 }),
        'SmolLM2-135M',
      ),
    ).toBe('countdown · SmolLM2-135M · G=4, lr=3e-5, beta=0.04');
    // Reward code never goes into a name; the reward list does.
    const custom = resolveConfig({
      rewards: ['format', 'custom:len'],
      customRewards: { len: 'return 1;' },
    });
    expect(defaultRunName(custom, 'm')).toBe('countdown · m · rewards=["format","cust…');
  });

  it('count the options that do not fit instead of cutting one', () => {
    const name = defaultRunName(
      resolveConfig({
        learningRate: 3e-5,
        beta: 0.04,
        seed: 7,
        steps: 50,
        epsilon: 0.3,
        numIterations: 2,
        temperature: 0.7,
        maxCompletionLength: 64,
      }),
      'SmolLM2-135M-Instruct',
    );
    expect(name.length).toBeLessThanOrEqual(RUN_NAME_MAX);
    // A long option is passed over for shorter ones after it; the task's own options by name.
    const long = defaultRunName(
      resolveConfig({
        taskOptions: { maxNumber: 10 },
        rewards: ['format', 'accuracy', 'language_consistency'],
        seed: 7,
      }),
      'tiny-reasoner (bundled)',
    );
    expect(long).toMatch(/^countdown · tiny-reasoner \(bundled\) · maxNumber=10, .*seed=7/);
    expect(name).toMatch(/^countdown · SmolLM2-135M-Instruct · maxLen=64, .*, \+\d more$/);
  });
});

describe('legend texts', () => {
  it('keep short names whole and cut long ones at the end', () => {
    expect(distinctTags([{ name: 'run a' }, { name: 'run b' }])).toEqual(['run a', 'run b']);
    expect(distinctTags([{ name: 'a very long run name indeed' }])).toEqual(['a very long run n…']);
  });

  it('show where two long names differ, never the same text for two runs', () => {
    const names = [
      'countdown · 2026-11-27 10:00 · lr=1e-5',
      'countdown · 2026-11-27 10:00 · lr=3e-5',
      'countdown · 2026-11-28 09:00',
    ];
    const tags = distinctTags(names.map((name) => ({ name })));
    expect(new Set(tags).size).toBe(3);
    for (const t of tags) expect(t.length).toBeLessThanOrEqual(OVERLAY_TAG_MAX);
    expect(tags[0]).toContain('1e-5');
    expect(tags[1]).toContain('3e-5');
    // The old cut made all three 'countdown · 2026-…'.
    expect(tags.every((t) => t !== 'countdown · 2026-…')).toBe(true);
  });

  it('tell runs of the same name apart by their date, then by number', () => {
    const when = Date.UTC(2026, 10, 27, 9, 5);
    expect(
      distinctTags([
        { name: 'countdown', when },
        { name: 'countdown', when: when + 3_600_000 },
      ]),
    ).toEqual(['count… 11-27 09:05', 'count… 11-27 10:05']);
    expect(distinctTags([{ name: 'x' }, { name: 'x' }])).toEqual(['x #1', 'x #2']);
  });
});

describe('overlays', () => {
  const live = [{ label: 'total', points: [{ x: 1, y: 0.5 }] }];
  const rows = [
    { step: 1, metrics: { reward: 0.25 } },
    { step: 2, metrics: { reward: 0.75 } },
  ];

  it('draw each overlaid run with a dash of its own and its own legend text', () => {
    const series = withOverlay(
      live,
      ['reward'],
      [
        { name: 'run a', tag: 'a', rows },
        { name: 'run b', tag: 'b', rows: rows.slice(0, 1) },
      ],
    ) as OverlaySeries[];
    expect(series.map((s) => [s.label, s.dash ?? null, s.points.length])).toEqual([
      ['total', null, 1],
      ['total · a', '5 3', 2],
      ['total · b', '2 2', 1],
    ]);
    expect(withOverlay(live, ['reward'], [])).toBe(live);
  });

  it('place rows at wall-clock minutes since the first timed step; untimed rows are left out', () => {
    expect(relativeMinutes([null, 60_000, 90_000, null])).toEqual([null, 0, 0.5, null]);
    expect(relativeMinutes([null])).toEqual([null]);
    const [, overlay] = withOverlay(
      live,
      ['reward'],
      [{ name: 'a', rows, xs: relativeMinutes([null, 120_000]) }],
    );
    expect(overlay.points).toEqual([{ x: 0, y: 0.75 }]);
  });
});

describe('the runs table', () => {
  const a = { task: 'countdown', learningRate: 1e-5, beta: 0, customRewards: { x: 'a' } };
  const b = { task: 'countdown', learningRate: 3e-5, beta: 0, customRewards: { x: 'b' } };
  const old = { task: 'arithmetic', learningRate: 1e-5 }; // stored by a version without `beta`

  it('has a column for each option that differs between the runs, task first', () => {
    expect(varyingKeys([a, b])).toEqual(['learningRate']);
    expect(varyingKeys([a, b, old])).toEqual(['task', 'learningRate', 'beta']);
    expect(varyingKeys([a])).toEqual([]);
    expect([
      cellText(3e-5),
      cellText(undefined),
      cellText([1, 2]),
      cellText('x'.repeat(50)),
    ]).toEqual(['3e-5', '—', '[1,2]', `${'x'.repeat(39)}…`]);
  });

  it("diffs two runs' configs key by key, nested options by their own keys", () => {
    expect(configDiff(a, b)).toEqual([
      { key: 'learningRate', a: 1e-5, b: 3e-5 },
      { key: 'customRewards.x', a: 'a', b: 'b' },
    ]);
    expect(configDiff(a, old)).toEqual([
      { key: 'task', a: 'countdown', b: 'arithmetic' },
      { key: 'beta', a: 0, b: undefined },
      { key: 'customRewards', a: { x: 'a' }, b: undefined },
    ]);
    expect(configDiff(a, a)).toEqual([]);
  });
});
