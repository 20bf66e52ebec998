// Time and count formatting for the playground, plus the ETA estimate shown while training (numbers
// and bytes: src/core/format.ts).

import { MISSING } from '../../core/format';

/** 0.4 s, 12 s, 3 min 05 s, 2 h 10 min. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return MISSING;
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
