// Which options of the form differ from the run's: the Step button's "pending: Reset to apply"
// names them. Every option applies only when a run is built (Reset, or the first Step of a run not
// trained yet): the buffers, the task, the rewards and the schedule are made from the whole config,
// so none is changed in the middle of a run today.
import { CONFIG_KEYS, type Config } from '../../grpo/config';

/** The keys whose values differ between the run's config and the form's (in schema order). */
export function changedOptions(applied: Config, draft: Config): string[] {
  return CONFIG_KEYS.filter((key) => JSON.stringify(applied[key]) !== JSON.stringify(draft[key]));
}

/** "numGenerations, learningRate and 2 more": short enough for a badge, all names in `title`. */
export function listOptions(keys: readonly string[], shown = 3): string {
  if (keys.length <= shown + 1) return keys.join(', ');
  return `${keys.slice(0, shown).join(', ')} and ${keys.length - shown} more`;
}
