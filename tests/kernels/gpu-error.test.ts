// An uncaptured GPU error ends the device (src/engine/device.ts): the submission it hit was dropped,
// so engine.run refuses to return its results, every later run refuses too, and the device-lost
// listeners hear why, once, as for a device the driver reset. Each test makes a device of its own,
// since it ends it.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { createEngine } from '../../src/engine/engine';
import type { DeviceLostEvent } from '../../src/engine/device';
import { AddKernel } from '../../src/kernels/add';

describe('an uncaptured GPU error', () => {
  it('ends the run that raised it and the device, with the error’s kind and message', async () => {
    const engine = await createEngine();
    const heard: DeviceLostEvent[] = [];
    engine.gpu.onDeviceLost((event) => heard.push(event));
    const add = new AddKernel(engine.device, engine.pipelines);
    const a = uploadStorageBuffer(engine.device, new Float32Array([1, 2, 3, 4]));
    const b = uploadStorageBuffer(engine.device, new Float32Array([10, 20, 30, 40]));
    await engine.run((encoder) => add.encode(encoder, { a, b, count: 4 }));
    expect(Array.from(await readF32(engine.device, a, 4))).toEqual([11, 22, 33, 44]);
    // A copy within one buffer is invalid: the whole submission, the add included, is dropped.
    const run = engine.run((encoder) => {
      add.encode(encoder, { a, b, count: 4 });
      encoder.copyBufferToBuffer(a, 0, a, 0, 4);
    });
    await expect(run).rejects.toThrow(
      /^The GPU reported a validation error: Source and destination are the same buffer/,
    );
    expect(heard).toEqual([
      {
        type: 'device-lost',
        reason: 'validation',
        message: expect.stringMatching(/^Source and destination are the same buffer/),
      },
    ]);
    expect(engine.gpu.lost?.reason).toBe('validation');
    // Every later run is refused before it records anything.
    let recorded = false;
    await expect(engine.run(() => void (recorded = true))).rejects.toThrow(
      /validation error: Source and destination/,
    );
    expect(recorded).toBe(false);
    // The device's own end (destroyed to free its memory) is not reported a second time.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(heard).toHaveLength(1);
    engine.destroy();
  });

  it('out of memory is told apart from a validation error', async () => {
    const engine = await createEngine();
    // A buffer past maxBufferSize is a validation error, not an allocation the device ran out
    // of memory for; the kind comes from the error's class (unit-tested in device-errors).
    createStorageBuffer(engine.device, engine.device.limits.maxBufferSize + 4, 'too large');
    await expect(engine.run(() => undefined)).rejects.toThrow(
      /^The GPU reported a validation error: Buffer size \(\d+\) exceeds the max buffer size/,
    );
    engine.destroy();
  });
});
