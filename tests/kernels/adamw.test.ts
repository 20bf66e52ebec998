// shaders/adamw.wgsl against adamwStepRef over several steps and shapes, with the clip scale and
// the NaN guard coming from the GPU grad-norm kernels.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { ADAMW_WG, AdamWKernel, type AdamWHyper } from '../../src/kernels/adamw';
import { GRAD_CLIP_OUT, gradNormPartialsLength, GradNormKernel } from '../../src/kernels/grad-norm';
import { adamwStepRef, gradClipRef } from '../../src/ref/adamw';
import { seededUniform, testEngine, worstMismatch, type Tolerance } from './harness';

// f32 update vs f64 reference, compounded over a few steps: each update is ~lr in size, so the
// error is dominated by the f32 rounding of the parameters themselves.
const PARAM_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-5 };
// Moments are running sums of terms ~0.2 (|g| ≤ 2, ×(1 − β)) that partly cancel: the absolute
// error is a few ulps of those terms, ~1e-8, whatever the (possibly tiny) result.
const MOMENT_TOLERANCE: Tolerance = { atol: 1e-7, rtol: 1e-5 };

const HYPER: AdamWHyper = { lr: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1 };

async function runSteps(
  n: number,
  steps: number,
  seed: number,
  opts: { maxNorm?: number; maxWorkgroupsPerDim?: number } = {},
) {
  const engine = await testEngine();
  const d = engine.device;
  const p0 = seededUniform(n, seed, -1, 1);
  const param = uploadStorageBuffer(d, p0);
  const m = createStorageBuffer(d, n * 4);
  const v = createStorageBuffer(d, n * 4);
  const adamw = new AdamWKernel(d, engine.pipelines);
  const norm = new GradNormKernel(d, engine.pipelines);
  const partials = createStorageBuffer(d, gradNormPartialsLength(1) * 4);
  const clip = createStorageBuffer(d, GRAD_CLIP_OUT.length * 4);
  const refP = Float64Array.from(p0);
  const refM = new Float64Array(n);
  const refV = new Float64Array(n);
  for (let step = 1; step <= steps; step++) {
    const g = seededUniform(n, seed * 100 + step, -2, 2);
    const grad = uploadStorageBuffer(d, g);
    await engine.run(async (enc) => {
      if (opts.maxNorm !== undefined) {
        norm.encode(enc, {
          grads: [{ buffer: grad, n }],
          partials,
          out: clip,
          maxNorm: opts.maxNorm,
        });
      }
      adamw.encode(enc, {
        param,
        grad,
        m,
        v,
        n,
        step,
        hyper: HYPER,
        clip: opts.maxNorm !== undefined ? clip : undefined,
        maxWorkgroupsPerDim: opts.maxWorkgroupsPerDim,
      });
    });
    grad.destroy();
    const scale = opts.maxNorm !== undefined ? gradClipRef([g], opts.maxNorm).scale : 1;
    adamwStepRef(refP, g, refM, refV, step, HYPER, scale);
  }
  const out = {
    param: await readF32(d, param, n),
    m: await readF32(d, m, n),
    v: await readF32(d, v, n),
    refP,
    refM,
    refV,
    p0,
  };
  for (const b of [param, m, v, partials, clip]) b.destroy();
  adamw.destroy();
  return out;
}

describe('adamw.wgsl', () => {
  for (const n of [1, 7, ADAMW_WG + 1, 1009, 20_000]) {
    it(`n=${n}: 4 steps match the reference`, async () => {
      const r = await runSteps(n, 4, n);
      expect(worstMismatch(r.param, r.refP, PARAM_TOLERANCE)).toBeNull();
      expect(worstMismatch(r.m, r.refM, MOMENT_TOLERANCE)).toBeNull();
      expect(worstMismatch(r.v, r.refV, MOMENT_TOLERANCE)).toBeNull();
      // The parameters really moved (~lr per step).
      expect(Math.abs(r.param[0] - r.p0[0])).toBeGreaterThan(1e-3);
    });
  }

  it('with global-norm clipping from the GPU clip buffer, 3 steps', async () => {
    const r = await runSteps(500, 3, 77, { maxNorm: 0.5 });
    expect(worstMismatch(r.param, r.refP, PARAM_TOLERANCE)).toBeNull();
    expect(worstMismatch(r.m, r.refM, MOMENT_TOLERANCE)).toBeNull();
    expect(worstMismatch(r.v, r.refV, MOMENT_TOLERANCE)).toBeNull();
  });

  it('split grid (grid limit lowered to 3)', async () => {
    const r = await runSteps(ADAMW_WG * 7 + 5, 2, 5, { maxWorkgroupsPerDim: 3 });
    expect(worstMismatch(r.param, r.refP, PARAM_TOLERANCE)).toBeNull();
  });

  it('hand-worked first step', async () => {
    // p = 1, g = 0.5, lr 0.1, wd 0.01: decay → 0.999; m̂ = g, v̂ = g², update = lr·g/(|g| + eps)
    // ≈ 0.1 → p = 0.899. m = 0.1·0.5 = 0.05, v = 0.001·0.25 = 2.5e-4 (β = 0.9, 0.999).
    const engine = await testEngine();
    const d = engine.device;
    const param = uploadStorageBuffer(d, new Float32Array([1]));
    const grad = uploadStorageBuffer(d, new Float32Array([0.5]));
    const m = createStorageBuffer(d, 4);
    const v = createStorageBuffer(d, 4);
    const kernel = new AdamWKernel(d, engine.pipelines);
    const hyper = { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 };
    await engine.run((enc) => kernel.encode(enc, { param, grad, m, v, n: 1, step: 1, hyper }));
    expect((await readF32(d, param))[0]).toBeCloseTo(0.899, 6);
    expect((await readF32(d, m))[0]).toBeCloseTo(0.05, 7);
    expect((await readF32(d, v))[0]).toBeCloseTo(2.5e-4, 9);
    kernel.destroy();
  });

  it('a NaN gradient leaves param, m and v bit-identical (NaN guard)', async () => {
    const engine = await testEngine();
    const d = engine.device;
    const n = 300;
    const p0 = seededUniform(n, 1);
    const m0 = seededUniform(n, 2, 0, 0.1);
    const v0 = seededUniform(n, 3, 0, 0.01);
    const g = seededUniform(n, 4);
    g[123] = NaN;
    const [param, m, v, grad] = [p0, m0, v0, g].map((x) => uploadStorageBuffer(d, x));
    const partials = createStorageBuffer(d, gradNormPartialsLength(1) * 4);
    const clip = createStorageBuffer(d, GRAD_CLIP_OUT.length * 4);
    const norm = new GradNormKernel(d, engine.pipelines);
    const adamw = new AdamWKernel(d, engine.pipelines);
    await engine.run(async (enc) => {
      norm.encode(enc, { grads: [{ buffer: grad, n }], partials, out: clip, maxNorm: 1 });
      adamw.encode(enc, { param, grad, m, v, n, step: 5, hyper: HYPER, clip });
    });
    expect((await readF32(d, clip))[GRAD_CLIP_OUT.finite]).toBe(0);
    expect(Array.from(await readF32(d, param, n))).toEqual(Array.from(p0));
    expect(Array.from(await readF32(d, m, n))).toEqual(Array.from(m0));
    expect(Array.from(await readF32(d, v, n))).toEqual(Array.from(v0));
    for (const b of [param, m, v, grad, partials, clip]) b.destroy();
    adamw.destroy();
  });
});
