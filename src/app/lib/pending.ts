// Which options of the form differ from the run's, and what becomes of them. The options a run can
// change in the middle (src/grpo/config.ts LIVE_OPTION_KEYS, as the worker's Run reports them for
// its run: beta only with a reference policy) apply at the next Step or Run, with no Reset; the
// rest shape the run when it is built (buffers, task, data stream) and wait for a Reset: the Step
// button's "pending: Reset to apply" names those. Also how a live change reads in the run's history.
import {
  changedKeys,
  LIVE_OPTION_KEYS,
  type Config,
  type ConfigKey,
  type LiveChange,
} from '../../grpo/config';

/** The keys whose values differ between the run's config and the form's (in schema order). */
export function changedOptions(applied: Config, draft: Config): ConfigKey[] {
  return changedKeys(applied, draft);
}

/**
 * The changed options split by what applies them: `live` at the next step (the run's own live
 * options: RunState.liveOptions, LIVE_OPTION_KEYS when not known), `reset` only on Reset.
 */
export function splitPending(
  applied: Config,
  draft: Config,
  live: readonly string[] = LIVE_OPTION_KEYS,
): { live: ConfigKey[]; reset: ConfigKey[] } {
  const changed = changedKeys(applied, draft);
  return {
    live: changed.filter((key) => live.includes(key)),
    reset: changed.filter((key) => !live.includes(key)),
  };
}

/** The run's config with the form's values of `keys` (the live ones): what a Step applies while
 * the options that need a Reset stay pending. */
export function withOptions(applied: Config, draft: Config, keys: readonly ConfigKey[]): Config {
  const next = { ...applied } as Record<ConfigKey, unknown>;
  for (const key of keys) next[key] = structuredClone(draft[key]);
  return next as Config;
}

/** "numGenerations, learningRate and 2 more": short enough for a badge, all names in `title`. */
export function listOptions(keys: readonly string[], shown = 3): string {
  if (keys.length <= shown + 1) return keys.join(', ');
  return `${keys.slice(0, shown).join(', ')} and ${keys.length - shown} more`;
}

/** A value as the change line shows it: numbers as JavaScript prints them, lists in brackets. */
function shown(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(shown).join(', ')}]`;
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

/** One change as a line: "learningRate 0.0003 → 0.001"; custom reward code by id (added,
 * removed, edited), not the code itself. */
export function describeChange(change: Pick<LiveChange, 'key' | 'from' | 'to'>): string {
  if (change.key === 'customRewards') {
    const from = (change.from ?? {}) as Record<string, string>;
    const to = (change.to ?? {}) as Record<string, string>;
    const ids = [...new Set([...Object.keys(from), ...Object.keys(to)])];
    const parts = ids.flatMap((id) =>
      !(id in from)
        ? [`+${id}`]
        : !(id in to)
          ? [`−${id}`]
          : from[id] !== to[id]
            ? [`${id} edited`]
            : [],
    );
    return `customRewards ${parts.join(', ')}`;
  }
  return `${change.key} ${shown(change.from)} → ${shown(change.to)}`;
}

/** The run's live changes grouped by the step they apply from, oldest first. */
export function changesByStep(
  changes: readonly LiveChange[],
): { step: number; changes: LiveChange[] }[] {
  const groups: { step: number; changes: LiveChange[] }[] = [];
  for (const change of changes) {
    const last = groups.at(-1);
    if (last && last.step === change.step) last.changes.push(change);
    else groups.push({ step: change.step, changes: [change] });
  }
  return groups;
}
