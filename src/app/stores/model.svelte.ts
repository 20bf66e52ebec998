// The page's store of the model service (src/worker/model-service.ts): the GPU adapter probe, the
// model chosen (bundled, folder, URL) with its config and memory plan before any weight is read,
// loading it (progress), and a PEFT adapter loaded onto it. A load or an adapter starts a new run,
// which the training store adopts.
import { draftFromConfig } from '../../grpo/config';
import type { ModelChoice, ModelInfo, ModelPreview } from '../../worker/protocol';
import type { AdapterProbe } from '../../worker/trainer-api';
import { msg, type Shell } from './shell';

export interface LoadProgress {
  phase: string;
  file: string;
  loaded: number;
  total: number | null;
}

export class ModelStore {
  #probe: AdapterProbe | null = $state(null);
  #choice: ModelChoice = $state.raw({ kind: 'bundled' });
  #preview: ModelPreview | null = $state.raw(null);
  #previewError: string | null = $state(null);
  #info: ModelInfo | null = $state.raw(null);
  #loadProgress: LoadProgress | null = $state.raw(null);
  /** Orders replan() answers: only the latest request's plan is shown. */
  #planRequest = 0;

  private readonly shell: Shell;

  constructor(shell: Shell) {
    this.shell = shell;
  }

  /** What the worker's GPU adapter is, or why there is none. */
  get probe() {
    return this.#probe;
  }
  get choice() {
    return this.#choice;
  }
  /** The chosen model's config and memory plan, read before any weight. */
  get preview() {
    return this.#preview;
  }
  get previewError() {
    return this.#previewError;
  }
  /** The loaded model, or null. */
  get info() {
    return this.#info;
  }
  get loadProgress() {
    return this.#loadProgress;
  }

  async probeAdapter(): Promise<AdapterProbe> {
    try {
      this.#probe = await this.shell.api.probeAdapter();
    } catch (err) {
      this.#probe = {
        ok: false,
        reason: `The trainer worker failed to start: ${msg(err)}`,
        remedy: 'Reload the page. If it keeps failing, your browser may block module workers.',
      };
    }
    return this.#probe;
  }

  onLoadProgress(progress: LoadProgress) {
    this.#loadProgress = progress;
  }

  async previewModel(choice: ModelChoice = this.#choice): Promise<void> {
    this.#choice = choice;
    this.#preview = null;
    this.#previewError = null;
    try {
      this.#preview = await this.shell.api.previewModel(choice, this.shell.options.forWorker());
    } catch (err) {
      this.#previewError = msg(err);
    }
  }

  /**
   * Plans the previewed model's memory again for the form's options (ModelPanel calls it when the
   * draft changes, e.g. its LoRA / dtype / checkpointing switches), so the plan follows the form
   * before anything is loaded. A draft that does not resolve keeps the last plan: the form says why.
   */
  async replan(): Promise<void> {
    const preview = this.#preview;
    if (!preview || !this.shell.options.resolved) return;
    const request = ++this.#planRequest;
    try {
      const plan = await this.shell.api.planMemory(preview.config, this.shell.options.forWorker());
      const now = this.#preview;
      if (request === this.#planRequest && now?.config === preview.config)
        this.#preview = { ...now, plan };
    } catch {
      // Same as an unresolved draft: the options form names the problem.
    }
  }

  /** The plan of the run the worker built (it follows the applied config). */
  notePlan(plan: ModelPreview['plan']) {
    this.#preview = this.#preview ? { ...this.#preview, plan } : this.#preview;
  }

  async load(): Promise<void> {
    const shell = this.shell;
    if (!(await shell.confirmDiscard('load'))) return;
    this.#loadProgress = null;
    const out = await shell.task(
      'Loading the model',
      () => shell.api.loadModel(this.#choice, shell.options.forWorker(), shell.options.jsonl?.text),
      'The model could not be loaded',
    );
    this.#loadProgress = null;
    if (!out) return;
    this.#info = out.model;
    shell.training.adopt(out.run, true);
  }

  /**
   * A PEFT LoRA adapter (its adapter_config.json and adapter_model.safetensors) onto the loaded
   * base model: a new run at step 0 with the adapter's LoRA options and weights; the form follows.
   */
  async importAdapter(files: readonly File[]): Promise<void> {
    const shell = this.shell;
    if (!this.#info) return;
    if (!(await shell.confirmDiscard('adapter'))) return;
    const run = await shell.task(
      'Loading the adapter',
      async () => {
        const read = await Promise.all(
          files.map(async (f) => ({ name: f.name, bytes: new Uint8Array(await f.arrayBuffer()) })),
        );
        return shell.api.importAdapter(read, shell.options.jsonl?.text);
      },
      'The adapter could not be loaded',
    );
    if (!run) return;
    shell.options.draft = draftFromConfig(run.config);
    shell.training.adopt(run, true);
  }
}
