// The engine handle every kernel wrapper receives: the device context, the pipeline cache, and the
// count of live GPU bytes (every storage buffer made on the device, see memory.ts) and the counters
// of host-side GPU work (submits, waits, dispatches, bytes moved, per step phase; counters.ts).
import { trackCounters, type EngineCounters } from './counters';
import { acquireGpu, type AcquireOptions, type GpuContext } from './device';
import { GpuMemory, releaseTransients, trackMemory } from './memory';
import { checkPipelines, DEFAULT_TUNING, PipelineCache, type KernelTuning } from './pipelines';

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
export interface Readback {
  buffer: GPUBuffer;
  /** Byte offset (a multiple of 4). Default 0. */
  offset?: number;
  bytes: number;
}

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

const MAP_READ_USAGE = 0x0001 | 0x0008; // GPUBufferUsage.MAP_READ | COPY_DST
const MAP_READ = 0x0001; // GPUMapMode.READ
const align4 = (n: number) => Math.ceil(n / 4) * 4;

export interface EngineOptions extends AcquireOptions {
  /** Kernel variant choices; by default barrier-free variants exactly on software adapters. */
  tuning?: Partial<KernelTuning>;
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
      if (gpu.lost)
        throw new Error(`GPU device was lost (${gpu.lost.reason}): ${gpu.lost.message}`);
      const wait = options.wait ?? true;
      const reads = options.read ?? [];
      if (!wait && reads.length > 0) throw new Error('engine.run: a readback needs wait');
      const at: number[] = [];
      let staging: GPUBuffer | null = null;
      let submitted = false;
      try {
        const encoder = device.createCommandEncoder({ label });
        await record(encoder);
        // One staging buffer for every range, each at a 4-byte-aligned offset (sizes are read
        // after encoding, so a range may be sized by what `record` encoded).
        let size = 0;
        for (const r of reads) {
          at.push(size);
          size += align4(r.bytes);
        }
        if (size > 0) {
          staging = device.createBuffer({ size, usage: MAP_READ_USAGE, label: `${label}.read` });
          reads.forEach((r, i) =>
            encoder.copyBufferToBuffer(r.buffer, r.offset ?? 0, staging!, at[i], align4(r.bytes)),
          );
        }
        device.queue.submit([encoder.finish()]);
        submitted = true;
        if (!wait) {
          inFlight = true;
          return [];
        }
        // Mapping the staging buffer waits for this submission (and, in queue order, every one
        // before it), so it is the one wait.
        if (staging) await staging.mapAsync(MAP_READ);
        else await device.queue.onSubmittedWorkDone();
        inFlight = false;
        const mapped = staging ? staging.getMappedRange() : null;
        const out = reads.map((r, i) =>
          mapped ? mapped.slice(at[i], at[i] + r.bytes) : new ArrayBuffer(0),
        );
        // A pipeline a kernel had to compile while encoding reports its compile error here.
        await checkPipelines(device);
        return out;
      } finally {
        staging?.destroy();
        if (wait) {
          // Kernels' per-call scratch, whether the work ran or `record` threw before submitting;
          // after a throw, earlier submissions that did not wait may still read theirs.
          if (inFlight && !submitted) await device.queue.onSubmittedWorkDone().catch(() => {});
          inFlight = false;
          releaseTransients(device);
        }
      }
    },
    destroy: () => gpu.destroy(),
  };
}
