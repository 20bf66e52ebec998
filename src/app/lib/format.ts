// Number, size and time formatting for the playground, plus the ETA estimate shown while training.

/** A metric value for a table or tooltip: fixed precision near 1, exponent for tiny or huge. */
export function formatValue(v: number | null | undefined, digits = 3): string {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (!Number.isFinite(v)) return v > 0 ? '∞' : '−∞';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(2);
  if (Number.isInteger(v)) return String(v);
  return v.toFixed(a >= 100 ? 1 : digits);
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[u]}`;
}

/** 0.4 s, 12 s, 3 min 05 s, 2 h 10 min. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '–';
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.round(s - m * 60)).padStart(2, '0')} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${String(m - h * 60).padStart(2, '0')} min`;
}

/** Steps kept for the time-per-step average: recent enough to follow a change of settings. */
export const ETA_WINDOW = 10;

/**
 * Mean time of the last ETA_WINDOW steps and the estimated time for `remaining` more steps, or
 * nulls before the first step.
 */
export function estimate(
  stepMs: readonly number[],
  remaining: number,
): { perStepMs: number | null; etaMs: number | null } {
  const recent = stepMs.slice(-ETA_WINDOW).filter((t) => Number.isFinite(t) && t >= 0);
  if (recent.length === 0) return { perStepMs: null, etaMs: null };
  const perStepMs = recent.reduce((a, b) => a + b, 0) / recent.length;
  return { perStepMs, etaMs: perStepMs * Math.max(0, remaining) };
}

export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}
