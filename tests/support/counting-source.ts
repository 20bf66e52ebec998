// A ModelSource wrapper that counts the bytes it hands a loader and which of them are still live
// (tests of the streamed load's host memory: tests/unit/streamed-load.test.ts,
// tests/kernels/streamed-load.test.ts).
import type { ModelSource, RangedFile } from '../../src/formats/model-source';

/**
 * `source` with every buffer it hands out counted as live until released: a tensor's buffer when
 * the consumer releases that tensor, everything else (headers, JSON) when the folder is open.
 * `ranged: false` hides open(), so the loader must read each shard whole.
 */
export function counting(source: ModelSource, ranged = true) {
  const live = new Map<ArrayBufferLike, number>();
  let liveBytes = 0;
  let peak = 0;
  let handedOut = 0;
  const take = (bytes: Uint8Array) => {
    live.set(bytes.buffer, (live.get(bytes.buffer) ?? 0) + bytes.byteLength);
    liveBytes += bytes.byteLength;
    handedOut += bytes.byteLength;
    peak = Math.max(peak, liveBytes);
    return bytes;
  };
  const release = (buffer: ArrayBufferLike) => {
    liveBytes -= live.get(buffer) ?? 0;
    live.delete(buffer);
  };
  const wrapped: ModelSource = {
    label: source.label,
    list: () => source.list(),
    read: async (name, options) => take(await source.read(name, options)),
    open: ranged
      ? async (name, options) => {
          const file = await source.open!(name, options);
          const out: RangedFile = {
            size: file.size,
            readRange: async (start, end) => take(await file.readRange(start, end)),
            close: () => file.close(),
          };
          return out;
        }
      : undefined,
  };
  return {
    source: wrapped,
    release,
    releaseAll: () => [...live.keys()].forEach(release),
    get peak() {
      return peak;
    },
    get handedOut() {
      return handedOut;
    },
  };
}
