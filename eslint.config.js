// ESLint flat config: TypeScript (type-aware off for speed), Svelte 5, Node and browser globals.
import js from '@eslint/js';
import ts from 'typescript-eslint';
import svelte from 'eslint-plugin-svelte';
import globals from 'globals';

// The layers of src/, lowest first. A folder may import only the folders before it (and itself);
// an upward import fails `npm run lint` with the rule below. README's "Layout" section explains each.
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
  'grpo', // rewards, advantages, the policy objective, trainer, the Run loop, evaluation
  'export', // HF folder, ONNX, TRL project: built on grpo + formats
  'worker', // what runs in the trainer / CPU worker: thin facades over grpo's Run
  'app', // the page: Svelte components and stores (never touches the GPU)
  'cli', // Node entry points
];
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const layerRules = LAYERS.map((layer, index) => {
  const higher = LAYERS.slice(index + 1);
  const pattern = `^(\\.\\./)+(${higher.map(escapeRe).join('|')})/`;
  return {
    files: [`src/${layer}/**/*.{ts,svelte}`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: higher.length
            ? [
                {
                  regex: pattern,
                  message: `src/${layer} is below ${higher.join(', ')} in the layer order (eslint.config.js LAYERS): move the shared code down instead of importing up.`,
                },
              ]
            : [],
        },
      ],
    },
  };
});

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
  {
    // workers/ are comlink shells around src/worker (and the reward sandbox in src/grpo).
    files: ['workers/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./src/(app|cli)/',
              message: 'workers/ are thin shells over src/worker and src/grpo.',
            },
          ],
        },
      ],
    },
  },
);
