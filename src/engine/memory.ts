// Byte accounting of GPU storage buffers: the engine wraps its device's createBuffer so that every
// storage buffer, whoever creates it, is counted while it lives. Tests and the memory plan compare
// against these counts (a step that leaks shows up as live bytes that do not come back).
// Uniform blocks (a few words each, left to the garbage collector) and readback staging buffers
// (destroyed at once) are not storage buffers and are not counted.
import { createStorageBuffer } from './buffers';

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

// Per-call scratch that every call of one kernel shares within a run (split-K and row-split
// partials): one buffer per role, reused by each call after the first instead of one new buffer
// per call. Each call writes every word it later reads in its own passes, and passes run in
// encoding order, so a later call overwriting the buffer cannot reach an earlier call's reads.
// Without it a submission that decodes several tokens, or a training step's backward, held one
// buffer per product until the run ended: on an H100 the GPU path's LoRA step at Qwen2.5-0.5B's
// shape peaked 227 MB (16%) above the memory plan that way (bench/results/2026-11-27-nvidia-h100.json).
const runScratches = new WeakMap<GPUDevice, Map<string, GPUBuffer>>();

/**
 * A scratch buffer of at least `bytes` for `role` (a kernel's name for its partials), shared by
 * every call of that role encoded until engine.run's work is done. A larger request replaces it;
 * the smaller one stays alive (transient) until then, as work encoded earlier still reads it.
 */
export function runScratch(device: GPUDevice, role: string, bytes: number): GPUBuffer {
  let roles = runScratches.get(device);
  if (!roles) runScratches.set(device, (roles = new Map()));
  const held = roles.get(role);
  if (held && held.size >= bytes) return held;
  if (held) transient(device, held);
  const buffer = createStorageBuffer(device, bytes, role);
  roles.set(role, buffer);
  return buffer;
}

/** Destroys every transient buffer of `device` and its run scratch (engine.run calls this when
 * its work is done). */
export function releaseTransients(device: GPUDevice): void {
  const roles = runScratches.get(device);
  if (roles) {
    runScratches.delete(device);
    for (const buffer of roles.values()) buffer.destroy();
  }
  const list = transients.get(device);
  if (!list) return;
  transients.delete(device);
  for (const buffer of list) buffer.destroy();
}
