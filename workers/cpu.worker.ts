// CPU worker: the bundled model on the CPU reference sampler for browsers without WebGPU. Thin
// comlink wrapper; the logic lives in src/worker/cpu-api.ts.
import * as Comlink from 'comlink';
import { createCpuApi } from '../src/worker/cpu-api';

Comlink.expose(createCpuApi());
