// Playwright end-to-end tests in Debian's Chromium with WebGPU on SwiftShader, against the built app
// served by `vite preview` on 127.0.0.1 (a secure context, so navigator.gpu exists).
import { defineConfig } from '@playwright/test';
import { CHROMIUM_ARGS, CHROMIUM_INSTALL_HINT, findChromium } from './tests/e2e/browser';

const executablePath = findChromium();
if (!executablePath) throw new Error(CHROMIUM_INSTALL_HINT);

const PORT = Number(process.env.E2E_PORT ?? 4173);
// Several builds side by side (one per working copy or helper): E2E_DIST names the build folder
// `vite build --outDir` wrote, and the results go to a folder of the same suffix.
const DIST = process.env.E2E_DIST ?? 'dist';
// E2E_RESULTS names a second run on the same build (npm test runs some specs in another lane):
// its own results folder and report.
const SUFFIX =
  (DIST === 'dist' ? '' : `-${DIST.replace(/[^\w-]/g, '_')}`) +
  (process.env.E2E_RESULTS ? `-${process.env.E2E_RESULTS.replace(/[^\w-]/g, '_')}` : '');

export default defineConfig({
  testDir: 'tests/e2e',
  // E2E_IGNORE: spec files (comma-separated names) this run leaves to another (npm test's lanes).
  testIgnore: (process.env.E2E_IGNORE ?? '')
    .split(',')
    .filter(Boolean)
    .map((spec) => `**/${spec}`),
  outputDir: `test-results/e2e${SUFFIX}`,
  timeout: 120_000,
  workers: 1,
  reporter: [['list'], ['json', { outputFile: `test-results/e2e-results${SUFFIX}.json` }]],
  use: {
    baseURL: `http://127.0.0.1:${PORT}`,
    browserName: 'chromium',
    launchOptions: { executablePath, args: CHROMIUM_ARGS },
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure',
  },
  webServer: {
    command: `npx vite preview --host 127.0.0.1 --port ${PORT} --strictPort --outDir ${DIST}`,
    url: `http://127.0.0.1:${PORT}`,
    reuseExistingServer: !process.env.CI,
    timeout: 60_000,
  },
});
