// Trainer worker: owns the GPU device. Thin comlink wrapper; the logic lives in src/worker/trainer-api.ts.
// Exports cross back with Comlink.transfer so large weight files are moved, not copied.
import * as Comlink from 'comlink';
import { createTrainerApi } from '../src/worker/trainer-api';

const api = createTrainerApi();

Comlink.expose({
  ...api,
  async exportModel(format: 'hf' | 'onnx' | 'peft') {
    const files = await api.exportModel(format);
    return Comlink.transfer(
      files,
      files.map((f) => f.bytes.buffer as ArrayBuffer),
    );
  },
} satisfies typeof api);
