// The user guide (docs/guide/*.md) as HTML pages served with the app: `vite build` writes them to
// dist/guide/ (so the service worker precaches them and the guide works offline), `npm run dev`
// renders them on request. Heading ids are GitHub's slugs, so a link that works on GitHub
// (playground.md#the-aha-demo) works in the app (playground.html#the-aha-demo), and the help links
// of the app's panels (src/app/lib/help-links.ts) name sections the same way. Also the markdown
// helpers the docs test (tests/unit/docs.test.ts) reads: headings' slugs, links and fenced blocks.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, posix, relative, resolve, sep } from 'node:path';
import { Marked, marked, type Token, type Tokens } from 'marked';
import type { Plugin, ResolvedConfig } from 'vite';

/** Where the guide's markdown lives, relative to the repository. */
export const GUIDE_DIR = 'docs/guide';
/** Where its pages are served: /guide/<page>.html (docs/guide/README.md is index.html). */
export const GUIDE_URL = 'guide';

const ENTITIES: Record<string, string> = {
  '&amp;': '&',
  '&lt;': '<',
  '&gt;': '>',
  '&quot;': '"',
  '&#39;': "'",
};

/** The text a heading shows: its inline markdown rendered, tags dropped, entities decoded. */
export function plainText(inline: string): string {
  const html = marked.parseInline(inline, { async: false });
  return html.replace(/<[^>]*>/g, '').replace(/&(amp|lt|gt|quot|#39);/g, (e) => ENTITIES[e]);
}

/**
 * GitHub's anchor for a heading's text (github-slugger): lower case, every character that is not a
 * letter, mark, digit, connector, space or hyphen dropped, each space a hyphen. `seen` numbers
 * repeats as GitHub does (x, x-1, x-2).
 */
export function githubSlug(text: string, seen?: Map<string, number>): string {
  const base = text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
  if (!seen) return base;
  let slug = base;
  let n = seen.get(base) ?? 0;
  while (seen.has(slug)) slug = `${base}-${++n}`;
  seen.set(base, n);
  seen.set(slug, 0);
  return slug;
}

/** Every token of a markdown text, nested ones included (list items, blockquotes, tables). */
export function walkTokens(markdown: string): Token[] {
  const out: Token[] = [];
  marked.walkTokens(marked.lexer(markdown), (t) => {
    out.push(t);
  });
  return out;
}

/** The anchors a markdown file has on GitHub: its headings' slugs and explicit id/name anchors. */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const t of walkTokens(markdown)) {
    if (t.type === 'heading') anchors.add(githubSlug(plainText((t as Tokens.Heading).text), seen));
    if (t.type === 'html' || t.type === 'tag')
      for (const m of t.raw.matchAll(/<a\s[^>]*(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  return anchors;
}

/** The links and images of a markdown text (not those inside code), as written. */
export function linksOf(markdown: string): string[] {
  const out: string[] = [];
  for (const t of walkTokens(markdown)) {
    if (t.type === 'link' || t.type === 'image') out.push((t as Tokens.Link).href);
    if (t.type === 'html' || t.type === 'tag')
      for (const m of t.raw.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g)) out.push(m[1]);
  }
  return out;
}

/** Fenced code blocks with their info string ('sh runnable') and text. */
export function codeBlocks(markdown: string): { lang: string; text: string }[] {
  return walkTokens(markdown)
    .filter((t): t is Tokens.Code => t.type === 'code')
    .map((t) => ({ lang: (t.lang ?? '').trim(), text: t.text }));
}

/** A guide page's served name: README.md is the index. */
export function pageName(mdFile: string): string {
  return mdFile === 'README.md' ? 'index.html' : mdFile.replace(/\.md$/, '.html');
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

const STYLE = `body{font:16px/1.55 system-ui,sans-serif;margin:0;color:#1d232b;background:#fbfcfd}
nav{padding:.6rem 1.2rem;border-bottom:1px solid #d8dee6;background:#fff}
main{max-width:52rem;margin:0 auto;padding:1rem 1.2rem 4rem}
a{color:#0b5cad}h1,h2,h3{line-height:1.25}h2{margin-top:2rem;border-bottom:1px solid #d8dee6}
code,pre{font:13.5px/1.45 ui-monospace,monospace;background:#eef1f5;border-radius:4px}
code{padding:.1em .3em}pre{padding:.8rem;overflow:auto}pre code{padding:0;background:none}
table{border-collapse:collapse;display:block;overflow:auto}th,td{border:1px solid #d8dee6;padding:.3rem .5rem;vertical-align:top}
img{max-width:100%}.repo{color:#555}:target{scroll-margin-top:1rem;background:#fff7d6}
@media (prefers-color-scheme:dark){body{background:#14181d;color:#e3e7ec}nav{background:#1b2026;border-color:#333}
a{color:#7db4f0}code,pre{background:#232a32}th,td,h2{border-color:#333}:target{background:#3a3420}.repo{color:#aaa}}
`;

export interface RenderedGuide {
  /** Served name (index.html, playground.html, guide.css, assets/x.png) → contents. */
  files: Map<string, string | Buffer>;
  /** Served page name → its anchors (heading ids). */
  anchors: Map<string, Set<string>>;
}

/**
 * Renders every docs/guide/*.md of `root` to HTML. A link to another guide page becomes a link to
 * its .html; an image elsewhere in the repository is copied to assets/; a link to any other file
 * of the repository (source, README.md) is not served with the app, so it is shown as its path.
 */
export function renderGuide(root: string): RenderedGuide {
  const dir = join(root, GUIDE_DIR);
  const files = new Map<string, string | Buffer>([['guide.css', STYLE]]);
  const anchors = new Map<string, Set<string>>();
  if (!existsSync(dir)) return { files, anchors };
  const mdFiles = readdirSync(dir)
    .filter((f) => f.endsWith('.md'))
    .sort();
  for (const md of mdFiles) {
    const seen = new Map<string, number>();
    const ids = new Set<string>();
    let title = '';
    const page = new Marked({ gfm: true, async: false });
    page.use({
      renderer: {
        heading({ tokens, depth, text }) {
          const id = githubSlug(plainText(text), seen);
          ids.add(id);
          if (!title) title = plainText(text);
          return `<h${depth} id="${id}">${this.parser.parseInline(tokens)}</h${depth}>\n`;
        },
        link({ href, title: t, tokens }) {
          const inner = this.parser.parseInline(tokens);
          const target = servedHref(root, dir, href, files);
          const tip = t ? ` title="${escapeHtml(t)}"` : '';
          if (target === null)
            return `${inner} <span class="repo">(<code>${escapeHtml(repoPath(root, dir, href))}</code> in the repository)</span>`;
          return `<a href="${escapeHtml(target)}"${tip}>${inner}</a>`;
        },
        image({ href, title: t, text }) {
          const target = servedHref(root, dir, href, files) ?? href;
          const tip = t ? ` title="${escapeHtml(t)}"` : '';
          return `<img src="${escapeHtml(target)}" alt="${escapeHtml(text)}"${tip}>`;
        },
      },
    });
    const body = page.parse(readFileSync(join(dir, md), 'utf8')) as string;
    const name = pageName(md);
    anchors.set(name, ids);
    files.set(
      name,
      `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title || md)} · GRPO Playground guide</title>
<link rel="stylesheet" href="guide.css">
</head>
<body>
<nav><a href="index.html">Guide</a> · <a href="../">Open the playground</a></nav>
<main>
${body}</main>
</body>
</html>
`,
    );
  }
  return { files, anchors };
}

const isExternal = (href: string) => /^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//');

/** The repository path a relative link names (for display). */
function repoPath(root: string, dir: string, href: string): string {
  const [path] = href.split('#');
  return relative(root, resolve(dir, decodeURI(path)))
    .split(sep)
    .join('/');
}

/** Where a link points in the served guide, or null when its file is not served. */
function servedHref(
  root: string,
  dir: string,
  href: string,
  files: Map<string, string | Buffer>,
): string | null {
  if (isExternal(href) || href.startsWith('#')) return href;
  const [path, hash] = href.split('#');
  const file = resolve(dir, decodeURI(path));
  const suffix = hash !== undefined ? `#${hash}` : '';
  if (dirname(file) === resolve(dir) && file.endsWith('.md'))
    return pageName(basename(file)) + suffix;
  if (/\.(png|svg|jpe?g|gif|webp)$/i.test(file) && existsSync(file)) {
    const rel = relative(root, file).split(sep).join('/');
    const asset = posix.join('assets', rel.replace(/\//g, '_'));
    files.set(asset, readFileSync(file));
    return asset;
  }
  return null;
}

/**
 * The Vite plugin: the guide's pages in the app build (emitted into the bundle, so the precache
 * plugin's listing of dist/ includes them) and on the dev server.
 */
export function guidePlugin(): Plugin {
  let config: ResolvedConfig;
  return {
    name: 'grpo-guide',
    configResolved(resolved) {
      config = resolved;
    },
    generateBundle() {
      if (config.build.ssr) return;
      const { files } = renderGuide(config.root);
      for (const [name, source] of files) {
        this.emitFile({ type: 'asset', fileName: `${GUIDE_URL}/${name}`, source });
      }
    },
    configureServer(server) {
      server.middlewares.use((req, res, next) => {
        const path = decodeURIComponent((req.url ?? '').split(/[?#]/)[0]);
        const prefix = `/${GUIDE_URL}/`;
        if (!path.startsWith(prefix)) return next();
        const file = renderGuide(config.root).files.get(path.slice(prefix.length) || 'index.html');
        if (file === undefined) return next();
        const type = path.endsWith('.css')
          ? 'text/css'
          : path.endsWith('.html') || path === prefix
            ? 'text/html; charset=utf-8'
            : path.endsWith('.svg')
              ? 'image/svg+xml'
              : 'image/png';
        res.setHeader('Content-Type', type);
        res.end(file);
      });
    },
  };
}
