// Runs as things of their own, in Chromium on the built app with its real IndexedDB:
// - the schema upgrade 1 → 2 on a database the previous version wrote (a checkpointed run): the
//   checkpoint is still listed and the run is listed with the steps of its checkpoint's history;
// - two tiny steps, a reload: the run is listed with 2 steps; its CSV (a real download) has the
//   header `step,<every metric>` and one line per step with the values the charts had, its JSONL
//   one TRL-style line per step; overlaid, the Train charts draw it as a second, dashed series
//   with a legend naming both runs, and it stays while a new run takes a step;
// - a quota capped through the DevTools protocol: the step's metrics are refused, a banner says so,
//   and once the cap is lifted the next step stores both steps (nothing lost);
// - runs like a tracker, on runs written into the page's database (no training): two runs whose
//   names the old legend cut made the same ('countdown · 2026-…') overlay at once with distinct
//   legend texts; the table shows the option they differ in as a column and the diff names it;
//   the wall-clock axis redraws them by time; one run exported as a file in this browser profile
//   and imported in a fresh one (a second browser context: its own IndexedDB) lists the same
//   steps, notes and config, downloads the same CSV and draws the same chart lines.
import { expect, test, type Browser, type Page } from '@playwright/test';
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
  // Named after what it is: task · model · the options this URL set away from their defaults.
  expect(runName).toMatch(/^countdown · tiny-reasoner.* · [A-Za-z]+=\S+/);
  expect(runName).not.toMatch(/\d{4}-\d\d-\d\d/); // no date: the first run of that name

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
  // The new run has the same default name; its legend text still differs from the stored run's.
  expect(await page.getByTestId('overlay-live-tag').textContent()).not.toBe(
    await page.getByTestId('overlay-tag').textContent(),
  );
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

/** Two runs written into the app's database as the worker would have stored them. */
async function seedTwoRuns(page: Page) {
  await page.goto('/#checkpoints');
  await expect(page.getByTestId('runs-empty')).toBeVisible();
  await page.evaluate(async () => {
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const req = indexedDB.open('grpo-playground');
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const tx = db.transaction(['runs', 'metrics'], 'readwrite');
    const t0 = Date.UTC(2026, 10, 27, 10, 0);
    for (const [id, lr, pace] of [
      ['run-a', 1e-5, 60_000],
      ['run-b', 3e-5, 20_000],
    ] as const) {
      tx.objectStore('runs').put({
        id,
        name: `countdown · 2026-11-27 10:00 · lr=${lr === 1e-5 ? '1e-5' : '3e-5'}`,
        status: 'paused',
        config: { task: 'countdown', learningRate: lr, beta: 0 },
        modelConfig: null,
        modelIdentity: { name: 'tiny-reasoner (bundled)', sha256: 'ab'.repeat(32) },
        createdAt: t0,
        updatedAt: t0 + (id === 'run-a' ? 1 : 2),
        ...(id === 'run-a' ? { notes: 'baseline' } : {}),
      });
      for (const step of [1, 2, 3]) {
        const reward = id === 'run-a' ? step / 4 : 1 - step / 5;
        tx.objectStore('metrics').put({
          runId: id,
          step,
          values: { step, reward, loss: -reward, kl: step === 2 ? NaN : 0.01 * step },
          at: t0 + step * pace,
        });
      }
    }
    await new Promise((resolve, reject) => {
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
    });
    db.close();
  });
  await page.reload();
  await expect(page.getByTestId('run-row')).toHaveCount(2);
}

/** The dashed (overlaid) lines of the reward chart, by legend label. */
const dashedPaths = (page: Page) =>
  page
    .getByTestId('chart-reward')
    .locator('path[stroke-dasharray]')
    .evaluateAll((paths) => paths.map((p) => p.getAttribute('d')));

/** The rightmost x of an SVG path ('M12.0,30.5L…'). */
const rightEnd = (d: string | null) =>
  Math.max(...[...(d ?? '').matchAll(/[ML](-?[\d.]+),/g)].map((m) => Number(m[1])));

async function freshProfile(browser: Browser, baseURL: string) {
  const context = await browser.newContext({ baseURL, serviceWorkers: 'block' });
  return { context, page: await context.newPage() };
}

test('runs like a tracker: distinct legends, config columns and diff, wall-clock axis, a run carried to another profile', async ({
  page,
  browser,
  baseURL,
}) => {
  const errors = watchErrors(page);
  await seedTwoRuns(page);
  const rowA = page.locator('[data-testid="run-row"][data-run-id="run-a"]');
  const rowB = page.locator('[data-testid="run-row"][data-run-id="run-b"]');
  // The option the two runs differ in is a column; the diff of the two names it and nothing else.
  await expect(page.getByTestId('run-config-column')).toHaveText(['learningRate']);
  await expect(rowA.getByTestId('run-config')).toHaveText('1e-5');
  await expect(rowB.getByTestId('run-config')).toHaveText('3e-5');
  await expect(rowA.getByTestId('run-notes')).toHaveText('baseline');
  await rowA.getByTestId('run-pick').check();
  await rowB.getByTestId('run-pick').check();
  await expect(page.getByTestId('run-diff-line')).toHaveCount(1);
  await expect(page.getByTestId('run-diff-line')).toHaveAttribute('data-key', 'learningRate');

  // Both overlaid: every legend names each run differently.
  await rowA.getByTestId('run-overlay').click();
  await rowB.getByTestId('run-overlay').click();
  await page.getByTestId('nav-train').click();
  const tags = await page.getByTestId('overlay-tag').allTextContents();
  expect(tags).toHaveLength(2);
  expect(tags[0]).not.toBe(tags[1]);
  expect(tags[0]).toContain('1e-5');
  expect(tags[1]).toContain('3e-5');
  const keys = await page
    .getByTestId('chart-reward')
    .locator('.key')
    .evaluateAll((els) => els.map((e) => e.firstChild?.nextSibling?.textContent?.trim() ?? ''));
  const overlayKeys = keys.filter((k) => k.includes(' · '));
  expect(overlayKeys).toHaveLength(2);
  expect(new Set(overlayKeys).size).toBe(2);
  const byStep = await dashedPaths(page);
  expect(byStep).toHaveLength(2);
  // Wall-clock: run b took a third of run a's time per step, so its line ends a third of the way.
  await page.getByTestId('x-axis').selectOption('wall');
  await expect(page.getByTestId('chart-reward').locator('.tick').last()).not.toHaveText(String(3));
  const byTime = await dashedPaths(page);
  expect(byTime).toHaveLength(2);
  expect(rightEnd(byStep[1])).toBe(rightEnd(byStep[0]));
  expect(rightEnd(byTime[1])).toBeLessThan(rightEnd(byTime[0]) / 2);
  await page.getByTestId('x-axis').selectOption('step');

  // Export run a from this profile.
  await page.getByTestId('nav-checkpoints').click();
  const csvA = await downloadText(page, () => rowA.getByTestId('run-csv').click());
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    rowA.getByTestId('run-export').click(),
  ]);
  expect(download.suggestedFilename()).toBe('countdown_2026-11-27_10_00_lr_1e-5.grporun.json');
  const file = (await download.path())!;
  await page.getByTestId('nav-train').click();
  await page.getByTestId('overlay-remove').last().click(); // run b off: run a alone
  await expect(page.getByTestId('overlay-tag')).toHaveCount(1);
  const original = await dashedPaths(page);

  // A fresh profile: nothing stored; the file imports as a run with the same rows and charts.
  const other = await freshProfile(browser, baseURL!);
  const otherErrors = watchErrors(other.page);
  await other.page.goto('/#checkpoints');
  await expect(other.page.getByTestId('runs-empty')).toBeVisible();
  await other.page.getByTestId('run-import-file').setInputFiles(file);
  await expect(other.page.getByTestId('runs-done')).toContainText(
    "Imported 'countdown · 2026-11-27 10:00 · lr=1e-5': 3 steps.",
  );
  const imported = other.page.getByTestId('run-row');
  await expect(imported).toHaveCount(1);
  await expect(imported).toHaveAttribute('data-steps', '3');
  await expect(imported.getByTestId('run-notes')).toHaveText('baseline');
  const csvB = await downloadText(other.page, () => imported.getByTestId('run-csv').click());
  expect(csvB.text).toBe(csvA.text);
  await imported.getByTestId('run-overlay').click();
  await other.page.getByTestId('nav-train').click();
  await expect(other.page.getByTestId('overlay-tag')).toHaveCount(1);
  // The same lines once the fresh page has laid its charts out at the same width.
  await expect.poll(() => dashedPaths(other.page)).toEqual(original);
  // A file that is not a run file is refused with its reason; nothing is stored.
  await other.page.getByTestId('nav-checkpoints').click();
  await other.page.getByTestId('run-import-file').setInputFiles({
    name: 'bad.grporun.json',
    mimeType: 'application/json',
    buffer: Buffer.from(JSON.stringify({ format: 'grpo-playground-run', schemaVersion: 9 })),
  });
  await expect(other.page.getByTestId('runs-problem')).toContainText('newer GRPO Playground');
  await expect(other.page.getByTestId('run-row')).toHaveCount(1);
  // A command-line run folder: its config.json and metrics.jsonl picked together.
  await other.page.getByTestId('run-import-file').setInputFiles([
    {
      name: 'config.json',
      mimeType: 'application/json',
      buffer: Buffer.from(JSON.stringify({ task: 'countdown', model: '/m/SmolLM2-135M', seed: 7 })),
    },
    {
      name: 'metrics.jsonl',
      mimeType: 'application/x-ndjson',
      buffer: Buffer.from(
        [1, 2].map((step) => JSON.stringify({ step, reward: step / 2, skipped: false })).join('\n'),
      ),
    },
  ]);
  await expect(other.page.getByTestId('runs-done')).toContainText(
    "Imported 'countdown · SmolLM2-135M · seed=7': 2 steps.",
  );
  await expect(other.page.getByTestId('run-row')).toHaveCount(2);
  await other.context.close();
  expect(otherErrors).toEqual([]);
  expect(errors).toEqual([]);
});
