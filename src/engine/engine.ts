// The engine handle every kernel wrapper receives: the device context, the pipeline cache, and the
// count of live GPU bytes (every storage buffer made on the device, see memory.ts) and the counters
// of host-side GPU work (submits, waits, dispatches, bytes moved, per step phase; counters.ts).
import { encodeReadback, type ReadRange } from './buffers';
import { trackCounters, type EngineCounters } from './counters';
import { acquireGpu, type AcquireOptions, type DeviceLostEvent, type GpuContext } from './device';
import { GpuMemory, releaseTransients, trackMemory } from './memory';
import { checkPipelines, DEFAULT_TUNING, PipelineCache, type KernelTuning } from './pipelines';
import { discardUniformArena, flushUniformArena, openUniformArena } from './uniform-arena';

export interface Engine {
  gpu: GpuContext;
  device: GPUDevice;
  pipelines: PipelineCache;
  /** Live and peak bytes of the device's storage buffers. */
  memory: GpuMemory;
  /** Submits, waits, dispatches, bytes moved and pipelines compiled, per step phase. */
  counters: EngineCounters;
  /**
   * Encodes with `record` and submits once. By default it then waits for the queue to drain; with
   * `options.read` it copies those ranges to the CPU in the same submission and waits for them
   * instead (one wait, their bytes in order); with `options.wait: false` it returns once submitted.
   */
  run(
    record: (encoder: GPUCommandEncoder) => void | Promise<void>,
    label?: string,
    options?: RunOptions,
  ): Promise<ArrayBuffer[]>;
  destroy(): void;
}

/** A byte range of a GPU buffer to copy back (see RunOptions.read). */
export type Readback = ReadRange;

export interface RunOptions {
  /**
   * false: return once submitted, without waiting for the GPU. Kernels' transient scratch
   * (memory.ts) then stays allocated until a later run waits, so the GPU never loses a buffer it
   * still reads; writeBuffer calls made after this and before the next submit reach the GPU after
   * this submission's work (queue order). Default true.
   */
  wait?: boolean;
  /** Ranges copied back in the same submission; the run waits on their map, not on the queue. */
  read?: readonly Readback[];
  /** How many units of work the submission holds (the decode steps of a sampling submission):
   * what a progress display counts. The engine ignores it. Default 1. */
  count?: number;
}

export interface EngineOptions extends AcquireOptions {
  /** Kernel variant choices; by default barrier-free variants exactly on software adapters. */
  tuning?: Partial<KernelTuning>;
}

/** The error engine.run throws on a device that has ended (see DeviceLostEvent). */
export function deviceLostError(lost: DeviceLostEvent): Error {
  if (lost.reason === 'out-of-memory') {
    return new Error(`The GPU ran out of memory: ${lost.message}`);
  }
  if (lost.reason === 'validation') {
    return new Error(`The GPU reported a validation error: ${lost.message}`);
  }
  if (lost.reason === 'internal') {
    return new Error(`The GPU reported an internal error: ${lost.message}`);
  }
  return new Error(`GPU device was lost (${lost.reason}): ${lost.message}`);
}

export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const gpu = await acquireGpu(options);
  const device = gpu.device;
  const memory = trackMemory(device);
  const counters = trackCounters(device);
  // A submission made without waiting (RunOptions.wait false) whose scratch is still held.
  let inFlight = false;
  const tuning: KernelTuning = {
    ...DEFAULT_TUNING,
    avoidBarriers: gpu.adapter.isSoftware,
    ...options.tuning,
  };
  return {
    gpu,
    device,
    pipelines: new PipelineCache(device, tuning),
    memory,
    counters,
    async run(record, label = 'engine.run', options = {}) {
      if (gpu.lost) throw deviceLostError(gpu.lost);
      const wait = options.wait ?? true;
      const reads = options.read ?? [];
      if (!wait && reads.length > 0) throw new Error('engine.run: a readback needs wait');
      let readback: ReturnType<typeof encodeReadback> | null = null;
      let submitted = false;
      try {
        const encodeStarted = performance.now();
        const encoder = device.createCommandEncoder({ label });
        openUniformArena(device, encoder);
        try {
          await record(encoder);
        } catch (err) {
          discardUniformArena(encoder);
          throw err;
        }
        // Sized after encoding, so a range may be sized by what `record` encoded.
        if (reads.length > 0) readback = encodeReadback(device, encoder, reads, `${label}.read`);
        // The kernels' uniform blocks, written right before the submit that reads them.
        flushUniformArena(encoder);
        device.queue.submit([encoder.finish()]);
        submitted = true;
        counters.addEncode(performance.now() - encodeStarted);
        if (!wait) {
          inFlight = true;
          return [];
        }
        // Mapping the staging buffer waits for this submission (and, in queue order, every one
        // before it), so it is the one wait.
        const out = readback ? await readback.take() : [];
        if (!readback) await device.queue.onSubmittedWorkDone();
        inFlight = false;
        // An error this submission raised ended the device while it ran: its results are void.
        if (gpu.lost) throw deviceLostError(gpu.lost);
        // A pipeline a kernel had to compile while encoding reports its compile error here.
        await checkPipelines(device);
        return out;
      } finally {
        readback?.destroy();
        if (wait || !submitted) {
          // Kernels' per-call scratch, once the work ran or `record` threw before submitting
          // (with or without wait: a failed step frees it at once); after a throw, earlier
          // submissions that did not wait may still read theirs, so the queue drains first.
          if (inFlight && !submitted) await device.queue.onSubmittedWorkDone().catch(() => {});
          inFlight = false;
          releaseTransients(device);
        }
      }
    },
    destroy: () => gpu.destroy(),
  };
}
