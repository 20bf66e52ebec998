// A small seeded PRNG for task generation (mulberry32): the same seed gives the same problems on
// every platform, in the browser, in Node and in the exported TRL dataset.

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number;
  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T;
  /** Fisher–Yates shuffle of a copy. */
  shuffle<T>(items: readonly T[]): T[];
}

/** Folds any number (negative, fractional, > 2^32) into a 32-bit seed deterministically. */
export function seed32(seed: number): number {
  if (!Number.isFinite(seed)) throw new RangeError(`seed must be finite, got ${seed}`);
  const hi = Math.floor(seed / 0x1_0000_0000);
  return (Math.trunc(seed) ^ Math.imul(hi, 0x9e3779b1)) >>> 0;
}

/** Mixes two 32-bit values into one (for derived streams such as "epoch e of seed s"). */
export function mixSeeds(a: number, b: number): number {
  let h = Math.imul(seed32(a) ^ 0x85ebca6b, 0xc2b2ae35) >>> 0;
  h = Math.imul(h ^ (h >>> 16) ^ seed32(b), 0x27d4eb2f) >>> 0;
  return (h ^ (h >>> 15)) >>> 0;
}

/**
 * The raw mulberry32 stream: uniforms in [0, 1) from a 32-bit state (`seed >>> 0`). Tests use it
 * directly for seeded inputs; createRng adds seed folding and the integer/array helpers.
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function createRng(seed: number): Rng {
  const next = mulberry32(seed32(seed));
  const int = (lo: number, hi: number): number => {
    if (!Number.isInteger(lo) || !Number.isInteger(hi) || hi < lo) {
      throw new RangeError(`rng.int needs integers lo ≤ hi, got ${lo}, ${hi}`);
    }
    return lo + Math.floor(next() * (hi - lo + 1));
  };
  return {
    next,
    int,
    pick: <T>(items: readonly T[]): T => {
      if (items.length === 0) throw new RangeError('rng.pick on an empty array');
      return items[int(0, items.length - 1)];
    },
    shuffle: <T>(items: readonly T[]): T[] => {
      const out = items.slice();
      for (let i = out.length - 1; i > 0; i--) {
        const j = int(0, i);
        [out[i], out[j]] = [out[j], out[i]];
      }
      return out;
    },
  };
}
