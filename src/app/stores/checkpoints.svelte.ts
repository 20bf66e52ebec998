// The page's store of the checkpoint service (src/worker/checkpoint-service.ts): the stored
// checkpoints and what the browser's storage holds, which steps of the run a checkpoint holds (so
// Reset, Restore, Load and leaving the page ask before losing others), and the actions Save,
// Restore (the model checked before any question, custom reward code only with consent), Rename,
// Delete, Export and Import; failed saves and unreadable stored rows as banners until dismissed.
import * as Comlink from 'comlink';
import { draftFromConfig } from '../../grpo/config';
import { CUSTOM_REWARD_PREFIX } from '../../rewards/rewards';
import { customRewardCode, rewardIdsProblem } from '../../rewards/reward-id';
import { decodeCheckpointFile } from '../../storage/transfer';
import { CHECKPOINT_FAILURE_REPORTED } from '../../worker/protocol';
import type { CheckpointInfo, StorageInfo, TrainerEvent } from '../../worker/protocol';
import type { StorageNotice } from '../../worker/types';
import { msg, type Shell } from './shell';

/** Where a checkpoint file's manifest ends: read that much to see its config before importing. */
const CHECKPOINT_PREFIX_BYTES = 16;
const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

/**
 * The config inside a checkpoint file, read on the page from the manifest alone (the tensors are
 * not read), or null when the file is not readable as one (the worker's import then says why).
 */
export async function checkpointFileConfig(file: Blob): Promise<Record<string, unknown> | null> {
  try {
    const head = new Uint8Array(await file.slice(0, CHECKPOINT_PREFIX_BYTES).arrayBuffer());
    if (head.byteLength < CHECKPOINT_PREFIX_BYTES) return null;
    const manifestBytes = Number(new DataView(head.buffer).getBigUint64(8, true));
    if (manifestBytes > Math.min(MAX_MANIFEST_BYTES, file.size - CHECKPOINT_PREFIX_BYTES))
      return null;
    const bytes = new Uint8Array(
      await file.slice(0, CHECKPOINT_PREFIX_BYTES + manifestBytes).arrayBuffer(),
    );
    const { manifest } = decodeCheckpointFile(bytes, (file as File).name ?? 'checkpoint');
    const config = (manifest as { config?: unknown } | null)?.config;
    return config && typeof config === 'object' && !Array.isArray(config)
      ? (config as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

export class CheckpointStore {
  #list: CheckpointInfo[] = $state.raw([]);
  #storage: StorageInfo | null = $state.raw(null);
  #lastSaved: CheckpointInfo | null = $state.raw(null);
  /** The last step of this run that a stored checkpoint holds: the step it was adopted at (0, or
   * the checkpoint it was restored from), or a later save; a deleted checkpoint no longer counts. */
  #savedStep = $state(0);
  private readonly shell: Shell;

  constructor(shell: Shell) {
    this.shell = shell;
  }

  /** Every stored checkpoint, newest first. */
  get list() {
    return this.#list;
  }
  get storage() {
    return this.#storage;
  }
  /** The newest checkpoint this page saved or restored. */
  get lastSaved() {
    return this.#lastSaved;
  }
  /** Steps trained since the last checkpoint of this run: what Reset, Restore or Load would lose. */
  get unsavedSteps(): number {
    const { runId, step } = this.shell.training;
    return runId ? Math.max(0, step - Math.min(this.#savedStep, step)) : 0;
  }

  /** The worker's events about checkpoints and stored history; false for any other event. */
  onEvent(e: TrainerEvent): boolean {
    switch (e.type) {
      case 'checkpoint-saved':
        this.#lastSaved = e.checkpoint;
        this.noteSaved(e.checkpoint);
        void this.refresh();
        return true;
      case 'checkpoint-failed': {
        // The storage names runs by id; the page knows the current run's name.
        const { runId, runName } = this.shell.training;
        if (runId && runName) e.message = e.message.replaceAll(`'${runId}'`, `'${runName}'`);
        this.shell.notify(
          e.quota ? 'warn' : 'error',
          (e.quota
            ? `Storage full: the checkpoint at step ${e.step} was not saved`
            : `The checkpoint at step ${e.step} was not saved`) +
            (e.automatic ? ' (training continues)' : ''),
          `${e.message} ${this.unsavedNote()}`,
          e.candidates,
          e.quota,
        );
        if (e.quota) void this.refresh();
        return true;
      }
      default:
        return false;
    }
  }

  /** Which trained steps no checkpoint holds, for a failed save's banner (it stays until
   * dismissed, so it must say what the user would lose). */
  private unsavedNote(): string {
    const n = this.unsavedSteps;
    const { step, runId, runName } = this.shell.training;
    if (n === 0) return 'Every trained step is in an earlier checkpoint.';
    const range = n === 1 ? `Step ${step} is` : `Steps ${step - n + 1}–${step} are`;
    return `${range} not in any checkpoint of run '${runName ?? runId}' yet.`;
  }

  /** A run was adopted at `step` (0, or the checkpoint it came from): those steps are held. */
  noteAdopted(step: number) {
    this.#savedStep = step;
  }

  /** A checkpoint of the current run now holds its steps up to `c.step`. */
  private noteSaved(c: CheckpointInfo) {
    if (c.runId === this.shell.training.runId) this.#savedStep = Math.max(this.#savedStep, c.step);
  }

  async refresh(): Promise<void> {
    try {
      const [list, storage] = await Promise.all([
        this.shell.api.listCheckpoints(),
        this.shell.api.storageInfo(),
      ]);
      this.#list = list;
      this.#storage = storage;
    } catch (err) {
      this.shell.notify('warn', 'Checkpoints are unavailable', msg(err));
    }
  }

  /** Stored rows the database could not read (an upgrade or a read left them out): one banner
   * that names them until the user dismisses it, after which they are not shown again. */
  async showStorageNotices(): Promise<void> {
    let notices: StorageNotice[];
    try {
      notices = await this.shell.api.storageNotices();
    } catch {
      return; // Storage unavailable: refresh() reports that.
    }
    if (notices.length === 0) return;
    const SHOWN = 8;
    const listed = notices
      .slice(0, SHOWN)
      .map((n) => `run '${n.runId}', ${n.row}: ${n.problem}`)
      .join('; ');
    const more = notices.length > SHOWN ? ` and ${notices.length - SHOWN} more` : '';
    const rows = notices.length === 1 ? '1 stored row' : `${notices.length} stored rows`;
    this.shell.notify(
      'warn',
      `${rows} could not be read and ${notices.length === 1 ? 'was' : 'were'} left out`,
      `Every readable run and checkpoint is kept. Left out (unchanged in the database): ${listed}${more}.`,
      undefined,
      false,
      () => void this.shell.api.dismissStorageNotices(notices.map((n) => n.key)).catch(() => {}),
    );
  }

  async save(): Promise<void> {
    await this.shell.busyWith('Saving', async () => {
      try {
        this.#lastSaved = await this.shell.api.saveCheckpoint();
        this.noteSaved(this.#lastSaved);
      } catch (err) {
        // A failure the worker already reported with its 'checkpoint-failed' event is not repeated.
        if ((err as { name?: string }).name !== CHECKPOINT_FAILURE_REPORTED)
          this.shell.notify('error', 'Not saved', msg(err));
      }
    });
  }

  async restore(id: string): Promise<void> {
    const shell = this.shell;
    // A checkpoint of another model is refused before the discard question: answering it would
    // cost nothing but the user's trust, and the message names the model to load.
    const problem = await shell.api.restoreProblem(id).catch((err: unknown) => msg(err));
    if (problem) {
      shell.notify('error', 'The checkpoint could not be restored', problem);
      return;
    }
    if (!(await shell.confirmDiscard('restore'))) return;
    const info = this.#list.find((c) => c.id === id);
    const subject = info
      ? `The checkpoint of run '${info.runName}' at step ${info.step}`
      : 'This checkpoint';
    let declined: string[] = [];
    // The worker asks (through this proxy) before it builds the run, so declined code never runs.
    const consent = async (code: Record<string, string>) => {
      const allowed = await shell.askConsent('restore', subject, code);
      if (!allowed) declined = Object.keys(code);
      return allowed;
    };
    const run = await shell.task(
      'Restoring',
      () => shell.api.restoreCheckpoint(id, shell.options.jsonl?.text, Comlink.proxy(consent)),
      'The checkpoint could not be restored',
    );
    if (!run) return;
    if (declined.length > 0)
      shell.notify(
        'info',
        'Restored without its custom reward code',
        `Left out: ${declined.map((d) => CUSTOM_REWARD_PREFIX + d).join(', ')}. The weights and optimizer state are restored; steps are scored with ${run.config.rewards.join(', ')}.`,
      );
    shell.options.draft = draftFromConfig(run.config);
    shell.training.clearForRestore();
    shell.training.adopt(run, true);
  }

  async rename(runId: string, name: string): Promise<void> {
    await this.shell.task('Renaming', () => this.shell.api.renameRun(runId, name), 'Not renamed');
    this.shell.training.noteRenamed(runId, name.trim());
    await this.refresh();
  }

  async remove(id: string): Promise<void> {
    const info = this.#list.find((c) => c.id === id);
    const deleted = await this.shell.task(
      'Deleting',
      async () => (await this.shell.api.deleteCheckpoint(id), true),
      'Not deleted',
    );
    // "saved at step N" and the unsaved-steps count must not lean on a deleted checkpoint.
    if (deleted && this.#lastSaved?.id === id) this.#lastSaved = null;
    await this.refresh();
    const { runId, step } = this.shell.training;
    if (deleted && info && info.runId === runId && info.step === this.#savedStep) {
      // The run's steps up to there are now held only by its other checkpoints, if any.
      this.#savedStep = Math.max(
        0,
        ...this.#list.filter((c) => c.runId === runId && c.step <= step).map((c) => c.step),
      );
    }
  }

  async export(id: string): Promise<{ blob: Blob; fileName: string } | null> {
    return this.shell.task('Exporting', () => this.shell.api.exportCheckpoint(id), 'Not exported');
  }

  /**
   * Imports a checkpoint file. Its config is read on the page first: reward ids must follow the
   * one rule, and custom reward code is shown for consent. Declining still imports the file as it
   * is (weights are data, and an export gives back the same file), but the answer is remembered
   * for this session, so restoring it leaves the code out without asking again.
   */
  async import(file: File): Promise<void> {
    const shell = this.shell;
    const config = await checkpointFileConfig(file);
    let allowed = true;
    if (config) {
      const problem = rewardIdsProblem(config);
      if (problem) {
        shell.notify('error', 'Not imported', `${file.name}: ${problem.message}`);
        return;
      }
      allowed = await shell.askConsent(
        'import',
        `The checkpoint file '${file.name}'`,
        customRewardCode(config),
      );
    }
    const info = await shell.task(
      'Importing',
      () => shell.api.importCheckpoint(file),
      'Not imported',
    );
    await this.refresh();
    if (info && !allowed)
      shell.notify(
        'info',
        `Imported '${file.name}' without permission to run its reward code`,
        'Restoring it leaves its custom rewards out; its weights and optimizer state restore as usual.',
      );
  }
}
