// The engine's pipeline cache and byte accounting: prepare() compiles ahead and throws WGSL errors
// with their position; a pipeline get() compiles itself (nobody prepared it) reports its error at
// the end of engine.run; every storage buffer is counted while it lives, transients included.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer } from '../../src/engine/buffers';
import { WgslCompileError } from '../../src/engine/errors';
import { transient } from '../../src/engine/memory';
import { shaderSource } from '../../src/engine/shaders';
import { testEngine } from './harness';

// Line 3 uses an undeclared identifier.
const BROKEN = '@compute @workgroup_size(1)\nfn main() {\n  let x = undeclared + 1;\n}\n';

describe('PipelineCache', () => {
  it('prepare() compiles once; get() then returns the same pipeline without compiling', async () => {
    const { pipelines } = await testEngine();
    const source = shaderSource('add');
    await pipelines.prepare('add', source, { WG: 64 });
    await pipelines.prepare('add', source, { WG: 64 });
    const size = pipelines.size;
    const pipeline = pipelines.get('add', source, { WG: 64 });
    expect(pipelines.get('add', source, { WG: 64 })).toBe(pipeline);
    expect(pipelines.size).toBe(size);
  });

  it('prepare() throws a WGSL error with its line and source', async () => {
    const { pipelines } = await testEngine();
    const error = await pipelines.prepare('broken', BROKEN).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WgslCompileError);
    expect((error as WgslCompileError).line).toBe(3);
    expect((error as WgslCompileError).sourceLine).toContain('undeclared');
  });

  it('a pipeline get() compiles while encoding reports its WGSL error from engine.run', async () => {
    const engine = await testEngine();
    const run = engine.run(() => void engine.pipelines.get('broken-sync', BROKEN), 'broken');
    await expect(run).rejects.toThrow(WgslCompileError);
    // Not cached: the next use reports it again.
    await expect(
      engine.run(() => void engine.pipelines.get('broken-sync', BROKEN), 'broken'),
    ).rejects.toThrow(/undeclared/);
  });
});

describe('GPU byte accounting', () => {
  it('counts storage buffers while they live, and frees transients when the run ends', async () => {
    const engine = await testEngine();
    const { memory, device } = engine;
    const live = memory.liveBytes;
    const buffer = createStorageBuffer(device, 1000);
    expect(memory.liveBytes).toBe(live + 1000);
    expect(memory.peakBytes).toBeGreaterThanOrEqual(live + 1000);
    buffer.destroy();
    buffer.destroy(); // a second destroy is allowed and counts nothing
    expect(memory.liveBytes).toBe(live);

    await expect(
      engine.run(() => {
        transient(device, createStorageBuffer(device, 512));
        expect(memory.liveBytes).toBe(live + 512);
        throw new Error('fails while encoding');
      }),
    ).rejects.toThrow('fails while encoding');
    expect(memory.liveBytes).toBe(live);
  });
});
