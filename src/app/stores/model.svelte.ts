// The page's store of the model service (src/worker/model-service.ts): the GPU adapter probe, the
// model chosen (a bundled one, folder, URL) with its config and memory plan before any weight is read,
// loading it (progress), and a PEFT adapter loaded onto it. A load or an adapter starts a new run,
// which the training store adopts. Local files get a name here (lib/model-name.ts: the folder's,
// else config.json's _name_or_path, else architecture and size), which the worker keeps as the
// model's label: the name on the page, in run names, checkpoints and adapter_config.json.
import { draftFromConfig } from '../../grpo/config';
import { DEFAULT_BUNDLED } from '../../core/bundled-models';
import type { ModelChoice, ModelInfo, ModelPreview } from '../../worker/protocol';
import type { AdapterProbe } from '../../worker/trainer-api';
import { describeChosen, describedName, folderName, nameFromConfig } from '../lib/model-name';
import { msg, type Shell } from './shell';

type FilesChoice = Extract<ModelChoice, { kind: 'files' }>;

/** config.json is a few kB; a file far larger is not one to read for a name. */
const CONFIG_NAME_MAX_BYTES = 1 << 20;

/** config.json among the chosen files (the shallowest), parsed; null when absent or unreadable. */
async function readChosenConfig(choice: FilesChoice): Promise<unknown> {
  const paths = choice.paths;
  const candidates = choice.files
    .map((f, i) => ({ f, path: paths?.[i] ?? (f.webkitRelativePath || f.name) }))
    .filter(({ f }) => f.name === 'config.json' && f.size <= CONFIG_NAME_MAX_BYTES)
    .sort((a, b) => a.path.split('/').length - b.path.split('/').length);
  if (candidates.length === 0) return null;
  try {
    return JSON.parse(await candidates[0].f.text());
  } catch {
    return null; // the preview reports a broken config.json with its own message
  }
}

/** The same model source: a load of `a` after `b` reloads the same files. */
function sameChoice(a: ModelChoice, b: ModelChoice | null): boolean {
  if (!b || a.kind !== b.kind) return false;
  if (a.kind === 'bundled')
    return b.kind === 'bundled' && (a.name ?? DEFAULT_BUNDLED) === (b.name ?? DEFAULT_BUNDLED);
  if (a.kind === 'url') return b.kind === 'url' && a.url === b.url;
  return (
    b.kind === 'files' &&
    a.files.length === b.files.length &&
    a.files.every((f, i) => f === b.files[i])
  );
}

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
  /** The choice the loaded model came from (the button reloads it, or loads another). */
  #loadedChoice: ModelChoice | null = $state.raw(null);
  /** How local files were chosen ('folder tiny (5 files)', '4 dropped files'), or null. */
  #source: string | null = $state(null);
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
  /** The loaded model's name (its folder's for local files, lib/model-name.ts), or null. */
  get name(): string | null {
    return this.#info?.label ?? null;
  }
  /** How the chosen local files were picked or dropped, beside their name; null otherwise. */
  get source(): string | null {
    return this.#choice.kind === 'files' ? this.#source : null;
  }
  /** The chosen model is the one loaded: Load would reload it. */
  get choiceLoaded(): boolean {
    return !!this.#info && sameChoice(this.#choice, this.#loadedChoice);
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

  /**
   * Reads the chosen model's config.json and plans its memory. Local files are named first (their
   * folder, else config.json's _name_or_path, else architecture and size once the config is read);
   * `source` says how they were chosen when the caller knows better ('dropped folder …').
   */
  async previewModel(choice: ModelChoice = this.#choice, source?: string): Promise<void> {
    this.#choice = choice;
    this.#preview = null;
    this.#previewError = null;
    if (choice.kind === 'files' && !choice.label) {
      this.#source = source ?? describeChosen(choice.files, choice.paths);
      const name =
        folderName(choice.files, choice.paths) ?? nameFromConfig(await readChosenConfig(choice));
      if (this.#choice !== choice) return; // another choice came meanwhile
      if (name) choice = { ...choice, label: name };
      this.#choice = choice;
    }
    try {
      let preview = await this.shell.api.previewModel(choice, this.shell.options.forWorker());
      if (choice.kind === 'files' && !choice.label) {
        // No folder and no _name_or_path: the model is called what it is.
        const label = describedName(preview.config.architecture, preview.parameterCount);
        preview = { ...preview, label };
        if (this.#choice === choice) this.#choice = { ...choice, label };
      }
      this.#preview = preview;
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
      const plan = await this.shell.api.planMemory(
        preview.config,
        this.shell.options.forWorker(),
        preview.prequantised ?? false,
      );
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
    const choice = this.#choice;
    const out = await shell.task(
      'Loading the model',
      () => shell.api.loadModel(choice, shell.options.forWorker(), shell.options.jsonl?.text),
      'The model could not be loaded',
    );
    this.#loadProgress = null;
    if (!out) return;
    this.#info = out.model;
    this.#loadedChoice = choice;
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
