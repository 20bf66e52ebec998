#!/usr/bin/env node
// `npm test`: every layer — lint, formatting and types (svelte-check) side by side, then vitest
// unit tests beside the kernel tests on Node WebGPU, then the production build and Playwright
// end-to-end tests in Chromium. A missing browser or WebGPU driver fails with how to install it; a layer is skipped only
// when asked explicitly (SKIP_KERNELS=1, SKIP_E2E=1). Ends with one summary line of counts.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';

const skipKernels = process.env.SKIP_KERNELS === '1';
const skipE2E = process.env.SKIP_E2E === '1';
const started = Date.now();
const totals = { passed: 0, failed: 0, skipped: 0 };

// `countResults` reads the layer's JSON report before deciding, so the summary line counts the
// failing layer's tests too, not only those of the layers that passed.
function run(title, command, args, countResults = () => {}) {
  console.log(`\n=== ${title}: ${command} ${args.join(' ')}`);
  const t0 = Date.now();
  const result = spawnSync(command, args, { stdio: 'inherit', env: process.env });
  const seconds = ((Date.now() - t0) / 1000).toFixed(1);
  try {
    countResults();
  } catch (error) {
    console.error(`(no test report from ${title}: ${error.message})`);
  }
  if (result.status !== 0) {
    console.error(`\n✗ ${title} failed (exit ${result.status ?? result.signal}) after ${seconds}s`);
    summarize();
    process.exit(result.status || 1);
  }
  console.log(`✓ ${title} (${seconds}s)`);
}

/**
 * Runs layers at the same time: the static layers (lint, formatting, types: each one mostly
 * single-threaded process) and the unit tests beside the kernel tests (which run their files one
 * at a time), so each group takes about its longest layer's time instead of the sum. A layer with
 * `live` streams its output as it comes; the others' output is printed whole when they end, in the
 * order given. Every layer's counts are read; the first failure stops the run after all end.
 */
async function runTogether(layers) {
  const results = await Promise.all(
    layers.map(
      (layer) =>
        new Promise((resolve) => {
          const t0 = Date.now();
          if (layer.live)
            console.log(`\n=== ${layer.title}: ${layer.command} ${layer.args.join(' ')}`);
          const child = spawn(layer.command, layer.args, {
            env: layer.live ? process.env : { ...process.env, FORCE_COLOR: '0' },
            stdio: layer.live ? 'inherit' : 'pipe',
          });
          let output = '';
          child.stdout?.on('data', (chunk) => (output += chunk));
          child.stderr?.on('data', (chunk) => (output += chunk));
          child.on('close', (code, signal) =>
            resolve({
              ...layer,
              output,
              code,
              signal,
              seconds: ((Date.now() - t0) / 1000).toFixed(1),
            }),
          );
        }),
    ),
  );
  let failed = null;
  for (const r of results) {
    if (!r.live) {
      console.log(`\n=== ${r.title}: ${r.command} ${r.args.join(' ')}`);
      process.stdout.write(r.output.endsWith('\n') || r.output === '' ? r.output : `${r.output}\n`);
    }
    try {
      r.countResults?.();
    } catch (error) {
      console.error(`(no test report from ${r.title}: ${error.message})`);
    }
    if (r.code !== 0) {
      console.error(`\n✗ ${r.title} failed (exit ${r.code ?? r.signal}) after ${r.seconds}s`);
      failed ??= r;
    } else console.log(`✓ ${r.title} (${r.seconds}s)`);
  }
  if (failed) {
    summarize();
    process.exit(failed.code || 1);
  }
}

function summarize() {
  const minutes = ((Date.now() - started) / 60000).toFixed(1);
  console.log(`\nAll layers finished in ${minutes} min.`);
  console.log(`tests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
}

function preflightNodeWebGpu() {
  const probe = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { existsSync } from 'node:fs';
       const icd = ['/usr/lib/chromium/vk_swiftshader_icd.json', '/usr/lib/chromium-browser/vk_swiftshader_icd.json'].find(existsSync);
       if (!process.env.VK_ICD_FILENAMES && icd) process.env.VK_ICD_FILENAMES = icd;
       const { create, globals } = await import('webgpu');
       Object.assign(globalThis, globals);
       const adapter = await create(['backend=vulkan']).requestAdapter();
       if (!adapter) process.exit(3);
       console.log('Node WebGPU adapter:', adapter.info.vendor, adapter.info.architecture);`,
    ],
    { encoding: 'utf8' },
  );
  if (probe.status !== 0) {
    console.error(
      'Kernel tests need WebGPU in Node (the `webgpu` package) and a Vulkan driver, and none was found.\n' +
        'On Debian/Ubuntu without a GPU: `sudo apt-get install chromium libvulkan1` (SwiftShader ships with chromium).\n' +
        'To skip this layer on purpose, set SKIP_KERNELS=1.\n' +
        (probe.stderr || '')
          .split('\n')
          .filter((l) => l && !l.includes('XDG_RUNTIME_DIR'))
          .slice(0, 5)
          .join('\n'),
    );
    process.exit(1);
  }
  process.stdout.write(probe.stdout);
}

function preflightChromium() {
  const candidates = [
    process.env.CHROMIUM_PATH,
    '/usr/bin/chromium',
    '/usr/bin/chromium-browser',
    '/usr/bin/google-chrome',
  ];
  if (!candidates.some((p) => p && existsSync(p))) {
    console.error(
      'End-to-end tests need Chromium: `sudo apt-get install chromium nginx` on Debian/Ubuntu, or set CHROMIUM_PATH.\n' +
        'To skip this layer on purpose, set SKIP_E2E=1.',
    );
    process.exit(1);
  }
}

function addVitestCounts(file) {
  const report = JSON.parse(readFileSync(file, 'utf8'));
  totals.passed += report.numPassedTests;
  totals.failed += report.numFailedTests;
  totals.skipped += report.numPendingTests + (report.numTodoTests ?? 0);
}

function addPlaywrightCounts(file) {
  const { stats } = JSON.parse(readFileSync(file, 'utf8'));
  totals.passed += stats.expected + (stats.flaky ?? 0);
  totals.failed += stats.unexpected;
  totals.skipped += stats.skipped;
}

mkdirSync('test-results', { recursive: true });
if (!skipKernels) preflightNodeWebGpu();
if (!skipE2E) preflightChromium();

await runTogether([
  { title: 'lint', command: 'npx', args: ['eslint', '.'] },
  { title: 'format', command: 'npx', args: ['prettier', '--check', '.'] },
  {
    title: 'types',
    command: 'npx',
    args: [
      'svelte-check',
      '--tsconfig',
      './tsconfig.json',
      '--fail-on-warnings',
      '--output',
      'human',
    ],
  },
]);

/** A vitest layer: one project, its JSON report counted. */
function vitestLayer(title, project, live) {
  const report = `test-results/vitest-${project}.json`;
  rmSync(report, { force: true });
  return {
    title,
    command: 'npx',
    args: [
      'vitest',
      'run',
      '--project',
      project,
      '--reporter=default',
      '--reporter=json',
      `--outputFile=${report}`,
    ],
    live,
    countResults: () => addVitestCounts(report),
  };
}

if (skipKernels) console.log('\nSKIP_KERNELS=1: kernel tests skipped on request.');
await runTogether([
  ...(skipKernels ? [] : [vitestLayer('kernel tests (Node WebGPU)', 'kernels', true)]),
  vitestLayer('unit tests', 'unit', skipKernels),
]);

if (skipE2E) {
  console.log('\nSKIP_E2E=1: end-to-end tests skipped on request.');
} else {
  run('build', 'npx', ['vite', 'build']);
  const e2eJson = 'test-results/e2e-results.json';
  rmSync(e2eJson, { force: true });
  run('end-to-end tests (Chromium)', 'npx', ['playwright', 'test'], () =>
    addPlaywrightCounts(e2eJson),
  );
}
summarize();
