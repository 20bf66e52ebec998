// GPU buffer helpers: create, upload and read back storage buffers (uniform blocks: uniforms.ts).
// Sizes are rounded up to 4 bytes because WebGPU copies and bindings need 4-byte multiples.

export const STORAGE = 0x0080 | 0x0008 | 0x0004; // STORAGE | COPY_DST | COPY_SRC (GPUBufferUsage)
const MAP_READ_USAGE = 0x0001 | 0x0008; // MAP_READ | COPY_DST
const MAP_READ = 0x0001; // GPUMapMode.READ

const align4 = (n: number) => Math.max(4, Math.ceil(n / 4) * 4);

/** A zero-initialised storage buffer (WebGPU guarantees zero fill). */
export function createStorageBuffer(
  device: GPUDevice,
  byteLength: number,
  label?: string,
): GPUBuffer {
  return device.createBuffer({ size: align4(byteLength), usage: STORAGE, label });
}

/** A storage buffer holding `data`. */
export function uploadStorageBuffer(
  device: GPUDevice,
  data: ArrayBufferView,
  label?: string,
): GPUBuffer {
  const buffer = device.createBuffer({
    size: align4(data.byteLength),
    usage: STORAGE,
    label,
    mappedAtCreation: true,
  });
  new Uint8Array(buffer.getMappedRange()).set(
    new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  );
  buffer.unmap();
  return buffer;
}

/** Copies `byteLength` bytes of `source` to the CPU. One staging buffer, one submit, one map. */
export async function readBuffer(
  device: GPUDevice,
  source: GPUBuffer,
  byteLength = source.size,
): Promise<ArrayBuffer> {
  const size = align4(byteLength);
  const staging = device.createBuffer({ size, usage: MAP_READ_USAGE, label: 'readback' });
  const encoder = device.createCommandEncoder({ label: 'readback' });
  encoder.copyBufferToBuffer(source, 0, staging, 0, size);
  device.queue.submit([encoder.finish()]);
  try {
    await staging.mapAsync(MAP_READ);
    return staging.getMappedRange().slice(0, byteLength);
  } finally {
    staging.destroy();
  }
}

/** A byte range of a GPU buffer to copy back to the CPU. */
export interface ReadRange {
  buffer: GPUBuffer;
  /** Byte offset (a multiple of 4). Default 0. */
  offset?: number;
  bytes: number;
}

/**
 * Encodes copies of `ranges` into one staging buffer (each at a 4-byte-aligned offset); take()
 * maps it, the one CPU wait for all of them, once the encoder's submission is made, and returns
 * each range's bytes in order.
 */
export function encodeReadback(
  device: GPUDevice,
  encoder: GPUCommandEncoder,
  ranges: readonly ReadRange[],
  label = 'readback',
): { take(): Promise<ArrayBuffer[]>; destroy(): void } {
  const at: number[] = [];
  let size = 0;
  for (const r of ranges) {
    at.push(size);
    size += align4(r.bytes);
  }
  const staging = size > 0 ? device.createBuffer({ size, usage: MAP_READ_USAGE, label }) : null;
  if (staging) {
    ranges.forEach((r, i) =>
      encoder.copyBufferToBuffer(r.buffer, r.offset ?? 0, staging, at[i], align4(r.bytes)),
    );
  }
  return {
    async take() {
      if (!staging) {
        await device.queue.onSubmittedWorkDone(); // nothing to map: still the submission's wait
        return ranges.map(() => new ArrayBuffer(0));
      }
      await staging.mapAsync(MAP_READ);
      const mapped = staging.getMappedRange();
      return ranges.map((r, i) => mapped.slice(at[i], at[i] + r.bytes));
    },
    destroy: () => staging?.destroy(),
  };
}

/** Staging bytes per submission of readRanges (a range larger than this goes alone). */
export const READBACK_BATCH_BYTES = 64 * 2 ** 20;

/**
 * The bytes of every range, in order: as few submissions and CPU waits as staging buffers of at
 * most READBACK_BATCH_BYTES allow (a checkpoint reads hundreds of tensors: one wait per tensor
 * was one round trip each).
 */
export async function readRanges(
  device: GPUDevice,
  ranges: readonly ReadRange[],
  maxBytes = READBACK_BATCH_BYTES,
): Promise<ArrayBuffer[]> {
  const out: ArrayBuffer[] = [];
  for (let i = 0; i < ranges.length;) {
    let bytes = align4(ranges[i].bytes);
    let j = i + 1;
    while (j < ranges.length && bytes + align4(ranges[j].bytes) <= maxBytes)
      bytes += align4(ranges[j++].bytes);
    const batch = ranges.slice(i, j);
    const encoder = device.createCommandEncoder({ label: 'readback' });
    const readback = encodeReadback(device, encoder, batch);
    device.queue.submit([encoder.finish()]);
    try {
      out.push(...(await readback.take()));
    } finally {
      readback.destroy();
    }
    i = j;
  }
  return out;
}

export async function readF32(
  device: GPUDevice,
  source: GPUBuffer,
  length?: number,
): Promise<Float32Array> {
  return new Float32Array(
    await readBuffer(device, source, length === undefined ? source.size : length * 4),
  );
}

export async function readU32(
  device: GPUDevice,
  source: GPUBuffer,
  length?: number,
): Promise<Uint32Array> {
  return new Uint32Array(
    await readBuffer(device, source, length === undefined ? source.size : length * 4),
  );
}

/** queue.writeBuffer for any typed array (TS types reject views over ArrayBufferLike). */
export function writeBuffer(
  device: GPUDevice,
  buffer: GPUBuffer,
  data: ArrayBufferView,
  bufferOffset = 0,
): void {
  device.queue.writeBuffer(
    buffer,
    bufferOffset,
    data.buffer as ArrayBuffer,
    data.byteOffset,
    data.byteLength,
  );
}
