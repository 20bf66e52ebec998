// The checkpoint storage (src/storage) on Chromium's real, on-disk IndexedDB, loaded into the
// built app page: a bit-exact round trip that survives a new tab and a browser restart, a tab
// closed in the middle of a save, a quota capped through the DevTools protocol, and export /
// import through a real downloaded file picked with a file input.
import { expect, test, type Page } from '@playwright/test';
import { readFileSync, writeFileSync } from 'node:fs';
import {
  bundleStorageModule,
  launchProfile,
  openAppPage,
  type Profile,
} from './support/storage-page';

// ~6.3 MiB checkpoint (551,552 parameters + both AdamW moments): two 4 MiB chunks, one partial.
const SMALL = [128, 256, 2, 1000] as const;
// ~49 MiB checkpoint (4,273,920 parameters + moments): 13 chunks, long enough to interrupt.
const LARGE = [256, 688, 3, 4096] as const;
// Orphan grace used when reopening after the closed tab; the app's default is 5 minutes.
const SHORT_GRACE_MS = 1000;

let bundle = '';
let profile: Profile | null = null;

test.beforeAll(async () => {
  const t0 = Date.now();
  bundle = await bundleStorageModule();
  test.info().annotations.push({
    type: 'bundle',
    description: `${bundle.length} bytes built in ${Date.now() - t0} ms`,
  });
});

test.beforeEach(async ({ baseURL }) => {
  profile = await launchProfile(baseURL!, bundle);
});

test.afterEach(async () => {
  await profile?.dispose();
  profile = null;
});

const note = (type: string, description: string) =>
  test.info().annotations.push({ type, description });

/** Saves checkpoints in the page; returns what each save returned or how it failed. */
function saveInPage(
  page: Page,
  saves: Array<{ runId: string; runName?: string; step: number; seed: number }>,
  size: readonly [number, number, number, number],
) {
  return page.evaluate(
    async ({ saves, size }) => {
      const api = __grpoE2E;
      const storage = await api.GrpoStorage.open();
      const config = api.llamaConfig(...size);
      const results = [];
      try {
        for (const spec of saves) {
          const payload = api.makePayload({ ...spec, config });
          const digest = await api.tensorsDigest(payload.tensors);
          const t0 = performance.now();
          try {
            const record = await storage.saveCheckpoint(payload);
            results.push({ ok: true as const, record, digest, ms: performance.now() - t0 });
          } catch (err) {
            const e = err as Error;
            const quota = err instanceof api.StorageQuotaError ? err : null;
            results.push({
              ok: false as const,
              digest,
              name: e.name,
              message: e.message,
              isQuotaError: quota !== null,
              quota: quota && {
                runId: quota.runId,
                step: quota.step,
                bytes: quota.bytes,
                previousStep: quota.previousStep,
                candidates: quota.candidates,
                causeName: (quota.cause as { name?: string } | undefined)?.name,
              },
            });
          }
        }
      } finally {
        storage.close();
      }
      return results;
    },
    { saves, size },
  );
}

/** Loads a checkpoint in the page: its digest and metadata, or the error it threw. */
function loadInPage(page: Page, id: string) {
  return page.evaluate(async (id) => {
    const storage = await __grpoE2E.GrpoStorage.open();
    try {
      const t0 = performance.now();
      const loaded = await storage.loadCheckpoint(id);
      const ms = performance.now() - t0;
      return { ...(await __grpoE2E.summarize(loaded)), ms };
    } finally {
      storage.close();
    }
  }, id);
}

const listInPage = (page: Page) =>
  page.evaluate(async () => {
    const storage = await __grpoE2E.GrpoStorage.open();
    try {
      return await storage.listCheckpoints();
    } finally {
      storage.close();
    }
  });

const snapshot = (page: Page) => page.evaluate(() => __grpoE2E.rawSnapshot());

test('save → list → load is bit-exact and survives a new tab and a browser restart', async () => {
  const page = await openAppPage(profile!.context);
  const [saved] = await saveInPage(
    page,
    [{ runId: 'run-a', runName: 'Round trip', step: 7, seed: 11 }],
    SMALL,
  );
  if (!saved.ok) throw new Error(saved.message);
  const { record, digest } = saved;
  expect(record.bytes).toBe(551_552 * 3 * 4);
  expect(record.chunkCount).toBe(2);
  expect(record.tensorCount).toBe(3 * 21);
  note('round trip', `save ${record.bytes} bytes in ${saved.ms.toFixed(0)} ms`);

  const expected = {
    id: record.id,
    runId: 'run-a',
    runName: 'Round trip',
    step: 7,
    optimizerStep: 8,
    bytes: record.bytes,
    tensorCount: 63,
    digest,
    rng: { sampler: [11, 0x9e3779b9, 7], dataOrder: 'xorshift:11' },
    config: { task: 'countdown', groupSize: 4, learningRate: 1e-5, seed: 11 },
    metricsSoFar: [{ step: 7, reward: 0.7, loss: 0.25 }],
  };
  expect(await listInPage(page)).toEqual([record]);
  const same = await loadInPage(page, record.id);
  expect(same).toMatchObject(expected);
  note('round trip', `load in the saving tab ${same.ms.toFixed(0)} ms`);

  // Another tab of the same browser reads what the first one wrote.
  const other = await openAppPage(profile!.context);
  expect(await listInPage(other)).toEqual([record]);
  expect(await loadInPage(other, record.id)).toMatchObject(expected);

  // The bytes are on disk: a restarted browser on the same profile still has them.
  await profile!.closeBrowser();
  await profile!.relaunch();
  const restarted = await openAppPage(profile!.context);
  expect(await listInPage(restarted)).toEqual([record]);
  const reloaded = await loadInPage(restarted, record.id);
  expect(reloaded).toMatchObject(expected);
  note('round trip', `load after a browser restart ${reloaded.ms.toFixed(0)} ms`);
});

test('a tab closed mid-save leaves the previous checkpoint loadable and its chunks collected', async () => {
  const saver = await openAppPage(profile!.context);
  const [previous] = await saveInPage(saver, [{ runId: 'long', step: 10, seed: 1 }], LARGE);
  if (!previous.ok) throw new Error(previous.message);
  expect(previous.record.chunkCount).toBe(13);
  note(
    'closed tab',
    `previous: ${previous.record.bytes} bytes saved in ${previous.ms.toFixed(0)} ms`,
  );

  // A second tab watches the chunk store and, once the new save has written 3 chunks, holds a
  // readwrite transaction on it so that the save cannot write more or commit before the close.
  const watcher = await openAppPage(profile!.context);
  const held = watcher.evaluate((n) => __grpoE2E.holdSaveMidway(n), 13 + 3);
  const interrupted = saveInPage(saver, [{ runId: 'long', step: 20, seed: 2 }], LARGE);
  interrupted.catch(() => {}); // awaited below, after the tab is gone
  const { chunks: seenChunks } = await held;
  expect(seenChunks).toBeGreaterThanOrEqual(16);
  await saver.close();
  await expect(interrupted).rejects.toThrow(/closed|destroyed/i);
  await watcher.evaluate(() => __grpoE2E.releaseSaveHold());

  // What the closed tab left: some chunks and a pending row under an id nothing lists.
  const left = await snapshot(watcher);
  const strayIds = Object.keys(left.chunksById).filter((id) => id !== previous.record.id);
  expect(strayIds).toHaveLength(1);
  const stray = strayIds[0];
  const strayChunks = left.chunksById[stray];
  expect(strayChunks).toBeGreaterThanOrEqual(3);
  expect(strayChunks).toBeLessThan(13);
  expect(left.chunksById[previous.record.id]).toBe(13);
  expect(left.keys.checkpoints).toEqual([JSON.stringify(previous.record.id)]);
  expect(left.keys.pendingSaves).toEqual([JSON.stringify(stray)]);
  note('closed tab', `tab closed with ${strayChunks} of 13 chunks of the new save written`);

  // A new tab, default options: the interrupted save is not listed, the previous one loads, and
  // the stray chunks are kept for now (within the grace period a slow save looks the same).
  const next = await openAppPage(profile!.context);
  const reopened = await next.evaluate(async () => {
    const storage = await __grpoE2E.GrpoStorage.open();
    try {
      const latest = await storage.loadLatestCheckpoint('long');
      return {
        collected: storage.orphansCollectedOnOpen,
        list: await storage.listCheckpoints(),
        latest: latest && (await __grpoE2E.summarize(latest)),
        touchedAt: (await storage.db.getAll('pendingSaves')).map((p) => p.touchedAt),
      };
    } finally {
      storage.close();
    }
  });
  expect(reopened.collected).toEqual({ saves: 0, chunks: 0 });
  expect(reopened.list).toEqual([previous.record]);
  expect(reopened.latest).toMatchObject({
    id: previous.record.id,
    step: 10,
    digest: previous.digest,
  });
  expect((await snapshot(next)).chunksById[stray]).toBe(strayChunks);

  // Once the pending save has not been touched for the grace period, opening collects it.
  expect(reopened.touchedAt).toHaveLength(1);
  const wait = reopened.touchedAt[0] + SHORT_GRACE_MS + 100 - Date.now();
  if (wait > 0) await next.waitForTimeout(wait);
  const later = await openAppPage(profile!.context);
  const reopenedLater = await later.evaluate(async (orphanGraceMs) => {
    // With collection at open switched off, even an expired save's chunks stay.
    const manual = await __grpoE2E.GrpoStorage.open({ orphanGraceMs, collectOrphansOnOpen: false });
    manual.close();
    const before = await __grpoE2E.rawSnapshot();
    const openedAt = Date.now();
    const storage = await __grpoE2E.GrpoStorage.open({ orphanGraceMs });
    storage.close();
    return {
      manual: manual.orphansCollectedOnOpen,
      before,
      openedAt,
      collected: storage.orphansCollectedOnOpen,
    };
  }, SHORT_GRACE_MS);
  expect(reopenedLater.manual).toEqual({ saves: 0, chunks: 0 });
  expect(reopenedLater.before.chunksById[stray]).toBe(strayChunks);
  expect(
    reopenedLater.collected,
    `left by the closed tab: ${JSON.stringify(left)}; touched at ${reopened.touchedAt[0]}; ` +
      `before collection: ${JSON.stringify(reopenedLater.before)} at ${reopenedLater.openedAt}`,
  ).toEqual({ saves: 1, chunks: strayChunks });
  const after = await snapshot(later);
  expect(after.chunksById).toEqual({ [previous.record.id]: 13 });
  expect(after.keys.pendingSaves).toEqual([]);
  expect(await loadInPage(later, previous.record.id)).toMatchObject({ digest: previous.digest });
});

test.describe('quota', () => {
  // One CI run (Chromium 156, fresh profile) saw every save of this test refused, the first two
  // included, which no local run of it has reproduced (10 of 10 repeats pass). One retry, in a
  // fresh profile, tells a passing flake (Playwright reports it as flaky) from a real regression;
  // the refusals' messages are in the assertion below either way.
  test.describe.configure({ retries: 1 });

  test('a capped quota fails the save with StorageQuotaError and keeps earlier checkpoints', async ({
    baseURL,
  }) => {
    await cappedQuotaScenario(baseURL!);
  });
});

async function cappedQuotaScenario(baseURL: string) {
  const page = await openAppPage(profile!.context);
  const usageOf = () =>
    page.evaluate(async () => {
      const storage = await __grpoE2E.GrpoStorage.open();
      try {
        return await storage.storageUsage();
      } finally {
        storage.close();
      }
    });
  const empty = await usageOf();
  if (!empty.known) throw new Error(empty.reason);
  const checkpointBytes = 551_552 * 3 * 4;
  // Room for two checkpoints and one more 4 MiB chunk: the third save writes its first chunk
  // and fails on its second, so the failure also has to delete what it had written.
  const quotaSize = empty.usageBytes + 2 * checkpointBytes + 5 * 1024 * 1024;
  const cdp = await profile!.context.newCDPSession(page);
  await cdp.send('Storage.overrideQuotaForOrigin', { origin: new URL(baseURL).origin, quotaSize });

  const saves = [1, 2, 3, 4].map((step) => ({
    runId: 'q',
    runName: 'Quota run',
    step,
    seed: step,
  }));
  const results = await saveInPage(page, saves, SMALL);
  expect(
    results.map((r) => r.ok),
    `saves under a ${quotaSize} B cap (empty usage ${empty.usageBytes} B): ` +
      JSON.stringify(results.map((r) => (r.ok ? 'ok' : `${r.name}: ${r.message}`))),
  ).toEqual([true, true, false, false]);
  const [first, second, failed] = results;
  if (!first.ok || !second.ok || failed.ok) throw new Error('unreachable');
  expect(failed.name).toBe('StorageQuotaError');
  expect(failed.isQuotaError).toBe(true);
  expect(failed.quota).toMatchObject({
    runId: 'q',
    step: 3,
    bytes: checkpointBytes,
    previousStep: 2,
    causeName: 'QuotaExceededError',
  });
  expect(failed.quota!.candidates.map((c) => [c.checkpointId, c.runName, c.step])).toEqual([
    [first.record.id, 'Quota run', 1],
    [second.record.id, 'Quota run', 2],
  ]);
  // The message says what was not saved, what is still there and what to delete.
  expect(failed.message).toContain("Checkpoint of run 'q' at step 3 (6.31 MiB) was not saved");
  expect(failed.message).toContain('The previous checkpoint (step 2) is intact and loadable');
  expect(failed.message).toContain("run 'Quota run' step 1 (6.31 MiB, ");
  expect(failed.message).toContain("run 'Quota run' step 2 (6.31 MiB, ");
  note('quota', failed.message);

  // Nothing of the failed saves remains; the earlier checkpoints load bit for bit.
  const left = await snapshot(page);
  expect(left.chunksById).toEqual({ [first.record.id]: 2, [second.record.id]: 2 });
  expect(left.keys.pendingSaves).toEqual([]);
  expect(await loadInPage(page, first.record.id)).toMatchObject({ digest: first.digest });
  expect(await loadInPage(page, second.record.id)).toMatchObject({ digest: second.digest });

  // Real numbers: what the origin uses covers both checkpoints and stays under the cap.
  const full = await usageOf();
  if (!full.known) throw new Error(full.reason);
  expect(full.checkpointCount).toBe(2);
  expect(full.checkpointBytes).toBe(2 * checkpointBytes);
  expect(full.usageBytes).toBeGreaterThanOrEqual(2 * checkpointBytes);
  expect(full.usageBytes).toBeLessThanOrEqual(quotaSize);
  expect(full.quotaBytes).toBeGreaterThanOrEqual(full.usageBytes);
  expect(typeof full.persisted).toBe('boolean');
  note(
    'quota',
    `cap ${quotaSize} B; empty usage ${empty.usageBytes} B; with 2 checkpoints usage ` +
      `${full.usageBytes} B, estimate().quota ${full.quotaBytes} B`,
  );

  // Deleting the first suggested checkpoint frees its bytes, and the same save then succeeds.
  const freed = await page.evaluate(async (id) => {
    const storage = await __grpoE2E.GrpoStorage.open();
    try {
      return await storage.deleteCheckpoint(id);
    } finally {
      storage.close();
    }
  }, failed.quota!.candidates[0].checkpointId);
  expect(freed).toBe(true);
  const afterDelete = await usageOf();
  if (!afterDelete.known) throw new Error(afterDelete.reason);
  // Less a little: the deletion itself adds a few KiB of database bookkeeping.
  expect(full.usageBytes - afterDelete.usageBytes).toBeGreaterThan(checkpointBytes - 64 * 1024);
  const [retried] = await saveInPage(page, [saves[2]], SMALL);
  expect(retried.ok).toBe(true);
  if (!retried.ok) throw new Error('unreachable');
  expect(retried.digest).toBe(failed.digest);
  expect(await loadInPage(page, retried.record.id)).toMatchObject({
    step: 3,
    digest: failed.digest,
  });
}

test('export → import through a downloaded file; a corrupted file is rejected and changes nothing', async () => {
  const page = await openAppPage(profile!.context);
  const [saved] = await saveInPage(
    page,
    [{ runId: 'src', runName: 'Countdown / e2e', step: 5, seed: 5 }],
    SMALL,
  );
  if (!saved.ok) throw new Error(saved.message);

  // Export: a Blob from storage, downloaded the way the UI will (object URL + <a download>).
  const downloadEvent = page.waitForEvent('download');
  const exported = await page.evaluate(async (id) => {
    const storage = await __grpoE2E.GrpoStorage.open();
    try {
      const t0 = performance.now();
      const { blob, fileName } = await storage.exportCheckpointBlob(id);
      const ms = performance.now() - t0;
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = fileName;
      document.body.append(a);
      a.click();
      a.remove();
      return { fileName, size: blob.size, ms };
    } finally {
      storage.close();
    }
  }, saved.record.id);
  expect(exported.fileName).toBe('Countdown_e2e-step5.grpockpt');
  const download = await downloadEvent;
  expect(download.suggestedFilename()).toBe(exported.fileName);
  const filePath = test.info().outputPath(exported.fileName);
  await download.saveAs(filePath);
  const bytes = readFileSync(filePath);
  expect(bytes.byteLength).toBe(exported.size);
  expect(bytes.subarray(0, 8).toString('latin1')).toBe('GRPOCKPT');
  note('export', `${exported.size} bytes exported in ${exported.ms.toFixed(0)} ms`);

  // Import: the user picks the file with an <input type=file>; storage reads the real File.
  await page.evaluate(() => {
    const input = document.createElement('input');
    input.type = 'file';
    input.id = 'e2e-import';
    document.body.append(input);
  });
  const importFile = (path: string) =>
    page
      .locator('#e2e-import')
      .setInputFiles(path)
      .then(() =>
        page.evaluate(async () => {
          const file = (document.getElementById('e2e-import') as HTMLInputElement).files![0];
          const storage = await __grpoE2E.GrpoStorage.open();
          try {
            const t0 = performance.now();
            const result = await storage.importCheckpoint(file);
            const ms = performance.now() - t0;
            const loaded = await storage.loadCheckpoint(result.checkpoint.id);
            return {
              ok: true as const,
              ms,
              fileName: file.name,
              run: result.run,
              metrics: await storage.getMetrics(result.run.id),
              loaded: await __grpoE2E.summarize(loaded),
            };
          } catch (err) {
            const e = err as Error & { file?: string };
            return { ok: false as const, fileName: file.name, name: e.name, message: e.message };
          } finally {
            storage.close();
          }
        }),
      );

  const before = await snapshot(page);
  const imported = await importFile(filePath);
  if (!imported.ok) throw new Error(imported.message);
  note('import', `${exported.size} bytes imported in ${imported.ms.toFixed(0)} ms`);
  expect(imported.run.id).not.toBe('src');
  expect(imported.run.name).toBe('Countdown / e2e (imported)');
  expect(imported.loaded).toMatchObject({
    runId: imported.run.id,
    step: 5,
    optimizerStep: 6,
    bytes: saved.record.bytes,
    digest: saved.digest,
    rng: { sampler: [5, 0x9e3779b9, 5], dataOrder: 'xorshift:5' },
    config: { task: 'countdown', groupSize: 4, learningRate: 1e-5, seed: 5 },
    metricsSoFar: [{ step: 5, reward: 0.5, loss: 0.25 }],
  });
  expect(imported.metrics).toEqual([{ step: 5, reward: 0.5, loss: 0.25 }]);
  const withImport = await snapshot(page);
  expect(withImport.keys.runs).toHaveLength(before.keys.runs.length + 1);
  expect(withImport.keys.checkpoints).toHaveLength(2);

  // One flipped bit in the last tensor's data: caught by its checksum, nothing written.
  const manifestLength = Number(bytes.readBigUInt64LE(8));
  const manifest = JSON.parse(bytes.subarray(16, 16 + manifestLength).toString('utf8')) as {
    tensors: Array<{ name: string }>;
  };
  const lastTensor = manifest.tensors[manifest.tensors.length - 1].name;
  const corrupted = Buffer.from(bytes);
  corrupted[corrupted.length - 5] ^= 0x10;
  const corruptedPath = test.info().outputPath('corrupted.grpockpt');
  writeFileSync(corruptedPath, corrupted);
  const rejected = await importFile(corruptedPath);
  expect(rejected).toEqual({
    ok: false,
    fileName: 'corrupted.grpockpt',
    name: 'CheckpointImportError',
    message:
      `corrupted.grpockpt: tensor '${lastTensor}' does not match its SHA-256 checksum: ` +
      `the file is corrupted`,
  });
  expect(await snapshot(page)).toEqual(withImport);

  // A download cut short: named as truncated, nothing written.
  const truncatedPath = test.info().outputPath('truncated.grpockpt');
  writeFileSync(truncatedPath, bytes.subarray(0, bytes.length >> 1));
  const truncated = await importFile(truncatedPath);
  expect(truncated.ok).toBe(false);
  if (truncated.ok) throw new Error('unreachable');
  expect(truncated.name).toBe('CheckpointImportError');
  expect(truncated.message).toMatch(
    /^truncated\.grpockpt: file is truncated: the tensor data should be \d+ bytes but only \d+ are present/,
  );
  expect(await snapshot(page)).toEqual(withImport);
});
