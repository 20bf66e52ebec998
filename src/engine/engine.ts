// The engine handle every kernel wrapper receives: the device context plus the pipeline cache.
import { acquireGpu, type AcquireOptions, type GpuContext } from './device';
import { DEFAULT_TUNING, PipelineCache, type KernelTuning } from './pipelines';

export interface Engine {
  gpu: GpuContext;
  device: GPUDevice;
  pipelines: PipelineCache;
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
  const tuning: KernelTuning = {
    ...DEFAULT_TUNING,
    avoidBarriers: gpu.adapter.isSoftware,
    ...options.tuning,
  };
  return {
    gpu,
    device,
    pipelines: new PipelineCache(device, tuning),
    async run(record, label = 'engine.run') {
      if (gpu.lost)
        throw new Error(`GPU device was lost (${gpu.lost.reason}): ${gpu.lost.message}`);
      const encoder = device.createCommandEncoder({ label });
      await record(encoder);
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
    },
    destroy: () => gpu.destroy(),
  };
}
