// The playground's pure helpers: chart decimation and ticks, ETA, per-token colouring values, the
// service worker's precache manifest, and the options form's coverage of the schema.
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { columnPath, decimate, yRange } from '../../src/app/lib/decimate';
import { estimate, formatDuration } from '../../src/app/lib/format';
import { formatTick, niceTicks } from '../../src/core/chart-scale';
import { formatNumber } from '../../src/core/format';
import { OPTION_GROUPS } from '../../src/app/lib/options';
import { isClipped, tokenKl, tokenRatios, tokenValues } from '../../src/app/lib/tokens';
import { precacheManifest, serviceWorkerSource } from '../../src/app/sw/precache-plugin';
import { CONFIG_KEYS } from '../../src/grpo/config';
import type { CompletionRecord } from '../../src/grpo/trainer';

// Colouring values are computed in f64 from f32 log-probs: equal to the closed form to rounding.
const TOKEN_TOL = 1e-12;

describe('decimate', () => {
  it('keeps every point when there are fewer points than pixels', () => {
    const xs = [1, 2, 3];
    const cols = decimate(xs, [0.5, -1, 2], 1, 3, 300);
    expect(cols.map((c) => c.px)).toEqual([0, 150, 299]);
    expect(cols.map((c) => c.first)).toEqual([0.5, -1, 2]);
  });

  it('reduces 10 000 points to at most width columns with exact min and max', () => {
    const n = 10_000;
    const xs = Float64Array.from({ length: n }, (_, i) => i + 1);
    const ys = Float64Array.from({ length: n }, (_, i) => Math.sin(i / 37) + (i === 4321 ? 9 : 0));
    const cols = decimate(xs, ys, 1, n, 200);
    expect(cols.length).toBe(200);
    expect(cols.reduce((s, c) => s + c.count, 0)).toBe(n);
    expect(Math.max(...cols.map((c) => c.max))).toBe(ys[4321]);
    expect(Math.min(...cols.map((c) => c.min))).toBe(Math.min(...ys));
    // The spike's column draws first → max → min/last in order of occurrence.
    const spike = cols.find((c) => c.max === ys[4321])!;
    expect(columnPath(spike)).toContain(ys[4321]);
  });

  it('skips non-finite values (metrics not computed at a step)', () => {
    const cols = decimate([1, 2, 3, 4], [NaN, 1, Infinity, 3], 1, 4, 4);
    expect(cols.map((c) => c.first)).toEqual([1, 3]);
  });

  it('yRange pads and never collapses; niceTicks are round and cover the range', () => {
    expect(yRange([[2, 2]])).toEqual([1.8, 2.2]);
    expect(yRange([[NaN]])).toEqual([0, 1]);
    const [lo, hi] = yRange([[0, 1], [-1]]);
    expect(lo).toBeLessThan(-1);
    expect(hi).toBeGreaterThan(1);
    expect(niceTicks(0, 1, 4)).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect(niceTicks(-0.3, 0.3, 3)).toEqual([-0.2, 0, 0.2]);
    // Labels distinguish neighbouring ticks however small the range.
    expect(niceTicks(-0.003, 0, 3).map((t) => formatTick(t, 0.001))).toEqual([
      '-0.003',
      '-0.002',
      '-0.001',
      '0',
    ]);
    expect(formatTick(0.25, 0.25)).toBe('0.25');
    expect(formatTick(40, 20)).toBe('40');
  });
});

describe('format and ETA', () => {
  it('averages the last 10 steps and multiplies by the steps left', () => {
    expect(estimate([], 5)).toEqual({ perStepMs: null, etaMs: null });
    const times = [100, ...Array.from({ length: 10 }, () => 2000)];
    expect(estimate(times, 3)).toEqual({ perStepMs: 2000, etaMs: 6000 });
    expect(estimate([1000, 3000], 0).etaMs).toBe(0);
  });

  it('formats values and durations', () => {
    expect(formatNumber(NaN)).toBe('—');
    expect(formatNumber(0.123456)).toBe('0.123');
    expect(formatNumber(1e-6)).toBe('1.00e-6');
    expect(formatNumber(3)).toBe('3');
    expect(formatDuration(1500)).toBe('1.5 s');
    expect(formatDuration(185_000)).toBe('3 min 05 s');
    expect(formatDuration(2 * 3600_000 + 600_000)).toBe('2 h 10 min');
  });
});

describe('token colouring values', () => {
  const completion = (over: Partial<CompletionRecord>): CompletionRecord => ({
    text: 'abc',
    tokens: [1, 2, 3],
    truncated: false,
    reward: { total: 1, perFunction: {}, errors: [] },
    advantage: 0.5,
    reflects: false,
    logp: [-1, -2, -0.5],
    oldLogp: [-1, -2, -0.5],
    refLogp: null,
    counted: [true, true, true],
    logpAfter: null,
    ...over,
  });

  it('ratio uses the after-update log-probs when present', () => {
    const c = completion({ logpAfter: [-0.5, -2.5, -0.5] });
    const r = tokenRatios(c);
    expect(Math.abs(r[0] - Math.exp(0.5))).toBeLessThan(TOKEN_TOL);
    expect(Math.abs(r[1] - Math.exp(-0.5))).toBeLessThan(TOKEN_TOL);
    expect(r[2]).toBe(1);
    expect(tokenRatios(completion({}))).toEqual([1, 1, 1]);
  });

  it('clipped follows the sign of the advantage (docs/grpo.md §3)', () => {
    expect(isClipped(1.3, 1, 0.2, 0.28)).toBe(true);
    expect(isClipped(1.25, 1, 0.2, 0.28)).toBe(false);
    expect(isClipped(0.7, 1, 0.2, 0.28)).toBe(false);
    expect(isClipped(0.7, -1, 0.2, 0.28)).toBe(true);
    expect(isClipped(1.5, -1, 0.2, 0.28)).toBe(false);
    const c = completion({ advantage: 1, logpAfter: [-0.5, -2, -0.5] });
    expect(tokenValues(c, 'clipped', 0.2, 0.2)).toEqual([1, 0, 0]);
  });

  it('k3 per token against the reference; null without one', () => {
    expect(tokenKl(completion({}))).toEqual([null, null, null]);
    const c = completion({ refLogp: [-1.5, -2, 0] });
    const kl = tokenKl(c) as number[];
    const k3 = (d: number) => Math.exp(d) - d - 1;
    expect(Math.abs(kl[0] - k3(-0.5))).toBeLessThan(TOKEN_TOL);
    expect(kl[1]).toBe(0);
    expect(Math.abs(kl[2] - k3(0.5))).toBeLessThan(TOKEN_TOL);
    expect(tokenValues(c, 'advantage', 0.2, 0.2)).toEqual([0.5, 0.5, 0.5]);
  });
});

describe('service worker precache', () => {
  it('lists the build output (no source maps), index.html as /, and versions by content', () => {
    const dir = mkdtempSync(join(tmpdir(), 'k1-sw-'));
    mkdirSync(join(dir, 'assets'));
    mkdirSync(join(dir, 'models/tiny'), { recursive: true });
    writeFileSync(join(dir, 'index.html'), '<!doctype html>');
    writeFileSync(join(dir, 'assets/app.js'), 'x');
    writeFileSync(join(dir, 'assets/app.js.map'), '{}');
    writeFileSync(join(dir, 'models/tiny/config.json'), '{}');
    writeFileSync(join(dir, 'sw.js'), 'old');
    const a = precacheManifest(dir);
    expect(a.urls).toEqual(['/', '/assets/app.js', '/index.html', '/models/tiny/config.json']);
    writeFileSync(join(dir, 'assets/app.js'), 'y');
    const b = precacheManifest(dir);
    expect(b.version).not.toBe(a.version);
    const sw = serviceWorkerSource(b);
    expect(sw).toContain(JSON.stringify(b.urls));
    expect(sw).toContain(b.version);
    // The generated worker is valid JavaScript.
    expect(() => new Function(sw)).not.toThrow();
  });
});

describe('options form', () => {
  it('shows every config option: in the generic form or in its own panel', () => {
    const own = [
      'model',
      'task',
      'taskOptions',
      'template',
      'enableThinking',
      'rewards',
      'customRewards',
      'rewardWeights',
      'languageScript',
    ];
    const shown = [...OPTION_GROUPS.flatMap((g) => g.keys), ...own].sort();
    expect(shown).toEqual([...CONFIG_KEYS].sort());
  });
});
