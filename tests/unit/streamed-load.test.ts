// Streamed model loading (issue #37, bounded host memory): a BF16 model of a few MB in two shards
// on disk, one tensor (the embedding, 2 MiB) known to be the largest, opened with openHfFolder
// and read tensor by tensor through a ModelSource that counts every byte it hands the loader.
// The loader's live bytes peak at the largest tensor as stored plus a fixed margin (headers,
// config.json); the same count over a source that can only read whole files exceeds that bound,
// so the measure would catch a whole-shard read. process.memoryUsage().arrayBuffers around the
// load is printed as a second measure. Also: the identity hashed on the way (incremental SHA-256)
// equals weightsIdentity of the whole-model Map, so checkpoints stored against it still match.
// bitsandbytes 4-bit folders (tests/fixtures/bnb4bit, make_bnb_folder.py): the reader gives NF4
// tensors whose dequantised values are the fixture's (bitsandbytes') bit for bit; a GPTQ folder is
// refused by name before any weight byte is read.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, describe, expect, it } from 'vitest';
import { numel, parameterSpecs, parseHfConfig } from '../../src/core/model-config';
import { Sha256 } from '../../src/core/sha256';
import { ModelFileError } from '../../src/formats/errors';
import { loadHfFolder, openHfFolder, readWeights, storedToF32 } from '../../src/formats/hf-folder';
import { folderSource, urlSource } from '../../src/formats/model-source';
import { counting } from '../support/counting-source';
import { parseSafetensors, writeSafetensors } from '../../src/formats/safetensors';
import type { HalfTensor } from '../../src/ref/half';
import { frozenDtypeOf } from '../../src/model/parameters';
import { checkQuantisedBase } from '../../src/train/run';
import { weightsIdentity, weightsIdentityHasher } from '../../src/train/checkpoint';

/** What the loader may hold besides one tensor: shard headers and config.json (a few KB here). */
const MARGIN_BYTES = 64 * 1024;

const configJson = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 64,
  intermediate_size: 256,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  vocab_size: 16384,
  max_position_embeddings: 64,
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  tie_word_embeddings: true,
  bos_token_id: 1,
  eos_token_id: 2,
};
const config = parseHfConfig(configJson);
const EMBED = 'model.embed_tokens.weight';

const dir = mkdtempSync(join(tmpdir(), 'streamed-load-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
{
  let s = 7;
  const weights = parameterSpecs(config).map((spec) => {
    const data = new Float32Array(numel(spec.shape));
    for (let i = 0; i < data.length; i++) {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      data[i] = ((s % 255) - 127) / 64; // exact in bf16
    }
    return { name: spec.name, shape: spec.shape, data };
  });
  // Shard 0: the embedding and layers 0–1; shard 1: the rest (each well over the margin).
  const inFirst = (name: string) => name === EMBED || /layers\.[01]\./.test(name);
  const shards = [weights.filter((w) => inFirst(w.name)), weights.filter((w) => !inFirst(w.name))];
  const files = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
  shards.forEach((tensors, i) =>
    writeFileSync(join(dir, files[i]), writeSafetensors(tensors, undefined, { dtype: 'BF16' })),
  );
  const weightMap = Object.fromEntries(shards.flatMap((t, i) => t.map((w) => [w.name, files[i]])));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(configJson));
  writeFileSync(
    join(dir, 'model.safetensors.index.json'),
    JSON.stringify({ weight_map: weightMap }),
  );
}

// A collectable heap between samples, so arrayBuffers shows what is held, not garbage.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const arrayBufferBytes = () => {
  gc();
  return process.memoryUsage().arrayBuffers;
};

/** Opens the folder through `meter` and reads every tensor in name order as an upload does. */
async function streamAll(meter: ReturnType<typeof counting>, sampleArrays = true) {
  const before = arrayBufferBytes();
  let arrayPeak = 0;
  const { weights } = await openHfFolder(meter.source, { requireTokenizer: false });
  meter.releaseAll(); // headers and JSON: parsed, no longer referenced by the loader
  const hasher = weightsIdentityHasher('m');
  const names = weights.specs.map((s) => s.name).sort();
  for (const name of names) {
    const data = await weights.read(name);
    // Sampled with the tensor held (a collection first, so garbage of earlier ones is not counted).
    if (sampleArrays) arrayPeak = Math.max(arrayPeak, arrayBufferBytes() - before);
    // The consumer's own work (hashing the f32 values) is not the loader's memory.
    hasher.add(name, storedToF32(data));
    // The buffer the source handed out (bf16 here: its 16-bit values).
    meter.release(data instanceof Float32Array ? data.buffer : (data as HalfTensor).bits.buffer);
  }
  await weights.close();
  return { weights, identity: hasher.finish(), arrayPeak };
}

describe('streamed load in bounded host memory', () => {
  it('holds at most the largest tensor as stored plus a fixed margin', async () => {
    const meter = counting(folderSource(dir));
    const { weights, identity, arrayPeak } = await streamAll(meter);
    const largest = numel([config.vocabSize, config.hiddenSize]) * 2;
    expect(weights.largestTensorBytes).toBe(largest);
    expect(weights.storedDtypes.get(EMBED)).toBe('BF16');
    const totalWeightBytes = parameterSpecs(config).reduce((n, s) => n + numel(s.shape) * 2, 0);
    // Every tensor byte was read once, and nothing more than headers besides.
    expect(meter.handedOut).toBeGreaterThanOrEqual(totalWeightBytes);
    expect(meter.handedOut).toBeLessThan(totalWeightBytes + MARGIN_BYTES);
    expect(meter.peak).toBeLessThanOrEqual(largest + MARGIN_BYTES);

    // The same measure over whole-file reads: the first shard alone exceeds the bound.
    const whole = counting(folderSource(dir), false);
    const wholeRun = await streamAll(whole, false);
    expect(whole.peak).toBeGreaterThan(largest + MARGIN_BYTES);
    expect(wholeRun.identity).toEqual(identity);

    // The identity hashed on the way is the one the whole-model Map gives (stored checkpoints).
    const loaded = await loadHfFolder(folderSource(dir), { requireTokenizer: false });
    expect(identity).toEqual(await weightsIdentity('m', loaded.tensors));

    console.log(
      `streamed load: model ${totalWeightBytes} B (BF16, 2 shards), largest tensor ${largest} B; ` +
        `loader live peak ${meter.peak} B (bound ${largest + MARGIN_BYTES}); whole-shard reads ` +
        `peak ${whole.peak} B; process arrayBuffers peak above its start: ${arrayPeak} B`,
    );
  });

  it('reads a URL model by HTTP Range requests when the server answers them', async () => {
    // A local server with byte ranges (206 + Content-Range), as the Hugging Face hub serves files.
    const answers: number[] = [];
    const server = createServer((req, res) => {
      const name = decodeURIComponent(new URL(req.url!, 'http://x').pathname.slice(1));
      let bytes: Buffer;
      try {
        bytes = readFileSync(join(dir, name));
      } catch {
        res.writeHead(404).end();
        return;
      }
      const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (!range) {
        answers.push(200);
        res.writeHead(200, { 'content-length': String(bytes.length) }).end(bytes);
        return;
      }
      const [start, end] = [Number(range[1]), Math.min(Number(range[2]), bytes.length - 1)];
      answers.push(206);
      res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${bytes.length}` });
      res.end(bytes.subarray(start, end + 1));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const meter = counting(urlSource(base, { cacheName: false }));
      const { weights, identity } = await streamAll(meter, false);
      expect(meter.peak).toBeLessThanOrEqual(weights.largestTensorBytes + MARGIN_BYTES);
      const loaded = await loadHfFolder(folderSource(dir), { requireTokenizer: false });
      expect(identity).toEqual(await weightsIdentity('m', loaded.tensors));
      // Only the JSON files came whole; every weight byte came by range.
      expect(answers.filter((a) => a === 200).length).toBeLessThanOrEqual(3);
      expect(answers.filter((a) => a === 206).length).toBeGreaterThan(
        parameterSpecs(config).length,
      );
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
  });

  it('incremental SHA-256 matches node:crypto, fed in uneven pieces', () => {
    for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 100_000]) {
      const bytes = new Uint8Array(n).map((_, i) => (i * 31 + 7) & 255);
      const hash = new Sha256();
      for (let i = 0, step = 1; i < n; i += step, step = ((step * 3) % 97) + 1) {
        hash.update(bytes.subarray(i, i + step));
      }
      expect(hash.hex(), `${n} bytes`).toBe(createHash('sha256').update(bytes).digest('hex'));
    }
  });
});

describe('bitsandbytes 4-bit folders through the streamed loader', () => {
  const fixtures = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/bnb4bit');

  for (const name of ['nf4', 'nf4-nested']) {
    it(`${name}: projections read as NF4, dequantised bit for bit as bitsandbytes`, async () => {
      const folder = join(fixtures, name);
      const { config, weights } = await openHfFolder(folderSource(folder));
      expect(weights.quantization?.method).toBe('bitsandbytes-nf4');
      expect(weights.quantization?.nested).toBe(name === 'nf4-nested');
      const expected = parseSafetensors(
        new Uint8Array(readFileSync(join(folder, 'expected_dequantized.safetensors'))),
        'expected_dequantized.safetensors',
      ).tensors;
      expect(expected.size).toBe(7 * config.numLayers);
      for (const [key, want] of expected) {
        expect(weights.storedDtypes.get(key)).toBe('NF4');
        const t = await weights.read(key);
        expect(!(t instanceof Float32Array) && t.format).toBe('nf4');
        expect(storedToF32(t)).toEqual(want.data);
      }
      // The statistics entries are part of their weights, not unused tensors.
      expect(weights.ignoredTensors).toEqual([]);
      // A run's weights as stored: dtype 'auto' keeps NF4, and a full fine-tune is refused.
      const stored = await readWeights(weights, 'stored');
      expect(frozenDtypeOf('auto', config, stored)).toBe('nf4');
      expect(() => checkQuantisedBase({ usePeft: false }, stored)).toThrow(/usePeft/);
      await weights.close();
      // The f32 load (CPU reference, exports) gets the dequantised values.
      const loaded = await loadHfFolder(folderSource(folder));
      for (const [key, want] of expected) expect(loaded.tensors.get(key)).toEqual(want.data);
      expect(loaded.storedDtypes.get('model.layers.0.self_attn.q_proj.weight')).toBe('NF4');
    });
  }

  it('another quantisation config is refused by name before any weight byte is read', async () => {
    const meter = counting(folderSource(join(fixtures, 'gptq')));
    const err = await openHfFolder(meter.source).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModelFileError);
    expect((err as Error).message).toMatch(
      /^config\.json: quantization_config\.quant_method 'gptq' \(GPTQ\) is not supported/,
    );
    // Only config.json was read.
    expect(meter.handedOut).toBe(readFileSync(join(fixtures, 'gptq/config.json')).byteLength);
  });
});
