// Host-memory helpers of the benchmarks that load whole model shapes (bench/node/nf4.ts,
// bench/node/recipe-memory.ts): a model folder of random BF16 weights written tensor by tensor
// (never the whole model in memory), and host memory sampled around a piece of work (RSS and
// ArrayBuffer bytes, peaks above the sample taken before).
import { closeSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { numel, parameterSpecs, type LlamaConfig } from '../../src/core/model-config';

/**
 * Writes `config`'s tensors as random BF16 values (N(0, 0.02²)-like: uniform of the same spread;
 * norms 1, biases 0) to `dir`/model.safetensors, tensor by tensor in slices of 1 Mi values, so the
 * writer holds one slice, never a tensor or the model. Returns the file's bytes.
 */
export function writeRandomBf16Folder(
  dir: string,
  json: Record<string, unknown>,
  config: LlamaConfig,
) {
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...json, torch_dtype: 'bfloat16' }));
  const specs = parameterSpecs(config);
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const spec of specs) {
    const bytes = numel(spec.shape) * 2;
    header[spec.name] = {
      dtype: 'BF16',
      shape: spec.shape,
      data_offsets: [offset, offset + bytes],
    };
    offset += bytes;
  }
  let headerText = JSON.stringify(header);
  headerText += ' '.repeat((8 - (Buffer.byteLength(headerText) % 8)) % 8);
  const headerBytes = Buffer.from(headerText);
  const fd = openSync(join(dir, 'model.safetensors'), 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(headerBytes.length));
    writeSync(fd, len);
    writeSync(fd, headerBytes);
    const SLICE = 2 ** 20;
    const bits = new Uint16Array(SLICE);
    // xorshift32: fast, seeded; uniform on ±0.02·√3 has the spread of N(0, 0.02²).
    let s = 0x9e3779b9;
    const spread = 0.02 * Math.sqrt(3);
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    for (const spec of specs) {
      const n = numel(spec.shape);
      const fill = spec.name.endsWith('norm.weight') ? 1 : spec.name.endsWith('.bias') ? 0 : null;
      for (let start = 0; start < n; start += SLICE) {
        const m = Math.min(SLICE, n - start);
        for (let i = 0; i < m; i++) {
          if (fill === null) {
            s ^= s << 13;
            s ^= s >>> 17;
            s ^= s << 5;
            f32[0] = ((s >>> 0) / 2 ** 32 - 0.5) * 2 * spread;
          } else f32[0] = fill;
          // Round to nearest even bf16.
          const w = u32[0];
          bits[i] = (w + 0x7fff + ((w >>> 16) & 1)) >>> 16;
        }
        writeSync(fd, new Uint8Array(bits.buffer, 0, m * 2));
      }
    }
  } finally {
    closeSync(fd);
  }
  return 8 + headerBytes.length + offset;
}

export interface HostSample {
  rss: number;
  arrayBuffers: number;
  heapUsed: number;
}
const sample = (): HostSample => {
  const m = process.memoryUsage();
  return { rss: m.rss, arrayBuffers: m.arrayBuffers, heapUsed: m.heapUsed };
};

/** Runs `work` while sampling host memory every 20 ms; peaks above the sample taken before. */
export async function sampled<T>(work: () => Promise<T>) {
  const before = sample();
  const peak = { ...before };
  const take = () => {
    const now = sample();
    peak.rss = Math.max(peak.rss, now.rss);
    peak.arrayBuffers = Math.max(peak.arrayBuffers, now.arrayBuffers);
    peak.heapUsed = Math.max(peak.heapUsed, now.heapUsed);
  };
  const timer = setInterval(take, 20);
  const t0 = performance.now();
  try {
    const result = await work();
    take();
    return {
      result,
      seconds: (performance.now() - t0) / 1000,
      before,
      peak,
      rssAboveBaseline: peak.rss - before.rss,
      arrayBuffersAboveBaseline: peak.arrayBuffers - before.arrayBuffers,
    };
  } finally {
    clearInterval(timer);
  }
}
