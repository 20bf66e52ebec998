// src/app/aha/reference.json is exactly what scripts/aha-reference.mjs makes of the committed
// docs/aha/report.json (rerun the script after `npm run aha`), the preset the panel compares a run
// with is the one the reference ran, and the panel's timing and curves read the right numbers.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  REFERENCE_JSON,
  REPORT_JSON,
  referenceText,
  round,
  slimReference,
} from '../../scripts/aha-reference.mjs';
import {
  AHA_REFERENCE,
  referenceSeries,
  referenceSteps,
  referenceTiming,
} from '../../src/app/aha/reference';
import { resolveConfig } from '../../src/grpo/config';
import { PRESETS } from '../../src/grpo/presets';

const report = JSON.parse(readFileSync(REPORT_JSON, 'utf8'));

describe('reference.json', () => {
  it('is the slice of docs/aha/report.json the script writes (node scripts/aha-reference.mjs)', () => {
    expect(readFileSync(REFERENCE_JSON, 'utf8')).toBe(referenceText(slimReference(report)));
  });

  it('keeps every step of every seed, rounded, and the held-out evaluations unrounded', () => {
    expect(AHA_REFERENCE.seeds.map((s) => s.seed)).toEqual([1, 2, 3]);
    for (const [i, seed] of AHA_REFERENCE.seeds.entries()) {
      const history = report.seeds[i].history;
      expect(seed.steps).toEqual(history.map((h: { step: number }) => h.step));
      expect(seed.curves.reflection_rate[0]).toBe(round(history[0].metrics.reflection_rate, 4));
      expect(seed.base).toEqual(report.seeds[i].base);
      expect(seed.final).toEqual(report.seeds[i].final);
    }
    // Seed 1, step 1: 5 of 32 completions reflected, 7 of 32 right (report.json).
    expect(AHA_REFERENCE.seeds[0].curves.reflection_rate[0]).toBe(0.1563);
    expect(AHA_REFERENCE.seeds[0].curves.accuracy[0]).toBe(0.2188);
    expect(round(NaN, 2)).toBeNull();
    expect(round(undefined, 2)).toBeNull();
  });

  it('was measured with the aha preset as it stands (apart from the seed, 1 to 3)', () => {
    // Options added since the report keep their defaults in the preset; every option the report
    // names has the preset's value.
    const preset = JSON.parse(JSON.stringify(resolveConfig(PRESETS.aha))) as Record<
      string,
      unknown
    >;
    const keys = Object.keys(AHA_REFERENCE.config).filter((k) => k !== 'seed');
    expect(keys).toHaveLength(39);
    for (const key of keys) expect([key, AHA_REFERENCE.config[key]]).toEqual([key, preset[key]]);
    expect(AHA_REFERENCE.config.seed).toBe(3);
    expect(referenceSteps()).toBe(PRESETS.aha.steps);
  });
});

describe('what the panel reads', () => {
  it('timing: 38.7 min in all, per-seed training and seconds per step', () => {
    const t = referenceTiming();
    expect(t.steps).toBe(95);
    expect(t.seeds).toBe(3);
    expect(t.totalMinutes.toFixed(1)).toBe('38.7');
    // trainSeconds 710.28, 781.57, 689.53 over 95 steps each.
    expect(t.seedMinutes.map((m) => m.toFixed(2))).toEqual(['11.49', '13.03']);
    expect(t.stepSeconds.map((s) => s.toFixed(2))).toEqual(['7.26', '8.23']);
    expect(t.cores).toBe(2);
    expect(t.adapter).toBe('google swiftshader');
  });

  it('series: one point per step, a null value is a gap', () => {
    const seed = { ...AHA_REFERENCE.seeds[0], steps: [1, 2], curves: { accuracy: [0.5, null] } };
    expect(referenceSeries(seed, 'accuracy')).toEqual([
      { x: 1, y: 0.5 },
      { x: 2, y: NaN },
    ]);
    expect(referenceSeries(AHA_REFERENCE.seeds[2], 'reflection_rate')).toHaveLength(95);
  });
});
