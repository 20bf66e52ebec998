// Counter-based RNG shared bit-exactly by the CPU and the GPU: Philox-4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11; the Random123 / cuRAND generator).
// A draw is a pure function of (seed, sequence, step), so sampling is reproducible, resumable from a
// checkpoint, and independent of batch layout. shaders/sample.wgsl mirrors philox4x32 and
// uniformFromBits line for line; the 32×32→64 multiply is built from 16-bit halves because WGSL
// has no mulhi (the same decomposition is used here so both sides share one definition).

const PHILOX_M0 = 0xd2511f53;
const PHILOX_M1 = 0xcd9e8d57;
const PHILOX_W0 = 0x9e3779b9;
const PHILOX_W1 = 0xbb67ae85;

/** High 32 bits of the 64-bit product of two u32. */
export function mulhi32(a: number, b: number): number {
  const aLo = a & 0xffff;
  const aHi = a >>> 16;
  const bLo = b & 0xffff;
  const bHi = b >>> 16;
  const loLo = aLo * bLo;
  const loHi = aLo * bHi;
  const hiLo = aHi * bLo;
  const hiHi = aHi * bHi;
  const cross = (loLo >>> 16) + (loHi & 0xffff) + (hiLo & 0xffff);
  return (hiHi + (loHi >>> 16) + (hiLo >>> 16) + (cross >>> 16)) >>> 0;
}

/** Philox-4x32 with 10 rounds: four u32 outputs from a 4×u32 counter and a 2×u32 key. */
export function philox4x32(counter: ArrayLike<number>, key: ArrayLike<number>): Uint32Array {
  let c0 = counter[0] >>> 0;
  let c1 = counter[1] >>> 0;
  let c2 = counter[2] >>> 0;
  let c3 = counter[3] >>> 0;
  let k0 = key[0] >>> 0;
  let k1 = key[1] >>> 0;
  for (let round = 0; round < 10; round++) {
    const hi0 = mulhi32(PHILOX_M0, c0);
    const lo0 = Math.imul(PHILOX_M0, c0) >>> 0;
    const hi1 = mulhi32(PHILOX_M1, c2);
    const lo1 = Math.imul(PHILOX_M1, c2) >>> 0;
    c0 = (hi1 ^ c1 ^ k0) >>> 0;
    c1 = lo1;
    c2 = (hi0 ^ c3 ^ k1) >>> 0;
    c3 = lo0;
    k0 = (k0 + PHILOX_W0) >>> 0;
    k1 = (k1 + PHILOX_W1) >>> 0;
  }
  return Uint32Array.of(c0, c1, c2, c3);
}

/** A uniform in [0, 1) from 24 random bits: exactly representable in f32, identical on the GPU. */
export function uniformFromBits(bits: number): number {
  return (bits >>> 8) * 2 ** -24;
}

/** The key words of a seed (an integer below 2^53: low and high 32 bits). */
export function seedKey(seed: number): [number, number] {
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new RangeError(`RNG seed must be a non-negative safe integer, got ${seed}`);
  }
  return [seed >>> 0, Math.floor(seed / 2 ** 32) >>> 0];
}

/**
 * The sampling uniform of one sequence at one decode step: Philox counter (step, sequence, 0, 0)
 * under key seedKey(seed), first output word.
 */
export function sampleUniform(seed: number, sequence: number, step: number): number {
  return uniformFromBits(philox4x32([step, sequence, 0, 0], seedKey(seed))[0]);
}
