// Loading a model folder from a URL in real Chromium: src/formats/model-source.ts (urlSource) and
// src/formats/hf-folder.ts (loadHfFolder) are bundled with vite's build() API and served under /__e2e__/
// on the app's origin; a tiny sharded BF16 model folder written by exportHfFolder is served at
// /models/e2e-tiny/ on the same origin via page.route (streamed by a Node server). Checks: the first load reads every file
// with progress and gives the weights a Node load of the same files gives; a second load with the
// browser offline comes from the Cache API without one request; a URL answered with an HTML page
// (the preview server's index.html fallback, a login page), an HTTP error or a dropped connection
// each fail with their own message naming the URL.
import { expect, test, type Page } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { build, type Rollup } from 'vite';
import { exportHfFolder } from '../../src/export/hf-export';
import { loadHfFolder, type LoadedHfModel } from '../../src/formats/hf-folder';
import { filesSource, MODEL_CACHE_NAME } from '../../src/formats/model-source';
import { parameterSpecs, parseHfConfig } from '../../src/core/model-config';
import type * as HfFolder from '../../src/formats/hf-folder';
import type * as ModelSource from '../../src/formats/model-source';

const ROOT = resolve('.');
const BASE = '/__e2e__/';
const ENTRY = 'virtual:model-io-e2e';
const MODEL_PATH = '/models/e2e-tiny/';

interface E2EApi {
  urlSource: typeof ModelSource.urlSource;
  loadHfFolder: typeof HfFolder.loadHfFolder;
}

/** Per-tensor fingerprint (f64 sums in a fixed order, first values): equal iff loaded alike. */
interface TensorPrint {
  name: string;
  n: number;
  sum: number;
  sumAbs: number;
  head: number[];
}
function fingerprint(tensors: Map<string, Float32Array>): TensorPrint[] {
  return [...tensors].map(([name, data]) => {
    let sum = 0;
    let sumAbs = 0;
    for (const v of data) {
      sum += v;
      sumAbs += Math.abs(v);
    }
    return { name, n: data.length, sum, sumAbs, head: Array.from(data.subarray(0, 3)) };
  });
}

// A Llama big enough that its safetensors arrive in several network chunks (~2.9 M parameters,
// ~5.6 MB in BF16, two shards), with the fixture tokenizer (272 ids).
const config = parseHfConfig({
  architectures: ['LlamaForCausalLM'],
  hidden_size: 256,
  intermediate_size: 512,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  vocab_size: 272,
  max_position_embeddings: 128,
  rms_norm_eps: 1e-5,
  eos_token_id: 2,
});
const folder = (() => {
  let s = 7;
  const tensors = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(config)) {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      data[i] = (s / 2 ** 31 - 0.5) * 0.1;
    }
    tensors.set(spec.name, data);
  }
  const tokenizerFiles = new Map(
    ['tokenizer.json', 'tokenizer_config.json'].map((name) => [
      name,
      new Uint8Array(readFileSync(`tests/fixtures/tiny-tokenizer/${name}`)),
    ]),
  );
  return exportHfFolder({
    config,
    tensors,
    tokenizerFiles,
    dtype: 'BF16',
    maxShardBytes: 3_000_000,
  });
})();

const bundle = new Map<string, string | Uint8Array>();
let expected: LoadedHfModel;
// The model files come from a Node server that writes them in 256 KiB pieces, reached through
// page.route's continue() with a rewritten URL: the page sees a same-origin response that really
// streams (a fulfilled route delivers its body in one piece, so progress would be one event).
let fileServer: Server;
let fileServerUrl = '';
const PIECE = 256 * 1024;

test.use({ serviceWorkers: 'block' }); // urlSource's own Cache API use, not the app's worker

test.afterAll(() => new Promise<void>((done) => fileServer?.close(() => done())));

test.beforeAll(async () => {
  expect([...folder.keys()].filter((f) => f.endsWith('.safetensors'))).toHaveLength(2);
  fileServer = createServer(async (req, res) => {
    const bytes = folder.get(new URL(req.url!, 'http://x').pathname.slice(1));
    if (!bytes) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such file');
      return;
    }
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': String(bytes.byteLength),
    });
    for (let i = 0; i < bytes.byteLength; i += PIECE) {
      res.write(bytes.subarray(i, i + PIECE));
      await new Promise((r) => setTimeout(r, 5));
    }
    res.end();
  });
  await new Promise<void>((done) => fileServer.listen(0, '127.0.0.1', done));
  fileServerUrl = `http://127.0.0.1:${(fileServer.address() as AddressInfo).port}/`;
  expected = await loadHfFolder(
    filesSource([...folder].map(([name, bytes]) => new File([bytes.slice()], name))),
  );
  const out = await build({
    configFile: false,
    root: ROOT,
    base: BASE,
    logLevel: 'warn',
    plugins: [
      {
        name: 'model-io-e2e-entry',
        resolveId: (id) => (id === ENTRY ? '\0' + ENTRY : null),
        load(id) {
          if (id !== '\0' + ENTRY) return null;
          const src = (p: string) => JSON.stringify(resolve(ROOT, p));
          return `
import { urlSource } from ${src('src/formats/model-source.ts')};
import { loadHfFolder } from ${src('src/formats/hf-folder.ts')};
globalThis.__modelIoE2E = { urlSource, loadHfFolder };
`;
        },
      },
    ],
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      modulePreload: false,
      rollupOptions: { input: ENTRY, output: { entryFileNames: 'entry.js' } },
    },
  });
  for (const o of (Array.isArray(out) ? out : [out]) as Rollup.RollupOutput[])
    for (const item of o.output)
      bundle.set(item.fileName, item.type === 'chunk' ? item.code : item.source);
  expect(bundle.has('entry.js')).toBe(true);
});

/** Serves the bundle and the model folder on the app's origin; counts model-file requests. */
async function openApp(page: Page): Promise<{ requests: string[] }> {
  const requests: string[] = [];
  await page.route(`**${BASE}**`, (route) => {
    const body = bundle.get(new URL(route.request().url()).pathname.slice(BASE.length));
    if (body === undefined) return route.fulfill({ status: 404, body: 'not found' });
    return route.fulfill({
      status: 200,
      contentType: 'text/javascript',
      body: typeof body === 'string' ? body : Buffer.from(body),
    });
  });
  await page.route(`**${MODEL_PATH}**`, (route) => {
    const name = new URL(route.request().url()).pathname.slice(MODEL_PATH.length);
    requests.push(name);
    return route.continue({ url: fileServerUrl + name });
  });
  await page.goto('/');
  await page.addScriptTag({ url: `${BASE}entry.js`, type: 'module' });
  await page.waitForFunction(() => '__modelIoE2E' in globalThis);
  return { requests };
}

/** Loads `base` with loadHfFolder in the page: fingerprints and progress, or the error. */
function loadInPage(page: Page, base: string) {
  return page.evaluate(
    async ({ base, fingerprintSource }) => {
      const api = (globalThis as unknown as { __modelIoE2E: E2EApi }).__modelIoE2E;
      const print = new Function(`return ${fingerprintSource}`)() as typeof fingerprint;
      const events: { file: string; loaded: number; total: number | null; phase: string }[] = [];
      try {
        const model = await api.loadHfFolder(api.urlSource(base), {
          onProgress: (e) =>
            events.push({ file: e.file, loaded: e.loaded, total: e.total, phase: e.phase }),
        });
        return {
          ok: true as const,
          config: model.config,
          prints: print(model.tensors),
          tokenizerFiles: [...model.tokenizerFiles.keys()],
          events,
        };
      } catch (err) {
        const e = err as Error & { reason?: string };
        return { ok: false as const, name: e.name, message: e.message, reason: e.reason };
      }
    },
    { base, fingerprintSource: fingerprint.toString() },
  );
}

test('a URL folder loads with progress, then again offline from the Cache API', async ({
  page,
  context,
}) => {
  const { requests } = await openApp(page);
  await page.evaluate((name) => caches.delete(name), MODEL_CACHE_NAME);

  const first = await loadInPage(page, MODEL_PATH);
  if (!first.ok) throw new Error(`first load failed: ${first.message}`);
  expect(first.config).toEqual(expected.config);
  expect(first.prints).toEqual(fingerprint(expected.tensors));
  expect(first.tokenizerFiles.sort()).toEqual(['tokenizer.json', 'tokenizer_config.json']);
  for (const file of [...folder.keys()]) expect(requests, file).toContain(file);

  // Progress: every file of the folder reports, per file the byte count only grows and ends at
  // the file's size; each shard arrives in more than one step.
  const byFile = new Map<string, typeof first.events>();
  for (const e of first.events) byFile.set(e.file, [...(byFile.get(e.file) ?? []), e]);
  for (const [name, bytes] of folder) {
    const events = byFile.get(name);
    expect(events, `progress for ${name}`).toBeDefined();
    const loaded = events!.map((e) => e.loaded);
    expect(loaded).toEqual([...loaded].sort((a, b) => a - b));
    expect(events!.at(-1)).toMatchObject({ loaded: bytes.byteLength, total: bytes.byteLength });
    if (name.endsWith('.safetensors')) {
      expect(events!.every((e) => e.phase === 'weights')).toBe(true);
      expect(events!.length, `${name} in steps`).toBeGreaterThan(1);
    }
  }
  const cached = await page.evaluate(
    async (name) => (await (await caches.open(name)).keys()).map((r) => new URL(r.url).pathname),
    MODEL_CACHE_NAME,
  );
  for (const file of folder.keys()) expect(cached).toContain(`${MODEL_PATH}${file}`);

  // Offline: every file of the folder comes out of the cache without a request. Optional files
  // the folder lacks are asked for again (a cached 404 is only believed when the network is down,
  // so a file added later is found); those attempts fail offline and the cached 404 answers.
  requests.length = 0;
  await context.setOffline(true);
  const second = await loadInPage(page, MODEL_PATH);
  await context.setOffline(false);
  if (!second.ok) throw new Error(`offline load failed: ${second.message}`);
  expect(requests.filter((name) => folder.has(name))).toEqual([]);
  expect(requests.length).toBeGreaterThan(0); // the optional files were re-checked, and failed
  expect(second.prints).toEqual(first.prints);
  expect(second.config).toEqual(first.config);
});

test('a URL that returns HTML, an HTTP error or no answer fails with its own message', async ({
  page,
}) => {
  await openApp(page);
  const origin = new URL(page.url()).origin;
  // The preview server answers an unknown path outside /models/ with the app's index.html (SPA
  // fallback; absent files under /models/ get a real 404), as many static hosts do.
  const fallback = await loadInPage(page, '/hub/no-such-model/');
  expect(fallback).toMatchObject({ ok: false, name: 'ModelSourceError', reason: 'html' });
  expect(fallback.ok || fallback.message).toBe(
    `${origin}/hub/no-such-model/config.json: the server returned an HTML page instead of ` +
      'config.json; the URL must point at the raw file',
  );

  await page.route('**/models/login-wall/**', (route) =>
    route.fulfill({
      status: 200,
      contentType: 'text/html; charset=utf-8',
      body: '<!doctype html><title>Sign in</title><form>…</form>',
    }),
  );
  const login = await loadInPage(page, '/models/login-wall/');
  expect(login).toMatchObject({ ok: false, reason: 'html' });
  expect(login.ok || login.message).toContain('returned an HTML page instead of config.json');

  await page.route('**/models/broken/**', (route) =>
    route.fulfill({ status: 500, contentType: 'text/plain', body: 'upstream error' }),
  );
  const broken = await loadInPage(page, '/models/broken/');
  expect(broken).toMatchObject({ ok: false, reason: 'http' });
  expect(broken.ok || broken.message).toMatch(
    new RegExp(`^${origin}/models/broken/config\\.json: HTTP 500`),
  );

  await page.route('**/models/unreachable/**', (route) => route.abort('connectionrefused'));
  const unreachable = await loadInPage(page, '/models/unreachable/');
  expect(unreachable).toMatchObject({ ok: false, reason: 'network' });
  expect(unreachable.ok || unreachable.message).toContain(
    `${origin}/models/unreachable/config.json: could not fetch (`,
  );
});
