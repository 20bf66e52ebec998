// shaders/rope.wgsl (forward and INVERSE = backward) against src/ref/rope.ts on a shape sweep
// with positions into the thousands, a hand-worked rotation, the HF inverse frequencies, a
// forced grid split, and the inverse checked against a central finite difference of the forward.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { ROPE_WG, RopeKernel } from '../../src/kernels/rope';
import { ropeInvFreq, ropeRef } from '../../src/ref/rope';
import {
  seededUniform,
  testEngine,
  worstMismatch,
  type Tolerance,
  centralDifference,
  dot,
} from './harness';

// The angle is the same f32 value on both sides; the kernel's sin/cos (Cody-Waite reduction +
// Cephes polynomials) is within ~1e-7 of the exact values, then two products and one add in f32.
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-5 };
// The backward is the same kernel with the transposed rotation: same error budget.
const GRADIENT_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-5 };

/** Positions 0 … maxPosition − 1, plus the extremes. */
function seededPositions(R: number, maxPosition: number, seed: number): Uint32Array {
  const u = seededUniform(R, seed, 0, 1);
  const p = Uint32Array.from(u, (v) => Math.floor(v * maxPosition));
  p[0] = 0;
  if (R > 1) p[R - 1] = maxPosition - 1;
  return p;
}

async function runRope(
  x: Float32Array,
  positions: Uint32Array,
  shape: { R: number; Hx: number; D: number; theta: number; inverse?: boolean },
  maxWorkgroupsPerDim?: number,
) {
  const engine = await testEngine();
  const { R, Hx, D } = shape;
  const xBuf = uploadStorageBuffer(engine.device, x);
  const posBuf = uploadStorageBuffer(engine.device, positions);
  const yBuf = createStorageBuffer(engine.device, R * Hx * D * 4);
  const kernel = new RopeKernel(engine.device, engine.pipelines, { maxWorkgroupsPerDim });
  await engine.run((enc) =>
    kernel.encode(enc, {
      x: xBuf,
      positions: posBuf,
      y: yBuf,
      rows: R,
      heads: Hx,
      D,
      theta: shape.theta,
      inverse: shape.inverse,
    }),
  );
  const y = await readF32(engine.device, yBuf, R * Hx * D);
  for (const b of [xBuf, posBuf, yBuf]) b.destroy();
  kernel.destroy();
  return y;
}

// [R, Hx, D, theta, max position]
const SHAPES: Array<[number, number, number, number, number]> = [
  [1, 1, 2, 10000, 1],
  [7, 3, 26, 10000, 13], // primes; D/2 = 13
  [13, 3, 14, 10000, 4096], // R·Hx·D/2 = 273 pairs: one past a workgroup; positions to 4095
  [300, 2, 64, 100000, 3000], // larger, Qwen2-like theta
  [37, 5, 128, 500000, 32768], // Llama-3-like D and theta, positions to 32767
];

describe('rope reference', () => {
  it('inverse frequencies as HF computes them in f32', () => {
    expect(Array.from(ropeInvFreq(4, 10000))).toEqual([1, Math.fround(0.01)]);
    const inv = ropeInvFreq(64, 10000);
    expect(inv[1]).toBe(Math.fround(Math.pow(10000, -1 / 32)));
    expect(Math.abs(inv[31] / Math.pow(10000, -62 / 64) - 1)).toBeLessThan(1.2e-7); // f32 rounding
    // Values printed by PyTorch 1.13 (HF's expression, f32): equal to the bit.
    expect([inv[1], inv[7], inv[17], inv[24]]).toEqual([
      0.7498942017555237, 0.1333521455526352, 0.007498942315578461, 0.0010000000474974513,
    ]);
    expect(() => ropeInvFreq(5, 10000)).toThrow(RangeError);
  });

  it('hand-worked rotation', () => {
    // D = 4, theta = 10000: inv_freq = [1, 0.01]. At position 1 the pair (x0, x2) = (1, 3)
    // turns by 1 rad, the pair (x1, x3) = (2, 4) by 0.01 rad; at position 0 nothing moves.
    const y = ropeRef([1, 2, 3, 4, 1, 2, 3, 4], [1, 0], 2, 1, 4, 10000);
    const [c1, s1] = [0.5403023058681398, 0.8414709848078965]; // cos 1, sin 1
    const [c2, s2] = [0.9999500004166653, 0.009999833334166664]; // cos 0.01, sin 0.01
    const angle2 = Math.fround(0.01); // the f32 angle HF uses: 0.01 rounded to f32
    const expected = [
      1 * c1 - 3 * s1,
      2 * c2 - 4 * s2,
      3 * c1 + 1 * s1,
      4 * c2 + 2 * s2,
      1,
      2,
      3,
      4,
    ];
    expect(worstMismatch(y, expected, { atol: 1e-8, rtol: 0 })).toBeNull();
    expect(y[1]).toBeCloseTo(2 * Math.cos(angle2) - 4 * Math.sin(angle2), 14);
    expect(y[0]).toBeCloseTo(-1.9841106485555497, 12);
  });

  it('inverse is the transpose: matches a central finite difference of Σ dy·rope(x)', () => {
    const [R, Hx, D, theta] = [3, 2, 6, 10000];
    const positions = [0, 5, 1234];
    const x = Float64Array.from(seededUniform(R * Hx * D, 1));
    const dy = Float64Array.from(seededUniform(R * Hx * D, 2));
    const numeric = centralDifference((xv) => dot(dy, ropeRef(xv, positions, R, Hx, D, theta)), x);
    const analytic = ropeRef(dy, positions, R, Hx, D, theta, true);
    expect(worstMismatch(analytic, numeric, { atol: 1e-8, rtol: 1e-7 })).toBeNull();
  });
});

describe('rope.wgsl', () => {
  for (const [R, Hx, D, theta, maxPos] of SHAPES) {
    for (const inverse of [false, true]) {
      it(`R=${R} Hx=${Hx} D=${D} theta=${theta} positions<${maxPos} inverse=${inverse}`, async () => {
        const shape = { R, Hx, D, theta, inverse };
        const x = seededUniform(R * Hx * D, R * 100 + D);
        const positions = seededPositions(R, maxPos, R + Hx);
        const gpu = await runRope(x, positions, shape);
        const ref = ropeRef(x, positions, R, Hx, D, theta, inverse);
        const tol = inverse ? GRADIENT_TOLERANCE : FORWARD_TOLERANCE;
        expect(worstMismatch(gpu, ref, tol)).toBeNull();
      });
    }
  }

  it('hand-worked rotation on the GPU', async () => {
    const x = Float32Array.from([1, 2, 3, 4, 1, 2, 3, 4]);
    const gpu = await runRope(x, Uint32Array.from([1, 0]), { R: 2, Hx: 1, D: 4, theta: 10000 });
    const expected = [-1.9841106, 1.9599007, 2.4623779, 4.0197997, 1, 2, 3, 4];
    expect(worstMismatch(gpu, expected, { atol: 1e-6, rtol: 0 })).toBeNull();
  });

  it('inverse undoes forward', async () => {
    const [R, Hx, D, theta] = [5, 2, 8, 10000];
    const x = seededUniform(R * Hx * D, 77);
    const positions = seededPositions(R, 2048, 78);
    const y = await runRope(x, positions, { R, Hx, D, theta });
    expect(worstMismatch(y, x, { atol: 1e-3, rtol: 0 })).not.toBeNull(); // it did rotate
    const back = await runRope(y, positions, { R, Hx, D, theta, inverse: true });
    expect(worstMismatch(back, x, { atol: 2e-6, rtol: 0 })).toBeNull();
  });

  it('split grid (tail workgroups guarded)', async () => {
    // 23 · 4 · 16 = 1472 pairs → 6 workgroups of 256, ≤ 4 per dim → grid (3, 2).
    const [R, Hx, D, theta] = [23, 4, 32, 10000];
    expect(Math.ceil((R * Hx * D) / 2 / ROPE_WG)).toBe(6);
    const x = seededUniform(R * Hx * D, 5);
    const positions = seededPositions(R, 1000, 6);
    const gpu = await runRope(x, positions, { R, Hx, D, theta }, 4);
    expect(
      worstMismatch(gpu, ropeRef(x, positions, R, Hx, D, theta), FORWARD_TOLERANCE),
    ).toBeNull();
  });

  it('refuses to run in place', async () => {
    const engine = await testEngine();
    const kernel = new RopeKernel(engine.device, engine.pipelines);
    const buf = createStorageBuffer(engine.device, 16);
    const encoder = engine.device.createCommandEncoder();
    expect(() =>
      kernel.encode(encoder, {
        x: buf,
        positions: buf,
        y: buf,
        rows: 1,
        heads: 1,
        D: 4,
        theta: 1e4,
      }),
    ).toThrow(/out of place/);
    buf.destroy();
  });
});
