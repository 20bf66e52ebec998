#!/usr/bin/env node
// `npm run bench`: bundles the TypeScript benchmark entries for Node with Vite (the same way the CLI
// is built, so WGSL loads through import.meta.glob) into node_modules/.cache/grpo-bench/ (out of
// the way of lint and git), then runs bench/cli.ts, which
// runs each benchmark and prints the tables and JSON. Flags are passed through (see bench/cli.ts).
import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = resolve(root, 'node_modules/.cache/grpo-bench');

await build({
  configFile: false,
  root,
  logLevel: 'warn',
  build: {
    ssr: true,
    outDir,
    emptyOutDir: true,
    target: 'node20',
    rollupOptions: {
      input: {
        cli: 'bench/cli.ts',
        engine: 'bench/node/engine.ts',
        profile: 'bench/node/profile.ts',
        memory: 'bench/node/memory.ts',
        nf4: 'bench/node/nf4.ts',
        'recipe-memory': 'bench/node/recipe-memory.ts',
        counters: 'bench/node/counters.ts',
        gpu: 'bench/node/gpu.ts',
      },
      output: { format: 'es', entryFileNames: '[name].js' },
    },
  },
  ssr: { external: ['webgpu', 'vite', '@playwright/test', 'playwright-core'] },
});

const ENTRIES = {
  '--profile': 'profile.js',
  '--memory': 'memory.js',
  '--nf4': 'nf4.js',
  '--recipe-memory': 'recipe-memory.js',
  '--gpu': 'gpu.js',
  '--counters': 'counters.js',
};
const entry = ENTRIES[process.argv[2]] ?? 'cli.js';
// bench:gpu measures the machine's own GPU: the system's Vulkan driver, not the SwiftShader
// fallback src/engine/node-gpu.ts picks when none is named (--tiny keeps that fallback).
const env =
  entry === 'gpu.js' && !process.argv.includes('--tiny')
    ? { GRPO_USE_SYSTEM_VULKAN: '1', ...process.env }
    : process.env;
const result = spawnSync(process.execPath, [resolve(outDir, entry), ...process.argv.slice(2)], {
  stdio: 'inherit',
  cwd: root,
  env,
});
process.exit(result.status ?? 1);
