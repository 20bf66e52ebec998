// Page-side handle on the CPU worker (comlink proxy), started only when WebGPU is missing.
import * as Comlink from 'comlink';
import type { CpuApi } from '../worker/cpu-api';

let cpu: Comlink.Remote<CpuApi> | null = null;

export function cpuWorker(): Comlink.Remote<CpuApi> {
  cpu ??= Comlink.wrap<CpuApi>(
    new Worker(new URL('../../workers/cpu.worker.ts', import.meta.url), {
      type: 'module',
      name: 'cpu-sampler',
    }),
  );
  return cpu;
}
