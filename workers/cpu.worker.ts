// CPU worker: the bundled model on the CPU reference sampler for browsers without WebGPU. Thin
// comlink wrapper; the logic lives in src/app/cpu-api.ts.
import * as Comlink from 'comlink';
import { createCpuApi } from '../src/app/cpu-api';

Comlink.expose(createCpuApi());
