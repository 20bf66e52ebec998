// Where a model's files come from: a `ModelSource` is a set of named files read on demand (only the
// files a loader asks for are read, so a sharded checkpoint streams shard by shard). Sources: a Node
// folder path, browser File objects (file picker, <input webkitdirectory>, drag and drop through
// src/app/lib/drop.ts), and a URL base (fetch with progress, cached in the Cache API so a model
// downloaded once loads offline). Every failure is a ModelSourceError saying why.
//
// Names come from files the user did not write (a shard index), so every source reads only plain
// relative names that stay inside its folder or base URL, only regular files (never a device, FIFO
// or a link out of the folder), and never more bytes than the loader allows for that file.

import { ModelFileError, ModelSourceError } from './errors';

export interface ReadProgress {
  /** The file being read, as the loader named it. */
  file: string;
  loaded: number;
  /** Total bytes when the source knows it (Content-Length, File.size), else null. */
  total: number | null;
}

export interface ReadOptions {
  onProgress?: (progress: ReadProgress) => void;
  /** The most bytes this file may have; a larger one fails with reason 'too-large' before it is read. */
  maxBytes?: number;
  /** Why the limit is what it is, for the message ('config.json's tensors need at most …'). */
  maxBytesReason?: string;
}

/**
 * Why `name` is not a plain relative file name inside a model folder, or null when it is. Refused:
 * empty names, control characters, absolute paths ('/etc/passwd', 'C:\\x', '\\\\server\\x'),
 * URLs and other schemes ('https://…', 'file:…'), and any '..' segment (also percent-encoded, which
 * a URL base would decode).
 */
export function unsafeFileName(name: string): string | null {
  if (name.length === 0) return 'the name is empty';
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return 'the name contains control characters';
  }
  if (/^[\\/]/.test(name)) return 'it is an absolute path';
  if (/^[A-Za-z]:/.test(name)) return 'it is an absolute path (a drive letter)';
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(name)) return 'it is a URL, not a file name';
  const segments = name.split(/[\\/]/);
  let decoded: string[];
  try {
    decoded = segments.map((seg) => decodeURIComponent(seg));
  } catch {
    decoded = segments;
  }
  if (segments.some((seg, i) => seg === '..' || decoded[i] === '..')) {
    return "it climbs out of the folder ('..')";
  }
  return null;
}

function refuseUnsafe(name: string, where: string): void {
  const why = unsafeFileName(name);
  if (why !== null) {
    throw new ModelSourceError(
      name,
      `refused: ${why}; only file names inside ${where} can be read`,
      'refused',
    );
  }
}

function tooLarge(name: string, size: number, options: ReadOptions | undefined): ModelSourceError {
  return new ModelSourceError(
    name,
    `is ${size} bytes, more than the ${options?.maxBytes} bytes allowed` +
      (options?.maxBytesReason ? ` (${options.maxBytesReason})` : '') +
      '; is it the right file?',
    'too-large',
  );
}

const overLimit = (size: number, options: ReadOptions | undefined) =>
  options?.maxBytes !== undefined && size > options.maxBytes;

export interface ModelSource {
  /** Where the files come from, for messages ('folder /models/x', 'https://…/resolve/main/'). */
  readonly label: string;
  /** The file's bytes; a missing file throws ModelSourceError with reason 'missing'. */
  read(name: string, options?: ReadOptions): Promise<Uint8Array>;
  /** File names (relative paths) when the source can list them; null for URLs. */
  list(): Promise<string[] | null>;
  /**
   * The file opened for ranged reads (same checks and errors as read: name, kind, maxBytes), so a
   * loader can take a large weight file a tensor at a time. Sources without it are read whole
   * (openRanged falls back to read).
   */
  open?(name: string, options?: ReadOptions): Promise<RangedFile>;
}

/** A file read by byte ranges: what a streamed weight load holds instead of the whole file. */
export interface RangedFile {
  readonly size: number;
  /** Bytes [start, end) in a new buffer of their own (start ≤ end ≤ size). */
  readRange(start: number, end: number): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** A RangedFile over bytes already in memory (a source that can only read whole files). */
export function bytesRangedFile(bytes: Uint8Array): RangedFile {
  return {
    size: bytes.byteLength,
    async readRange(start, end) {
      return bytes.slice(start, end);
    },
    async close() {},
  };
}

/** `name` opened for ranged reads: source.open when it has one, else the whole file read once. */
export async function openRanged(
  source: ModelSource,
  name: string,
  options?: ReadOptions,
): Promise<RangedFile> {
  if (source.open) return source.open(name, options);
  return bytesRangedFile(await source.read(name, options));
}

function checkRange(name: string, size: number, start: number, end: number): void {
  if (!(Number.isSafeInteger(start) && Number.isSafeInteger(end) && 0 <= start && start <= end)) {
    throw new RangeError(`${name}: bad byte range [${start}, ${end})`);
  }
  if (end > size) {
    throw new ModelSourceError(
      name,
      `is ${size} bytes, shorter than the range [${start}, ${end}) read from it (did it change while loading?)`,
      'io',
    );
  }
}

/** Reads a file that may legitimately be absent (generation_config.json, a shard index …). */
export async function readOptional(
  source: ModelSource,
  name: string,
  options?: ReadOptions,
): Promise<Uint8Array | null> {
  try {
    return await source.read(name, options);
  } catch (err) {
    if (err instanceof ModelSourceError && err.reason === 'missing') return null;
    throw err;
  }
}

/** Parses JSON bytes; the error names the file. */
export function parseJsonFile(bytes: Uint8Array, name: string): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ModelFileError(name, 'is not UTF-8 text (expected JSON)');
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ModelFileError(
      name,
      `is not valid JSON (${err instanceof Error ? err.message : String(err)})`,
    );
  }
}

const normalise = (name: string) => name.replace(/\\/g, '/').replace(/^\.?\//, '');

// ---------------------------------------------------------------------------------------------
// Node folder

/** A folder on disk (Node only; `node:fs` is imported lazily so the browser bundle never loads it). */
export function folderSource(folder: string): ModelSource {
  // A variable specifier keeps bundlers from trying to resolve node builtins for the browser.
  const fsModule = 'node:fs/promises';
  const pathModule = 'node:path';
  const load = async () => ({
    fs: (await import(/* @vite-ignore */ fsModule)) as typeof import('node:fs/promises'),
    path: (await import(/* @vite-ignore */ pathModule)) as typeof import('node:path'),
  });
  /** Checks `name` as read does (inside the folder, a regular file, under maxBytes) and opens it. */
  const openChecked = async (name: string, options: ReadOptions | undefined) => {
    refuseUnsafe(name, `folder ${folder}`);
    const { fs, path } = await load();
    const full = path.join(folder, normalise(name));
    const ioError = (err: unknown) => {
      const code = (err as { code?: string }).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        return new ModelSourceError(name, `not found in folder ${folder}`, 'missing');
      }
      return new ModelSourceError(
        name,
        `could not read ${full}: ${err instanceof Error ? err.message : String(err)}`,
        'io',
      );
    };
    let real: string;
    let stat: import('node:fs').Stats;
    try {
      real = await fs.realpath(full);
      stat = await fs.stat(real);
    } catch (err) {
      throw ioError(err);
    }
    const root = await fs.realpath(folder).catch(() => path.resolve(folder));
    if (!isInside(path, root, real) && !isHubCacheBlob(path, root, real)) {
      throw new ModelSourceError(
        name,
        `refused: it is a link to ${real}, outside folder ${folder}; copy the file into the folder`,
        'refused',
      );
    }
    // Checked before opening: opening a FIFO blocks, and /dev/zero never ends.
    if (!stat.isFile()) {
      throw new ModelSourceError(
        name,
        `refused: ${real} is not a regular file (a folder, device, FIFO or socket)`,
        'refused',
      );
    }
    if (overLimit(stat.size, options)) throw tooLarge(name, stat.size, options);
    let handle: import('node:fs/promises').FileHandle;
    let size: number;
    try {
      handle = await fs.open(real, 'r');
    } catch (err) {
      throw ioError(err);
    }
    try {
      // The size is re-read from the open file and is the most that is read, so a file that
      // is swapped or grows after the check cannot make the read larger.
      size = (await handle.stat()).size;
      if (overLimit(size, options)) throw tooLarge(name, size, options);
    } catch (err) {
      await handle.close().catch(() => undefined);
      if (err instanceof ModelSourceError) throw err;
      throw ioError(err);
    }
    /** Bytes [start, end) of the open file (fewer when it shrank meanwhile). */
    const readRange = async (start: number, end: number) => {
      let bytes = new Uint8Array(end - start);
      let pos = 0;
      try {
        while (pos < bytes.byteLength) {
          const { bytesRead } = await handle.read(bytes, pos, bytes.byteLength - pos, start + pos);
          if (bytesRead === 0) break;
          pos += bytesRead;
        }
      } catch (err) {
        throw ioError(err);
      }
      if (pos < bytes.byteLength) bytes = bytes.subarray(0, pos);
      return bytes;
    };
    return { handle, size, readRange };
  };
  return {
    label: `folder ${folder}`,
    async read(name, options) {
      const { handle, size, readRange } = await openChecked(name, options);
      let bytes: Uint8Array;
      try {
        bytes = await readRange(0, size);
      } finally {
        await handle.close().catch(() => undefined);
      }
      options?.onProgress?.({ file: name, loaded: bytes.byteLength, total: bytes.byteLength });
      return bytes;
    },
    async open(name, options) {
      const { handle, size, readRange } = await openChecked(name, options);
      let loaded = 0;
      return {
        size,
        async readRange(start, end) {
          checkRange(name, size, start, end);
          const bytes = await readRange(start, end);
          if (bytes.byteLength < end - start)
            checkRange(name, start + bytes.byteLength, start, end);
          loaded += bytes.byteLength;
          options?.onProgress?.({ file: name, loaded: Math.min(loaded, size), total: size });
          return bytes;
        },
        async close() {
          await handle.close().catch(() => undefined);
        },
      };
    },
    async list() {
      const { fs } = await load();
      try {
        const entries = await fs.readdir(folder, { recursive: true, withFileTypes: true });
        return entries
          .filter((e) => e.isFile())
          .map((e) => {
            const dir = (e as { parentPath?: string; path?: string }).parentPath ?? e.path ?? '';
            const rel = dir.startsWith(folder) ? dir.slice(folder.length) : '';
            return normalise(`${rel}/${e.name}`);
          })
          .sort();
      } catch (err) {
        throw new ModelSourceError(
          folder,
          `could not list the folder: ${err instanceof Error ? err.message : String(err)}`,
          'io',
        );
      }
    },
  };
}

type PathModule = typeof import('node:path');

function isInside(path: PathModule, root: string, target: string): boolean {
  const rel = path.relative(root, target);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * The Hugging Face hub cache keeps a snapshot's files as links to ../../blobs/<sha256>
 * (models--org--name/snapshots/<rev>/config.json → ../../blobs/…): those stay inside the model's
 * own cache folder, so they are read like files of the snapshot.
 */
function isHubCacheBlob(path: PathModule, root: string, target: string): boolean {
  if (path.basename(path.dirname(root)) !== 'snapshots') return false;
  const blobs = path.join(path.dirname(path.dirname(root)), 'blobs');
  return path.dirname(target) === blobs;
}

// ---------------------------------------------------------------------------------------------
// Browser files: picker, <input webkitdirectory>, drag and drop

/** The parts of `File` we use (so tests can pass Node's `File` and apps can pass Blobs with names). */
export interface NamedBlob {
  name: string;
  size: number;
  arrayBuffer(): Promise<ArrayBuffer>;
  /** Blob.slice: a byte range read without reading the file (a streamed weight load uses it). */
  slice?(start: number, end: number): { arrayBuffer(): Promise<ArrayBuffer> };
  webkitRelativePath?: string;
}

/**
 * Files picked by the user. With <input webkitdirectory> every file carries 'folder/config.json'
 * in webkitRelativePath; the common top folder is dropped so names match what loaders ask for.
 */
export function filesSource(
  files: Iterable<NamedBlob> | ArrayLike<NamedBlob>,
  label = 'selected files',
): ModelSource {
  const list = Array.from(files as ArrayLike<NamedBlob>);
  const paths = list.map((f) => normalise(f.webkitRelativePath || f.name));
  const tops = new Set(paths.map((p) => (p.includes('/') ? p.split('/')[0] : '')));
  const stripTop = tops.size === 1 && !tops.has('');
  const byName = new Map<string, NamedBlob>();
  list.forEach((f, i) => {
    const p = stripTop ? paths[i].slice(paths[i].indexOf('/') + 1) : paths[i];
    byName.set(p, f);
  });
  const find = (name: string, options: ReadOptions | undefined) => {
    refuseUnsafe(name, `the ${label}`);
    const file = byName.get(normalise(name));
    if (!file) {
      throw new ModelSourceError(
        name,
        `not among the ${label} (${[...byName.keys()].join(', ') || 'none'}); select the whole model folder`,
        'missing',
      );
    }
    if (overLimit(file.size, options)) throw tooLarge(name, file.size, options);
    return file;
  };
  const ioError = (name: string, err: unknown) =>
    new ModelSourceError(
      name,
      `could not read the file: ${err instanceof Error ? err.message : String(err)}`,
      'io',
    );
  return {
    label,
    async open(name, options) {
      const file = find(name, options);
      if (!file.slice) return bytesRangedFile(await this.read(name, options));
      const size = file.size;
      let loaded = 0;
      return {
        size,
        async readRange(start, end) {
          checkRange(name, size, start, end);
          let bytes: Uint8Array;
          try {
            bytes = new Uint8Array(await file.slice!(start, end).arrayBuffer());
          } catch (err) {
            throw ioError(name, err);
          }
          if (bytes.byteLength < end - start)
            checkRange(name, start + bytes.byteLength, start, end);
          loaded += bytes.byteLength;
          options?.onProgress?.({ file: name, loaded: Math.min(loaded, size), total: size });
          return bytes;
        },
        async close() {},
      };
    },
    async read(name, options) {
      const file = find(name, options);
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await file.arrayBuffer());
      } catch (err) {
        throw ioError(name, err);
      }
      options?.onProgress?.({ file: name, loaded: bytes.byteLength, total: file.size });
      return bytes;
    },
    async list() {
      return [...byName.keys()].sort();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// URL base

export const MODEL_CACHE_NAME = 'grpo-playground-models-v1';

export interface UrlSourceOptions {
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Cache API cache for offline reuse; false turns caching off. Default MODEL_CACHE_NAME. */
  cacheName?: string | false;
}

/**
 * An HTML page where a model file was expected: a `/blob/` (web view) URL instead of `/resolve/`,
 * a login page, a dev server's index.html fallback for a missing file. The u64 test keeps a real
 * safetensors file whose header length happens to start with byte '<' from being mistaken for one.
 */
function looksLikeHtml(bytes: Uint8Array, contentType: string | null): boolean {
  if (contentType && /^\s*text\/html/i.test(contentType)) return true;
  let i = 0;
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) i = 3;
  while (
    i < bytes.length &&
    (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09)
  )
    i++;
  if (bytes[i] !== 0x3c) return false;
  if (i > 0 || bytes.length < 8) return true;
  const asHeaderLength = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  return asHeaderLength > BigInt(bytes.length);
}

async function readBody(
  response: Response,
  name: string,
  options: ReadOptions | undefined,
): Promise<Uint8Array> {
  const onProgress = options?.onProgress;
  const lengthHeader = response.headers.get('content-length');
  const total = lengthHeader !== null && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : null;
  if (total !== null && overLimit(total, options)) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge(name, total, options);
  }
  if (!response.body) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (overLimit(bytes.byteLength, options)) throw tooLarge(name, bytes.byteLength, options);
    onProgress?.({ file: name, loaded: bytes.byteLength, total });
    return bytes;
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    loaded += value.byteLength;
    // A server that sends no (or a false) Content-Length is stopped at the limit, not at EOF.
    if (overLimit(loaded, options)) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(name, loaded, options);
    }
    chunks.push(value);
    onProgress?.({ file: name, loaded, total });
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(loaded);
  let pos = 0;
  for (const c of chunks) {
    out.set(c, pos);
    pos += c.byteLength;
  }
  return out;
}

/**
 * Files under a URL base, e.g. 'https://huggingface.co/HuggingFaceTB/SmolLM2-135M/resolve/main/'
 * or '/models/tiny/' on the app's own server.
 */
export function urlSource(base: string, options: UrlSourceOptions = {}): ModelSource {
  const root = base.endsWith('/') ? base : `${base}/`;
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  const cacheName = options.cacheName ?? MODEL_CACHE_NAME;
  const openCache = async (): Promise<Cache | null> => {
    if (cacheName === false || typeof caches === 'undefined') return null;
    try {
      return await caches.open(cacheName);
    } catch {
      return null; // Cache API refused (opaque origin, private mode): just don't cache.
    }
  };
  const blobHint = /\/blob\//.test(root)
    ? ' (a Hugging Face "/blob/" URL is the web page; use "/resolve/" instead)'
    : '';
  const urlOf = (name: string) => {
    refuseUnsafe(name, root);
    const rootUrl = new URL(root, globalThis.location?.href);
    const url = new URL(normalise(name), rootUrl).href;
    // Belt and braces after unsafeFileName: whatever the URL parser makes of the name, the file
    // must be on the same origin and under the base path.
    if (!url.startsWith(rootUrl.href) || new URL(url).origin !== rootUrl.origin) {
      throw new ModelSourceError(
        name,
        `refused: it resolves to ${url}, outside the model's base URL ${rootUrl.href}`,
        'refused',
      );
    }
    return url;
  };
  const htmlError = (url: string, name: string) =>
    new ModelSourceError(
      url,
      `the server returned an HTML page instead of ${name}${blobHint}; ` +
        `the URL must point at the raw file`,
      'html',
    );
  /** Bytes [start, end) by an HTTP Range request; null when the server sends the whole file. */
  const fetchRange = async (url: string, start: number, end: number) => {
    let response: Response;
    try {
      response = await doFetch(url, { headers: { range: `bytes=${start}-${end - 1}` } });
    } catch (err) {
      throw new ModelSourceError(
        url,
        `could not fetch (${err instanceof Error ? err.message : String(err)})`,
        'network',
      );
    }
    if (response.status !== 206) {
      await response.body?.cancel().catch(() => undefined);
      return null;
    }
    const total = /\/(\d+)\s*$/.exec(response.headers.get('content-range') ?? '');
    const bytes = new Uint8Array(await response.arrayBuffer());
    return {
      bytes,
      size: total ? Number(total[1]) : null,
      contentType: response.headers.get('content-type'),
    };
  };
  return {
    label: root,
    /**
     * Ranged reads: a file in the Cache is read by Blob slices; without a cache (Node, or
     * cacheName false) a server that answers Range requests (206) is read range by range; any
     * other case reads the whole file once as read() does (and caches it), then serves ranges
     * from memory: the first download of a URL model with the cache on is not bounded.
     */
    async open(name, opts) {
      const url = urlOf(name);
      const cache = await openCache();
      /** The cached copy, read by Blob slices (a browser keeps it on disk); null when absent. */
      const fromCache = async (c: Cache, progress = opts): Promise<RangedFile | null> => {
        const hit = await c.match(url).catch(() => undefined);
        if (!hit || hit.status === 404) return null;
        const blob = await hit.blob();
        if (overLimit(blob.size, opts)) throw tooLarge(name, blob.size, opts);
        const head = new Uint8Array(await blob.slice(0, 8).arrayBuffer());
        if (looksLikeHtml(head, hit.headers.get('content-type'))) return null;
        const file = { name, size: blob.size, arrayBuffer: () => blob.arrayBuffer() };
        const sliced = { ...file, slice: (a: number, b: number) => blob.slice(a, b) };
        return filesSource([sliced], root).open!(name, progress);
      };
      if (cache) {
        const cached = await fromCache(cache);
        if (cached) return cached;
        // Downloaded whole once into the cache (as read() does, with its progress), then read from
        // the cached copy, so the downloaded bytes are not kept; if the cache refused them, from
        // memory. The download already reported the file's bytes: the reads report nothing more.
        const bytes = await this.read(name, opts);
        const quiet = { ...opts, onProgress: undefined };
        return (await fromCache(cache, quiet).catch(() => null)) ?? bytesRangedFile(bytes);
      }
      const probe = await fetchRange(url, 0, 8).catch(() => null);
      if (
        probe === null ||
        probe.size === null ||
        probe.bytes.byteLength !== Math.min(8, probe.size)
      ) {
        return bytesRangedFile(await this.read(name, opts));
      }
      if (looksLikeHtml(probe.bytes, probe.contentType)) throw htmlError(url, name);
      const size = probe.size;
      if (overLimit(size, opts)) throw tooLarge(name, size, opts);
      let loaded = 0;
      return {
        size,
        async readRange(start, end) {
          checkRange(name, size, start, end);
          if (start === end) return new Uint8Array(0);
          const got = await fetchRange(url, start, end);
          if (got === null || got.bytes.byteLength !== end - start) {
            throw new ModelSourceError(
              url,
              `the server did not answer the byte range [${start}, ${end}) it answered before (did the file change?)`,
              'network',
            );
          }
          loaded += got.bytes.byteLength;
          opts?.onProgress?.({ file: name, loaded: Math.min(loaded, size), total: size });
          return got.bytes;
        },
        async close() {},
      };
    },
    async read(name, opts) {
      const url = urlOf(name);
      const cache = await openCache();
      // A cached file is served without the network; a cached 404 (an optional file the folder
      // lacks) is only believed when the network is down, so a file added later is still found.
      let knownMissing = false;
      if (cache) {
        const hit = await cache.match(url).catch(() => undefined);
        if (hit && hit.status === 404) knownMissing = true;
        else if (hit) {
          const bytes = await readBody(hit, name, opts);
          if (!looksLikeHtml(bytes, hit.headers.get('content-type'))) return bytes;
        }
      }
      let response: Response;
      try {
        response = await doFetch(url);
      } catch (err) {
        if (knownMissing) {
          throw new ModelSourceError(url, 'no such file (cached answer while offline)', 'missing');
        }
        throw new ModelSourceError(
          url,
          `could not fetch (${err instanceof Error ? err.message : String(err)}); ` +
            `check the URL, your connection, and that the server allows cross-origin requests (CORS)`,
          'network',
        );
      }
      if (!response.ok) {
        const missing = response.status === 404 || response.status === 410;
        if (missing && cache) {
          await cache.put(url, new Response(null, { status: 404 })).catch(() => undefined);
        }
        throw new ModelSourceError(
          url,
          `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}` +
            (missing ? ': no such file at this URL' : '') +
            (response.status === 401 || response.status === 403
              ? ': the model may be gated or private (download it and load the folder instead)'
              : ''),
          missing ? 'missing' : 'http',
        );
      }
      let bytes: Uint8Array;
      try {
        bytes = await readBody(response, name, opts);
      } catch (err) {
        if (err instanceof ModelSourceError) throw err;
        throw new ModelSourceError(
          url,
          `download interrupted (${err instanceof Error ? err.message : String(err)})`,
          'network',
        );
      }
      const contentType = response.headers.get('content-type');
      if (looksLikeHtml(bytes, contentType)) throw htmlError(url, name);
      if (cache) {
        const headers = contentType ? { 'content-type': contentType } : undefined;
        // Quota errors only cost the offline copy, never the load.
        await cache
          .put(url, new Response(bytes.slice().buffer, { headers }))
          .catch(() => undefined);
      }
      return bytes;
    },
    async list() {
      return null;
    },
  };
}
