// The Train charts' overlays: a chart's live series plus the same metrics of other runs (or the
// Aha reference), dashed, each overlay in a fainter version of each live series' colour and a dash
// pattern of its own, so the solid live lines stand out and each group reads as one metric. Legend
// keys name the runs by distinct short tags (distinctTags): two runs never show the same text, and
// the full name is the key's title. Pure; TrainView passes what this returns to LineChart.
import type { ChartSeries } from '../teach/plot';
import type { MetricsRow } from '../../worker/types';

/** Longest run name a legend key shows (the phone's legend wraps by key). */
export const OVERLAY_TAG_MAX = 18;

/** Dash patterns of the overlays, in order (the live run is solid). */
export const OVERLAY_DASHES = ['5 3', '2 2', '8 3 2 3', '1 3'] as const;
/** Opacity of each overlay's colour, in order: the first overlay stays the easiest to read. */
const OVERLAY_MIX = [55, 45, 38, 32];

/** A run's name as a chart legend's key suffix, cut at the end. */
export function overlayTag(name: string, max = OVERLAY_TAG_MAX): string {
  const t = name.trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** `name` cut to `max` characters around position `at`: its start, an ellipsis, and the text
 * from just before `at` (with a closing ellipsis when more follows). */
function cutAround(name: string, at: number, max: number): string {
  if (name.length <= max) return name;
  const head = Math.max(3, Math.floor(max / 3));
  const room = max - head - 1;
  const from = Math.min(Math.max(at - 2, head), Math.max(head, name.length - room));
  let mid = name.slice(from, from + room);
  if (from + room < name.length) mid = `${mid.slice(0, -1)}…`;
  return `${name.slice(0, head)}…${mid}`;
}

const commonPrefix = (a: string, b: string): number => {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
};

/**
 * Short legend texts for runs, one per run and all different: a name that fits stays whole; names
 * that would cut to the same text show, after their start, the part where each differs from its
 * closest sibling ('countd…lr=3e-5'); the same full name twice gets its date (`when`), then a
 * number.
 */
export function distinctTags(
  runs: ReadonlyArray<{ name: string; when?: number | null }>,
  max = OVERLAY_TAG_MAX,
): string[] {
  const names = runs.map((r) => r.name.trim());
  const tags = names.map((n) => overlayTag(n, max));
  const groups = new Map<string, number[]>();
  tags.forEach((t, i) => groups.set(t, [...(groups.get(t) ?? []), i]));
  for (const members of groups.values()) {
    if (members.length < 2) continue;
    for (const i of members) {
      const full = names[i];
      const others = members.filter((j) => j !== i);
      if (others.some((j) => names[j] === full)) {
        const w = runs[i].when;
        const date =
          typeof w === 'number' ? new Date(w).toISOString().slice(5, 16).replace('T', ' ') : '';
        tags[i] = date ? `${overlayTag(full, Math.max(6, max - date.length - 1))} ${date}` : full;
        tags[i] = overlayTag(tags[i], date ? max : max - 3);
      } else {
        // Where this name parts from the one most like it.
        const at = Math.max(...others.map((j) => commonPrefix(full, names[j])));
        tags[i] = cutAround(full, at, max);
      }
    }
  }
  // Whatever still collides (same name and date, or a cut that met another run's tag) is numbered.
  const seen = new Map<string, number>();
  return tags.map((t) => {
    const k = (seen.get(t) ?? 0) + 1;
    seen.set(t, k);
    return k === 1 && tags.filter((x) => x === t).length === 1 ? t : `${t} #${k}`;
  });
}

/** An overlay's series: a ChartSeries with its own dash pattern (LineChart reads `dash`). */
export type OverlaySeries = ChartSeries & { dash?: string };

/** What withOverlay draws of one overlaid run. */
export interface OverlaySource {
  name: string;
  /** The legend's short text (distinctTags); default the name, cut. */
  tag?: string;
  rows: readonly MetricsRow[];
  /** The x of each row (aligned with rows) when the axis is not the step (wall-clock minutes);
   * a row whose x is null is left out. */
  xs?: ReadonlyArray<number | null>;
}

/**
 * `live[k]` charts metric `keys[k]`. Each overlay adds, for each metric it has (some finite value),
 * a series after the live ones: '<label> · <tag>', dashed with the overlay's pattern, the live
 * series' palette colour faded. Live series keep their default colours (the palette by index).
 */
export function withOverlay(
  live: ChartSeries[],
  keys: readonly string[],
  overlays: OverlaySource | readonly OverlaySource[] | null,
): ChartSeries[] {
  const list = overlays === null ? [] : Array.isArray(overlays) ? overlays : [overlays];
  if (list.length === 0) return live;
  const extra: OverlaySeries[] = [];
  list.forEach((overlay: OverlaySource, o) => {
    const tag = overlay.tag ?? overlayTag(overlay.name);
    keys.forEach((key, k) => {
      const points = overlay.rows.flatMap((r, i) => {
        const x = overlay.xs ? overlay.xs[i] : r.step;
        return x === null || x === undefined ? [] : [{ x, y: r.metrics[key] ?? NaN }];
      });
      if (!points.some((p) => Number.isFinite(p.y))) return;
      const colour = live[k]?.color ?? `var(--series-${(k % 6) + 1})`;
      extra.push({
        label: `${live[k]?.label ?? key} · ${tag}`,
        points,
        color: `color-mix(in srgb, ${colour} ${OVERLAY_MIX[o % OVERLAY_MIX.length]}%, transparent)`,
        dashed: true,
        dash: OVERLAY_DASHES[o % OVERLAY_DASHES.length],
        overlay: true,
      });
    });
  });
  return [...live, ...extra];
}

/**
 * Wall-clock x values: minutes since the run's first timed row (W&B's "relative time"), aligned
 * with `times`; null where a row's time is unknown. Runs started at different times start at 0.
 */
export function relativeMinutes(times: ReadonlyArray<number | null>): Array<number | null> {
  const first = times.find((t): t is number => t !== null);
  return times.map((t) => (t === null || first === undefined ? null : (t - first) / 60_000));
}
