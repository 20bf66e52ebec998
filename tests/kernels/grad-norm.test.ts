// shaders/sumsq.wgsl + shaders/grad_clip.wgsl against gradClipRef: global norm over several
// tensors of awkward sizes, the clip scale, the finite flag on NaN/Inf, and bit-reproducibility.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import {
  GRAD_CLIP_OUT,
  gradNormPartialsLength,
  GradNormKernel,
  SUMSQ_PARTIALS_PER_TENSOR,
  SUMSQ_WG,
} from '../../src/kernels/grad-norm';
import { gradClipRef } from '../../src/ref/adamw';
import { seededUniform, testEngine } from './harness';

// f32 sums of up to ~1e5 squares in a tree vs f64: relative error ~1e-6.
const NORM_RTOL = 1e-5;

async function runClip(grads: Float32Array[], maxNorm: number) {
  const engine = await testEngine();
  const d = engine.device;
  const buffers = grads.map((g) => uploadStorageBuffer(d, g));
  // Garbage in the partials: every slot the clip reads must be written by sumsq.
  const partials = uploadStorageBuffer(
    d,
    seededUniform(gradNormPartialsLength(grads.length), 1, 100, 200),
  );
  const out = createStorageBuffer(d, GRAD_CLIP_OUT.length * 4);
  const kernel = new GradNormKernel(d, engine.pipelines);
  await engine.run((enc) =>
    kernel.encode(enc, {
      grads: grads.map((g, i) => ({ buffer: buffers[i], n: g.length })),
      partials,
      out,
      maxNorm,
    }),
  );
  const result = await readF32(d, out, GRAD_CLIP_OUT.length);
  for (const b of [...buffers, partials, out]) b.destroy();
  return {
    norm: result[GRAD_CLIP_OUT.norm],
    scale: result[GRAD_CLIP_OUT.scale],
    finite: result[GRAD_CLIP_OUT.finite],
    raw: result,
  };
}

// 1, a prime, one past a workgroup, fewer elements than partials, one chunk boundary off, large.
const SIZES = [
  1,
  7,
  SUMSQ_WG + 1,
  SUMSQ_PARTIALS_PER_TENSOR - 1,
  SUMSQ_PARTIALS_PER_TENSOR * SUMSQ_WG + 3,
  100_003,
];

describe('sumsq.wgsl + grad_clip.wgsl', () => {
  it('global norm over tensors of every awkward size, clipping active', async () => {
    const grads = SIZES.map((n, i) => seededUniform(n, 10 + i, -0.1, 0.1));
    const ref = gradClipRef(grads, 1.0);
    expect(ref.norm).toBeGreaterThan(1); // so the clip is active
    const gpu = await runClip(grads, 1.0);
    expect(Math.abs(gpu.norm - ref.norm)).toBeLessThanOrEqual(NORM_RTOL * ref.norm);
    expect(Math.abs(gpu.scale - ref.scale)).toBeLessThanOrEqual(NORM_RTOL * ref.scale);
    expect(gpu.scale).toBeLessThan(1);
    expect(gpu.finite).toBe(1);
  });

  for (const n of SIZES) {
    it(`one tensor of ${n} elements`, async () => {
      const g = seededUniform(n, n, -3, 3);
      const ref = gradClipRef([g], 0.5);
      const gpu = await runClip([g], 0.5);
      expect(Math.abs(gpu.norm - ref.norm)).toBeLessThanOrEqual(NORM_RTOL * ref.norm);
      expect(Math.abs(gpu.scale - ref.scale)).toBeLessThanOrEqual(NORM_RTOL * ref.scale);
    });
  }

  it('hand-worked: [3, 4] and [12] have norm 13; maxNorm 26 → scale 1; maxNorm 6.5 → ½', async () => {
    const grads = [new Float32Array([3, 4]), new Float32Array([12])];
    const loose = await runClip(grads, 26);
    expect(loose.norm).toBe(13);
    expect(loose.scale).toBe(1);
    const tight = await runClip(grads, 6.5);
    expect(tight.scale).toBeCloseTo(6.5 / (13 + 1e-6), 6);
    const off = await runClip(grads, 0);
    expect(off.scale).toBe(1);
  });

  it('NaN or Inf in any gradient clears the finite flag', async () => {
    for (const bad of [NaN, Infinity, -Infinity, 3e38]) {
      const g = seededUniform(1000, 3);
      g[517] = bad; // 3e38² overflows f32: also not finite, as in torch with f32 grads
      const gpu = await runClip([seededUniform(10, 4), g], 1);
      expect(gpu.finite).toBe(0);
      expect(gpu.scale).toBe(0);
      expect(Number.isFinite(gpu.norm)).toBe(false);
    }
  });

  it('is bit-reproducible', async () => {
    const grads = SIZES.map((n, i) => seededUniform(n, 50 + i));
    const a = await runClip(grads, 1);
    const b = await runClip(grads, 1);
    expect(Array.from(a.raw)).toEqual(Array.from(b.raw));
  });
});
