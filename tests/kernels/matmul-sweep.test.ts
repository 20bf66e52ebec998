// The matmul variant sweep (src/kernels/matmul-sweep.ts) on SwiftShader: skipped on a software
// adapter unless forced; forced, it times every candidate on every shape of its class, picks the
// least summed median per class, applies it to the engine's tuning and caches it per adapter;
// timeMatmul reports GPU time from timestamp queries or wall-clock. No timing is asserted, only
// that the numbers exist and the choice follows them.
import { expect, it } from 'vitest';
import { MatmulKernel } from '../../src/kernels/matmul';
import {
  clearMatmulSweepMemory,
  modelMatmulShapes,
  sweepMatmulVariants,
  timeMatmul,
  type SweepShape,
} from '../../src/kernels/matmul-sweep';
import { testEngine, testEngineWith } from './harness';

const SHAPES: SweepShape[] = [
  { name: 'decode', M: 2, N: 12, K: 8, transB: true },
  { name: 'train', M: 20, N: 12, K: 8, transB: true },
];

it('skips a software adapter unless forced, and leaves the tuning alone', async () => {
  const engine = await testEngine();
  expect(engine.gpu.adapter.isSoftware).toBe(true);
  const before = { ...engine.pipelines.tuning };
  const result = await sweepMatmulVariants(engine, SHAPES);
  expect(result.skipped).toBe('software adapter');
  expect(result.choice).toEqual({ small: 'emulation', large: 'emulation' });
  expect(result.timings).toEqual([]);
  expect(engine.pipelines.tuning).toEqual(before);
});

it('forced: times each candidate per class, applies and caches the fastest', async () => {
  clearMatmulSweepMemory();
  const engine = await testEngineWith({ avoidBarriers: false, vectorLoads: true });
  const candidates = { small: ['staged64', 'reg16x64'], large: ['staged64', 'emulation'] } as const;
  const result = await sweepMatmulVariants(engine, SHAPES, {
    force: true,
    runs: 2,
    candidates: { small: [...candidates.small], large: [...candidates.large] },
  });
  expect(result.skipped).toBeNull();
  expect(result.timings).toHaveLength(4);
  for (const { timing } of result.timings) {
    expect(timing.ms.median).toBeGreaterThan(0);
    expect(timing.gflops.median).toBeGreaterThan(0);
    expect(timing.ms.min).toBeLessThanOrEqual(timing.ms.max);
  }
  // The variant that ran is the one asked for.
  expect(result.timings.map((t) => t.timing.variant)).toEqual([
    'staged64',
    'reg16x64',
    'staged64',
    'emulation',
  ]);
  for (const cls of ['small', 'large'] as const) {
    const totals = Object.entries(result.totals[cls]!);
    const fastest = totals.reduce((x, y) => (y[1] < x[1] ? y : x))[0];
    expect(result.choice[cls]).toBe(fastest);
  }
  expect(engine.pipelines.tuning.matmulSmall).toBe(result.choice.small);
  expect(engine.pipelines.tuning.matmulLarge).toBe(result.choice.large);
  const kernel = new MatmulKernel(engine.device, engine.pipelines);
  expect(kernel.variantFor({ M: 2 })).toBe(result.choice.small);
  // Same adapter, same shapes: the cached choice, nothing timed.
  const again = await sweepMatmulVariants(engine, SHAPES, { force: true });
  expect(again.skipped).toBe('cached');
  expect(again.choice).toEqual(result.choice);
  expect(again.key).toBe(result.key);
  expect(result.key).toContain(engine.gpu.adapter.vendor);
});

it('timeMatmul: timestamp queries where the device has them, else wall-clock', async () => {
  const engine = await testEngineWith({ avoidBarriers: false, vectorLoads: true });
  const shape = { M: 2, N: 12, K: 8, transB: true };
  const stamped = await timeMatmul(engine, shape, { matmulSmall: 'staged64' }, 2);
  expect(stamped.method).toBe(
    engine.device.features.has('timestamp-query') ? 'timestamp' : 'wall-clock',
  );
  // Three runs: an odd count, so the median GFLOP/s is the median time's.
  const wall = await timeMatmul(engine, shape, { matmulSmall: 'staged64' }, 3, {
    wallClock: true,
  });
  expect(wall.method).toBe('wall-clock');
  expect(wall.gflops.median).toBeCloseTo((2 * 2 * 12 * 8) / (wall.ms.median * 1e6), 6);
});

it("modelMatmulShapes: the model's products, deduplicated, both classes", () => {
  const llama = {
    hiddenSize: 80,
    intermediateSize: 224,
    numHeads: 5,
    numKvHeads: 5,
    headDim: 16,
    vocabSize: 449,
  } as Parameters<typeof modelMatmulShapes>[0];
  const shapes = modelMatmulShapes(llama, { decodeRows: 8, trainRows: 64 });
  // q, k/v and o are all 80×80 here: one shape each for decode and training.
  expect(shapes.map((s) => [s.M, s.N, s.K, !!s.transA, !!s.transB])).toEqual([
    [8, 80, 80, false, true],
    [8, 224, 80, false, true],
    [8, 80, 224, false, true],
    [8, 449, 80, false, true],
    [64, 80, 80, false, true],
    [64, 224, 80, false, true],
    [64, 80, 224, false, true],
    [64, 449, 80, false, true],
    [64, 80, 224, false, false],
    [224, 80, 64, true, false],
  ]);
});
