// The security and isolation headers have one source, deploy/headers.json: nginx's snippet must be
// exactly what deploy/gen-nginx-headers.mjs writes from it, and vite's dev server and `vite preview`
// (npm run dev, npm start) must send the same set on the page AND on worker scripts, which the
// index.html meta CSP does not cover. The servers here are real: started through vite's API on
// 127.0.0.1 with the repo's vite.config.ts, and read with fetch.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createServer, preview, type PreviewServer, type ViteDevServer } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const HEADERS = (
  JSON.parse(readFileSync('deploy/headers.json', 'utf8')) as { headers: Record<string, string> }
).headers;
const CONFIG_FILE = resolve('vite.config.ts');

/** add_header lines of the nginx snippet as name → value. */
function nginxHeaders(): Record<string, string> {
  const conf = readFileSync('deploy/nginx/grpo-headers.conf', 'utf8');
  const out: Record<string, string> = {};
  for (const line of conf.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^add_header ([A-Za-z0-9-]+) "([^"]*)" always;$/.exec(line);
    expect(m, `unexpected line in grpo-headers.conf: ${line}`).not.toBeNull();
    out[m![1]] = m![2];
  }
  return out;
}

/** The headers of HEADERS' names in a response, lower-cased names as fetch gives them. */
function picked(res: Response): Record<string, string | null> {
  return Object.fromEntries(Object.keys(HEADERS).map((k) => [k, res.headers.get(k)]));
}

describe('deploy/headers.json is the one source', () => {
  it('nginx sends exactly its headers, and the snippet is what the generator writes', () => {
    expect(nginxHeaders()).toEqual(HEADERS);
    execFileSync(process.execPath, ['deploy/gen-nginx-headers.mjs', '--check']);
  });

  it('forbids framing and keeps the isolation headers', () => {
    expect(HEADERS['Content-Security-Policy']).toMatch(/(^|; )frame-ancestors 'none'(;|$)/);
    expect(HEADERS['X-Frame-Options']).toBe('DENY');
    expect(HEADERS['Cross-Origin-Opener-Policy']).toBe('same-origin');
    expect(HEADERS['Cross-Origin-Embedder-Policy']).toBe('require-corp');
  });
});

describe('vite preview (npm start) serves the same headers on the page and on worker scripts', () => {
  let server: PreviewServer;
  let dist: string;
  let base: string;
  beforeAll(async () => {
    // A stand-in build output: the server's headers do not depend on what the files contain.
    dist = mkdtempSync(join(tmpdir(), 'preview-headers-'));
    mkdirSync(join(dist, 'assets'));
    writeFileSync(join(dist, 'index.html'), '<!doctype html><div id="app"></div>\n');
    writeFileSync(join(dist, 'assets', 'trainer.worker-abc123.js'), 'self.onmessage = () => {};\n');
    server = await preview({
      configFile: CONFIG_FILE,
      logLevel: 'silent',
      build: { outDir: dist },
      preview: { host: '127.0.0.1', port: 0, strictPort: false, open: false },
    });
    base = `http://127.0.0.1:${(server.httpServer.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    rmSync(dist, { recursive: true, force: true });
  });

  it('index.html', async () => {
    const res = await fetch(`${base}/`);
    expect(res.status).toBe(200);
    expect(picked(res)).toEqual(HEADERS);
  });

  it('a worker script', async () => {
    const res = await fetch(`${base}/assets/trainer.worker-abc123.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/javascript/);
    expect(picked(res)).toEqual(HEADERS);
  });
});

describe('the dev server (npm run dev) serves the same headers on the page and on worker scripts', () => {
  let server: ViteDevServer;
  let base: string;
  beforeAll(async () => {
    server = await createServer({
      configFile: CONFIG_FILE,
      logLevel: 'silent',
      // No dependency scan: these requests need no pre-bundled packages.
      optimizeDeps: { noDiscovery: true, include: [] },
      server: { host: '127.0.0.1', port: 0, strictPort: false, hmr: false, watch: null },
    });
    await server.listen();
    base = `http://127.0.0.1:${(server.httpServer!.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  // The dev server transforms on first request, which is slow on a busy machine.
  it('index.html', async () => {
    const res = await fetch(`${base}/`);
    expect(res.status).toBe(200);
    expect(picked(res)).toEqual(HEADERS);
  }, 30_000);

  it('a worker script', async () => {
    const res = await fetch(`${base}/workers/reward.worker.ts?worker_file&type=module`);
    expect(res.status).toBe(200);
    expect(picked(res)).toEqual(HEADERS);
  }, 30_000);
});
