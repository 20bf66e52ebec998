// Serves the built app through the repo's nginx config (deploy/nginx) with Debian's nginx and
// checks the headers the app relies on: cross-origin isolation, CSP, MIME types, caching.
import { expect, test } from '@playwright/test';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
const PORT = 4180;
const DIST = resolve('dist');
let nginx: ChildProcess | null = null;
let workDir = '';

test.beforeAll(async () => {
  if (!NGINX) {
    throw new Error(
      'nginx is not installed: `sudo apt-get install nginx` (or set SKIP_E2E=1 to skip browser tests)',
    );
  }
  if (!existsSync(join(DIST, 'index.html')))
    throw new Error('dist/ is missing: run `npm run build` first');
  workDir = mkdtempSync(join(tmpdir(), 'grpo-nginx-'));
  mkdirSync(join(workDir, 'snippets'));
  writeFileSync(
    join(workDir, 'snippets/grpo-headers.conf'),
    readFileSync('deploy/nginx/grpo-headers.conf'),
  );
  // The repo's server block, unchanged but for where it listens, what it serves and where its
  // snippet lives (the Docker image puts it in /etc/nginx/snippets).
  const server = readFileSync('deploy/nginx/default.conf', 'utf8')
    .replace(/listen 8080;/, `listen 127.0.0.1:${PORT};`)
    .replace(/root \/usr\/share\/nginx\/html;/, `root ${DIST};`)
    .replaceAll('/etc/nginx/snippets/', `${workDir}/snippets/`);
  writeFileSync(join(workDir, 'server.conf'), server);
  writeFileSync(
    join(workDir, 'nginx.conf'),
    `daemon off;
worker_processes 1;
pid ${workDir}/nginx.pid;
error_log ${workDir}/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${workDir}/body;
  proxy_temp_path ${workDir}/proxy;
  fastcgi_temp_path ${workDir}/fastcgi;
  uwsgi_temp_path ${workDir}/uwsgi;
  scgi_temp_path ${workDir}/scgi;
  include ${workDir}/server.conf;
}
`,
  );
  const check = spawnSync(NGINX, ['-t', '-c', join(workDir, 'nginx.conf'), '-p', workDir], {
    encoding: 'utf8',
  });
  expect(check.status, check.stderr).toBe(0);
  nginx = spawn(NGINX, ['-c', join(workDir, 'nginx.conf'), '-p', workDir], { stdio: 'inherit' });
  for (let i = 0; i < 50; i++) {
    try {
      await fetch(`http://127.0.0.1:${PORT}/`);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('nginx did not start');
});

test.afterAll(() => {
  nginx?.kill('SIGQUIT');
});

const url = (path: string) => `http://127.0.0.1:${PORT}${path}`;

test('index.html: isolation, CSP, no-cache', async () => {
  const res = await fetch(url('/'));
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/html');
  expect(res.headers.get('cross-origin-opener-policy')).toBe('same-origin');
  expect(res.headers.get('cross-origin-embedder-policy')).toBe('require-corp');
  expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
  // Model URLs of another https origin (Hugging Face) may be fetched; nothing else is loosened.
  expect(res.headers.get('content-security-policy')).toContain("connect-src 'self' https:;");
  expect(res.headers.get('cache-control')).toBe('no-cache');
  expect(await res.text()).toContain('<div id="app">');
});

test('hashed assets: long immutable caching and isolation headers', async () => {
  const asset = readdirSync(join(DIST, 'assets')).find((f) => f.endsWith('.js'));
  const res = await fetch(url(`/assets/${asset}`));
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('application/javascript');
  expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  expect(res.headers.get('cross-origin-embedder-policy')).toBe('require-corp');
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
});

test('MIME types for .wasm, .wgsl and .safetensors', async () => {
  // Files written into dist/ for this test only: the types are what matters.
  const probes = {
    'probe.wasm': new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]),
    'probe.wgsl': '@compute @workgroup_size(1) fn main() {}\n',
    'probe.safetensors': new Uint8Array(16),
  };
  const paths = Object.keys(probes).map((name) => join(DIST, 'assets', name));
  try {
    for (const [name, bytes] of Object.entries(probes))
      writeFileSync(join(DIST, 'assets', name), bytes);
    const type = async (path: string) => (await fetch(url(path))).headers.get('content-type');
    expect(await type('/assets/probe.wasm')).toBe('application/wasm');
    expect(await type('/assets/probe.wgsl')).toContain('text/wgsl');
    expect(await type('/assets/probe.safetensors')).toBe('application/octet-stream');
  } finally {
    for (const path of paths) rmSync(path, { force: true });
  }
});

test('the app runs under nginx in Chromium, cross-origin isolated, with WebGPU', async ({
  page,
}) => {
  await page.goto(url('/'));
  await expect(page.getByTestId('adapter-name')).toContainText(/swiftshader/i, { timeout: 60_000 });
  expect(await page.evaluate(() => crossOriginIsolated)).toBe(true);
});

// deploy/headers.json is the one list: every kind of response carries all of it, workers included.
const HEADERS = (
  JSON.parse(readFileSync('deploy/headers.json', 'utf8')) as { headers: Record<string, string> }
).headers;
const picked = (res: Response) =>
  Object.fromEntries(Object.keys(HEADERS).map((k) => [k, res.headers.get(k)]));

test('every response carries deploy/headers.json: page, worker script, model file, fallback', async () => {
  const worker = readdirSync(join(DIST, 'assets')).find((f) => /worker.*\.js$/.test(f));
  expect(worker, 'the build has a worker script').toBeTruthy();
  for (const path of [
    '/',
    `/assets/${worker}`,
    '/sw.js',
    '/models/tiny-reasoner/config.json',
    '/learn/advantages',
  ]) {
    const res = await fetch(url(path));
    expect(res.status, path).toBe(200);
    expect(picked(res), path).toEqual(HEADERS);
  }
  expect((await fetch(url('/'))).headers.get('content-security-policy')).toContain(
    "frame-ancestors 'none'",
  );
});

test('unknown paths fall back to the app (client-side routes)', async () => {
  const res = await fetch(url('/learn/advantages'));
  expect(res.status).toBe(200);
  expect(await res.text()).toContain('<div id="app">');
});
