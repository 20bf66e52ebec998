// Number and byte formatting for people, shared by every layer (memory plan messages, storage
// errors, the CLI and the page), so one value reads the same wherever it is shown.

/** What every view prints for a value that is missing (null, NaN, not computed at a step). */
export const MISSING = '—';

/**
 * How formatNumber lays a value out:
 * - 'compact' (metric legends and tables): integers as integers, one decimal from 100 on;
 * - 'fixed' (Learn mode's worked formulas): always `digits` decimals so columns line up, a
 *   typographic minus, and f64 rounding residue (|v| < 1e-12) shown as ≈ 0.
 */
export type NumberStyle = 'compact' | 'fixed';

/** A number for people: fixed decimals in ordinary ranges, an exponent for tiny or huge values. */
export function formatNumber(
  v: number | null | undefined,
  digits = 3,
  style: NumberStyle = 'compact',
): string {
  if (v === null || v === undefined || Number.isNaN(v)) return MISSING;
  if (!Number.isFinite(v)) return v > 0 ? '∞' : '−∞';
  if (v === 0) return '0';
  const a = Math.abs(v);
  const ordinary = a >= 1e-3 && a < 1e5;
  if (style === 'compact') {
    if (!ordinary) return v.toExponential(2);
    if (Number.isInteger(v)) return String(v);
    return v.toFixed(a >= 100 ? 1 : digits);
  }
  if (a < 1e-12) return '≈ 0';
  const s = ordinary ? v.toFixed(digits) : v.toExponential(Math.max(1, digits - 1));
  return s.replace(/^-/, '−');
}

/** Bytes in binary units: 512 B, 1.50 KiB, 12.3 MiB, 256 MiB. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return MISSING;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[u]}`;
}
