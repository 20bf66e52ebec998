// Uniform blocks of one submission, packed into shared buffers: while engine.run records a command
// encoder, each kernel's `struct Params` goes into the next 256-byte slot of that encoder's arena
// (a CPU copy), and just before the submit the used bytes go to the GPU in one queue.writeBuffer
// per 64 KiB chunk. Before, every dispatch made a uniform buffer of its own, created mapped: on a
// GPU a buffer object (and on a discrete GPU a staging copy), in a browser an IPC round of
// shared memory, and a garbage-collected wrapper everywhere (the aha preset's step made about
// 4,850 of them).
//
// The chunks are the device's and every arena reuses them from the first slot. That is safe
// without waiting for earlier submissions: queue.writeBuffer is ordered on the queue timeline, so
// a write issued after submit(A) reaches the buffer only after A's commands have read it, and each
// arena's writes are issued right before its own submit. A kernel encoded into an encoder that
// engine.run did not open (tests, benchmarks' own encoders) gets a buffer of its own as before.

import { writeBuffer } from './buffers';

/** Bytes per chunk buffer. */
const CHUNK_BYTES = 64 * 1024;
/** The largest `struct Params` a slot holds (16 words; the largest today has 15). */
export const MAX_UNIFORM_BYTES = 256;

export const UNIFORM_USAGE = 0x0040 | 0x0008; // UNIFORM | COPY_DST (GPUBufferUsage)

interface Arena {
  device: GPUDevice;
  /** Slot stride: the device's uniform offset alignment (256 on every adapter seen), at least
   * MAX_UNIFORM_BYTES. */
  stride: number;
  /** The CPU copy of every slot written so far, in slot order. */
  bytes: Uint8Array;
  slots: number;
}

const arenas = new WeakMap<GPUCommandEncoder, Arena>();
const chunksOf = new WeakMap<GPUDevice, GPUBuffer[]>();

/** Starts packing the uniform blocks recorded into `encoder` (engine.run calls this). */
export function openUniformArena(device: GPUDevice, encoder: GPUCommandEncoder): void {
  const alignment = device.limits.minUniformBufferOffsetAlignment ?? 256;
  const stride = Math.max(MAX_UNIFORM_BYTES, alignment);
  arenas.set(encoder, { device, stride, bytes: new Uint8Array(16 * stride), slots: 0 });
}

/** The device's chunk `index`, made on first use. */
function chunk(device: GPUDevice, index: number): GPUBuffer {
  let chunks = chunksOf.get(device);
  if (!chunks) chunksOf.set(device, (chunks = []));
  while (chunks.length <= index) {
    chunks.push(
      device.createBuffer({
        size: CHUNK_BYTES,
        usage: UNIFORM_USAGE,
        label: `uniform-arena.${chunks.length}`,
      }),
    );
  }
  return chunks[index];
}

/**
 * A slot of `encoder`'s arena holding `block`, as a binding; null when engine.run did not open
 * one for this encoder (the caller then makes a buffer of its own).
 */
export function arenaSlot(encoder: GPUCommandEncoder, block: ArrayBuffer): GPUBufferBinding | null {
  const arena = arenas.get(encoder);
  if (!arena) return null;
  if (block.byteLength > MAX_UNIFORM_BYTES) {
    throw new RangeError(`a uniform block of ${block.byteLength} bytes exceeds a slot`);
  }
  const { stride } = arena;
  const perChunk = Math.floor(CHUNK_BYTES / stride);
  const slot = arena.slots++;
  const at = slot * stride;
  if (at + stride > arena.bytes.length) {
    const grown = new Uint8Array(arena.bytes.length * 2);
    grown.set(arena.bytes);
    arena.bytes = grown;
  }
  arena.bytes.set(new Uint8Array(block), at);
  return {
    buffer: chunk(arena.device, Math.floor(slot / perChunk)),
    offset: (slot % perChunk) * stride,
    size: block.byteLength,
  };
}

/**
 * Writes `encoder`'s packed blocks to their chunks and closes its arena. Called right before the
 * encoder's submit, with nothing awaited in between (see the header for why that is the rule).
 */
export function flushUniformArena(encoder: GPUCommandEncoder): void {
  const arena = arenas.get(encoder);
  if (!arena) return;
  arenas.delete(encoder);
  const { device, stride, bytes, slots } = arena;
  const perChunk = Math.floor(CHUNK_BYTES / stride);
  for (let first = 0; first < slots; first += perChunk) {
    const count = Math.min(perChunk, slots - first);
    // The last slot needs only its block, but writing whole slots keeps one call per chunk.
    const used = bytes.subarray(first * stride, (first + count) * stride);
    writeBuffer(device, chunk(device, first / perChunk), used);
  }
}

/** Drops `encoder`'s arena without writing it (its recording failed). */
export function discardUniformArena(encoder: GPUCommandEncoder): void {
  arenas.delete(encoder);
}
