// Browser storage usage and persistence (navigator.storage). Node and old browsers have no
// StorageManager: they get { known: false } and 'unknown', never an exception.

export type StorageUsage =
  | {
      known: true;
      /** Bytes this origin uses (all storage, not only checkpoints). */
      usageBytes: number;
      quotaBytes: number;
      /** Whether the browser promised not to evict this origin's data; null if it cannot say. */
      persisted: boolean | null;
    }
  | { known: false; reason: string };

export type PersistenceResult = 'granted' | 'denied' | 'unknown';

/** The browser's StorageManager, if this environment has one. */
export function defaultStorageManager(): StorageManager | null {
  const nav = (globalThis as { navigator?: { storage?: StorageManager } }).navigator;
  return nav?.storage ?? null;
}

export async function storageUsage(
  manager: StorageManager | null = defaultStorageManager(),
): Promise<StorageUsage> {
  if (!manager || typeof manager.estimate !== 'function') {
    return { known: false, reason: 'this environment has no navigator.storage.estimate()' };
  }
  try {
    const estimate = await manager.estimate();
    if (typeof estimate.usage !== 'number' || typeof estimate.quota !== 'number') {
      return { known: false, reason: 'navigator.storage.estimate() gave no usage or quota' };
    }
    let persisted: boolean | null = null;
    if (typeof manager.persisted === 'function') {
      persisted = await manager.persisted().catch(() => null);
    }
    return { known: true, usageBytes: estimate.usage, quotaBytes: estimate.quota, persisted };
  } catch (err) {
    return {
      known: false,
      reason: `navigator.storage.estimate() failed: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
}

/**
 * Asks the browser to keep this origin's data under storage pressure (Chromium grants it to
 * installed or engaged sites without a prompt; Firefox asks the user).
 */
export async function requestPersistence(
  manager: StorageManager | null = defaultStorageManager(),
): Promise<PersistenceResult> {
  if (!manager || typeof manager.persist !== 'function') return 'unknown';
  try {
    return (await manager.persist()) ? 'granted' : 'denied';
  } catch {
    return 'unknown';
  }
}
