// Vite config for the app, the Node command-line build (`--mode cli`) and the vitest projects.
// One config so that WGSL files load the same way (`?raw` through import.meta.glob) in the
// browser bundle, in vitest and in the Node CLI.
import { defineConfig } from 'vitest/config';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { readdirSync, readFileSync } from 'node:fs';
// With its extension: Vite's config loader resolves only explicit paths (native loader warning).
import { precachePlugin } from './src/app/sw/precache-plugin.ts';
import { guidePlugin } from './scripts/guide-pages.ts';

// Cross-origin isolation (threaded wasm needs SharedArrayBuffer), the CSP (workers included, which
// index.html's meta tag does not cover, and frame-ancestors, which a meta tag cannot say) and the
// other security headers: one list in deploy/headers.json, which nginx's snippet is generated from,
// so that `npm run dev`, `npm start` and production send the same (tests/unit/headers.test.ts).
const securityHeaders = (
  JSON.parse(readFileSync(new URL('./deploy/headers.json', import.meta.url), 'utf8')) as {
    headers: Record<string, string>;
  }
).headers;

const cliEntries = Object.fromEntries(
  readdirSync('src/cli')
    .filter((f) => f.endsWith('.ts') && !f.includes('.'.repeat(2)) && !f.startsWith('_'))
    .map((f) => [f.replace(/\.ts$/, ''), `src/cli/${f}`]),
);

export default defineConfig(({ mode }) => {
  if (mode === 'cli') {
    return {
      build: {
        ssr: true,
        outDir: 'dist-cli',
        emptyOutDir: true,
        target: 'node20',
        rollupOptions: { input: cliEntries, output: { format: 'es', entryFileNames: '[name].js' } },
      },
      ssr: { external: ['webgpu'] },
    };
  }
  return {
    // guidePlugin renders docs/guide/*.md to dist/guide/*.html (the panels' help links open them);
    // precachePlugin then writes dist/sw.js (offline support), which precaches them with the app.
    plugins: [svelte(), guidePlugin(), precachePlugin()],
    worker: { format: 'es' },
    build: { target: 'es2022', sourcemap: true },
    server: { host: '127.0.0.1', headers: securityHeaders },
    preview: { host: '127.0.0.1', headers: securityHeaders },
    test: {
      projects: [
        {
          extends: true,
          test: {
            name: 'unit',
            include: ['tests/unit/**/*.test.ts'],
            environment: 'node',
            // Some unit tests start onnxruntime, python3 or a vite server: 5 s is too tight for
            // them on a loaded 2-core machine, and a time-out is never what these tests check.
            testTimeout: 30_000,
          },
        },
        {
          extends: true,
          test: {
            name: 'kernels',
            include: ['tests/kernels/**/*.test.ts'],
            environment: 'node',
            // SwiftShader runs WebGPU on the CPU: kernel tests are slow, and two files at once on
            // a 2-core machine only contend for the same cores.
            testTimeout: 120_000,
            fileParallelism: false,
          },
        },
      ],
    },
  };
});
