// Docs that cannot rot (issue 39 part 3): in README.md and docs/**/*.md every relative link names a
// file that exists and every #anchor a heading of that file (GitHub's slug); every `npm run <x>`
// names a script of package.json and, for a command-line command, only flags that command parses
// (its flag table, the config schema); the generated option tables (<!-- generated: … -->) are what
// scripts/docs-tables.ts makes from the schema (UPDATE_DOCS=1 rewrites them); and each panel's
// help link (src/app/lib/help-links.ts) names a page and a section of the guide as the app serves
// it (scripts/guide-pages.ts). The runnable examples themselves run in
// tests/kernels/docs-runnable.test.ts (they need Node WebGPU).
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anchorsOf, GUIDE_DIR, linksOf, renderGuide } from '../../scripts/guide-pages';
import {
  acceptsFlag,
  CLI_COMMANDS,
  fillGeneratedBlocks,
  generatedBlocks,
  generatedTable,
  normalizeBlock,
} from '../../scripts/docs-tables';
import { HELP_LINKS } from '../../src/app/lib/help-links';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** README.md and every markdown file under docs/, relative to the repository. */
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

const read = (rel: string) => readFileSync(join(root, rel), 'utf8');

/** Every link problem of the docs: "file: link: what is wrong". */
function linkProblems(): string[] {
  const problems: string[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(readFileSync(file, 'utf8')));
    return anchorCache.get(file)!;
  };
  for (const doc of docFiles()) {
    for (const href of linksOf(read(doc))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//')) continue;
      const [path, anchor] = href.split('#');
      const target = path ? resolve(root, dirname(doc), decodeURI(path)) : join(root, doc);
      if (!target.startsWith(root) || !existsSync(target)) {
        problems.push(`${doc}: ${href}: no such file ${relative(root, target)}`);
        continue;
      }
      // Anchors of markdown files only (a source file's #L12 is GitHub's line, not a heading).
      if (anchor && target.endsWith('.md') && !anchors(target).has(anchor))
        problems.push(`${doc}: ${href}: no heading '#${anchor}' in ${relative(root, target)}`);
    }
  }
  return problems;
}

/** Every `npm run <script> [-- args]` the docs mention: script, flags and where. */
function npmRuns(): { doc: string; line: string; script: string; flags: string[] }[] {
  const out: { doc: string; line: string; script: string; flags: string[] }[] = [];
  for (const doc of docFiles()) {
    for (const m of read(doc).matchAll(/npm run (?:-s )?([a-z][a-z0-9:-]*)([^\n`|;&)]*)/g)) {
      const script = m[1];
      const rest = m[2];
      // Flags of the command come after `--`; prose after the script name is not arguments.
      const dashes = rest.indexOf(' -- ');
      const args = dashes >= 0 ? rest.slice(dashes + 4).split(/\s+/) : [];
      const flags = args
        .filter((a) => /^--[a-z][a-z0-9_-]*/.test(a))
        .map((a) =>
          a
            .slice(2)
            .split('=')[0]
            .replace(/[.,:]+$/, ''),
        );
      out.push({ doc, line: m[0].trim(), script, flags });
    }
  }
  return out;
}

describe('links and anchors', () => {
  it('every relative link of README.md and docs/**/*.md resolves, and every #anchor', () => {
    expect(linkProblems()).toEqual([]);
  });
});

describe('commands the docs name', () => {
  const scripts = Object.keys(
    (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts,
  );
  const runs = npmRuns();

  it('finds the commands (the test reads what it thinks it reads)', () => {
    expect(runs.length).toBeGreaterThan(10);
    expect(runs.some((r) => r.script === 'train' && r.flags.length > 0)).toBe(true);
  });

  it('every `npm run <script>` names a script of package.json', () => {
    expect(
      runs.filter((r) => !scripts.includes(r.script)).map((r) => `${r.doc}: ${r.line}`),
    ).toEqual([]);
  });

  it('every flag given to a command-line command is one it accepts', () => {
    const stale = runs.flatMap((r) =>
      CLI_COMMANDS.includes(r.script)
        ? r.flags
            .filter((f) => !acceptsFlag(r.script, f, r.flags))
            .map((f) => `${r.doc}: ${r.line}: --${f}`)
        : [],
    );
    expect(stale).toEqual([]);
  });

  it('the flag check refuses what the command does not parse', () => {
    expect(acceptsFlag('train', 'num-generations')).toBe(true);
    expect(acceptsFlag('train', 'num_generations')).toBe(true);
    expect(acceptsFlag('train', 'no-use-peft')).toBe(true);
    expect(acceptsFlag('train', 'reward-file')).toBe(true);
    expect(acceptsFlag('train', 'num-generation')).toBe(false);
    expect(acceptsFlag('sft', 'learning_rate')).toBe(true);
    expect(acceptsFlag('sft', 'num-generations')).toBe(false);
    expect(acceptsFlag('recipe', 'steps')).toBe(false);
    expect(acceptsFlag('rejection-sample', 'no-dedupe')).toBe(true);
  });
});

describe('generated option tables', () => {
  const update = process.env.UPDATE_DOCS === '1';
  const withBlocks = docFiles().filter((doc) => generatedBlocks(read(doc)).size > 0);

  it('each generated block is the table the schema makes (UPDATE_DOCS=1 rewrites them)', () => {
    for (const doc of withBlocks) {
      const text = read(doc);
      if (update) {
        // Then `npx prettier --write` the file: the comparison ignores the columns' padding.
        writeFileSync(join(root, doc), fillGeneratedBlocks(text));
        continue;
      }
      for (const [name, block] of generatedBlocks(text))
        expect(normalizeBlock(block), `${doc}: <!-- generated: ${name} -->`).toBe(
          normalizeBlock(generatedTable(name)),
        );
    }
  });

  it('the command-line page holds the train and SFT option tables', () => {
    const page = `${GUIDE_DIR}/command-line.md`;
    if (!existsSync(join(root, page))) return;
    expect([...generatedBlocks(read(page)).keys()]).toEqual(
      expect.arrayContaining(['train-options', 'sft-options']),
    );
  });

  it('the train table lists every config option and flag, the SFT table every SFT option', () => {
    const train = generatedTable('train-options');
    for (const flag of ['--out', '--resume', '--num-generations', '--lora-alpha', '--beta'])
      expect(train).toContain(`\`${flag}`);
    expect(generatedTable('sft-options')).toContain('`--max-length`');
  });
});

describe('help links', () => {
  it("each panel's help link names a page and a section of the rendered guide", () => {
    const { anchors } = renderGuide(root);
    const missing = Object.entries(HELP_LINKS)
      .filter(([, l]) => !anchors.get(`${l.page}.html`)?.has(l.anchor))
      .map(([topic, l]) => `${topic}: guide/${l.page}.html#${l.anchor}`);
    expect(missing).toEqual([]);
  });
});
