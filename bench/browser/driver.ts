// Node side of the browser benchmarks: bundles bench/browser/index.html (+ page.ts and everything it
// imports) with Vite in memory, serves it and onnxruntime-web's wasm files from 127.0.0.1 on a free
// port (a secure context, cross-origin isolated), opens it in headless Chromium with the e2e flags
// (WebGPU on SwiftShader when there is no GPU), and calls the page's window.grpoBench API. The
// model benchmarks put their model files (built in memory, model-files.ts) in `modelFiles`, which
// the server answers from as well.
import { createServer, type Server } from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { chromium, type Browser, type Page } from '@playwright/test';
import { build, type Rollup } from 'vite';
import { CHROMIUM_ARGS, CHROMIUM_INSTALL_HINT, findChromium } from '../../tests/e2e/browser';
import type { BrowserInfo, GrpoBenchApi } from './page';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.wasm': 'application/wasm',
  '.map': 'application/json',
  '.json': 'application/json',
  '.css': 'text/css',
};

async function bundlePage(root: string): Promise<Map<string, Uint8Array | string>> {
  const result = await build({
    configFile: false,
    root,
    base: '/',
    logLevel: 'warn',
    build: {
      write: false,
      target: 'es2022',
      chunkSizeWarningLimit: 1e9,
      rollupOptions: { input: resolve(root, 'bench/browser/index.html') },
    },
  });
  const outputs = (Array.isArray(result) ? result : [result]) as Rollup.RollupOutput[];
  const files = new Map<string, Uint8Array | string>();
  for (const out of outputs) {
    for (const item of out.output) {
      files.set('/' + item.fileName, item.type === 'chunk' ? item.code : item.source);
    }
  }
  return files;
}

function serve(
  root: string,
  files: Map<string, Uint8Array | string>,
  modelFiles: ReadonlyMap<string, Uint8Array>,
): Promise<Server> {
  const ortDir = resolve(root, 'node_modules/onnxruntime-web/dist');
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://127.0.0.1').pathname);
    let body = files.get(path) ?? modelFiles.get(path);
    if (body === undefined && path.startsWith('/ort/') && !path.includes('..')) {
      const file = resolve(ortDir, path.slice('/ort/'.length));
      if (existsSync(file)) body = readFileSync(file);
    }
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, {
      'Content-Type': TYPES[extname(path)] ?? 'application/octet-stream',
      // Cross-origin isolation: what the app's server sends too (threaded wasm may use it).
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
    });
    res.end(body);
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => ok(server));
  });
}

export interface BenchPage {
  page: Page;
  info: BrowserInfo;
  browserVersion: string;
  /** Requests the page made to anything but this server (should stay empty: offline by design). */
  offOrigin: string[];
  /** URL path → bytes, served beside the page (the model benchmarks swap models in and out). */
  modelFiles: Map<string, Uint8Array>;
  call<K extends keyof GrpoBenchApi>(
    name: K,
    ...args: Parameters<GrpoBenchApi[K]>
  ): Promise<Awaited<ReturnType<GrpoBenchApi[K]>>>;
  close(): Promise<void>;
}

/** Builds, serves and opens the benchmark page; page `[page]` console lines are echoed. */
export async function openBenchPage(root: string): Promise<BenchPage> {
  const executablePath = findChromium();
  if (!executablePath) throw new Error(CHROMIUM_INSTALL_HINT);
  const files = await bundlePage(root);
  const modelFiles = new Map<string, Uint8Array>();
  const server = await serve(root, files, modelFiles);
  const { port } = server.address() as { port: number };
  let browser: Browser | null = null;
  try {
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
    const page = await browser.newPage();
    page.on('console', (m) => {
      if (m.text().startsWith('[page]')) console.error(`  ${m.text()}`);
    });
    page.on('pageerror', (e) => console.error(`  [page error] ${e.message}`));
    const origin = `http://127.0.0.1:${port}`;
    const offOrigin: string[] = [];
    page.on('request', (r) => {
      const url = r.url();
      if (!url.startsWith(origin + '/') && !url.startsWith('blob:') && !url.startsWith('data:'))
        offOrigin.push(url);
    });
    await page.goto(`${origin}/bench/browser/index.html`);
    await page.waitForFunction(() => document.body.dataset.ready === '1', null, {
      timeout: 120_000,
    });
    const call = ((name: keyof GrpoBenchApi, ...args: unknown[]) =>
      page.evaluate(
        ([n, a]) => {
          const api = (
            globalThis as unknown as { grpoBench: Record<string, (...x: unknown[]) => unknown> }
          ).grpoBench;
          return api[n as string](...(a as unknown[]));
        },
        [name, args] as const,
      )) as BenchPage['call'];
    const info = await call('info');
    const b = browser;
    return {
      page,
      info,
      browserVersion: b.version(),
      modelFiles,
      offOrigin,
      call,
      async close() {
        await b.close();
        await new Promise((ok) => server.close(ok));
      },
    };
  } catch (e) {
    await browser?.close();
    server.close();
    throw e;
  }
}
