// Typed errors of the checkpoint storage. The trainer catches StorageQuotaError and keeps
// training; the UI shows each message as is, so every message says what happened and what to do.

import { formatBytes } from '../core/format';

/** Base class: anything the storage layer refuses or cannot do. */
export class StorageError extends Error {
  override name = 'StorageError';
}

/** A checkpoint the storage can delete to free space, as offered by StorageQuotaError. */
export interface DeletionCandidate {
  checkpointId: string;
  runId: string;
  runName: string;
  step: number;
  bytes: number;
  createdAt: number;
}

/**
 * The browser refused to store a checkpoint (QuotaExceededError). Nothing of it was kept and
 * earlier checkpoints are intact; `candidates` lists what could be deleted, largest first.
 */
export class StorageQuotaError extends StorageError {
  override name = 'StorageQuotaError';
  constructor(
    readonly runId: string,
    readonly step: number,
    /** Bytes the checkpoint needed. */
    readonly bytes: number,
    readonly candidates: DeletionCandidate[],
    /** The step of the newest checkpoint of this run that is still loadable, if any. */
    readonly previousStep: number | null,
    override readonly cause?: unknown,
  ) {
    const what =
      `Checkpoint of run '${runId}' at step ${step} (${formatBytes(bytes)}) was not saved: ` +
      `the browser's storage quota is exhausted. `;
    const previous =
      previousStep === null
        ? 'This run has no earlier checkpoint. '
        : `The previous checkpoint (step ${previousStep}) is intact and loadable. `;
    const shown = candidates.slice(0, 5);
    const free =
      shown.length === 0
        ? 'There are no stored checkpoints to delete; free space in the browser or export and delete runs.'
        : `To free space, delete some of these checkpoints (largest, then oldest): ` +
          shown
            .map(
              (c) =>
                `run '${c.runName}' step ${c.step} (${formatBytes(c.bytes)}, ` +
                `${new Date(c.createdAt).toISOString()})`,
            )
            .join('; ') +
          (candidates.length > shown.length
            ? `; and ${candidates.length - shown.length} more`
            : '') +
          '.';
    super(what + previous + free);
  }
}

/** A stored checkpoint whose bytes no longer match their checksums (or whose chunks are missing). */
export class CheckpointIntegrityError extends StorageError {
  override name = 'CheckpointIntegrityError';
}

/** No such run or checkpoint (deleted in another tab, or a stale id). */
export class NotFoundError extends StorageError {
  override name = 'NotFoundError';
}

/** A checkpoint payload that does not fit its model config (a caller bug, caught before writing). */
export class CheckpointValidationError extends StorageError {
  override name = 'CheckpointValidationError';
}

/** An exported checkpoint file that cannot be imported; nothing was written. */
export class CheckpointImportError extends StorageError {
  override name = 'CheckpointImportError';
  constructor(
    readonly file: string,
    readonly detail: string,
  ) {
    super(`${file}: ${detail}`);
  }
}

/** Chromium and Safari say QuotaExceededError; old Firefox NS_ERROR_DOM_QUOTA_REACHED (code 1014). */
export function isQuotaExceeded(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { name, code } = err as { name?: unknown; code?: unknown };
  return name === 'QuotaExceededError' || name === 'NS_ERROR_DOM_QUOTA_REACHED' || code === 22;
}
