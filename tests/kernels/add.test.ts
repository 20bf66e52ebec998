// shaders/add.wgsl (a += alpha·b) against src/ref/add.ts on a length sweep, with alpha, a
// hand-worked case and a forced grid split.
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { ADD_WG, AddKernel } from '../../src/kernels/add';
import { addRef } from '../../src/ref/add';
import { seededUniform, testEngine, worstMismatch, type Tolerance } from './harness';

// One product and one sum in f32 (possibly fused): within an ULP or two of the f64 result.
const FORWARD_TOLERANCE: Tolerance = { atol: 1e-7, rtol: 1e-6 };

async function runAdd(a: Float32Array, b: Float32Array, alpha?: number, maxPerDim?: number) {
  const engine = await testEngine();
  const aBuf = uploadStorageBuffer(engine.device, a);
  const bBuf = uploadStorageBuffer(engine.device, b);
  const kernel = new AddKernel(engine.device, engine.pipelines, { maxWorkgroupsPerDim: maxPerDim });
  await engine.run((enc) => kernel.encode(enc, { a: aBuf, b: bBuf, count: a.length, alpha }));
  const out = await readF32(engine.device, aBuf, a.length);
  aBuf.destroy();
  bBuf.destroy();
  return out;
}

const LENGTHS = [1, 7 * 13, ADD_WG + 1, 300 * 257];

describe('add.wgsl', () => {
  for (const n of LENGTHS) {
    for (const alpha of [1, -0.375]) {
      it(`n=${n} alpha=${alpha}`, async () => {
        const a = seededUniform(n, n);
        const b = seededUniform(n, n + 1);
        const gpu = await runAdd(a, b, alpha);
        expect(worstMismatch(gpu, addRef(a, b, alpha), FORWARD_TOLERANCE)).toBeNull();
      });
    }
  }

  it('hand-worked; alpha defaults to 1', async () => {
    const a = Float32Array.from([1, 2, 3]);
    const b = Float32Array.from([10, 20, 30]);
    expect(Array.from(await runAdd(a, b))).toEqual([11, 22, 33]);
    expect(Array.from(await runAdd(a, b, 0.5))).toEqual([6, 12, 18]);
  });

  it('split grid (tail workgroups guarded)', async () => {
    const n = 5 * ADD_WG + 3; // 6 workgroups, ≤ 4 per dim → grid (3, 2)
    const a = seededUniform(n, 1);
    const b = seededUniform(n, 2);
    expect(worstMismatch(await runAdd(a, b, 2, 4), addRef(a, b, 2), FORWARD_TOLERANCE)).toBeNull();
  });
});
