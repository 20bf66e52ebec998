// Named scratch buffers reused across steps: a training step asks for the same activations every
// time, so allocating them once (and growing only when a shape grows) keeps the step loop free of
// buffer churn. Queue order makes reuse safe: a later submit sees the earlier one's writes.
import { createStorageBuffer } from './buffers';

export class Workspace {
  private readonly buffers = new Map<string, GPUBuffer>();

  constructor(private readonly device: GPUDevice) {}

  /** A storage buffer of at least `byteLength` bytes, kept under `name` for later calls. */
  get(name: string, byteLength: number): GPUBuffer {
    const existing = this.buffers.get(name);
    if (existing && existing.size >= byteLength) return existing;
    existing?.destroy();
    const buffer = createStorageBuffer(this.device, byteLength, name);
    this.buffers.set(name, buffer);
    return buffer;
  }

  /** Same as get(), zero-filled (by a clear on `encoder`, in queue order). */
  zeroed(encoder: GPUCommandEncoder, name: string, byteLength: number): GPUBuffer {
    const buffer = this.get(name, byteLength);
    encoder.clearBuffer(buffer, 0, Math.ceil(byteLength / 4) * 4);
    return buffer;
  }

  /** Bytes currently held. */
  get byteLength(): number {
    let total = 0;
    for (const buffer of this.buffers.values()) total += buffer.size;
    return total;
  }

  destroy(): void {
    for (const buffer of this.buffers.values()) buffer.destroy();
    this.buffers.clear();
  }
}
