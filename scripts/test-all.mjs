#!/usr/bin/env node
// `npm test`: every layer — lint, formatting and types (svelte-check) side by side, then the kernel
// tests on Node WebGPU beside one lane of the vitest unit tests, the production build and the
// Playwright end-to-end tests in Chromium. A missing browser or WebGPU driver fails with how to install it; a layer is skipped only
// when asked explicitly (SKIP_KERNELS=1, SKIP_E2E=1). Ends with one summary line of counts.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';

const skipKernels = process.env.SKIP_KERNELS === '1';
const skipE2E = process.env.SKIP_E2E === '1';
const started = Date.now();
const totals = { passed: 0, failed: 0, skipped: 0 };

/**
 * Runs layers at the same time: the static layers (lint, formatting, types: each one mostly
 * single-threaded process) and the unit tests beside the kernel tests (which run their files one
 * at a time), so each group takes about its longest layer's time instead of the sum. A layer with
 * `live` streams its output as it comes; the others' output is printed whole when they end, in the
 * order given. Every layer's counts are read; the first failure stops the run after all end.
 */
async function runTogether(layers) {
  const results = (await Promise.all(layers.map((layer) => runLane(layer)))).flat();
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

/**
 * One lane of runTogether: a layer, or `{ lane: [layers] }` run one after another (a later layer
 * starts only when the earlier ones passed; the layers not run are told so through `after`).
 * Resolves to the results of the layers that ran.
 */
async function runLane(layer) {
  if (!layer.lane) return [await runLayer(layer)];
  const results = [];
  for (const [i, step] of layer.lane.entries()) {
    const result = await runLayer(step);
    results.push(result);
    if (result.code !== 0) {
      for (const rest of layer.lane.slice(i + 1)) rest.after?.(false);
      break;
    }
  }
  return results;
}

/**
 * Runs one layer's command: `waitFor` (a promise of another lane's layer passing) first, `env`
 * added to the environment, `after(passed)` called when it ends.
 */
async function runLayer(layer) {
  if (layer.waitFor && !(await layer.waitFor)) {
    console.log(`\n(${layer.title}: not run, the layer it needs failed)`);
    return { ...layer, output: '', code: 0, signal: null, seconds: '0.0', countResults: null };
  }
  const result = await new Promise((resolve) => {
    const t0 = Date.now();
    layer.before?.();
    if (layer.live) console.log(`\n=== ${layer.title}: ${layer.command} ${layer.args.join(' ')}`);
    const child = spawn(layer.command, layer.args, {
      env: { ...process.env, ...(layer.live ? {} : { FORCE_COLOR: '0' }), ...layer.env },
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
  });
  layer.after?.(result.code === 0);
  return result;
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
if (skipE2E) console.log('\nSKIP_E2E=1: end-to-end tests skipped on request.');
const e2eJson = 'test-results/e2e-results.json';
// The kernel tests run their files one at a time and take long; beside them, one lane runs the
// unit tests, the build and most end-to-end specs. The kernel lane then runs the specs in
// E2E_OTHER_LANE (about 2 minutes, on their own port and report) once the build is there, so the
// two lanes end together (TEST_LANES=serial: kernels and unit tests side by side, then the build
// and every e2e spec alone, as before).
const E2E_OTHER_LANE = ['a11y-screens.spec.ts', 'recipe.spec.ts'];
const otherLaneJson = 'test-results/e2e-results-other-lane.json';
let buildDone;
const built = new Promise((resolve) => (buildDone = resolve));
const e2eLayer = (title, env, json) => ({
  title,
  command: 'npx',
  args: ['playwright', 'test'],
  env,
  live: true,
  before: () => rmSync(json, { force: true }),
  countResults: () => addPlaywrightCounts(json),
});
const buildLayer = {
  title: 'build',
  command: 'npx',
  args: ['vite', 'build'],
  after: (ok) => buildDone(ok),
};
const kernelLayer = skipKernels ? [] : [vitestLayer('kernel tests (Node WebGPU)', 'kernels', true)];
if (process.env.TEST_LANES === 'serial') {
  await runTogether([...kernelLayer, vitestLayer('unit tests', 'unit', skipKernels)]);
  if (!skipE2E) {
    await runTogether([buildLayer]);
    await runTogether([e2eLayer('end-to-end tests (Chromium)', {}, e2eJson)]);
  }
} else {
  const unitLayer = vitestLayer('unit tests', 'unit', skipKernels);
  const mainE2E = e2eLayer(
    'end-to-end tests (Chromium)',
    { E2E_IGNORE: E2E_OTHER_LANE.join(',') },
    e2eJson,
  );
  const otherE2E = {
    ...e2eLayer(
      `end-to-end tests, second lane (${E2E_OTHER_LANE.join(', ')})`,
      { E2E_RESULTS: 'other-lane', E2E_PORT: '4174' },
      otherLaneJson,
    ),
    args: ['playwright', 'test', ...E2E_OTHER_LANE.map((spec) => `tests/e2e/${spec}`)],
    waitFor: built,
  };
  if (skipE2E) buildDone(false);
  await runTogether([
    { lane: [...kernelLayer, ...(skipE2E ? [] : [otherE2E])] },
    { lane: [unitLayer, ...(skipE2E ? [] : [buildLayer, mainE2E])] },
  ]);
}
summarize();
