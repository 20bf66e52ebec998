// The one rule for reward ids, used wherever an id can come in: config resolution (CLI flags and
// config files), the shared URL's parser, checkpoint import and the rewards panel. An id ends up
// in metric keys ('rewards/custom:<id>/mean'), CSV and JSONL columns, the TRL export's Python
// source and the page's text, so it is kept to one short line of plain characters: a lower-case
// letter, then up to 39 lower-case letters, digits, '_' or '-' (the built-ins 'format' and
// 'accuracy' follow it too; '-' stays allowed because existing configs use ids like 'len-bonus').
// Also here: the helpers that list and drop a config's custom reward code, so the page (consent
// dialog) and the worker (restore) strip it the same way.

import { CUSTOM_REWARD_PREFIX, DEFAULT_REWARDS } from './rewards';

export const REWARD_ID_MAX_LENGTH = 40;
export const REWARD_ID_PATTERN = /^[a-z][a-z0-9_-]{0,39}$/;
export const REWARD_ID_RULE = `a lower-case letter, then up to ${REWARD_ID_MAX_LENGTH - 1} lower-case letters, digits, '_' or '-'`;

/** A string quoted as JSON with every character outside printable ASCII escaped (\uXXXX), so a
 * message that quotes it is one plain line (JSON.stringify alone leaves U+2028 and the like). */
function quote(text: string): string {
  return JSON.stringify(text).replace(
    /[^\x20-\x7e]/g,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Why `id` is not a valid reward id (a sentence naming the first problem), or null when it is. */
export function rewardIdProblem(id: unknown): string | null {
  if (typeof id !== 'string') return `a reward id must be a string, got ${typeof id}`;
  if (REWARD_ID_PATTERN.test(id)) return null;
  // Quoted and escaped: a line break or a quote in the id never breaks the message's own line.
  const shown = quote(id.length > 60 ? `${id.slice(0, 60)}...` : id);
  const why = (detail: string) => `reward id ${shown} ${detail} (an id is ${REWARD_ID_RULE})`;
  if (id.length === 0) return `a reward id is empty (an id is ${REWARD_ID_RULE})`;
  if (/[\r\n\u2028\u2029]/.test(id)) return why('contains a line break');
  if (/["'`]/.test(id)) return why('contains a quote');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(id)) return why('contains a control character');
  if (/\s/.test(id)) return why('contains a space');
  if (id.length > REWARD_ID_MAX_LENGTH)
    return why(`is ${id.length} characters long, more than ${REWARD_ID_MAX_LENGTH}`);
  if (/[A-Z]/.test(id)) return why('has upper-case letters');
  if (!/^[a-z]/.test(id)) return why('does not start with a lower-case letter');
  const bad = [...id].find((ch) => !/[a-z0-9_-]/.test(ch));
  return why(`contains ${quote(bad ?? '')}`);
}

/** Throws an Error with rewardIdProblem's message when `id` is not a valid reward id. */
export function checkRewardId(id: unknown): string {
  const problem = rewardIdProblem(id);
  if (problem) throw new Error(problem);
  return id as string;
}

/**
 * The first reward id problem in a config's reward fields (the `rewards` list's custom:<id>
 * entries and the keys of `customRewards`), or null. Built-in names pass; any other name without
 * the custom prefix is left to config resolution ("unknown reward").
 */
export function rewardIdsProblem(config: {
  rewards?: unknown;
  customRewards?: unknown;
}): { key: 'rewards' | 'customRewards'; message: string } | null {
  if (Array.isArray(config.rewards)) {
    for (const name of config.rewards) {
      if (typeof name !== 'string' || !name.startsWith(CUSTOM_REWARD_PREFIX)) continue;
      const problem = rewardIdProblem(name.slice(CUSTOM_REWARD_PREFIX.length));
      if (problem) return { key: 'rewards', message: `config 'rewards': ${problem}` };
    }
  }
  if (config.customRewards && typeof config.customRewards === 'object') {
    for (const id of Object.keys(config.customRewards)) {
      const problem = rewardIdProblem(id);
      if (problem) return { key: 'customRewards', message: `config 'customRewards': ${problem}` };
    }
  }
  return null;
}

/** The custom reward code a config carries, by id (empty when none). */
export function customRewardCode(config: { customRewards?: unknown }): Record<string, string> {
  const c = config.customRewards;
  if (!c || typeof c !== 'object' || Array.isArray(c)) return {};
  return Object.fromEntries(
    Object.entries(c as Record<string, unknown>).map(([id, s]) => [id, String(s)]),
  );
}

/** The reward fields a config has (ConfigInput, Config, a URL's partial config). */
export interface RewardFields {
  rewards?: string[];
  rewardWeights?: number[] | null;
  customRewards?: Record<string, string>;
}

/**
 * The config without any custom reward code: custom:<id> entries leave `rewards` together with
 * their weights, `customRewards` becomes {}, and everything else is kept. A list left empty falls
 * back to the default rewards (format, accuracy; weights 1), since a run needs at least one reward.
 */
export function withoutCustomRewards<T extends RewardFields>(config: T): T {
  const rewards = config.rewards ?? [...DEFAULT_REWARDS];
  const keep = rewards.map((r) => !r.startsWith(CUSTOM_REWARD_PREFIX));
  const kept = rewards.filter((_, i) => keep[i]);
  const weights = config.rewardWeights ? config.rewardWeights.filter((_, i) => keep[i]) : null;
  const out: RewardFields = { ...config, customRewards: {} };
  if (kept.length > 0) {
    out.rewards = kept;
    if (config.rewardWeights !== undefined)
      out.rewardWeights = weights && weights.length === kept.length ? weights : null;
  } else {
    out.rewards = [...DEFAULT_REWARDS];
    out.rewardWeights = null;
  }
  return out as T;
}

/**
 * Asked before restored custom reward code may run (the trainer worker's restoreCheckpoint takes
 * it as a Comlink proxy from the page, which shows the code): true allows it, false leaves it out.
 */
export type CustomCodeConsent = (code: Record<string, string>) => boolean | Promise<boolean>;
