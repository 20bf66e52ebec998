// Custom JS rewards in real Chromium, on the app's own page and under its CSP. src/grpo/
// reward-sandbox-browser.ts and what it needs (the reward worker with QuickJS and its wasm) are
// bundled with vite's build() API in beforeAll and served on the page's origin under /__e2e__/ via
// page.route; nothing is added to the app. Checks: a throwing, a looping and a NaN reward give the
// outcomes rewards.ts reports (as in Node), the loop is stopped at the limit while the page keeps
// running, a syntax error names its line, and what the user code can and cannot reach — from the
// page and through startRewardWorker. Error texts are QuickJS's. The escape attempts (network to
// another origin and the rest) are in reward-sandbox-escape.spec.ts.
import { expect, test, type Page } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { build, type Rollup } from 'vite';
import type * as CustomReward from '../../src/rewards/custom-reward';
import type * as SandboxBrowser from '../../src/rewards/reward-sandbox-browser';
import type * as Rewards from '../../src/rewards/rewards';

/** Per-call limit for rewards meant to time out (Chromium's worker start-up is not counted). Longer
 * than the unit tests' 200 ms so that a main-thread stall of that length could not hide among the
 * scheduling gaps of a loaded 2-core machine (~200 ms measured). */
const TIMEOUT_MS = 1000;
/** For rewards not meant to time out: SwiftShader work elsewhere on this 2-core machine. */
const RELAXED_TIMEOUT_MS = 5000;
const KILL_SLACK_MS = 2000;
/** Longest main-thread gap allowed while a reward loops in its worker: a loop on the main thread
 * would stall it for the whole TIMEOUT_MS. */
const MAX_PAGE_GAP_MS = TIMEOUT_MS / 2;

const ROOT = resolve('.');
const BASE = '/__e2e__/';
const ENTRY = 'virtual:custom-reward-e2e';

// The app's CSP as index.html declares it, sent with the bundled files as nginx would (a module
// worker's CSP comes from its own response, and nested Blob workers inherit it).
const APP_CSP = /http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(
  readFileSync('index.html', 'utf8'),
)?.[1];

interface E2EApi {
  browserSandboxFactory: typeof SandboxBrowser.browserSandboxFactory;
  createCustomRewards: typeof CustomReward.createCustomRewards;
  scoreCompletionsBatched: typeof CustomReward.scoreCompletionsBatched;
  tryCustomReward: typeof CustomReward.tryCustomReward;
  startRewardWorker: typeof CustomReward.startRewardWorker;
  scoreCompletions: typeof Rewards.scoreCompletions;
}

const SOURCES = {
  throws: `function reward() {
  throw new RangeError('no answer here');
}`,
  loops: `function reward({ completion }) {
  if (completion === 'loop') while (true) {}
  return completion.length;
}`,
  nan: `const reward = () => NaN;`,
  syntax: `// line 1
function reward({ completion }) {
  return completion.length +;
}`,
  probe: `async function reward() {
  const attempt = (f) => { try { return String(f()); } catch (e) { return e.name; } };
  let sameOrigin;
  try { sameOrigin = String(await fetch('/')); } catch (e) { sameOrigin = e.name; }
  let importSelf;
  try { importSelf = String(await import('/')); } catch (e) { importSelf = e.name + ': ' + e.message; }
  await new Promise((r) => setTimeout(r, 50));
  return JSON.stringify({
    self: typeof self,
    window: typeof window,
    document: typeof document,
    navigator: typeof navigator,
    location: typeof location,
    indexedDB: typeof indexedDB,
    caches: typeof caches,
    BroadcastChannel: typeof BroadcastChannel,
    Worker: typeof Worker,
    importScripts: typeof importScripts,
    postMessage: typeof postMessage,
    WebAssembly: typeof WebAssembly,
    eval: attempt(() => eval('typeof fetch')),
    Function: attempt(() => new Function('return typeof document')()),
    fetch: typeof fetch,
    XMLHttpRequest: typeof XMLHttpRequest,
    WebSocket: typeof WebSocket,
    EventSource: typeof EventSource,
    sameOrigin,
    importSelf,
  });
}`,
} as const;

const files = new Map<string, string | Uint8Array>();

test.beforeAll(async () => {
  expect(APP_CSP, 'index.html declares the CSP').toBeTruthy();
  const out = await build({
    configFile: false,
    root: ROOT,
    base: BASE,
    logLevel: 'warn',
    plugins: [
      {
        name: 'custom-reward-e2e-entry',
        resolveId: (id) => (id === ENTRY ? '\0' + ENTRY : null),
        load(id) {
          if (id !== '\0' + ENTRY) return null;
          const src = (p: string) => JSON.stringify(resolve(ROOT, p));
          return `
import { browserSandboxFactory } from ${src('src/rewards/reward-sandbox-browser.ts')};
import { createCustomRewards, scoreCompletionsBatched, tryCustomReward, startRewardWorker } from ${src('src/rewards/custom-reward.ts')};
import { scoreCompletions } from ${src('src/rewards/rewards.ts')};
globalThis.__customRewardE2E = { browserSandboxFactory, createCustomRewards, scoreCompletionsBatched, tryCustomReward, startRewardWorker, scoreCompletions };
`;
        },
      },
    ],
    worker: { format: 'es' },
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      modulePreload: false,
      rollupOptions: { input: ENTRY, output: { entryFileNames: 'entry.js' } },
    },
  });
  const outputs = (Array.isArray(out) ? out : [out]) as Rollup.RollupOutput[];
  for (const o of outputs)
    for (const item of o.output)
      files.set(item.fileName, item.type === 'chunk' ? item.code : item.source);
  expect(files.has('entry.js')).toBe(true);
  expect([...files.keys()].some((f) => /reward\.worker.*\.js$/.test(f))).toBe(true);
});

async function openApp(page: Page): Promise<void> {
  await page.route(`**${BASE}**`, async (route) => {
    const name = new URL(route.request().url()).pathname.slice(BASE.length);
    const body = files.get(name);
    if (body === undefined) return route.fulfill({ status: 404, body: 'not found' });
    await route.fulfill({
      status: 200,
      contentType: name.endsWith('.wasm') ? 'application/wasm' : 'text/javascript',
      body: typeof body === 'string' ? body : Buffer.from(body),
      headers: {
        'Content-Security-Policy': APP_CSP!,
        'Cross-Origin-Embedder-Policy': 'require-corp',
        'Cross-Origin-Opener-Policy': 'same-origin',
      },
    });
  });
  await page.goto('/');
  await expect(page.getByRole('heading', { name: 'GRPO Playground' })).toBeVisible();
  await page.addScriptTag({ url: `${BASE}entry.js`, type: 'module' });
  await page.waitForFunction(() => '__customRewardE2E' in globalThis);
}

const input = (completion: string) => ({
  completion,
  prompt: 'User: What is 2 + 3? Assistant:',
  problem: {
    id: 'p-1',
    task: 'arithmetic',
    question: 'What is 2 + 3',
    reference: '5',
    verifier: { kind: 'integer' as const, answer: '5' },
  },
});

test('throwing, looping and NaN rewards in reward workers under the app CSP; the loop is stopped, the page stays responsive', async ({
  page,
}) => {
  const consoleErrors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  await openApp(page);
  const result = await page.evaluate(
    async ({ SOURCES, TIMEOUT_MS, RELAXED_TIMEOUT_MS, inputs }) => {
      const api = (globalThis as unknown as { __customRewardE2E: E2EApi }).__customRewardE2E;
      const sandboxFactory = api.browserSandboxFactory();
      const fns = [
        ...api.createCustomRewards(
          { loops: SOURCES.loops },
          { timeoutMs: TIMEOUT_MS, sandboxFactory },
        ),
        ...api.createCustomRewards(
          { throws: SOURCES.throws, nan: SOURCES.nan },
          { timeoutMs: RELAXED_TIMEOUT_MS, sandboxFactory },
        ),
      ];
      // Start each reward's worker (QuickJS wasm compiled and instantiated) before timing: the
      // limit is per call, start-up is not counted against it.
      await api.scoreCompletionsBatched(fns, null, [inputs[0]]);
      // Main-thread heartbeat while the rewards run (one of them spinning in its worker).
      let beats = 0;
      let maxGap = 0;
      let last = performance.now();
      let running = true;
      const beat = () => {
        const now = performance.now();
        maxGap = Math.max(maxGap, now - last);
        last = now;
        beats++;
        if (running) setTimeout(beat, 0);
      };
      setTimeout(beat, 0);
      const t0 = performance.now();
      const batched = await api.scoreCompletionsBatched(fns, null, inputs);
      const batchedMs = performance.now() - t0;
      const plain = await api.scoreCompletions(fns, null, inputs);
      running = false;
      for (const f of fns) f.dispose();
      return { batched, plain, batchedMs, beats, maxGap };
    },
    { SOURCES, TIMEOUT_MS, RELAXED_TIMEOUT_MS, inputs: [input('ab'), input('loop'), input('abc')] },
  );

  const timeoutMessage = `TimeoutError: exceeded the ${TIMEOUT_MS} ms time limit`;
  const expected = (kind: 'timeout' | 'threw') => [
    { perFunction: { 'custom:loops': 2 }, loops: [] as string[][] },
    { perFunction: { 'custom:loops': 0 }, loops: [[kind, timeoutMessage]] },
    { perFunction: { 'custom:loops': 3 }, loops: [] as string[][] },
  ];
  for (const [results, kind] of [
    [result.batched, 'timeout'],
    [result.plain, 'threw'], // rewards.ts's scoreCompletions keeps no timeout flag
  ] as const) {
    expected(kind).forEach((want, i) => {
      const r = results[i];
      expect(r.perFunction).toEqual({ ...want.perFunction, 'custom:throws': 0, 'custom:nan': 0 });
      expect(r.total).toBe(want.perFunction['custom:loops']);
      expect(r.errors.map((e) => [e.reward, e.kind, e.message])).toEqual([
        ...want.loops.map(([k, m]) => ['custom:loops', k, m]),
        ['custom:throws', 'threw', 'RangeError: no answer here (line 2, column 23)'],
        ['custom:nan', 'non-finite', 'returned NaN'],
      ]);
    });
  }
  expect(result.batchedMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
  expect(result.batchedMs).toBeLessThan(TIMEOUT_MS + KILL_SLACK_MS);
  expect(result.beats).toBeGreaterThan(10);
  expect(result.maxGap).toBeLessThan(MAX_PAGE_GAP_MS);
  // The page still answers after the kill.
  expect(await page.evaluate(() => 6 * 7)).toBe(42);
  expect(consoleErrors).toEqual([]);
});

test('a syntax error is an invalid reward with its line', async ({ page }) => {
  await openApp(page);
  const results = await page.evaluate(
    async ({ source, inputs, ms }) => {
      const api = (globalThis as unknown as { __customRewardE2E: E2EApi }).__customRewardE2E;
      return api.tryCustomReward(source, inputs, ms);
    },
    { source: SOURCES.syntax, inputs: [input('a'), input('b')], ms: RELAXED_TIMEOUT_MS },
  );
  expect(results).toHaveLength(2);
  for (const r of results) {
    expect(r).toMatchObject({ error: { kind: 'invalid' } });
    expect('error' in r && r.error.message).toBe(
      "SyntaxError: unexpected token in expression: ';' (line 3, column 29)",
    );
  }
});

/** What the probe reports: QuickJS has none of the worker's globals, so nothing depends on the
 * CSP (the old Blob-worker sandbox removed globals and relied on the CSP for eval: eval and
 * Function now run, inside QuickJS, and see no more than the reward itself). */
function expectConfined(seen: Record<string, unknown>) {
  expect(seen).toEqual({
    self: 'undefined',
    window: 'undefined',
    document: 'undefined',
    navigator: 'undefined',
    location: 'undefined',
    indexedDB: 'undefined',
    caches: 'undefined',
    BroadcastChannel: 'undefined',
    Worker: 'undefined',
    importScripts: 'undefined',
    postMessage: 'undefined',
    WebAssembly: 'undefined',
    eval: 'undefined',
    Function: 'undefined',
    fetch: 'undefined',
    XMLHttpRequest: 'undefined',
    WebSocket: 'undefined',
    EventSource: 'undefined',
    sameOrigin: 'ReferenceError',
    importSelf: "ReferenceError: could not load module '/'",
  });
}

test('what the user code can reach: from the page and through startRewardWorker', async ({
  page,
}) => {
  await openApp(page);
  const seen = await page.evaluate(
    async ({ probe, loops, TIMEOUT_MS, RELAXED_TIMEOUT_MS, inputs }) => {
      const api = (globalThis as unknown as { __customRewardE2E: E2EApi }).__customRewardE2E;
      const direct = await api
        .browserSandboxFactory()(probe)
        .score([inputs[0]], RELAXED_TIMEOUT_MS);
      // startRewardWorker: a reward worker per source, all stopped by terminate().
      const rw = api.startRewardWorker();
      try {
        const nested = await rw.factory(probe).score([inputs[0]], RELAXED_TIMEOUT_MS);
        const [fn] = api.createCustomRewards(
          { loops },
          { timeoutMs: TIMEOUT_MS, sandboxFactory: rw.factory },
        );
        const looped = await api.scoreCompletionsBatched([fn], null, inputs);
        return {
          direct: direct.map((o) => ('value' in o ? o.value : String(o.error))),
          nested: nested.map((o) => ('value' in o ? o.value : String(o.error))),
          looped: looped.map((r) => [r.total, r.errors.map((e) => e.kind)]),
        };
      } finally {
        rw.terminate();
      }
    },
    {
      probe: SOURCES.probe,
      loops: SOURCES.loops,
      TIMEOUT_MS,
      RELAXED_TIMEOUT_MS,
      inputs: [input('ab'), input('loop'), input('abc')],
    },
  );
  expectConfined(JSON.parse(String(seen.direct[0])));
  expectConfined(JSON.parse(String(seen.nested[0])));
  expect(seen.looped).toEqual([
    [2, []],
    [0, ['timeout']],
    [3, []],
  ]);
});
