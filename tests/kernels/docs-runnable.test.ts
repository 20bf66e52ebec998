// The docs' runnable examples run (issue 39 part 3): every `npm run …` line of a fenced block whose
// info string is `sh runnable` in README.md or docs/**/*.md exits 0. Those blocks hold cheap
// commands (tiny sizes, seconds each); a command-line script runs from a build of its own (the
// same build `npm run <script>` makes), so the test does not rebuild once per line. A kernels test
// because the commands train or sample on Node WebGPU (SwiftShader here).
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { codeBlocks } from '../../scripts/guide-pages';
import { runBuiltCli } from '../support/cli-process';

const root = fileURLToPath(new URL('../..', import.meta.url));
const BUILD = 'node_modules/.cache/grpo-docs-runnable';
const scripts = (
  JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  }
).scripts;

function docFiles(): string[] {
  const out = ['README.md'];
  const walk = (dir: string) => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const rel = `${dir}/${name}`;
      if (statSync(join(root, rel)).isDirectory()) walk(rel);
      else if (name.endsWith('.md')) out.push(rel);
    }
  };
  walk('docs');
  return out;
}

/** A shell line's words: spaces split, single and double quotes group (no expansion). */
function words(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g)].map(
    (m) => m[1] ?? m[2]?.replace(/\\(.)/g, '$1') ?? m[3],
  );
}

/** The `npm run` lines of the runnable blocks (continuations joined, comments dropped). */
function runnableLines(): { doc: string; line: string }[] {
  const out: { doc: string; line: string }[] = [];
  for (const doc of docFiles()) {
    const text = readFileSync(join(root, doc), 'utf8');
    for (const block of codeBlocks(text).filter((b) => b.lang === 'sh runnable')) {
      for (const raw of block.text.replace(/\\\n\s*/g, ' ').split('\n')) {
        const line = raw.replace(/\s+#.*$/, '').trim();
        if (line.startsWith('npm run ')) out.push({ doc, line });
      }
    }
  }
  return out;
}

const lines = runnableLines();

beforeAll(() => {
  if (lines.length === 0) return;
  execFileSync(
    'npx',
    ['vite', 'build', '--mode', 'cli', '--logLevel', 'warn', '--outDir', BUILD, '--emptyOutDir'],
    { cwd: root, stdio: 'inherit' },
  );
}, 120_000);

describe('runnable examples in the docs', () => {
  it('the docs have runnable examples, each naming a script of package.json', () => {
    expect(lines.length).toBeGreaterThan(0);
    for (const { doc, line } of lines) {
      const script = words(line)[2];
      expect(Object.keys(scripts), `${doc}: ${line}`).toContain(script);
    }
  });

  for (const { doc, line } of lines) {
    it(`${doc}: ${line}`, async () => {
      const [, , script, ...rest] = words(line).filter((w) => w !== '-s');
      const args = rest[0] === '--' ? rest.slice(1) : rest;
      const cli = /^npm run -s build:cli && node dist-cli\/([a-z-]+)\.js$/.exec(scripts[script]);
      const run = cli
        ? await runBuiltCli(BUILD, cli[1], args)
        : (() => {
            const r = spawnSync('npm', ['run', '-s', script, '--', ...args], {
              cwd: root,
              encoding: 'utf8',
              timeout: 120_000,
            });
            return { status: r.status, out: r.stdout, err: r.stderr };
          })();
      expect(run.status, `${line}\n${run.out}\n${run.err}`).toBe(0);
    }, 120_000);
  }
});
