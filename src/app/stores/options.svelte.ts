// The page's store of the run's options: the draft config the forms edit (nulls kept), the
// imported dataset (any file the importer reads, as the jsonl task's text), the draft resolved
// against the config schema, and how it differs from the run the worker holds (pending live
// options, options that wait for a Reset). It mirrors what the run service takes (configure,
// applyOptions); presets and shared links write the draft.
import {
  configToUrlParams,
  configWarningsByKey,
  resolveConfig,
  resolveDraft,
  type Config,
  type ConfigInput,
  type ConfigKey,
  type DraftConfig,
} from '../../grpo/config';
import { PRESETS, type PresetName } from '../../grpo/presets';
import { CUSTOM_REWARD_PREFIX } from '../../rewards/rewards';
import { customRewardCode, withoutCustomRewards } from '../../rewards/reward-id';
import { parseJsonlDataset, type JsonlChecker } from '../../tasks/jsonl';
import {
  formatColumnMapping,
  readPickedFiles,
  importPromptDataset,
  type ColumnRole,
  type DatasetFile,
} from '../../tasks/datasets';
import { changedOptions, splitPending } from '../lib/pending';
import { optionLabel } from '../lib/options';
import { PLAYGROUND_DEFAULTS, msg, type JsonlImport, type Shell } from './shell';

/** The draft as the worker takes it: nulls kept, the imported JSONL file named in taskOptions. */
function draftForWorker(draft: DraftConfig, jsonl: JsonlImport | null): Partial<ConfigInput> {
  const d = $state.snapshot(draft);
  if (d.task !== 'jsonl') return d;
  return { ...d, taskOptions: { ...d.taskOptions, path: jsonl?.name ?? '' } };
}

export class OptionsStore {
  /** The form's config, nulls kept (DraftConfig); applied when a run starts or is reset. The
   * forms edit this deep `$state` proxy in place (bind:value on its fields). */
  draft: DraftConfig = $state(resolveDraft(PLAYGROUND_DEFAULTS));
  #jsonl: JsonlImport | null = $state.raw(null);

  /** The draft resolved, or why it does not resolve; follows the draft and the imported JSONL. */
  #resolved: { config: Config; error: null } | { config: null; error: string } = $derived.by(() => {
    try {
      return { config: resolveConfig(draftForWorker(this.draft, this.#jsonl)), error: null };
    } catch (err) {
      return { config: null, error: msg(err) };
    }
  });

  /** The draft's values outside their option's usual range (the schema's `sane`), by option:
   * accepted, as on the command line, and said beside the field (OptionsPanel). */
  #warnings: Partial<Record<ConfigKey, string>> = $derived(
    configWarningsByKey(this.draft, optionLabel),
  );

  #configError: string | null = $derived(
    this.#resolved.error ??
      (this.draft.task === 'jsonl' && !this.#jsonl ? 'Import a dataset first.' : null),
  );

  private readonly shell: Shell;

  constructor(shell: Shell) {
    this.shell = shell;
  }

  /** The run's config in force (the training store's), or null before a run. */
  private get applied(): Config | null {
    return this.shell.training.applied;
  }

  #dirty: boolean = $derived(
    !this.applied ||
      !this.#resolved.config ||
      JSON.stringify(this.#resolved.config) !== JSON.stringify(this.applied),
  );

  /** The options changed in the form since the run was built or last took live options. */
  #pending: string[] = $derived(
    this.applied && this.#resolved.config
      ? changedOptions(this.applied, this.#resolved.config)
      : [],
  );
  /** Those split: `live` apply at the next Step / Run, `reset` wait for a Reset (lib/pending.ts). */
  #pendingSplit: { live: ConfigKey[]; reset: ConfigKey[] } = $derived.by(() =>
    this.applied && this.#resolved.config
      ? splitPending(this.applied, this.#resolved.config, this.shell.training.liveOptions)
      : { live: [], reset: [] },
  );

  #rewardNames: string[] = $derived((this.applied ?? this.draft).rewards);

  get jsonl() {
    return this.#jsonl;
  }
  /** The draft resolved, or null when it does not resolve (configError says why). */
  get resolved(): Config | null {
    return this.#resolved.config;
  }
  /** A warning per option whose value is unusual (accepted), by option key. */
  get warnings(): Partial<Record<ConfigKey, string>> {
    return this.#warnings;
  }
  /** Why the draft cannot start a run, or null. */
  get configError(): string | null {
    return this.#configError;
  }
  /** The draft differs from the run's config (applies on Reset, or on Step at step 0). */
  get dirty(): boolean {
    return this.#dirty;
  }
  /** The options changed in the form since this run started or last took live options. */
  get pending(): string[] {
    return this.#pending;
  }
  /** The pending options the next Step or Run applies to the run as it goes on. */
  get pendingLive(): ConfigKey[] {
    return this.#pendingSplit.live;
  }
  /** The pending options that apply only on Reset (a new run). */
  get pendingReset(): ConfigKey[] {
    return this.#pendingSplit.reset;
  }
  get rewardNames(): string[] {
    return this.#rewardNames;
  }
  /** The steps the run trains to once the pending live options apply (Run's limit). */
  get targetSteps(): number {
    const next = this.#resolved.config;
    if (next && this.#pendingSplit.live.includes('steps')) return next.steps;
    return this.applied?.steps ?? this.draft.steps;
  }

  /** The draft as the worker takes it (epsilonHigh / rewardWeights keep their null meaning). */
  forWorker(): Partial<ConfigInput> {
    return draftForWorker(this.draft, this.#jsonl);
  }

  /** Replaces the draft with a named preset (src/grpo/presets.ts), exactly as the CLI runs it;
   * like any draft change it applies on Reset, or on the first Step of a fresh run. */
  usePreset(name: PresetName) {
    this.draft = resolveDraft({ ...PRESETS[name] });
    this.shell.notify(
      'info',
      `The '${name}' preset is in the options`,
      'It applies on Reset, or on the first Step of a run not trained yet.',
    );
  }

  /**
   * Imports dataset files as the jsonl task's data: one file, or several shards of one format
   * (.parquet, .jsonl, .json, .csv), read by the importer (src/tasks/datasets) with its layout
   * recognised. The draft takes the file name as `path`, the user's mapping as `columns` and, on a
   * first import, the checker the layout wants (gsm8k, MATH). Throws DatasetError for a file that
   * cannot be read (the message names it).
   */
  async importDataset(files: readonly DatasetFile[], columns = ''): Promise<void> {
    const d = await importPromptDataset(files, { columns });
    const remap = this.#jsonl?.dataset?.files === files;
    const name =
      files.length === 1 ? files[0].name : `${files[0].name} (+${files.length - 1} shards)`;
    const options = this.draft.task === 'jsonl' ? this.draft.taskOptions : {};
    const checker = ((!remap && d.checker) || options.checker || 'exact') as JsonlChecker;
    this.draft.taskOptions = { ...options, path: name, checker, columns };
    const preview = parseJsonlDataset(d.text, {
      checker,
      tolerance: Number(options.tolerance ?? 1e-6),
    });
    this.#jsonl = { name, text: d.text, preview, dataset: { ...d, files, userColumns: columns } };
  }

  /** Picked files (File objects) imported: their total size is checked before any is read. */
  async importFiles(picked: readonly File[]): Promise<void> {
    await this.importDataset(await readPickedFiles(picked));
  }

  /** The imported files read again with `role` mapped to `column` (the preview's selects). */
  remapColumn(role: ColumnRole, column: string): Promise<void> {
    const d = this.#jsonl?.dataset;
    if (!d) return Promise.resolve();
    return this.importDataset(d.files, formatColumnMapping({ ...d.mapping, [role]: column }));
  }

  /** The draft as a link (its config in the query, the view in the hash). */
  shareUrl(view: string): string {
    const params = configToUrlParams(resolveConfig(this.forWorker()));
    const q = params.toString();
    return `${location.origin}${location.pathname}${q ? `?${q}` : ''}#${view}`;
  }

  /**
   * A shared link's config: everything but its custom reward code applies at once; the code is
   * added only after the user has seen it and allowed it (the consent dialog). Resolves when the
   * answer has been applied.
   */
  async applyShared(shared: Partial<ConfigInput>): Promise<void> {
    const code = customRewardCode(shared);
    const custom = Object.keys(code).length > 0;
    try {
      this.draft = resolveDraft({
        ...PLAYGROUND_DEFAULTS,
        ...(custom ? withoutCustomRewards(shared) : shared),
      });
    } catch (err) {
      this.shell.notify('error', 'The shared configuration could not be applied', msg(err));
      return;
    }
    if (!custom) return;
    const allowed = await this.shell.askConsent('link', 'This link', code);
    if (!allowed) {
      this.shell.notify(
        'info',
        "The link's custom reward code was left out",
        `Not added: ${Object.keys(code)
          .map((id) => CUSTOM_REWARD_PREFIX + id)
          .join(', ')}. The rest of the shared configuration is in the options.`,
      );
      return;
    }
    try {
      this.draft = resolveDraft({ ...PLAYGROUND_DEFAULTS, ...shared });
    } catch (err) {
      this.shell.notify('error', 'The shared configuration could not be applied', msg(err));
    }
  }
}
