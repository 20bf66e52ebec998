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
