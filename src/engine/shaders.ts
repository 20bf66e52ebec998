// WGSL sources from shaders/, bundled as strings. The same import.meta.glob works in the Vite app
// bundle, in vitest and in the Node CLI (built with `vite build --mode cli`), so there is one way
// to load a kernel everywhere.
//
// WGSL has no include, so the loader adds one: a line `#include "name.wgsl"` is replaced by
// shaders/include/name.wgsl (which may include others). Kernels that repeat a block of helper
// functions (the attention kernels' row gathers) keep it once there. A snippet is pasted at most
// once per kernel; an include cycle or an unknown snippet throws, naming the file and line. The
// loader remembers where every line of an expanded kernel came from, so a compile error can name
// the file and line the author wrote (shaderLocation).
const files = import.meta.glob('/shaders/**/*.wgsl', {
  query: '?raw',
  import: 'default',
  eager: true,
}) as Record<string, string>;

const KERNEL_DIR = '/shaders/';
const INCLUDE_DIR = '/shaders/include/';
const INCLUDE = /^\s*#include\s+"([^"]+)"\s*(?:\/\/.*)?$/;

/** Where one line of an expanded source was written: a path under shaders/ and a 1-based line. */
export interface LineOrigin {
  file: string;
  line: number;
}

export interface ExpandedShader {
  source: string;
  /** origins[i] is where line i + 1 of `source` came from. */
  origins: LineOrigin[];
}

/**
 * Expands the `#include "name.wgsl"` lines of `path` (a key of `sources`, e.g.
 * '/shaders/attention_forward.wgsl'); included names resolve in `includeDir`. Pure, for tests.
 */
export function expandIncludes(
  path: string,
  sources: Readonly<Record<string, string>>,
  includeDir = INCLUDE_DIR,
): ExpandedShader {
  const out: string[] = [];
  const origins: LineOrigin[] = [];
  const pasted = new Set<string>();
  const visit = (file: string, stack: string[]) => {
    const text = sources[file];
    const lines = text.split('\n');
    lines.forEach((line, i) => {
      const m = INCLUDE.exec(line);
      if (!m) {
        out.push(line);
        origins.push({ file: short(file), line: i + 1 });
        return;
      }
      const target = includeDir + m[1];
      const at = `${short(file)}:${i + 1}`;
      if (sources[target] === undefined) {
        throw new Error(`${at}: #include "${m[1]}": no such file ${short(target)}`);
      }
      if (stack.includes(target)) {
        const cycle = [...stack, target].map(short).join(' → ');
        throw new Error(`${at}: #include "${m[1]}" forms a cycle (${cycle})`);
      }
      if (pasted.has(target)) return; // already pasted once into this kernel
      pasted.add(target);
      visit(target, [...stack, target]);
    });
  };
  if (sources[path] === undefined) throw new Error(`no shader source ${path}`);
  visit(path, [path]);
  return { source: out.join('\n'), origins };
}

/** 'shaders/include/x.wgsl' for '/shaders/include/x.wgsl'. */
const short = (path: string) => path.replace(/^\//, '');

const expanded = new Map<string, ExpandedShader>();
// Expanded source → its line origins, for compile errors (a few dozen kernels at most).
const originsBySource = new Map<string, LineOrigin[]>();

/** The WGSL source of shaders/<name>.wgsl, includes expanded. */
export function shaderSource(name: string): string {
  let entry = expanded.get(name);
  if (!entry) {
    const path = `${KERNEL_DIR}${name}.wgsl`;
    if (name.startsWith('include/') || files[path] === undefined) {
      const known = Object.keys(files)
        .filter((k) => !k.startsWith(INCLUDE_DIR))
        .map((k) => k.slice(KERNEL_DIR.length, -'.wgsl'.length));
      throw new Error(`no shader named '${name}' in shaders/ (have: ${known.join(', ')})`);
    }
    entry = expandIncludes(path, files);
    expanded.set(name, entry);
    originsBySource.set(entry.source, entry.origins);
  }
  return entry.source;
}

/**
 * 'shaders/include/attention_gather.wgsl:7' for line 1-based `line` of a source shaderSource
 * returned; null for a source that did not come from the loader (or a line past its end).
 */
export function shaderLocation(source: string, line: number): string | null {
  const origin = originsBySource.get(source)?.[line - 1];
  return origin ? `${origin.file}:${origin.line}` : null;
}
