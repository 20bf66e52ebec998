// ESLint flat config: TypeScript (type-aware off for speed), Svelte 5, Node and browser globals,
// and the project's structure rules: the layer order of src/, who may start a worker shell, the
// page never loading GPU code, and size warnings. tests/unit/lint-layers.test.ts proves each fires.
import js from '@eslint/js';
import ts from 'typescript-eslint';
import svelte from 'eslint-plugin-svelte';
import globals from 'globals';

// The layers of src/, lowest first. A folder may reference only the folders before it (and itself):
// a static import, an import() or a `new URL('<path>', import.meta.url)` that reaches a later
// folder fails `npm run lint` with the rules below. docs/guide/engine.md (Layout) explains each.
const LAYERS = [
  'core', // random numbers, the model config schema, small shared helpers: imports nothing
  'engine', // WebGPU device, buffers and byte accounting, pipelines, dispatch
  'ref', // plain-TS f64 reference of every kernel and of the whole model
  'kernels', // one TS wrapper per WGSL kernel
  'model', // parameter storage, GpuLlama, sampler, memory plan
  'optim', // AdamW, grad-norm clipping, schedules
  'tasks', // prompt generators and verifiers
  'formats', // safetensors, zip, ONNX proto, tokenizers, HF folders: bytes in and out
  'storage', // IndexedDB schema, runs, checkpoints, import/export of stored runs
  'rewards', // built-in rule rewards, custom rewards and the sandbox that runs them
  'grpo', // the algorithm: config, advantages, the policy objective, the trainer's update
  'train', // the loops: Run (GRPO) and SftRun behind one stage interface, checkpoint codec, evaluation
  'recipes', // multi-stage recipes (pure parts apart from the runner), rejection sampling, comparisons
  'export', // HF folder, ONNX, TRL project: built on grpo + formats
  'worker', // one small service per job over the training loops, and the page-worker protocol
  'app', // the page: Svelte components and stores (never touches the GPU)
  'cli', // Node entry points
];

// workers/ (repository root) holds the worker shells: entry points that import src/worker and
// src/rewards and serve them (Comlink.expose, or the reward worker's own messages), above both.
// Nothing in src/ imports a shell, statically or with import(): that would run its serving code in
// the importer's realm. A shell is started with `new Worker(new URL('../../workers/x.worker.ts',
// import.meta.url))`, which Vite needs literally in the file that starts it, and only these may
// write that: the page (src/app starts the trainer and CPU workers), a worker service (src/worker:
// a worker that starts a nested one), and the reward sandbox's spawner. The reward worker is
// started from the page ("try it") and, nested, from the trainer worker, both through the custom
// rewards of src/rewards, and the design puts the sandbox that starts it with the rewards; passing
// the URL in from above instead would leave custom-reward.ts without its browser default and push a
// factory through every caller, so the spawner is the one named exception.
const WORKER_STARTERS = {
  layers: ['app', 'worker'],
  files: ['src/rewards/reward-sandbox-browser.ts'],
};

// Modules that run on the GPU or load code that does: they value-import src/engine or
// src/kernels, directly or through another module. The page (src/app) may import their types,
// never their values (it would bundle GPU code into the page, kept out today only by
// tree-shaking). Paths are relative to src/, without the extension; '*' is a whole folder.
// tests/unit/lint-layers.test.ts recomputes this set from the import graph and fails when a module
// joins it unlisted. Pure parts the page needs live apart: recipe-spec.ts, sft-config.ts,
// worker/cpu-protocol.ts, worker/protocol.ts.
export const GPU_SIDE = [
  'engine/*',
  'kernels/*',
  'model/llama',
  'model/memory-plan',
  'model/parameters',
  'model/ref-sampler',
  'model/sampler',
  'optim/adamw',
  'train/checkpoint',
  'grpo/policy-objective',
  'recipes/merged-weights',
  'recipes/recipe',
  'recipes/rejection-sampling',
  'train/run',
  'grpo/score-completions',
  'train/sft',
  'grpo/trainer',
  'worker/cpu-api',
  'worker/context',
  'worker/*-service',
  'worker/trainer-api',
  'worker/warmup',
];

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A relative import path (any number of '../') that reaches one of `folders`. */
const reachesRe = (folders) => `^(\\.\\./)+(${folders.map(escapeRe).join('|')})/`;
const WORKERS_RE = reachesRe(['workers']);
const GPU_RE = `^(\\.\\./)+(${GPU_SIDE.map((p) => escapeRe(p).replace('\\*', '[^/]+')).join('|')})(\\.[jt]s)?$`;
// esquery (no-restricted-syntax's selectors) reads a regex up to the next '/', so a '/' inside one
// is written as \x2F, which the RegExp reads back as '/'.
const forSelector = (re) => `/${re.replaceAll('/', '\\x2F')}/`;
/** `import(<path>)` with a string literal path matching `re`. */
const importCall = (re, message) => ({
  selector: `ImportExpression[source.value=${forSelector(re)}]`,
  message,
});
/** `new URL(<path>, import.meta.url)` with a string literal path matching `re`. */
const urlRef = (re, message) => ({
  selector: `NewExpression[callee.name='URL'][arguments.1.object.type='MetaProperty'][arguments.0.value=${forSelector(re)}]`,
  message,
});

const SHELL_IMPORT =
  'workers/ are entry points (worker shells), never imported: start one with new Worker(new URL(…, import.meta.url)) from src/app or src/worker (eslint.config.js WORKER_STARTERS).';
const SHELL_URL =
  'only src/app, src/worker and the reward sandbox start a worker shell (eslint.config.js WORKER_STARTERS): take a started worker or a factory from the caller instead of referencing workers/ here.';
const GPU_MESSAGE =
  'the page (src/app) never loads GPU code (eslint.config.js GPU_SIDE): import only types from it (`import type`), or move the pure part the page needs into a module of its own.';

/** The references of `layer` that no-restricted-syntax forbids (import() and URLs). */
function syntaxRules(layer, { workerUrlsAllowed }) {
  const higher = LAYERS.slice(LAYERS.indexOf(layer) + 1);
  const upward = `src/${layer} is below ${higher.join(', ')} in the layer order (eslint.config.js LAYERS): move the shared code down instead of referencing up.`;
  const rules = [importCall(WORKERS_RE, SHELL_IMPORT)];
  if (higher.length)
    rules.push(importCall(reachesRe(higher), upward), urlRef(reachesRe(higher), upward));
  if (!workerUrlsAllowed) rules.push(urlRef(WORKERS_RE, SHELL_URL));
  if (layer === 'app') rules.push(importCall(GPU_RE, GPU_MESSAGE));
  return ['error', ...rules];
}

const layerRules = LAYERS.map((layer, index) => {
  const higher = LAYERS.slice(index + 1);
  return {
    files: [`src/${layer}/**/*.{ts,svelte}`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...(higher.length
              ? [
                  {
                    regex: reachesRe(higher),
                    message: `src/${layer} is below ${higher.join(', ')} in the layer order (eslint.config.js LAYERS): move the shared code down instead of importing up.`,
                  },
                ]
              : []),
            { regex: WORKERS_RE, message: SHELL_IMPORT },
          ],
        },
      ],
      'no-restricted-syntax': syntaxRules(layer, {
        workerUrlsAllowed: WORKER_STARTERS.layers.includes(layer),
      }),
    },
  };
});

// The named starters outside those layers: their layer's rules less the worker-URL one.
const starterExceptions = WORKER_STARTERS.files.map((file) => ({
  files: [file],
  rules: {
    'no-restricted-syntax': syntaxRules(file.split('/')[1], { workerUrlsAllowed: true }),
  },
}));

export default ts.config(
  { ignores: ['node_modules', 'dist', 'dist-cli', 'test-results', 'playwright-report', 'runs'] },
  js.configs.recommended,
  ...ts.configs.recommended,
  ...svelte.configs.recommended,
  {
    languageOptions: { globals: { ...globals.browser, ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['**/*.svelte', '**/*.svelte.ts'],
    languageOptions: { parserOptions: { parser: ts.parser } },
  },
  ...layerRules,
  ...starterExceptions,
  {
    // The page's static imports of GPU-side modules: typescript-eslint's variant of the rule
    // tells `import type` / `import { type X }` (allowed) from value imports (not).
    files: ['src/app/**/*.{ts,svelte}'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: [{ regex: GPU_RE, message: GPU_MESSAGE, allowTypeImports: true }] },
      ],
    },
  },
  {
    // Size: the page and the worker services grow by accretion; a warning marks a file or a
    // function that has become several and wants splitting (warnings do not fail `npm run lint`).
    files: ['src/app/**/*.{ts,svelte}', 'src/worker/**/*.ts'],
    rules: {
      'max-lines': ['warn', { max: 600, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['warn', { max: 150, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // workers/ are comlink shells around src/worker (and the reward sandbox in src/rewards).
    files: ['workers/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./src/(app|cli)/',
              message: 'workers/ are thin shells over src/worker and src/rewards.',
            },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        importCall(
          '^\\.\\./src/(app|cli)/',
          'workers/ are thin shells over src/worker and src/rewards.',
        ),
      ],
    },
  },
);
