// Node side of the storage end-to-end tests: bundles tests/e2e/support/storage-entry.ts (and so
// src/storage) for the browser with vite's build() API, launches Chromium on a fresh on-disk
// profile (real IndexedDB files, so a browser restart is a real restart), serves the bundle on
// the app's own origin and loads it into the app page.

import { chromium, type BrowserContext, type Page } from '@playwright/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'vite';
import { CHROMIUM_ARGS, CHROMIUM_INSTALL_HINT, findChromium } from '../browser';
import type { GrpoE2E } from './storage-entry';

export type { GrpoE2E } from './storage-entry';

/** Where the bundle is served: same origin as the app, so it shares the app's IndexedDB. */
export const STORAGE_BUNDLE_PATH = '/__e2e__/storage.js';

/** The storage module and test helpers as one ES module, built in memory (nothing on disk). */
export async function bundleStorageModule(): Promise<string> {
  const result = await build({
    configFile: false,
    logLevel: 'silent',
    root: resolve('.'),
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      lib: {
        entry: resolve('tests/e2e/support/storage-entry.ts'),
        formats: ['es'],
        fileName: 'storage',
      },
    },
  });
  const outputs = Array.isArray(result) ? result : [result];
  for (const out of outputs) {
    if (!('output' in out)) continue;
    const entry = out.output.find((o) => o.type === 'chunk' && o.isEntry);
    if (entry && entry.type === 'chunk') return entry.code;
  }
  throw new Error('vite build() produced no entry chunk for the storage bundle');
}

/** A Chromium with its own profile directory; close() removes the directory unless kept. */
export interface Profile {
  dir: string;
  context: BrowserContext;
  /** Closes the browser; the profile stays on disk for relaunch(). */
  closeBrowser(): Promise<void>;
  /** Starts Chromium again on the same profile directory. */
  relaunch(): Promise<BrowserContext>;
  dispose(): Promise<void>;
}

export async function launchProfile(baseURL: string, bundle: string): Promise<Profile> {
  const executablePath = findChromium();
  if (!executablePath) throw new Error(CHROMIUM_INSTALL_HINT);
  const dir = mkdtempSync(join(tmpdir(), 'grpo-e2e-profile-'));
  const start = async () => {
    const context = await chromium.launchPersistentContext(dir, {
      executablePath,
      args: CHROMIUM_ARGS,
      baseURL,
      headless: true,
    });
    await context.route(`**${STORAGE_BUNDLE_PATH}`, (route) =>
      route.fulfill({ status: 200, contentType: 'text/javascript', body: bundle }),
    );
    return context;
  };
  const profile: Profile = {
    dir,
    context: await start(),
    async closeBrowser() {
      await profile.context.close();
    },
    async relaunch() {
      profile.context = await start();
      return profile.context;
    },
    async dispose() {
      await profile.context.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return profile;
}

/** Opens the app in a new tab and loads the storage bundle into it (as a module script). */
export async function openAppPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  await page.goto('/');
  // A same-origin module script passes the app's CSP (script-src 'self'); inline code would not.
  await page.addScriptTag({ url: STORAGE_BUNDLE_PATH, type: 'module' });
  await page.waitForFunction(() => '__grpoE2E' in globalThis);
  return page;
}

declare global {
  /** The bundle's API, for page.evaluate callbacks (set by storage-entry.ts in the page). */
  var __grpoE2E: GrpoE2E;
}
