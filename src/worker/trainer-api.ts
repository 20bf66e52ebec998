// The API the trainer worker exposes over comlink, composed from one small service per job over a
// shared WorkerContext (context.ts: the GPU engine, the loaded model, the playground's run, the
// status, the event stream and storage):
//   model-service       adapter probe, preview and memory plan, step estimate, load, PEFT adapter
//   run-service         configure, Step, Run, Pause, live options, Reset, recovery, test hooks
//   checkpoint-service  save, list, restore, rename, delete, export / import, storage usage
//   evaluation-service  chat and the before/after comparison
//   export-service      HF folder, ONNX, PEFT adapter
//   recipe-service      multi-stage recipes on the loaded model
// Everything runs inside the worker, which owns the GPU device. The page sees plain,
// structured-clonable results and a stream of typed events (protocol.ts TrainerEvent) through one
// callback; the page's stores mirror these services (src/app).
import { checkpointService } from './checkpoint-service';
import { WorkerContext, type TrainerApiOptions } from './context';
import { evaluationService } from './evaluation-service';
import { exportService } from './export-service';
import { modelService } from './model-service';
import { COMPARE_PROMPTS, COMPARE_SAMPLES } from './protocol';
import type { TrainerEvent } from './protocol';
import { createRecipeApi } from './recipe-service';
import { runService } from './run-service';

export type { AdapterProbe, TrainerApiOptions } from './context';
/** Held-out prompts used by the before/after comparison (greedy + k samples each). */
export { COMPARE_PROMPTS, COMPARE_SAMPLES };

export function createTrainerApi(options: TrainerApiOptions = {}) {
  const ctx = new WorkerContext(options);
  // Multi-stage recipes on the loaded model, with this worker's device and storage; one training
  // loop on the GPU at a time, each side refusing while the other trains.
  const recipes = createRecipeApi({
    getEngine: () => ctx.getEngine(),
    getStorage: () => ctx.storage(),
    model: () => ctx.model,
    sandboxFactory: () => ctx.sandboxFactory(),
    busy: () =>
      ctx.status === 'running' || ctx.status === 'loading'
        ? 'The playground run is using the GPU: pause it (or wait for the model to load) first.'
        : null,
  });
  ctx.recipeBusy = () => recipes.recipeBusy();
  return {
    /** The page's single event callback (wrap it in Comlink.proxy). */
    setListener(callback: ((event: TrainerEvent) => void) | null): void {
      ctx.setListener(callback);
    },
    ...modelService(ctx),
    ...runService(ctx),
    ...checkpointService(ctx),
    ...evaluationService(ctx),
    ...exportService(ctx),
    ...recipes,
  };
}

export type TrainerApi = ReturnType<typeof createTrainerApi>;
