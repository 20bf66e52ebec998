// The benchmark statistics that turn runs into reported ratios (bench/lib/stats.ts), and the
// warm-up rule of the side-by-side model benchmarks (bench/browser/models.ts): every figure, quick
// mode included, has warm-up runs before its measured ones (issue 34: --quick timed the 100M model
// cold).
import { describe, expect, it } from 'vitest';
import { fmtRatio, ratioRange, summarize } from '../../bench/lib/stats';
import { BENCH_MODELS, MIN_WARMUP, quickModel } from '../../bench/browser/models';
import { OUR_ENGINE, parsePaths, pathOf, pathTuning } from '../../bench/browser/paths';

describe('ratioRange', () => {
  it('is median over median, with the range over every pairing of runs', () => {
    const ours = summarize([10, 12, 20], 'tok/s');
    const theirs = summarize([4, 5, 8], 'tok/s');
    const r = ratioRange(ours, theirs);
    expect(r.median).toBeCloseTo(12 / 5, 12);
    expect(r.min).toBeCloseTo(10 / 8, 12);
    expect(r.max).toBeCloseTo(20 / 4, 12);
    // Every pairwise ratio lies inside the range.
    for (const a of ours.samples)
      for (const b of theirs.samples) {
        expect(a / b).toBeGreaterThanOrEqual(r.min - 1e-12);
        expect(a / b).toBeLessThanOrEqual(r.max + 1e-12);
      }
  });

  it('collapses to one value for one run each, and is printed median [min–max]', () => {
    const r = ratioRange(summarize([6], 'GFLOP/s'), summarize([3], 'GFLOP/s'));
    expect(r).toEqual({ median: 2, min: 2, max: 2 });
    expect(fmtRatio(ratioRange(summarize([9, 10], 'x'), summarize([4, 5], 'x')))).toBe(
      '2.111× [1.800–2.500]',
    );
  });

  it('refuses rates that are not positive', () => {
    expect(() => ratioRange(summarize([1], 'x'), summarize([0, 1], 'x'))).toThrow(/positive/);
  });
});

describe('model benchmark warm-ups', () => {
  it('every figure of every model has warm-up runs, full and --quick', () => {
    for (const m of BENCH_MODELS) {
      for (const model of [m, quickModel(m)]) {
        expect(model.forward.warmup, `${m.id} forward`).toBeGreaterThanOrEqual(MIN_WARMUP.forward);
        expect(model.sampling.warmup, `${m.id} sampling`).toBeGreaterThanOrEqual(
          MIN_WARMUP.sampling,
        );
        expect(model.training.warmup, `${m.id} training`).toBeGreaterThanOrEqual(
          MIN_WARMUP.training,
        );
      }
      // --quick keeps at least two measured runs, so its ratios have a range.
      const q = quickModel(m);
      for (const w of [q.forward, q.sampling, q.training]) expect(w.runs).toBe(2);
    }
    expect(MIN_WARMUP.forward).toBeGreaterThanOrEqual(1);
    expect(MIN_WARMUP.sampling).toBeGreaterThanOrEqual(1);
  });
});

describe('our kernel paths', () => {
  it('map to the engine tuning and back from their labels', () => {
    expect(pathTuning('gpu')).toEqual({ avoidBarriers: false });
    expect(pathTuning('emulation')).toEqual({ avoidBarriers: true });
    expect(pathOf(OUR_ENGINE.gpu)).toBe('gpu');
    expect(pathOf(OUR_ENGINE.emulation)).toBe('emulation');
    expect(parsePaths('emulation,gpu')).toEqual(['gpu', 'emulation']);
    expect(() => parsePaths('cpu')).toThrow(/unknown path 'cpu'/);
  });
});
