// The engine handle every kernel wrapper receives: the device context, the pipeline cache, and the
// count of live GPU bytes (every storage buffer made on the device, see memory.ts).
import { acquireGpu, type AcquireOptions, type GpuContext } from './device';
import { GpuMemory, releaseTransients, trackMemory } from './memory';
import { checkPipelines, DEFAULT_TUNING, PipelineCache, type KernelTuning } from './pipelines';

export interface Engine {
  gpu: GpuContext;
  device: GPUDevice;
  pipelines: PipelineCache;
  /** Live and peak bytes of the device's storage buffers. */
  memory: GpuMemory;
  /** Encodes with `record`, submits once, and waits for the queue to drain. */
  run(record: (encoder: GPUCommandEncoder) => void | Promise<void>, label?: string): Promise<void>;
  destroy(): void;
}

export interface EngineOptions extends AcquireOptions {
  /** Kernel variant choices; by default barrier-free variants exactly on software adapters. */
  tuning?: Partial<KernelTuning>;
}

export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const gpu = await acquireGpu(options);
  const device = gpu.device;
  const memory = trackMemory(device);
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
    async run(record, label = 'engine.run') {
      if (gpu.lost)
        throw new Error(`GPU device was lost (${gpu.lost.reason}): ${gpu.lost.message}`);
      try {
        const encoder = device.createCommandEncoder({ label });
        await record(encoder);
        device.queue.submit([encoder.finish()]);
        await device.queue.onSubmittedWorkDone();
        // A pipeline a kernel had to compile while encoding reports its compile error here.
        await checkPipelines(device);
      } finally {
        // Kernels' per-call scratch, whether the work ran or `record` threw before submitting.
        releaseTransients(device);
      }
    },
    destroy: () => gpu.destroy(),
  };
}
