// The Runs panel's table and diff, as a tracker shows runs: config columns for the options that
// differ between the listed runs (the ones every run shares say nothing about any of them), and a
// diff of two runs' configs, key by key. Stored configs are compared as stored (JSON values), so a
// run saved by an older version with fewer options still lists and diffs: a key one run lacks
// reads '—'. Pure; RunsPanel.svelte renders what these return.

/** Options that never make a column: the reward code is long text (the diff still shows it). */
const NO_COLUMN = new Set(['customRewards']);

/** Most config columns the table shows (the rest are in the diff). */
export const MAX_CONFIG_COLUMNS = 8;

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** A config value as a table cell: numbers and text as they are, lists and objects as JSON, cut. */
export function cellText(value: unknown, max = 40): string {
  if (value === undefined) return '—';
  const text =
    typeof value === 'string'
      ? value
      : typeof value === 'number' && value !== 0 && Math.abs(value) < 1e-3
        ? value.toExponential()
        : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * The config keys whose values are not the same in every config, in first-seen key order (the
 * schema's order for configs this app wrote); 'task' first when it varies. At most `max` keys.
 */
export function varyingKeys(
  configs: ReadonlyArray<Record<string, unknown>>,
  max = MAX_CONFIG_COLUMNS,
): string[] {
  const keys: string[] = [];
  for (const c of configs) for (const k of Object.keys(c)) if (!keys.includes(k)) keys.push(k);
  const varying = keys.filter(
    (k) => !NO_COLUMN.has(k) && configs.some((c) => !same(c[k], configs[0][k])),
  );
  varying.sort((a, b) => (a === 'task' ? -1 : b === 'task' ? 1 : 0));
  return varying.slice(0, max);
}

/** One line of a two-run diff: the key and each run's value (undefined where a run lacks it). */
export interface DiffLine {
  key: string;
  a: unknown;
  b: unknown;
}

/** The keys where two configs differ, with both values; nested objects by their own keys
 * ('taskOptions.numbers'), so a diff names what changed rather than a whole JSON blob. */
export function configDiff(a: Record<string, unknown>, b: Record<string, unknown>): DiffLine[] {
  const out: DiffLine[] = [];
  const walk = (x: unknown, y: unknown, path: string) => {
    const plain = (v: unknown): v is Record<string, unknown> =>
      typeof v === 'object' && v !== null && !Array.isArray(v);
    if (plain(x) && plain(y)) {
      const keys = [...new Set([...Object.keys(x), ...Object.keys(y)])];
      for (const k of keys) walk(x[k], y[k], path ? `${path}.${k}` : k);
    } else if (!same(x, y)) {
      out.push({ key: path, a: x, b: y });
    }
  };
  walk(a, b, '');
  return out;
}
