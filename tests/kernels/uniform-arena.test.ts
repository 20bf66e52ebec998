// The uniform arena (src/engine/uniform-arena.ts): every pass that engine.run records reads its own
// `struct Params` from a slot of shared chunk buffers, across chunk boundaries, across
// submissions that reuse the chunks without waiting, and beside passes encoded outside
// engine.run (a buffer of their own). Each pass adds its own α, so one slot read wrong changes
// the sum.
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { diffCounts, totalCounts } from '../../src/engine/counters';
import { AddKernel } from '../../src/kernels/add';
import { testEngine } from './harness';

const N = 5;
const ones = new Float32Array(N).fill(1);

/** Σ α over `alphas`, the value each element of a zeroed buffer ends with. */
const sum = (alphas: number[]) => alphas.reduce((a, b) => a + b, 0);

describe('uniform arena', () => {
  it('gives 600 passes of one submission (3 chunks) their own parameters', async () => {
    const engine = await testEngine();
    const add = new AddKernel(engine.device, engine.pipelines);
    const [a, b] = [new Float32Array(N), ones].map((x) => uploadStorageBuffer(engine.device, x));
    // Distinct, exactly representable: 1, 2, …, 600 (Σ 180,300 < 2²⁴).
    const alphas = Array.from({ length: 600 }, (_, i) => i + 1);
    await engine.run((encoder) => {
      for (const alpha of alphas) add.encode(encoder, { a, b, count: N, alpha });
    });
    const before = engine.counters.snapshot();
    await engine.run((encoder) => {
      for (const alpha of alphas) add.encode(encoder, { a, b, count: N, alpha: -alpha });
      add.encode(encoder, { a, b, count: N, alpha: 7 });
    });
    const counts = totalCounts(diffCounts(engine.counters.snapshot(), before));
    expect(Array.from(await readF32(engine.device, a, N))).toEqual(Array(N).fill(7));
    // The chunks exist after the first run: the second makes no buffer, one bind group a pass.
    expect(counts.buffers).toBe(0);
    expect(counts.bindGroups).toBe(601);
    expect(counts.dispatches).toBe(601);
    a.destroy();
    b.destroy();
  });

  it('reuses the chunks in a submission made before the last one finished', async () => {
    const engine = await testEngine();
    const add = new AddKernel(engine.device, engine.pipelines);
    const b = uploadStorageBuffer(engine.device, ones);
    const first = uploadStorageBuffer(engine.device, new Float32Array(N));
    const second = uploadStorageBuffer(engine.device, new Float32Array(N));
    const firstAlphas = Array.from({ length: 300 }, (_, i) => 2 * i + 1);
    const secondAlphas = Array.from({ length: 300 }, (_, i) => 3 * i + 2);
    // No wait between: the second submission's writes into the same slots are queued after the
    // first submission, which must still read its own values.
    await engine.run(
      (encoder) => {
        for (const alpha of firstAlphas) add.encode(encoder, { a: first, b, count: N, alpha });
      },
      'first',
      { wait: false },
    );
    await engine.run((encoder) => {
      for (const alpha of secondAlphas) add.encode(encoder, { a: second, b, count: N, alpha });
    });
    expect(Array.from(await readF32(engine.device, first, N))).toEqual(
      Array(N).fill(sum(firstAlphas)),
    );
    expect(Array.from(await readF32(engine.device, second, N))).toEqual(
      Array(N).fill(sum(secondAlphas)),
    );
    for (const buffer of [b, first, second]) buffer.destroy();
  });

  it('leaves passes encoded outside engine.run a buffer of their own, and drops a failed run', async () => {
    const engine = await testEngine();
    const add = new AddKernel(engine.device, engine.pipelines);
    const [a, b] = [new Float32Array(N), ones].map((x) => uploadStorageBuffer(engine.device, x));
    const before = engine.counters.snapshot();
    const encoder = engine.device.createCommandEncoder();
    add.encode(encoder, { a, b, count: N, alpha: 4 });
    add.encode(encoder, { a, b, count: N, alpha: 5 });
    engine.device.queue.submit([encoder.finish()]);
    const counts = totalCounts(diffCounts(engine.counters.snapshot(), before));
    expect(counts.buffers).toBe(2); // one uniform buffer per pass
    await expect(
      engine.run((enc) => {
        add.encode(enc, { a, b, count: N, alpha: 1000 });
        throw new Error('recording failed');
      }),
    ).rejects.toThrow('recording failed');
    // The failed run's block was never written or submitted; the next run's slot 0 is its own.
    await engine.run((enc) => add.encode(enc, { a, b, count: N, alpha: 0.5 }));
    expect(Array.from(await readF32(engine.device, a, N))).toEqual(Array(N).fill(9.5));
    a.destroy();
    b.destroy();
  });
});
