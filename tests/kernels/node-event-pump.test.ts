// Dawn's real event pump, paced (src/engine/node-event-pump.ts): the callbacks dawn.node schedules
// while a GPU promise is pending are recognised by their shape, and a long wait takes about one
// pump turn per timer tick instead of thousands of back-to-back turns that hold a CPU core (which
// on CPU emulation is taken from the emulator: see the module's header).
import { describe, expect, it } from 'vitest';
import { uploadStorageBuffer } from '../../src/engine/buffers';
import { pumpStats } from '../../src/engine/node-event-pump';
import { MatmulKernel } from '../../src/kernels/matmul';
import { seededUniform, testEngine } from './harness';

describe("Dawn's event pump", () => {
  it('is paced through a long wait: turns bounded by the timer ticks, not by the spin', async () => {
    const engine = await testEngine();
    const size = 384;
    const [a, b, c] = [1, 2, 3].map((seed) =>
      uploadStorageBuffer(engine.device, seededUniform(size * size, seed)),
    );
    const kernel = new MatmulKernel(engine.device, engine.pipelines);
    const product = { a, b, c, M: size, N: size, K: size };
    await engine.run((encoder) => kernel.encode(encoder, product)); // compiles
    const before = { ...pumpStats };
    const started = performance.now();
    // Enough products for a wait of tens of milliseconds on SwiftShader.
    await engine.run((encoder) => {
      for (let i = 0; i < 8; i++) kernel.encode(encoder, product);
    });
    const waitedMs = performance.now() - started;
    const turns = pumpStats.dawnTurns - before.dawnTurns;
    const paced = pumpStats.pacedTurns - before.pacedTurns;
    for (const buffer of [a, b, c]) buffer.destroy();
    expect(waitedMs).toBeGreaterThan(10);
    // The pump ran, and all but its first millisecond was paced.
    expect(turns).toBeGreaterThan(0);
    expect(paced).toBeGreaterThan(0);
    // Spinning turns take microseconds each; unpaced, a wait this long takes thousands. Paced:
    // the first millisecond's spin, then at most one turn per timer tick (≥ 1 ms).
    const spinTurns = turns - paced;
    expect(paced).toBeLessThanOrEqual(Math.ceil(waitedMs));
    expect(spinTurns).toBeLessThan(500);
  });
});
