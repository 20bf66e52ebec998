// Page-side handle on the trainer worker (comlink proxy). The UI never touches the GPU itself.
import * as Comlink from 'comlink';
import type { TrainerApi } from '../worker/trainer-api';

let trainer: Comlink.Remote<TrainerApi> | null = null;

export function trainerWorker(): Comlink.Remote<TrainerApi> {
  trainer ??= Comlink.wrap<TrainerApi>(
    new Worker(new URL('../../workers/trainer.worker.ts', import.meta.url), {
      type: 'module',
      name: 'trainer',
    }),
  );
  return trainer;
}
