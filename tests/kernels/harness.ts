// Shared helpers for kernel tests: one engine per test file, seeded inputs, and a comparison that
// reports the worst element against |gpu − ref| ≤ atol + rtol·|ref|.
import { afterAll } from 'vitest';
import { mulberry32 } from '../../src/core/rng';
import { createEngine, type Engine } from '../../src/engine/engine';
import { PipelineCache, type KernelTuning } from '../../src/engine/pipelines';

let enginePromise: Promise<Engine> | null = null;

/** The test file's engine (Node WebGPU; SwiftShader on machines without a GPU). */
export function testEngine(): Promise<Engine> {
  if (!enginePromise) {
    enginePromise = createEngine();
    afterAll(async () => (await enginePromise)?.destroy());
  }
  return enginePromise;
}

const tunedEngines = new Map<string, Promise<Engine>>();

/** The test file's engine with the given kernel variant choices (same device, own pipelines), so
 * that every variant is tested whatever the adapter would pick by itself. */
export function testEngineWith(tuning: KernelTuning): Promise<Engine> {
  const key = JSON.stringify(tuning);
  let engine = tunedEngines.get(key);
  if (!engine) {
    engine = testEngine().then((e) => ({ ...e, pipelines: new PipelineCache(e.device, tuning) }));
    tunedEngines.set(key, engine);
  }
  return engine;
}

/** Both sides of KernelTuning.avoidBarriers, named for test titles. */
export const BARRIER_VARIANTS = [
  { name: 'cooperative', tuning: { avoidBarriers: false, vectorLoads: true } },
  { name: 'barrier-free', tuning: { avoidBarriers: true, vectorLoads: true } },
] as const;

/** Deterministic uniform values in [lo, hi) from a 32-bit seed (mulberry32). */
export function seededUniform(length: number, seed: number, lo = -1, hi = 1): Float32Array {
  const next = mulberry32(seed);
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) out[i] = lo + (hi - lo) * next();
  return out;
}

export interface Tolerance {
  atol: number;
  rtol: number;
}

/** Index and size of the worst violation, or null when every element is within tolerance. */
export function worstMismatch(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  { atol, rtol }: Tolerance,
): { index: number; actual: number; expected: number; excess: number } | null {
  if (actual.length !== expected.length) {
    return { index: -1, actual: actual.length, expected: expected.length, excess: Infinity };
  }
  let worst: { index: number; actual: number; expected: number; excess: number } | null = null;
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i];
    const e = expected[i];
    const excess = Math.abs(a - e) - (atol + rtol * Math.abs(e));
    if (!(excess <= 0) && (!worst || !(excess <= worst.excess)))
      worst = { index: i, actual: a, expected: e, excess };
  }
  return worst;
}

export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** ∂f/∂x by central differences in f64 (checks the references' backward passes). */
export function centralDifference(
  f: (x: Float64Array) => number,
  x: Float64Array,
  h = 1e-6,
): Float64Array {
  const grad = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const saved = x[i];
    x[i] = saved + h;
    const plus = f(x);
    x[i] = saved - h;
    const minus = f(x);
    x[i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}
