// Byte accounting of GPU storage buffers: the engine wraps its device's createBuffer so that every
// storage buffer, whoever creates it, is counted while it lives. Tests and the memory plan compare
// against these counts (a step that leaks shows up as live bytes that do not come back).
// Uniform blocks (a few words each, left to the garbage collector) and readback staging buffers
// (destroyed at once) are not storage buffers and are not counted.
const STORAGE_USAGE = 0x0080; // GPUBufferUsage.STORAGE

export class GpuMemory {
  /** Bytes of storage buffers created and not yet destroyed. */
  liveBytes = 0;
  /** How many such buffers. */
  liveBuffers = 0;
  /** The largest liveBytes seen since creation or the last resetPeak(). */
  peakBytes = 0;

  resetPeak(): void {
    this.peakBytes = this.liveBytes;
  }

  allocated(bytes: number): void {
    this.liveBytes += bytes;
    this.liveBuffers += 1;
    this.peakBytes = Math.max(this.peakBytes, this.liveBytes);
  }

  freed(bytes: number): void {
    this.liveBytes -= bytes;
    this.liveBuffers -= 1;
  }
}

// One tracker per device: engines that share a device (tests' tuned engines) share its count.
const trackers = new WeakMap<GPUDevice, GpuMemory>();

/** The device's tracker, installing the createBuffer / destroy wrappers on first use. */
export function trackMemory(device: GPUDevice): GpuMemory {
  let memory = trackers.get(device);
  if (memory) return memory;
  const tracker = (memory = new GpuMemory());
  trackers.set(device, tracker);
  const create = device.createBuffer.bind(device);
  device.createBuffer = (descriptor: GPUBufferDescriptor): GPUBuffer => {
    const buffer = create(descriptor);
    if (!(descriptor.usage & STORAGE_USAGE)) return buffer;
    const size = buffer.size;
    tracker.allocated(size);
    const destroy = buffer.destroy.bind(buffer);
    let live = true;
    // destroy() may be called more than once (WebGPU allows it); count the first only.
    buffer.destroy = () => {
      if (live) {
        live = false;
        tracker.freed(size);
      }
      destroy();
    };
    return buffer;
  };
  return memory;
}

// Scratch buffers that only the commands being encoded need (a kernel's per-call index or partial
// sums): destroyed when the engine.run that encodes them has finished, or failed, so a step
// neither waits for the garbage collector nor leaks when it throws.
const transients = new WeakMap<GPUDevice, GPUBuffer[]>();

/**
 * Marks `buffer` as scratch of the submission being encoded and returns it. engine.run destroys
 * it once that submission is done; a kernel encoded outside engine.run leaves it to the next run
 * on the device (or to the garbage collector).
 */
export function transient(device: GPUDevice, buffer: GPUBuffer): GPUBuffer {
  const list = transients.get(device);
  if (list) list.push(buffer);
  else transients.set(device, [buffer]);
  return buffer;
}

/** Destroys every transient buffer of `device` (engine.run calls this when its work is done). */
export function releaseTransients(device: GPUDevice): void {
  const list = transients.get(device);
  if (!list) return;
  transients.delete(device);
  for (const buffer of list) buffer.destroy();
}
