// The Wilson score interval of a binomial proportion: what Compare shows around each rate (k right
// out of n). Unlike the normal approximation p ± z·√(p(1−p)/n), it stays inside [0, 1] and is not
// empty at 0/n or n/n, which matter here: a handful of held-out prompts, rates near 0 or 1.

/** z for a two-sided 95% interval (the 0.975 quantile of the standard normal). */
export const Z95 = 1.959963984540054;

export interface Interval {
  low: number;
  high: number;
}

/**
 * Wilson score interval for `successes` out of `trials` at normal quantile `z`:
 *   centre = (p + z²/2n) / (1 + z²/n),  half = z/(1 + z²/n) · √(p(1−p)/n + z²/4n²).
 * trials = 0 gives [0, 1] (nothing measured, nothing ruled out).
 */
export function wilsonInterval(successes: number, trials: number, z = Z95): Interval {
  if (!(Number.isInteger(successes) && Number.isInteger(trials)) || trials < 0)
    throw new RangeError(`wilsonInterval: counts must be integers ≥ 0, got ${successes}/${trials}`);
  if (successes < 0 || successes > trials)
    throw new RangeError(`wilsonInterval: ${successes} successes out of ${trials} trials`);
  if (trials === 0) return { low: 0, high: 1 };
  const n = trials;
  const p = successes / n;
  const z2 = z * z;
  const denom = 1 + z2 / n;
  const centre = (p + z2 / (2 * n)) / denom;
  const half = (z / denom) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  // At 0/n and n/n the bound is exactly 0 or 1; rounding must not push it past.
  return {
    low: successes === 0 ? 0 : Math.max(0, centre - half),
    high: successes === n ? 1 : Math.min(1, centre + half),
  };
}
