// The API the trainer worker exposes over comlink. Everything here runs inside the worker, which
// owns the GPU device; the page only sees plain, structured-clonable results.
import { acquireGpu, type AdapterSummary, type GpuContext } from '../engine/device';
import { WebGpuUnavailableError } from '../engine/errors';

export type AdapterProbe =
  { ok: true; adapter: AdapterSummary } | { ok: false; reason: string; remedy: string };

export function createTrainerApi() {
  let gpu: GpuContext | null = null;
  return {
    /** Acquires (once) the worker's GPU device and describes the adapter. */
    async probeAdapter(): Promise<AdapterProbe> {
      try {
        gpu ??= await acquireGpu();
        return { ok: true, adapter: gpu.adapter };
      } catch (err) {
        if (err instanceof WebGpuUnavailableError) {
          return {
            ok: false,
            reason: err.message.replace(err.remedy, '').trim(),
            remedy: err.remedy,
          };
        }
        return {
          ok: false,
          reason: String((err as Error).message ?? err),
          remedy: 'Reload the page; if it persists, restart the browser.',
        };
      }
    },
  };
}

export type TrainerApi = ReturnType<typeof createTrainerApi>;
