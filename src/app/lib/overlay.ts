// The Train charts' overlay: a chart's live series plus the same metrics of another run (or the
// Aha reference), dashed and in a faint version of each live series' colour, so the solid live
// lines stand out and each pair reads as one metric. Pure; TrainView passes what this returns to LineChart.
import type { ChartSeries } from '../teach/plot';
import type { MetricsRow } from '../../worker/types';

/** Longest run name a legend key shows before an ellipsis (the phone's legend wraps by key). */
export const OVERLAY_TAG_MAX = 18;

/** A run's name as a chart legend's key suffix. */
export function overlayTag(name: string): string {
  const t = name.trim();
  return t.length > OVERLAY_TAG_MAX ? `${t.slice(0, OVERLAY_TAG_MAX - 1)}…` : t;
}

/**
 * `live[k]` charts metric `keys[k]`. With an overlay, each metric the overlay has (some finite
 * value) gets a second series after the live ones: '<label> · <tag or name>', dashed, the live
 * series' palette colour at 55%. Live series keep their default colours (the palette by index).
 */
export function withOverlay(
  live: ChartSeries[],
  keys: readonly string[],
  overlay: { name: string; tag?: string; rows: readonly MetricsRow[] } | null,
): ChartSeries[] {
  if (!overlay) return live;
  const tag = overlay.tag ?? overlayTag(overlay.name);
  const extra: ChartSeries[] = [];
  keys.forEach((key, k) => {
    const points = overlay.rows.map((r) => ({ x: r.step, y: r.metrics[key] ?? NaN }));
    if (!points.some((p) => Number.isFinite(p.y))) return;
    const colour = live[k]?.color ?? `var(--series-${(k % 6) + 1})`;
    extra.push({
      label: `${live[k]?.label ?? key} · ${tag}`,
      points,
      color: `color-mix(in srgb, ${colour} 55%, transparent)`,
      dashed: true,
      overlay: true,
    });
  });
  return [...live, ...extra];
}
