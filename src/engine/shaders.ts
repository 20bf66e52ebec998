// WGSL sources from shaders/, bundled as strings. The same import.meta.glob works in the Vite app
// bundle, in vitest and in the Node CLI (built with `vite build --mode cli`), so there is one way
// to load a kernel everywhere.
const sources = import.meta.glob('/shaders/*.wgsl', {
  query: '?raw',
  import: 'default',
  eager: true,
}) as Record<string, string>;

/** The WGSL source of shaders/<name>.wgsl. */
export function shaderSource(name: string): string {
  const source = sources[`/shaders/${name}.wgsl`];
  if (source === undefined) {
    const known = Object.keys(sources).map((k) => k.replace(/^\/shaders\/|\.wgsl$/g, ''));
    throw new Error(`no shader named '${name}' in shaders/ (have: ${known.join(', ')})`);
  }
  return source;
}
