// Dispatch geometry: ceil division and splitting of grids that exceed the per-dimension limit.

/** WebGPU's guaranteed maxComputeWorkgroupsPerDimension; devices may allow more, never less. */
export const MAX_WORKGROUPS_PER_DIM = 65535;

export const ceilDiv = (n: number, d: number) => Math.floor((n + d - 1) / d);

/**
 * Lays `totalWorkgroups` out as a 2-D grid (x, y, 1) with x ≤ maxPerDim. Kernels recover the flat
 * workgroup index as `wid.x + wid.y * nwg.x` (`@builtin(num_workgroups) nwg`) and guard the tail,
 * because x·y may exceed the total.
 */
export function splitGrid(
  totalWorkgroups: number,
  maxPerDim = MAX_WORKGROUPS_PER_DIM,
): [number, number, number] {
  if (!Number.isInteger(totalWorkgroups) || totalWorkgroups < 0) {
    throw new RangeError(`workgroup count must be a non-negative integer, got ${totalWorkgroups}`);
  }
  if (totalWorkgroups <= maxPerDim) return [totalWorkgroups, 1, 1];
  const y = ceilDiv(totalWorkgroups, maxPerDim);
  if (y > maxPerDim)
    throw new RangeError(
      `grid of ${totalWorkgroups} workgroups exceeds ${maxPerDim}² per dispatch`,
    );
  return [ceilDiv(totalWorkgroups, y), y, 1];
}

/** 1-D elementwise dispatch: one thread per element, `workgroupSize` threads per workgroup. */
export function dispatch1D(
  pass: GPUComputePassEncoder,
  elements: number,
  workgroupSize: number,
): void {
  const [x, y, z] = splitGrid(ceilDiv(elements, workgroupSize));
  if (x > 0) pass.dispatchWorkgroups(x, y, z);
}

/**
 * Threads for a workgroup that reduces a row of `extent` elements: the next power of two ≥ extent,
 * between 32 and `maxSize`. Idle threads are not free: on CPU emulation (SwiftShader) every
 * invocation and barrier costs time, and on GPUs they waste occupancy, so a 32-wide row should
 * not get 256 threads. Kernels take the result both as their WG override and for dispatch.
 */
export function reductionWorkgroupSize(extent: number, maxSize = 256): number {
  let size = 32;
  while (size < extent && size < maxSize) size *= 2;
  return size;
}
