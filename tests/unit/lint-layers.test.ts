// The structure rules of eslint.config.js, run through ESLint's Node API on small snippets placed
// at virtual paths: an upward import() and an upward `new URL(…, import.meta.url)` fail, a worker
// shell is referenced only from the files that start workers, and the page (src/app) fails on a
// value import of GPU-side code while its type imports and downward imports pass. The GPU_SIDE
// list those rules read is checked against the import graph itself, so that a module that starts
// loading GPU code cannot slip past the page's rule unlisted.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ESLint } from 'eslint';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

const UPWARD_GRPO =
  'src/grpo is below train, recipes, export, worker, app, cli in the layer order (eslint.config.js LAYERS): move the shared code down instead of referencing up.';
const SHELL_URL =
  'only src/app, src/worker and the reward sandbox start a worker shell (eslint.config.js WORKER_STARTERS): take a started worker or a factory from the caller instead of referencing workers/ here.';
const SHELL_IMPORT =
  'workers/ are entry points (worker shells), never imported: start one with new Worker(new URL(…, import.meta.url)) from src/app or src/worker (eslint.config.js WORKER_STARTERS).';
const GPU =
  'the page (src/app) never loads GPU code (eslint.config.js GPU_SIDE): import only types from it (`import type`), or move the pure part the page needs into a module of its own.';

describe('eslint.config.js structure rules', () => {
  let eslint: ESLint;
  beforeAll(() => {
    eslint = new ESLint({ cwd: root });
  });

  /** "rule: message" of every error `code` gets at `path` (relative to the repository). */
  async function errors(path: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath: join(root, path) });
    return result.messages.filter((m) => m.severity === 2).map((m) => `${m.ruleId}: ${m.message}`);
  }

  it('an upward import() fails like an upward import', async () => {
    expect(
      await errors(
        'src/grpo/probe.ts',
        "export const load = () => import('../worker/recipe-service');",
      ),
    ).toEqual([`no-restricted-syntax: ${UPWARD_GRPO}`]);
    expect(
      await errors(
        'src/grpo/probe.ts',
        "export { createRecipeApi } from '../worker/recipe-service';",
      ),
    ).toHaveLength(1);
    // Downward and same-layer import() pass.
    expect(
      await errors(
        'src/grpo/probe.ts',
        "export const a = () => import('../core/rng');\nexport const b = () => import('./config');",
      ),
    ).toEqual([]);
  });

  it('an upward new URL(…, import.meta.url) fails; a worker shell is started only by its starters', async () => {
    const startTrainer =
      "export const start = () => new Worker(new URL('../../workers/trainer.worker.ts', import.meta.url), { type: 'module' });";
    expect(await errors('src/grpo/probe.ts', startTrainer)).toEqual([
      `no-restricted-syntax: ${SHELL_URL}`,
    ]);
    expect(
      await errors(
        'src/grpo/probe.ts',
        "export const u = new URL('../app/App.svelte', import.meta.url);",
      ),
    ).toEqual([`no-restricted-syntax: ${UPWARD_GRPO}`]);
    // The page, a worker service and the reward sandbox's spawner may start a shell.
    expect(await errors('src/app/probe.ts', startTrainer)).toEqual([]);
    expect(await errors('src/worker/probe.ts', startTrainer)).toEqual([]);
    expect(await errors('src/rewards/reward-sandbox-browser.ts', startTrainer)).toEqual([]);
    // Nobody imports a shell, not even a starter.
    expect(
      await errors(
        'src/app/probe.ts',
        "export const w = () => import('../../workers/cpu.worker');",
      ),
    ).toEqual([`no-restricted-syntax: ${SHELL_IMPORT}`]);
    expect(await errors('src/worker/probe.ts', "import '../../workers/cpu.worker';")).toEqual([
      `no-restricted-imports: '../../workers/cpu.worker' import is restricted from being used by a pattern. ${SHELL_IMPORT}`,
    ]);
  });

  it('the page fails on a value import of GPU-side code, passes on its types', async () => {
    const gpuImport = `@typescript-eslint/no-restricted-imports: '../../model/llama' import is restricted from being used by a pattern. ${GPU}`;
    expect(
      await errors(
        'src/app/lib/probe.ts',
        "import { GpuLlama } from '../../model/llama';\nexport const m = GpuLlama;",
      ),
    ).toEqual([gpuImport]);
    expect(
      await errors(
        'src/app/components/Probe.svelte',
        '<script lang="ts">\n  import { GpuLlama } from \'../../model/llama\';\n  console.log(GpuLlama);\n</script>\n',
      ),
    ).toEqual([gpuImport]);
    expect(
      await errors('src/app/probe.ts', "export const run = () => import('../train/run');"),
    ).toEqual([`no-restricted-syntax: ${GPU}`]);
    expect(
      await errors(
        'src/app/probe.ts',
        "import { RecipeRun } from '../recipes/recipe';\nexport const r = RecipeRun;",
      ),
    ).toHaveLength(1);
    // Types only, and the pure modules the page needs.
    expect(
      await errors(
        'src/app/lib/probe.ts',
        [
          "import type { GpuLlama } from '../../model/llama';",
          "import { type Sampler } from '../../model/sampler';",
          "import { builtinRecipe } from '../../recipes/recipe-spec';",
          "import { CPU_MAX_PROMPTS } from '../../worker/cpu-protocol';",
          'export type T = [GpuLlama, Sampler];',
          'export const x = [builtinRecipe, CPU_MAX_PROMPTS];',
        ].join('\n'),
      ),
    ).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// The import graph of src/: value imports only (`import type`, all-`type` named imports and
// type-only re-exports carry no code), static and import() with a literal path.

function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (/\.(ts|svelte)$/.test(entry.name)) out.push(path);
  }
  return out;
}

function scriptOf(file: string): string {
  const text = readFileSync(file, 'utf8');
  if (!file.endsWith('.svelte')) return text;
  return [...text.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]).join('\n');
}

const isFile = (path: string) => {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

function resolveImport(from: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  const base = resolve(dirname(from), spec);
  const found = [base, `${base}.ts`, join(base, 'index.ts'), base.replace(/\.js$/, '.ts')].find(
    isFile,
  );
  return found ?? null;
}

function valueImports(file: string): string[] {
  const source = ts.createSourceFile(file, scriptOf(file), ts.ScriptTarget.Latest, true);
  const specs: string[] = [];
  const allTypes = (elements: ts.NodeArray<ts.ImportSpecifier | ts.ExportSpecifier>) =>
    elements.length > 0 && elements.every((e) => e.isTypeOnly);
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        clause?.isTypeOnly ||
        (clause &&
          !clause.name &&
          clause.namedBindings &&
          ts.isNamedImports(clause.namedBindings) &&
          allTypes(clause.namedBindings.elements));
      if (!typeOnly) specs.push(node.moduleSpecifier.text);
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const typeOnly =
        node.isTypeOnly ||
        (node.exportClause &&
          ts.isNamedExports(node.exportClause) &&
          allTypes(node.exportClause.elements));
      if (!typeOnly) specs.push(node.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      specs.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return specs.map((spec) => resolveImport(file, spec)).filter((f): f is string => f !== null);
}

describe('GPU_SIDE in eslint.config.js is what the import graph says', () => {
  const files = walk(join(root, 'src'));
  const rel = (file: string) => relative(join(root, 'src'), file).replace(/\.(ts|svelte)$/, '');
  const gpu = /^(engine|kernels)\//;
  /** Every module that value-imports src/engine or src/kernels, directly or through others: grown
   * to a fixed point, which cycles in the graph cannot fool. */
  function gpuLoaders(): Set<string> {
    const deps = new Map(files.map((f) => [f, valueImports(f)]));
    const loaders = new Set(files.filter((f) => gpu.test(rel(f))));
    for (let grew = true; grew;) {
      grew = false;
      for (const [file, imports] of deps)
        if (!loaders.has(file) && imports.some((d) => loaders.has(d))) {
          loaders.add(file);
          grew = true;
        }
    }
    return loaders;
  }

  it('lists exactly the modules that load GPU code (below the page), and the page loads none', async () => {
    const config = (await import(pathToFileURL(join(root, 'eslint.config.js')).href)) as {
      GPU_SIDE: string[];
    };
    // An entry is a module path relative to src/, where '*' stands for any part of one name.
    const patterns = config.GPU_SIDE.map(
      (entry) =>
        [
          entry,
          new RegExp(`^${entry.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]+')}$`),
        ] as const,
    );
    const listed = (path: string) => patterns.some(([, re]) => re.test(path));
    const loaders = [...gpuLoaders()].map(rel);
    const loading = loaders.filter((p) => !gpu.test(p));
    const below = loading.filter((p) => !/^(app|cli)\/|^main$/.test(p));
    expect(
      below.filter((p) => !listed(p)),
      'load GPU code but are not in GPU_SIDE',
    ).toEqual([]);
    const stale = patterns.filter(([, re]) => !loaders.some((p) => re.test(p))).map(([e]) => e);
    expect(stale, 'in GPU_SIDE but name no module that loads GPU code').toEqual([]);
    expect(
      loading.filter((p) => /^app\/|^main$/.test(p)),
      'page modules that load GPU code',
    ).toEqual([]);
  });
});
