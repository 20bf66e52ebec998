// Loading Hugging Face model folders: tiny folders built from bytes in the test (F32, F16, BF16,
// sharded, tied embeddings), from File objects, a disk folder and a local HTTP server; one test per
// bad input asserting the message.
import { execFileSync } from 'node:child_process';
import {
  mkdtempSync,
  readFileSync,
  rmSync,
  mkdirSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHfFolder, MAX_JSON_FILE_BYTES, maxWeightFileBytes } from '../../src/formats/hf-folder';
import {
  filesSource,
  folderSource,
  urlSource,
  type ModelSource,
} from '../../src/formats/model-source';
import { writeSafetensors, type SafetensorsDtype } from '../../src/formats/safetensors';
import { ModelFileError, ModelSourceError } from '../../src/formats/errors';
import { ModelConfigError, parseHfConfig } from '../../src/core/model-config';
import { lcgWeights, tinyLlamaConfigJson } from '../support/llama-fixture';

const enc = new TextEncoder();
const json = (v: unknown) => enc.encode(JSON.stringify(v));

const llamaConfigJson = tinyLlamaConfigJson({ hidden: 8, intermediate: 12, vocab: 272 });
const qwenConfigJson = {
  ...llamaConfigJson,
  architectures: ['Qwen2ForCausalLM'],
  model_type: 'qwen2',
  tie_word_embeddings: true,
};

/** Values k/64 with |k| < 1024 are exact in F32, F16 and BF16, so every dtype must load them exactly. */
function weightsFor(configJson: Record<string, unknown>, seed = 1) {
  return lcgWeights(parseHfConfig(configJson), seed);
}

const tokenizerDir = 'tests/fixtures/tiny-tokenizer';
const tokenizerFiles = {
  'tokenizer.json': new Uint8Array(readFileSync(`${tokenizerDir}/tokenizer.json`)),
  'tokenizer_config.json': new Uint8Array(readFileSync(`${tokenizerDir}/tokenizer_config.json`)),
};

function folder(
  configJson: Record<string, unknown>,
  options: { dtype?: SafetensorsDtype; extra?: boolean; omitTokenizer?: boolean } = {},
) {
  const weights = weightsFor(configJson);
  const stored = [...weights];
  if (options.extra) {
    stored.push({
      name: 'model.layers.0.self_attn.rotary_emb.inv_freq',
      shape: [2],
      data: Float32Array.from([1, 0.01]),
    });
  }
  const files: Record<string, Uint8Array> = {
    'config.json': json(configJson),
    'generation_config.json': json({ eos_token_id: [2, 0], temperature: 0.7, do_sample: true }),
    'model.safetensors': writeSafetensors(stored, { format: 'pt' }, { dtype: options.dtype }),
    ...(options.omitTokenizer ? {} : tokenizerFiles),
  };
  return { files, weights };
}

const asFiles = (files: Record<string, Uint8Array>, prefix = '') =>
  filesSource(
    Object.entries(files).map(([name, bytes]) => {
      const f = new File([bytes.slice()], name.split('/').pop()!);
      if (prefix) Object.defineProperty(f, 'webkitRelativePath', { value: prefix + name });
      return f;
    }),
  );

function expectExact(actual: Map<string, Float32Array>, expected: ReturnType<typeof weightsFor>) {
  expect([...actual.keys()]).toEqual(expected.map((w) => w.name));
  for (const w of expected) expect(actual.get(w.name)).toEqual(w.data);
}

async function errorOf(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the load to fail');
}

describe('loadHfFolder: good folders', () => {
  for (const dtype of ['F32', 'F16', 'BF16'] as const) {
    it(`loads a ${dtype} Llama folder exactly, with generation defaults and tokenizer files`, async () => {
      const { files, weights } = folder(llamaConfigJson, { dtype, extra: true });
      const model = await loadHfFolder(asFiles(files));
      expect(model.config.architecture).toBe('LlamaForCausalLM');
      expect(model.config.numKvHeads).toBe(1);
      expectExact(model.tensors, weights);
      expect(model.storedDtypes.get('lm_head.weight')).toBe(dtype);
      expect(model.ignoredTensors).toEqual(['model.layers.0.self_attn.rotary_emb.inv_freq']);
      expect(model.generation.eosTokenIds).toEqual([2, 0]);
      expect(model.generation.temperature).toBe(0.7);
      expect(model.generation.doSample).toBe(true);
      expect([...model.tokenizerFiles.keys()]).toEqual(['tokenizer.json', 'tokenizer_config.json']);
      expect(model.tokenizerFiles.get('tokenizer.json')).toEqual(tokenizerFiles['tokenizer.json']);
    });
  }

  it('loads a sharded folder (index + shards in different dtypes) from a picked directory', async () => {
    const weights = weightsFor(llamaConfigJson, 7);
    const half = Math.ceil(weights.length / 2);
    const shards = [weights.slice(0, half), weights.slice(half)];
    const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
    const weightMap = Object.fromEntries(
      shards.flatMap((shard, i) => shard.map((w) => [w.name, names[i]])),
    );
    const files = {
      'config.json': json(llamaConfigJson),
      'model.safetensors.index.json': json({ metadata: { total_size: 0 }, weight_map: weightMap }),
      [names[0]]: writeSafetensors(shards[0], undefined, { dtype: 'BF16' }),
      [names[1]]: writeSafetensors(shards[1]),
      ...tokenizerFiles,
    };
    const progress: string[] = [];
    // <input webkitdirectory> gives 'SmolTest/config.json': the top folder must be stripped.
    const model = await loadHfFolder(asFiles(files, 'SmolTest/'), {
      onProgress: (p) => progress.push(`${p.phase}:${p.file}`),
    });
    expectExact(model.tensors, weights);
    expect(model.storedDtypes.get('model.embed_tokens.weight')).toBe('BF16');
    expect(model.storedDtypes.get('lm_head.weight')).toBe('F32');
    expect(model.generation.eosTokenIds).toEqual([2]); // no generation_config.json: config.json's
    expect(progress).toContain(`weights:${names[1]}`);
    expect(progress).toContain('config:config.json');
  });

  it('Qwen2 with tied embeddings: q/k/v biases required, a stored lm_head ignored', async () => {
    const { files, weights } = folder(qwenConfigJson);
    expect(weights.some((w) => w.name === 'model.layers.1.self_attn.k_proj.bias')).toBe(true);
    expect(weights.some((w) => w.name === 'lm_head.weight')).toBe(false);
    const model = await loadHfFolder(asFiles(files));
    expect(model.config.tieWordEmbeddings).toBe(true);
    expectExact(model.tensors, weights);
    const withHead = [
      ...weights,
      { name: 'lm_head.weight', shape: [272, 8], data: new Float32Array(272 * 8) },
    ];
    files['model.safetensors'] = writeSafetensors(withHead);
    const again = await loadHfFolder(asFiles(files));
    expect(again.tensors.has('lm_head.weight')).toBe(false);
    expect(again.ignoredTensors).toEqual(['lm_head.weight']);
  });

  it('loads from a folder on disk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hf-folder-'));
    try {
      const { files, weights } = folder(llamaConfigJson, { dtype: 'F16' });
      for (const [name, bytes] of Object.entries(files)) writeFileSync(join(dir, name), bytes);
      mkdirSync(join(dir, 'onnx'));
      writeFileSync(join(dir, 'onnx', 'model.onnx'), new Uint8Array(4));
      const source = folderSource(dir);
      expect(await source.list()).toEqual([...Object.keys(files), 'onnx/model.onnx'].sort());
      const model = await loadHfFolder(source);
      expectExact(model.tensors, weights);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('loadHfFolder: bad folders name the file and tensor', () => {
  it('tensor missing', async () => {
    const { files, weights } = folder(llamaConfigJson);
    files['model.safetensors'] = writeSafetensors(
      weights.filter((w) => w.name !== 'model.layers.1.mlp.up_proj.weight'),
    );
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toBe(
      "model.safetensors (tensor 'model.layers.1.mlp.up_proj.weight'): tensor missing: config.json " +
        '(LlamaForCausalLM, 2 layers) needs it with shape [12, 8]',
    );
  });

  it('shape disagreeing with config.json', async () => {
    const { files } = folder(llamaConfigJson);
    // A config claiming 2 kv-heads while the file has k_proj for 1.
    files['config.json'] = json({ ...llamaConfigJson, num_key_value_heads: 2 });
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toBe(
      "model.safetensors (tensor 'model.layers.0.self_attn.k_proj.weight'): shape [4, 8] disagrees " +
        'with config.json, which implies [8, 8] (num_key_value_heads=2 × head_dim=4, hidden_size=8)',
    );
  });

  it('unsupported architecture', async () => {
    const { files } = folder(llamaConfigJson);
    files['config.json'] = json({
      ...llamaConfigJson,
      architectures: ['GPT2LMHeadModel'],
      model_type: 'gpt2',
    });
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err).toBeInstanceOf(ModelConfigError);
    expect(err.message).toContain(
      `config.json: unsupported architecture "GPT2LMHeadModel" (model_type 'gpt2')`,
    );
  });

  it('missing tokenizer (checked before any weights are read)', async () => {
    const { files } = folder(llamaConfigJson, { omitTokenizer: true });
    files['tokenizer.model'] = new Uint8Array(8);
    delete files['model.safetensors'];
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toMatch(
      /^tokenizer\.json: missing from selected files: the model needs its tokenizer .*tokenizer\.model \(sentencepiece\) alone is not supported/,
    );
    // Without the requirement, the same folder fails on the weights instead.
    const weightsErr = await errorOf(loadHfFolder(asFiles(files), { requireTokenizer: false }));
    expect(weightsErr.message).toMatch(/^model\.safetensors: missing from selected files/);
  });

  it('missing config.json', async () => {
    const { files } = folder(llamaConfigJson);
    delete files['config.json'];
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err.message).toMatch(/^config\.json: missing from selected files/);
  });

  it('a shard listed in the index but absent', async () => {
    const { files, weights } = folder(llamaConfigJson);
    delete files['model.safetensors'];
    files['model.safetensors.index.json'] = json({
      weight_map: Object.fromEntries(weights.map((w, i) => [w.name, `s${i % 2}.safetensors`])),
    });
    files['s0.safetensors'] = writeSafetensors(weights.filter((_, i) => i % 2 === 0));
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err.message).toBe(
      `s1.safetensors: missing from selected files, but model.safetensors.index.json lists it as a shard`,
    );
  });

  it('pytorch_model.bin only', async () => {
    const { files } = folder(llamaConfigJson);
    delete files['model.safetensors'];
    files['pytorch_model.bin'] = new Uint8Array(4);
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err.message).toContain(
      'found pytorch_model.bin; only safetensors weights can be loaded',
    );
  });
});

describe('loading from a URL (local HTTP server on 127.0.0.1)', () => {
  let server: Server;
  let base = '';
  const { files, weights } = folder(llamaConfigJson, { dtype: 'BF16' });
  beforeAll(async () => {
    server = createServer((req, res) => {
      const path = decodeURIComponent(new URL(req.url!, 'http://x').pathname);
      if (path.startsWith('/broken/')) {
        res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
        return;
      }
      if (path.startsWith('/blob/')) {
        // A web page for every file, as a Hugging Face /blob/ URL gives.
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end('<!doctype html><html><body>model page</body></html>');
        return;
      }
      if (path.startsWith('/spa/')) {
        // A dev server's index.html fallback with a wrong content type: caught by sniffing.
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end('<!DOCTYPE html>\n<html></html>');
        return;
      }
      const name = path.replace(/^\/model\//, '');
      const bytes = files[name];
      if (!path.startsWith('/model/') || !bytes) {
        res.writeHead(404).end('not found');
        return;
      }
      res.writeHead(200, {
        'content-type': name.endsWith('.json') ? 'application/json' : 'application/octet-stream',
        'content-length': String(bytes.length),
      });
      res.end(Buffer.from(bytes));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

  it('loads a folder served over HTTP with progress', async () => {
    const seen = new Map<string, { loaded: number; total: number | null }>();
    const model = await loadHfFolder(urlSource(`${base}/model`, { cacheName: false }), {
      onProgress: (p) => seen.set(p.file, { loaded: p.loaded, total: p.total }),
    });
    expectExact(model.tensors, weights);
    const st = seen.get('model.safetensors')!;
    expect(st.loaded).toBe(files['model.safetensors'].length);
    expect(st.total).toBe(files['model.safetensors'].length);
  });

  it('caches downloads in the Cache API and reuses them offline', async () => {
    // Node has no Cache API: an in-memory stand-in with the two methods the source uses.
    const store = new Map<string, Response>();
    const fakeCaches = {
      open: async () => ({
        match: async (url: string) => store.get(url)?.clone(),
        put: async (url: string, response: Response) => void store.set(url, response),
      }),
    };
    const g = globalThis as { caches?: unknown };
    const saved = g.caches;
    g.caches = fakeCaches;
    let fetches = 0;
    const counting: typeof fetch = (input, init) => {
      fetches++;
      return fetch(input, init);
    };
    try {
      const first = await loadHfFolder(urlSource(`${base}/model/`, { fetch: counting }));
      expect(store.has(`${base}/model/model.safetensors`)).toBe(true);
      const afterFirst = fetches;
      const offline: typeof fetch = () => Promise.reject(new TypeError('offline'));
      const second = await loadHfFolder(urlSource(`${base}/model/`, { fetch: offline }));
      expectExact(second.tensors, weights);
      expect(second.tensors).toEqual(first.tensors);
      expect(afterFirst).toBeGreaterThan(0);
      // An HTML answer is never cached.
      await errorOf(urlSource(`${base}/spa/`, { fetch: counting }).read('config.json'));
      expect(store.has(`${base}/spa/config.json`)).toBe(false);
    } finally {
      g.caches = saved;
    }
  });

  it('a URL that fails (HTTP 500)', async () => {
    const err = await errorOf(loadHfFolder(urlSource(`${base}/broken/`, { cacheName: false })));
    expect(err).toBeInstanceOf(ModelSourceError);
    expect((err as ModelSourceError).reason).toBe('http');
    expect(err.message).toBe(`${base}/broken/config.json: HTTP 500 Internal Server Error`);
  });

  it('a URL nothing answers', async () => {
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const err = await errorOf(
      loadHfFolder(urlSource(`http://127.0.0.1:${port}/m/`, { cacheName: false })),
    );
    expect((err as ModelSourceError).reason).toBe('network');
    expect(err.message).toMatch(
      new RegExp(`^http://127\\.0\\.0\\.1:${port}/m/config\\.json: could not fetch .*CORS`),
    );
  });

  it('a URL that returns HTML (content-type text/html)', async () => {
    const err = await errorOf(loadHfFolder(urlSource(`${base}/blob/main`, { cacheName: false })));
    expect((err as ModelSourceError).reason).toBe('html');
    expect(err.message).toBe(
      `${base}/blob/main/config.json: the server returned an HTML page instead of config.json ` +
        `(a Hugging Face "/blob/" URL is the web page; use "/resolve/" instead); the URL must point at the raw file`,
    );
  });

  it('a URL that returns HTML bytes under a binary content type', async () => {
    const source: ModelSource = urlSource(`${base}/spa/`, { cacheName: false });
    const err = await errorOf(source.read('model.safetensors'));
    expect((err as ModelSourceError).reason).toBe('html');
    expect(err.message).toContain('returned an HTML page instead of model.safetensors');
  });
});

// ---- untrusted folders: names stay inside, sizes stay bounded, values are checked at load ----

/** A model folder on disk inside a parent that also holds files the model must never read. */
function diskFolder(files: Record<string, Uint8Array>) {
  const parent = mkdtempSync(join(tmpdir(), 'hf-contain-'));
  const dir = join(parent, 'model');
  mkdirSync(dir);
  for (const [name, bytes] of Object.entries(files)) writeFileSync(join(dir, name), bytes);
  return { parent, dir };
}

/** A sharded folder whose index points `first tensor`'s shard at `shardName`. */
function indexedFiles(shardName: string) {
  const { files, weights } = folder(llamaConfigJson);
  delete files['model.safetensors'];
  const weightMap = Object.fromEntries(weights.map((w) => [w.name, 'model-1.safetensors']));
  weightMap[weights[0].name] = shardName;
  files['model.safetensors.index.json'] = json({ weight_map: weightMap });
  files['model-1.safetensors'] = writeSafetensors(weights.slice(1));
  return { files, weights, first: weights[0] };
}

describe('shard names from model.safetensors.index.json stay inside the folder', () => {
  const hostile: [string, string][] = [
    ['../outside.safetensors', "it climbs out of the folder ('..')"],
    ['sub/../../outside.safetensors', "it climbs out of the folder ('..')"],
    ['%2e%2e/outside.safetensors', "it climbs out of the folder ('..')"],
    ['/etc/passwd', 'it is an absolute path'],
    ['/proc/self/environ', 'it is an absolute path'],
    ['C:\\Windows\\win.ini', 'it is an absolute path (a drive letter)'],
    ['https://evil.example/x.safetensors', 'it is a URL, not a file name'],
    ['/dev/zero', 'it is an absolute path'],
    ['model-1.bin', 'it is not a .safetensors file'],
  ];
  for (const [shard, why] of hostile) {
    it(`refuses ${JSON.stringify(shard)} before reading anything`, async () => {
      const { files, first } = indexedFiles(shard);
      const { parent, dir } = diskFolder(files);
      // A valid shard right outside the folder: the old loader read it and loaded the model.
      writeFileSync(join(parent, 'outside.safetensors'), writeSafetensors([first]));
      try {
        const err = await errorOf(loadHfFolder(folderSource(dir)));
        expect(err).toBeInstanceOf(ModelFileError);
        expect((err as ModelFileError).file).toBe('model.safetensors.index.json');
        expect((err as ModelFileError).tensor).toBe(first.name);
        expect(err.message).toBe(
          `model.safetensors.index.json (tensor '${first.name}'): weight_map names shard ` +
            `${JSON.stringify(shard)}, which is refused: ${why}; shards must be .safetensors files ` +
            `inside the model folder, named relative to it (e.g. "model-00001-of-00002.safetensors")`,
        );
      } finally {
        rmSync(parent, { recursive: true, force: true });
      }
    });
  }
});

describe('folderSource reads only regular files inside its folder', () => {
  let parent: string;
  let dir: string;
  beforeAll(() => {
    ({ parent, dir } = diskFolder({ 'config.json': json(llamaConfigJson) }));
    writeFileSync(join(parent, 'secret.txt'), 'SECRET=1');
    symlinkSync(join(parent, 'secret.txt'), join(dir, 'link-out.safetensors'));
    symlinkSync('/dev/zero', join(dir, 'zero.safetensors'));
    symlinkSync(join(dir, 'config.json'), join(dir, 'link-in.json'));
    mkdirSync(join(dir, 'sub'));
    execFileSync('mkfifo', [join(dir, 'fifo.safetensors')]);
  });
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  async function refusal(name: string): Promise<ModelSourceError> {
    const err = await errorOf(folderSource(dir).read(name));
    expect(err).toBeInstanceOf(ModelSourceError);
    expect((err as ModelSourceError).reason).toBe('refused');
    return err as ModelSourceError;
  }

  it('refuses names that leave the folder', async () => {
    expect((await refusal('../secret.txt')).message).toBe(
      `../secret.txt: refused: it climbs out of the folder ('..'); only file names inside folder ${dir} can be read`,
    );
    expect((await refusal(join(parent, 'secret.txt'))).message).toContain(
      'refused: it is an absolute path',
    );
  });

  it('refuses a link that points outside, even to a device', async () => {
    expect((await refusal('link-out.safetensors')).message).toBe(
      `link-out.safetensors: refused: it is a link to ${join(parent, 'secret.txt')}, outside folder ${dir}; copy the file into the folder`,
    );
    expect((await refusal('zero.safetensors')).message).toContain(
      'refused: it is a link to /dev/zero, outside folder',
    );
  });

  it('refuses a FIFO and a folder without opening them (a FIFO would block)', async () => {
    expect((await refusal('fifo.safetensors')).message).toBe(
      `fifo.safetensors: refused: ${join(dir, 'fifo.safetensors')} is not a regular file (a folder, device, FIFO or socket)`,
    );
    expect((await refusal('sub')).message).toContain('is not a regular file');
  }, 5000);

  it('reads a link that stays inside, and a Hugging Face hub cache snapshot (links to ../../blobs)', async () => {
    expect(await folderSource(dir).read('link-in.json')).toEqual(json(llamaConfigJson));
    const hub = mkdtempSync(join(tmpdir(), 'hub-'));
    try {
      mkdirSync(join(hub, 'blobs'));
      mkdirSync(join(hub, 'snapshots', 'abc123'), { recursive: true });
      writeFileSync(join(hub, 'blobs', 'f00d'), 'hello');
      symlinkSync('../../blobs/f00d', join(hub, 'snapshots', 'abc123', 'config.json'));
      const bytes = await folderSource(join(hub, 'snapshots', 'abc123')).read('config.json');
      expect(new TextDecoder().decode(bytes)).toBe('hello');
    } finally {
      rmSync(hub, { recursive: true, force: true });
    }
  });

  it('refuses a file larger than the caller allows, before reading it', async () => {
    const err = await errorOf(
      folderSource(dir).read('config.json', { maxBytes: 10, maxBytesReason: 'a test limit' }),
    );
    expect((err as ModelSourceError).reason).toBe('too-large');
    expect(err.message).toBe(
      `config.json: is ${json(llamaConfigJson).length} bytes, more than the 10 bytes allowed (a test limit); is it the right file?`,
    );
  });

  it('a weight file larger than config.json can explain is refused by loadHfFolder (sparse 120 MB file)', async () => {
    const { files } = folder(llamaConfigJson);
    const { parent: p, dir: d } = diskFolder(files);
    try {
      truncateSync(join(d, 'model.safetensors'), 120 * 2 ** 20);
      const config = parseHfConfig(llamaConfigJson);
      const err = await errorOf(loadHfFolder(folderSource(d)));
      expect((err as ModelSourceError).reason).toBe('too-large');
      expect(err.message).toBe(
        `model.safetensors: is ${120 * 2 ** 20} bytes, more than the ${maxWeightFileBytes(config)} bytes ` +
          `allowed (what the tensors config.json describes can take, in F32); is it the right file?`,
      );
    } finally {
      rmSync(p, { recursive: true, force: true });
    }
  });
});

describe('urlSource stays under its base URL and stops endless bodies', () => {
  let server: Server;
  let base = '';
  let served = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const path = new URL(req.url!, 'http://x').pathname;
      if (path === '/secret.json') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"secret":1}');
        return;
      }
      if (path === '/endless/config.json') {
        // No Content-Length, never ends: /dev/zero over HTTP.
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(1 << 16, 0x20);
        const pump = () => {
          while (res.write(chunk)) served += chunk.length;
          if (!res.destroyed) res.once('drain', pump);
        };
        res.on('close', () => res.removeAllListeners('drain'));
        pump();
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((ok) => server.close(() => ok()));
  });

  it('refuses names that resolve outside the base URL or to another origin', async () => {
    const source = urlSource(`${base}/model/`, { cacheName: false });
    for (const [name, why] of [
      ['../secret.json', "it climbs out of the folder ('..')"],
      ['%2e%2e/secret.json', "it climbs out of the folder ('..')"],
      ['/secret.json', 'it is an absolute path'],
      ['//evil.example/x.json', 'it is an absolute path'],
      ['https://evil.example/x.json', 'it is a URL, not a file name'],
    ]) {
      const err = await errorOf(source.read(name));
      expect(err).toBeInstanceOf(ModelSourceError);
      expect((err as ModelSourceError).reason, name).toBe('refused');
      expect(err.message).toBe(
        `${name}: refused: ${why}; only file names inside ${base}/model/ can be read`,
      );
    }
  });

  it('stops reading config.json at the JSON size limit', async () => {
    const err = await errorOf(loadHfFolder(urlSource(`${base}/endless/`, { cacheName: false })));
    expect((err as ModelSourceError).reason).toBe('too-large');
    expect(err.message).toMatch(
      new RegExp(
        `^config\\.json: is \\d+ bytes, more than the ${MAX_JSON_FILE_BYTES} bytes allowed ` +
          `\\(a JSON settings file of a model folder\\); is it the right file\\?$`,
      ),
    );
    expect(served).toBeLessThan(MAX_JSON_FILE_BYTES * 4);
  }, 20_000);
});

describe('config.json bounds every dimension before anything is sized from it', () => {
  const bounded: [string, number, number][] = [
    ['num_hidden_layers', 1e7, 1024],
    ['hidden_size', 1 << 20, 65536],
    ['num_attention_heads', 4096, 1024],
    ['num_key_value_heads', 4096, 1024],
    ['intermediate_size', 1e9, 262144],
    ['vocab_size', 1e9, 4194304],
    ['max_position_embeddings', 1e12, 16777216],
  ];
  for (const [key, value, max] of bounded) {
    it(`${key} = ${value}`, () => {
      const started = performance.now();
      const err = errorOfSync(() => parseHfConfig({ ...llamaConfigJson, [key]: value }));
      expect(performance.now() - started).toBeLessThan(100);
      expect(err).toBeInstanceOf(ModelConfigError);
      expect(err.message).toBe(
        `config.json: '${key}' is ${value}, more than the ${max} this app supports; ` +
          `the file is damaged or not a small Llama-family model`,
      );
    });
  }

  const invalid: [string, Record<string, unknown>, string][] = [
    [
      'hidden_size not divisible by the heads',
      { hidden_size: 10, num_attention_heads: 4, num_key_value_heads: 2 },
      'config.json: head dimension 2.5 must be an even integer (hidden_size 10 / num_attention_heads 4; set ' +
        "'head_dim' or fix them)",
    ],
    [
      'hidden_act gelu',
      { hidden_act: 'gelu' },
      `config.json: 'hidden_act' is "gelu"; only "silu" (SwiGLU) is supported`,
    ],
    [
      'mlp_bias true',
      { mlp_bias: true },
      "config.json: 'mlp_bias' is true; only MLPs without bias are supported (set it to false only if the " +
        'checkpoint really has no MLP bias tensors)',
    ],
    ['rope_theta 0', { rope_theta: 0 }, "config.json: 'rope_theta' must be a number > 0, got 0"],
    [
      'rope_theta negative',
      { rope_theta: -1e4 },
      "config.json: 'rope_theta' must be a number > 0, got -10000",
    ],
    [
      'rms_norm_eps 0',
      { rms_norm_eps: 0 },
      "config.json: 'rms_norm_eps' must be a number > 0, got 0",
    ],
    [
      'rms_norm_eps negative',
      { rms_norm_eps: -1e-6 },
      "config.json: 'rms_norm_eps' must be a number > 0, got -0.000001",
    ],
    [
      'eos_token_id outside vocab_size',
      { eos_token_id: [2, 272] },
      "config.json: 'eos_token_id' has token id 272, outside the vocabulary (vocab_size 272 in config.json allows 0…271)",
    ],
    [
      'bos_token_id negative',
      { bos_token_id: -1 },
      "config.json: 'bos_token_id' must be a token id (an integer ≥ 0) or a list of them, got -1",
    ],
  ];
  for (const [label, edit, message] of invalid) {
    it(label, () => {
      const err = errorOfSync(() => parseHfConfig({ ...llamaConfigJson, ...edit }));
      expect(err).toBeInstanceOf(ModelConfigError);
      expect(err.message).toBe(message);
    });
  }
});

describe('loadHfFolder checks token ids and weight values at load', () => {
  it('an EOS id in generation_config.json outside vocab_size', async () => {
    const { files } = folder(llamaConfigJson);
    files['generation_config.json'] = json({ eos_token_id: [2, 5000] });
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toBe(
      "generation_config.json: 'eos_token_id' has token id 5000, outside the vocabulary (vocab_size 272 in config.json allows 0…271)",
    );
  });

  it('tokenizer ids outside vocab_size (a tokenizer of another model), before any weights', async () => {
    const small = { ...llamaConfigJson, vocab_size: 100, bos_token_id: 1, eos_token_id: 2 };
    const { files } = folder(small);
    delete files['generation_config.json'];
    const vocab = (
      JSON.parse(new TextDecoder().decode(tokenizerFiles['tokenizer.json'])) as {
        model: { vocab: Record<string, number> };
      }
    ).model.vocab;
    const [token, id] = Object.entries(vocab).find(([, i]) => i >= 100)!;
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toBe(
      `tokenizer.json: token ${JSON.stringify(token)} has id ${id}, outside vocab_size 100 of ` +
        `config.json (ids 0…99): the tokenizer does not belong to this model`,
    );
  });

  it('NaN and Inf weights name the tensor and the count', async () => {
    const { files, weights } = folder(llamaConfigJson);
    const bad = weights.map((w) => ({ ...w, data: w.data.slice() }));
    const target = bad.find((w) => w.name === 'model.layers.1.mlp.down_proj.weight')!;
    target.data[0] = NaN;
    target.data[5] = Infinity;
    target.data[7] = -Infinity;
    files['model.safetensors'] = writeSafetensors(bad);
    const err = await errorOf(loadHfFolder(asFiles(files)));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toBe(
      "model.safetensors (tensor 'model.layers.1.mlp.down_proj.weight'): 3 of 96 values are NaN or " +
        'infinite: the checkpoint is damaged (or was saved from a diverged run)',
    );
  });
});

function errorOfSync(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected an error');
}
