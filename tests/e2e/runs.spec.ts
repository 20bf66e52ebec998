// Runs as things of their own, in Chromium on the built app with its real IndexedDB:
// - the schema upgrade 1 → 2 on a database the previous version wrote (a checkpointed run): the
//   checkpoint is still listed and the run is listed with the steps of its checkpoint's history;
// - two tiny steps, a reload: the run is listed with 2 steps; its CSV (a real download) has the
//   header `step,<every metric>` and one line per step with the values the charts had, its JSONL
//   one TRL-style line per step; overlaid, the Train charts draw it as a second, dashed series
//   with a legend naming both runs, and it stays while a new run takes a step;
// - a quota capped through the DevTools protocol: the step's metrics are refused, a banner says so,
//   and once the cap is lifted the next step stores both steps (nothing lost).
import { expect, test, type Page } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { watchErrors } from './support/watch-errors';
import { DB_VERSION } from '../../src/storage/db';
import { loadBundledModel } from './support/bundled-model';

const STEP_TIMEOUT = 180_000;
// A small run, so a step takes seconds on WebGPU emulated by SwiftShader.
const TINY_RUN = 'perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1';

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

async function takeStep(page: Page, n: number) {
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText(`step ${n}`, {
    timeout: STEP_TIMEOUT,
  });
  await expect(page.getByTestId('status')).not.toHaveText('Running', { timeout: STEP_TIMEOUT });
}

async function downloadText(page: Page, click: () => Promise<void>) {
  const [download] = await Promise.all([page.waitForEvent('download'), click()]);
  return { name: download.suggestedFilename(), text: readFileSync(await download.path()!, 'utf8') };
}

test('a database of schema version 1 upgrades: its checkpoint stays, its run is listed with its steps', async ({
  page,
}) => {
  const errors = watchErrors(page);
  // A page of the app's origin that runs none of the app, to write the old database first.
  await page.route('**/__blank', (route) =>
    route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>blank</title>' }),
  );
  await page.goto('/__blank');
  await page.evaluate(async () => {
    // Version 1's stores, as storage/db.ts's first migration creates them.
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const req = indexedDB.open('grpo-playground', 1);
      req.onupgradeneeded = () => {
        const d = req.result;
        d.createObjectStore('runs', { keyPath: 'id' }).createIndex('byUpdatedAt', 'updatedAt');
        d.createObjectStore('metrics', { keyPath: ['runId', 'step'] });
        d.createObjectStore('samples', { keyPath: ['runId', 'step'] });
        const c = d.createObjectStore('checkpoints', { keyPath: 'id' });
        c.createIndex('byRun', 'runId');
        c.createIndex('byRunStep', ['runId', 'step']);
        d.createObjectStore('checkpointDetails', { keyPath: 'id' });
        d.createObjectStore('chunks', { keyPath: ['checkpointId', 'index'] });
        d.createObjectStore('pendingSaves', { keyPath: 'id' });
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const identity = { name: 'tiny', sha256: 'ab'.repeat(32) };
    const rows = [1, 2, 3].map((step) => ({ step, reward: step / 4, loss: -step }));
    const tx = db.transaction(['runs', 'checkpoints', 'checkpointDetails'], 'readwrite');
    tx.objectStore('runs').put({
      id: 'legacy',
      name: 'Legacy run',
      status: 'paused',
      config: {},
      modelConfig: null,
      modelIdentity: identity,
      createdAt: 1_700_000_000_000,
      updatedAt: 1_700_000_000_000,
    });
    tx.objectStore('checkpoints').put({
      id: 'legacy-3',
      runId: 'legacy',
      step: 3,
      optimizerStep: 3,
      createdAt: 1_700_000_000_000,
      bytes: 0,
      chunkCount: 0,
      tensorCount: 0,
      modelIdentity: identity,
      metrics: rows[2],
    });
    tx.objectStore('checkpointDetails').put({
      id: 'legacy-3',
      chunkSize: 4,
      tensors: [],
      rng: {},
      config: {},
      modelConfig: null,
      referenceIdentity: null,
      tokenizerIdentity: null,
      // A malformed row among good ones (a NaN step): before, it aborted the upgrade on every
      // open and no stored run was reachable; now it is left out and named in a banner.
      metricsSoFar: [...rows, { step: NaN, reward: 1 }],
    });
    await new Promise((resolve, reject) => {
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
    });
    db.close();
  });

  await page.goto('/#checkpoints');
  const row = page.locator('[data-testid="run-row"][data-run-id="legacy"]');
  await expect(row).toHaveAttribute('data-steps', '3');
  await expect(row).toContainText('Legacy run');
  await expect(page.locator('[data-testid="checkpoint-row"][data-step="3"]')).toContainText(
    'Legacy run',
  );
  const version = await page.evaluate(
    () =>
      new Promise<number>((resolve) => {
        const req = indexedDB.open('grpo-playground');
        req.onsuccess = () => {
          resolve(req.result.version);
          req.result.close();
        };
      }),
  );
  expect(version).toBe(DB_VERSION);
  const notice = page.getByTestId('banner').filter({ hasText: 'could not be read' });
  await expect(notice).toContainText('1 stored row could not be read and was left out');
  await expect(notice).toContainText("run 'legacy'");
  await expect(notice).toContainText('NaN');
  await notice.getByRole('button', { name: 'Dismiss' }).click();
  await page.reload();
  await expect(row).toHaveAttribute('data-steps', '3');
  // Dismissed for good: the same unreadable row is not reported again.
  await expect(page.getByTestId('banner').filter({ hasText: 'could not be read' })).toHaveCount(0);
  // The copied history downloads like any run's.
  const csv = await downloadText(page, () => row.getByTestId('run-csv').click());
  expect(csv.name).toBe('Legacy_run.metrics.csv');
  expect(csv.text).toBe('step,reward,loss\n1,0.25,-1\n2,0.5,-2\n3,0.75,-3\n');
  expect(errors).toEqual([]);
});

test('two steps are stored, listed after a reload, downloaded as CSV and JSONL, and overlaid', async ({
  page,
}) => {
  test.setTimeout(1_200_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}&test-hooks=1#train`);
  await loadBundledModel(page);
  for (const n of [1, 2]) await takeStep(page, n);
  const history = await page.evaluate(() =>
    (
      globalThis as unknown as {
        __grpoTest: { history(): Array<{ step: number; metrics: Record<string, number> }> };
      }
    ).__grpoTest.history(),
  );
  expect(history.map((r) => r.step)).toEqual([1, 2]);
  // Stored as each step arrived: the panel lists it before any reload.
  await page.getByTestId('nav-checkpoints').click();
  await expect(page.getByTestId('run-row').first()).toHaveAttribute('data-steps', '2');

  await page.reload();
  await page.getByTestId('nav-checkpoints').click();
  const rows = page.getByTestId('run-row');
  await expect(rows).toHaveCount(1);
  const row = rows.first();
  await expect(row).toHaveAttribute('data-steps', '2');
  const runName = (await row.getByTestId('run-name').textContent())!.trim();

  // CSV: step, then every metric key of the two steps in first-appearance order; the values are
  // those the charts had (the shortest digits that read back as the same number).
  const csv = await downloadText(page, () => row.getByTestId('run-csv').click());
  expect(csv.name).toMatch(/\.metrics\.csv$/);
  const lines = csv.text.trimEnd().split('\n');
  expect(lines.length).toBe(3);
  const keys = [...new Set(history.flatMap((r) => Object.keys(r.metrics)))];
  expect(lines[0]).toBe(['step', ...keys].join(','));
  const header = lines[0].split(',');
  for (const [i, r] of history.entries()) {
    const cells = lines[i + 1].split(',');
    expect(cells[0]).toBe(String(r.step));
    const reward = r.metrics.reward;
    expect(cells[header.indexOf('reward')]).toBe(Number.isNaN(reward) ? 'NaN' : String(reward));
  }

  // JSONL: one line per step, TRL's order (loss, grad_norm, learning_rate first, step last).
  const jsonl = await downloadText(page, () => row.getByTestId('run-jsonl').click());
  const objects = jsonl.text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number | null>);
  expect(objects.map((o) => o.step)).toEqual([1, 2]);
  expect(Object.keys(objects[0]).slice(0, 3)).toEqual(['loss', 'grad_norm', 'learning_rate']);
  expect(Object.keys(objects[0]).at(-1)).toBe('step');
  expect(objects.map((o) => o.loss)).toEqual(history.map((r) => r.metrics.loss));

  // Overlay: the stored run on the Train charts, dashed, with a legend naming it.
  await row.getByTestId('run-overlay').click();
  await expect(row.getByTestId('run-overlay')).toHaveAttribute('aria-pressed', 'true');
  await page.getByTestId('nav-train').click();
  await expect(page.getByTestId('overlay-name')).toHaveText(runName);
  const reward = page.getByTestId('chart-reward');
  await expect(reward.locator('path[stroke-dasharray]')).not.toHaveCount(0);
  await expect(reward.locator('.key', { hasText: ' · ' }).first()).toBeVisible();

  // A new run takes a step: its line is drawn and the overlay stays.
  await loadBundledModel(page);
  await takeStep(page, 1);
  await expect(reward).toHaveAttribute('data-points', '1');
  await expect(reward.locator('path[stroke-dasharray]')).not.toHaveCount(0);
  await expect(page.getByTestId('overlay-name')).toHaveText(runName);
  // A click where only the overlaid run has a step (its step 2, at the axis' right end) selects
  // this run's nearest step, 1: the views never get a step the live run does not have.
  await reward.evaluate((el) => el.scrollIntoView({ block: 'center' }));
  const plot = await reward.getByRole('slider').boundingBox();
  await page.mouse.click(plot!.x + plot!.width - 4, plot!.y + plot!.height / 2);
  await expect(page.getByTestId('follow-state')).toHaveText('pinned');
  await expect(page.getByTestId('selected-step')).toHaveValue('1');
  await expect(reward).toHaveAttribute('data-selected', '1');
  await page.getByTestId('overlay-clear').click();
  await expect(reward.locator('path[stroke-dasharray]')).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('a full storage refuses a step’s metrics with a banner; the next step stores both', async ({
  page,
  baseURL,
}) => {
  test.setTimeout(1_200_000);
  const errors = watchErrors(page);
  await page.goto(`/?${TINY_RUN}#train`);
  await loadBundledModel(page);
  // The cap: what the origin uses now, so any further write is refused.
  const usage = await page.evaluate(async () => (await navigator.storage.estimate()).usage ?? 0);
  const cdp = await page.context().newCDPSession(page);
  const origin = new URL(baseURL!).origin;
  await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: usage });
  await takeStep(page, 1);
  const banner = page.getByTestId('banner').filter({ hasText: 'Storage full: the run’s metrics' });
  await expect(banner).toContainText('(step 1) were not stored');
  await page.getByTestId('nav-checkpoints').click();
  await expect(page.getByTestId('runs-empty')).toBeVisible();

  await cdp.send('Storage.overrideQuotaForOrigin', { origin });
  await page.getByTestId('nav-train').click();
  await takeStep(page, 2);
  await page.getByTestId('nav-checkpoints').click();
  await expect(page.getByTestId('run-row')).toHaveAttribute('data-steps', '2');
  const csv = await downloadText(page, () => page.getByTestId('run-csv').click());
  expect(
    csv.text
      .trimEnd()
      .split('\n')
      .map((l) => l.split(',')[0]),
  ).toEqual(['step', '1', '2']);
  expect(errors).toEqual([]);
});
