// Transaction helpers shared by the storage modules. IndexedDB commits a transaction as soon as
// no request is pending, so a body may only await IDB requests (never hashing or other I/O), and
// it awaits each request right away: a request left pending when the body throws would reject
// later, unobserved, once the transaction aborts.

import type { IDBPTransaction, StoreNames } from 'idb';
import type { GrpoDatabase, GrpoDB } from './db';
import { isQuotaExceeded } from './errors';

type Stores = StoreNames<GrpoDB>[];

/**
 * Runs `body` in one readwrite transaction and resolves when it has committed. Any error aborts
 * the whole transaction (nothing of it is kept); a quota failure reported on the transaction
 * (Chromium reports it at commit, not on the request) wins over the request's AbortError.
 */
export async function writeTx<const S extends Stores>(
  db: GrpoDatabase,
  stores: S,
  body: (tx: IDBPTransaction<GrpoDB, S, 'readwrite'>) => Promise<void>,
  durability?: 'strict' | 'relaxed',
): Promise<void> {
  const tx = db.transaction(stores, 'readwrite', durability ? { durability } : undefined);
  const done = tx.done;
  done.catch(() => {}); // observed below; the body's own error is the one to report
  try {
    await body(tx);
  } catch (err) {
    const txError = tx.error;
    try {
      tx.abort();
    } catch {
      // Already aborted by the failed request, or already finished.
    }
    throw isQuotaExceeded(txError) ? txError : err;
  }
  try {
    await done;
  } catch (err) {
    throw isQuotaExceeded(tx.error) ? tx.error : err;
  }
}

/** Every key [id, i] of a store keyed by [id, number]: chunks of one checkpoint, a run's metrics. */
export const prefixRange = (id: string): IDBKeyRange =>
  IDBKeyRange.bound([id, -Infinity], [id, Infinity]);

/**
 * The smallest key after every [id, number]: arrays sort after numbers, so [id, []] skips a
 * whole prefix in one cursor step.
 */
export const afterPrefix = (id: string): [string, number] =>
  [id, []] as unknown as [string, number];
