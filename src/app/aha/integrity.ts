// Whether an aha reading of this run can be trusted, and against what: the Aha panel's integrity
// checks. (1) Enough steps: the reference (`npm run aha`, reference.json) only separates from its
// start after about 30 steps, so no verdict before AHA_VERDICT_STEPS. (2) Every way the run's
// config differs from the aha preset (src/grpo/presets.ts), key by key. (3) A custom reward that
// pays for reflection markers ("wait", "check again", "backward" …) makes rising reflection
// bought, not an aha: found by scoring the reward on completions that differ only by a marker (in
// the reward's own sandbox, as the Rewards panel's "Try it" does), or, when it cannot run, by
// scanning its source for the marker words. (4) Base rates: the first step's reflection rate and
// accuracies beside the selected step's, so "reflecting completions are right more often" is read
// against where the run started. Pure functions, apart from probeCustomRewards' sandbox calls.
import { resolveConfig, type Config } from '../../grpo/config';
import type { TryResult } from '../../rewards/custom-reward';
import { PRESETS } from '../../grpo/presets';
import { DEFAULT_REFLECTION_MARKERS, findReflectionMarkers } from '../../rewards/reflection';
import { CUSTOM_REWARD_PREFIX, type RewardInput } from '../../rewards/rewards';
import { COUNTDOWN_REFLECTION_MARKERS } from '../../tasks/countdown';
import { BACKWARD_WORD, VERIFY_PHRASE } from '../../tasks/traces';
import type { Problem } from '../../tasks/types';
import type { MetricsRow } from '../../worker/types';
import { AHA_METRICS, MIN_STEPS } from './derive';

/** Steps before any verdict (derive.ts MIN_STEPS, why it is 30 there). */
export const AHA_VERDICT_STEPS = MIN_STEPS;

/** Steps still needed before a verdict (0 when there are enough). */
export function stepsNeeded(history: readonly MetricsRow[], needed = AHA_VERDICT_STEPS): number {
  return Math.max(0, needed - history.length);
}

// ---------------------------------------------------------------------------------------------
// The run against the preset
// ---------------------------------------------------------------------------------------------

export interface PresetDifference {
  key: string;
  run: unknown;
  preset: unknown;
}

/** The seeds the reference ran (reference.json): a run with one of them differs in nothing. */
export const REFERENCE_SEEDS = [1, 2, 3];

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The keys of `run` and `want` whose values differ (compared as JSON), nested options (e.g.
 * taskOptions) key by key as `taskOptions.name`; custom reward sources stay one key. */
function differing(
  run: Record<string, unknown>,
  want: Record<string, unknown>,
  prefix = '',
): PresetDifference[] {
  const keys = [...new Set([...Object.keys(want), ...Object.keys(run)])];
  return keys.flatMap((key) => {
    const a = run[key];
    const b = want[key];
    if (JSON.stringify(a) === JSON.stringify(b)) return [];
    if (isRecord(a) && isRecord(b) && key !== 'customRewards')
      return differing(a, b, `${prefix}${key}.`);
    return [{ key: prefix + key, run: a, preset: b }];
  });
}

/** Every config key whose value differs from the resolved aha preset's, in the config's order
 * (a reference seed is no difference). */
export function presetDifferences(
  config: Config,
  preset: Config = resolveConfig(PRESETS.aha),
  seeds: readonly number[] = REFERENCE_SEEDS,
): PresetDifference[] {
  const run = config as unknown as Record<string, unknown>;
  return differing(run, preset as unknown as Record<string, unknown>).filter(
    (d) => !(d.key === 'seed' && seeds.includes(run.seed as number)),
  );
}

/** A config value in a line of text: strings bare, custom reward sources by their ids only. */
export function showValue(key: string, value: unknown): string {
  if (value === undefined) return '(none)';
  if (key === 'customRewards' && value && typeof value === 'object') {
    const ids = Object.keys(value);
    return ids.length ? `{${ids.join(', ')}}` : '{}';
  }
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return `[${value.map((v) => showValue('', v)).join(', ')}]`;
  return JSON.stringify(value);
}

export function differenceText(d: PresetDifference): string {
  return `${d.key}: ${showValue(d.key, d.run)} (preset ${showValue(d.key, d.preset)})`;
}

// ---------------------------------------------------------------------------------------------
// Custom rewards that pay for reflection
// ---------------------------------------------------------------------------------------------

/** The words a reward could pay for to buy reflection: the default markers, Countdown's own, and
 * the careful traces' "check again" and "backward" (src/tasks/traces.ts). */
export const PROBE_MARKERS: readonly string[] = [
  ...new Set<string>([
    ...DEFAULT_REFLECTION_MARKERS,
    ...COUNTDOWN_REFLECTION_MARKERS,
    VERIFY_PHRASE,
    BACKWARD_WORD,
  ]),
];

/** The marker with the same spacing in a neutral word (same length, not a marker). */
export function controlWord(marker: string): string {
  return marker.replace(/[^\s]/g, 'z');
}

/** `completion` with `word` inserted at the end of its reasoning (before </think>; at the start
 * when it has no think tag). */
export function insertWord(completion: string, word: string): string {
  const close = completion.indexOf('</think>');
  if (close >= 0) return `${completion.slice(0, close)}. ${word} ${completion.slice(close)}`;
  return `${word} ${completion}`;
}

/** A fixed Countdown problem: the probe's completions answer it rightly and wrongly. */
export const PROBE_PROBLEM: Problem = {
  id: 'aha-probe',
  task: 'countdown',
  question:
    'Using the numbers [6, 4, 2], create an equation that equals 20. You can use basic arithmetic operations (+, -, *, /) and each number can only be used once. Return the final equation in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>',
  reference: '(6 + 4) * 2',
  verifier: { kind: 'countdown', nums: [6, 4, 2], target: 20 },
};

export interface ProbeBase {
  completion: string;
  prompt: string;
  problem: Problem;
}

/** Completions that do not reflect, to insert markers into: a right and a wrong answer to
 * PROBE_PROBLEM, and the run's own non-reflecting completions given (its task, its answers). */
export function probeBases(own: readonly ProbeBase[] = []): ProbeBase[] {
  const prompt = PROBE_PROBLEM.question;
  const fixed: ProbeBase[] = [
    {
      completion: '<think>6 + 4 = 10, 10 * 2 = 20</think><answer>(6 + 4) * 2</answer>',
      prompt,
      problem: PROBE_PROBLEM,
    },
    {
      completion: '<think>6 - 4 = 2, 2 * 2 = 4</think><answer>(6 - 4) * 2</answer>',
      prompt,
      problem: PROBE_PROBLEM,
    },
  ];
  return [
    ...fixed,
    ...own.filter((b) => findReflectionMarkers(b.completion, PROBE_MARKERS).length === 0),
  ];
}

export interface ProbeCase {
  marker: string;
  /** Index in the inputs of the completion with the neutral word. */
  control: number;
  /** Index of the same completion with the marker instead. */
  variant: number;
}

/**
 * The pairs to score: for each base and marker (as written and capitalised), the base with a
 * neutral word of the marker's length and the base with the marker, which differ only by it (so a
 * length penalty is no "pay").
 */
export function probeInputs(
  bases: readonly ProbeBase[],
  markers: readonly string[] = PROBE_MARKERS,
): { inputs: RewardInput[]; cases: ProbeCase[] } {
  const inputs: RewardInput[] = [];
  const cases: ProbeCase[] = [];
  for (const base of bases) {
    for (const marker of markers) {
      const capital = marker[0].toUpperCase() + marker.slice(1);
      for (const word of capital === marker ? [marker] : [marker, capital]) {
        const control = inputs.length;
        inputs.push({ ...base, completion: insertWord(base.completion, controlWord(word)) });
        inputs.push({ ...base, completion: insertWord(base.completion, word) });
        cases.push({ marker, control, variant: control + 1 });
      }
    }
  }
  return { inputs, cases };
}

export type PayKind = 'pays' | 'penalises' | 'neutral';

export interface RewardProbe {
  /** 'custom:<id>' */
  name: string;
  weight: number;
  /** 'scored': run on marker pairs; 'scanned': the source was read for the marker words
   * (the reward could not run here). */
  method: 'scored' | 'scanned';
  kind: PayKind;
  /** Scored: the markers whose pairs changed the weighted reward in the direction of `kind`;
   * scanned: the marker words the source mentions. */
  markers: string[];
  /** Scored: the largest |weight × (reward with marker − reward without)|. */
  gain: number;
  /** Why it was scanned instead of scored. */
  error?: string;
}

/** A value as training counts it: not applicable or a failure is 0. */
function counted(r: TryResult | undefined): number {
  return r && 'value' in r && typeof r.value === 'number' ? r.value : 0;
}

/** Reads the scored pairs: a positive weighted difference on any pair pays for that marker. */
export function judgeProbe(
  name: string,
  weight: number,
  results: readonly TryResult[],
  cases: readonly ProbeCase[],
): RewardProbe {
  const up = new Set<string>();
  const down = new Set<string>();
  let most = 0;
  let least = 0;
  for (const c of cases) {
    const d = weight * (counted(results[c.variant]) - counted(results[c.control]));
    if (d > 1e-9) up.add(c.marker);
    if (d < -1e-9) down.add(c.marker);
    most = Math.max(most, d);
    least = Math.min(least, d);
  }
  const kind: PayKind = up.size ? 'pays' : down.size ? 'penalises' : 'neutral';
  return {
    name,
    weight,
    method: 'scored',
    kind,
    markers: [...(kind === 'penalises' ? down : up)],
    gain: kind === 'penalises' ? -least : most,
  };
}

/** The marker words a source mentions (case-insensitive; words, not substrings of longer ones). */
export function scanSource(source: string, markers: readonly string[] = PROBE_MARKERS): string[] {
  return markers.filter((m) => {
    const words = m
      .split(/\s+/)
      .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/'/g, "['\u2019]?"));
    return new RegExp(`(?<![A-Za-z])${words.join('\\s+')}(?![A-Za-z])`, 'i').test(source);
  });
}

/** The enabled custom rewards of `config` with their weights (a reward with weight 0 pays
 * nothing and is left out). */
export function enabledCustomRewards(
  config: Config,
): { id: string; name: string; weight: number; source: string }[] {
  return config.rewards.flatMap((name, k) => {
    if (!name.startsWith(CUSTOM_REWARD_PREFIX)) return [];
    const id = name.slice(CUSTOM_REWARD_PREFIX.length);
    const source = config.customRewards[id];
    const weight = config.rewardWeights[k] ?? 1;
    return typeof source === 'string' && weight !== 0 ? [{ id, name, weight, source }] : [];
  });
}

/** Runs `source` on the inputs (tryCustomReward with the page's sandbox). */
export type TryReward = (
  source: string,
  inputs: readonly RewardInput[],
  timeoutMs: number,
) => Promise<TryResult[]>;

/**
 * Each enabled custom reward, scored on the marker pairs; when the reward cannot run (the sandbox
 * fails to start, or every call fails) its source is scanned for the marker words instead.
 */
export async function probeCustomRewards(
  config: Config,
  tryReward: TryReward,
  own: readonly ProbeBase[] = [],
): Promise<RewardProbe[]> {
  const { inputs, cases } = probeInputs(probeBases(own));
  const out: RewardProbe[] = [];
  for (const r of enabledCustomRewards(config)) {
    let error: string | undefined;
    try {
      const results = await tryReward(r.source, inputs, config.rewardTimeoutMs);
      const failed = results.filter((x) => 'error' in x);
      if (results.length === inputs.length && failed.length < results.length) {
        out.push(judgeProbe(r.name, r.weight, results, cases));
        continue;
      }
      const first = failed[0];
      error = first && 'error' in first ? first.error.message : 'no results';
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    const markers = scanSource(r.source);
    out.push({
      name: r.name,
      weight: r.weight,
      method: 'scanned',
      kind: markers.length ? (r.weight > 0 ? 'pays' : 'penalises') : 'neutral',
      markers,
      gain: NaN,
      error,
    });
  }
  return out;
}

/** The panel's sentence for a reward that pays for (or penalises) reflection words. */
export function probeText(p: RewardProbe): string {
  const words = p.markers.map((m) => `“${m}”`).join(', ');
  if (p.kind === 'neutral')
    return p.method === 'scored'
      ? `${p.name} does not change with reflection words (scored on completions that differ only by one).`
      : `${p.name} could not run here (${p.error}); its source names no reflection word.`;
  const how =
    p.method === 'scored'
      ? `scored on completions that differ only by the word, ${p.kind === 'pays' ? 'adding' : 'removing'} it is worth up to ${Number(p.gain.toPrecision(3))} reward (${words})`
      : `it could not run here (${p.error}), and its source names ${words}`;
  return p.kind === 'pays'
    ? `A custom reward pays for reflection words: ${p.name} (${how}). Rising reflection is then bought, not an aha.`
    : `A custom reward penalises reflection words: ${p.name} (${how}). Falling reflection is then bought, not learned.`;
}

// ---------------------------------------------------------------------------------------------
// The verdict's frame: steps, differences, bought reflection
// ---------------------------------------------------------------------------------------------

export interface Integrity {
  /** Steps still needed before any verdict (0: enough). */
  needed: number;
  /** null: the run's config is unknown (no run yet). */
  differences: PresetDifference[] | null;
  /** Custom rewards that pay for (or penalise) reflection words. */
  bought: RewardProbe[];
  /** The lines the panel shows, in order. */
  lines: string[];
}

export function integrity(
  history: readonly MetricsRow[],
  config: Config | null,
  probes: readonly RewardProbe[],
  needed = AHA_VERDICT_STEPS,
): Integrity {
  const more = stepsNeeded(history, needed);
  const differences = config ? presetDifferences(config) : null;
  const bought = probes.filter((p) => p.kind !== 'neutral');
  const lines: string[] = [];
  if (more > 0)
    lines.push(
      `Waiting: ${more} more step${more === 1 ? '' : 's'} needed before a verdict (${history.length} of ${needed}).`,
    );
  for (const p of bought) lines.push(probeText(p));
  if (differences)
    lines.push(
      differences.length === 0
        ? 'This run uses the aha preset’s settings.'
        : `This run differs from the aha preset in ${differences.length} setting${differences.length === 1 ? '' : 's'}: ${differences.map(differenceText).join('; ')}.`,
    );
  return { needed: more, differences, bought, lines };
}

// ---------------------------------------------------------------------------------------------
// Base rates
// ---------------------------------------------------------------------------------------------

export interface StepRates {
  step: number;
  rate: number;
  accuracy: number;
  accuracyReflecting: number;
  accuracyNotReflecting: number;
  countReflecting: number;
  countNotReflecting: number;
}

export function stepRates(row: MetricsRow): StepRates {
  const m = row.metrics;
  const v = (k: string) => (typeof m[k] === 'number' ? m[k] : NaN);
  return {
    step: row.step,
    rate: v(AHA_METRICS.rate),
    accuracy: v(AHA_METRICS.accuracy),
    accuracyReflecting: v(AHA_METRICS.accuracyReflecting),
    accuracyNotReflecting: v(AHA_METRICS.accuracyNotReflecting),
    countReflecting: v(AHA_METRICS.countReflecting),
    countNotReflecting: v(AHA_METRICS.countNotReflecting),
  };
}

/** The first step's rates and the selected step's (the latest when none is selected or the
 * selected one has no row); null without history. */
export function baseRates(
  history: readonly MetricsRow[],
  selected: number | null = null,
): { start: StepRates; now: StepRates } | null {
  if (history.length === 0) return null;
  const rows = [...history].sort((a, b) => a.step - b.step);
  const now = rows.find((r) => r.step === selected) ?? rows[rows.length - 1];
  return { start: stepRates(rows[0]), now: stepRates(now) };
}

// ---------------------------------------------------------------------------------------------
// Expected duration
// ---------------------------------------------------------------------------------------------

/** The step shape keys that set a step's time (grpo/step-estimate.ts StepShape) plus the model. */
export const SHAPE_KEYS = [
  'model',
  'perStepPrompts',
  'numGenerations',
  'maxPromptLength',
  'maxCompletionLength',
  'numIterations',
  'beta',
] as const;

/** The shape keys where `config` differs from the aha preset: its measured step time is the
 * preset's only when there are none. */
export function shapeDifferences(
  config: Config,
  preset: Config = resolveConfig(PRESETS.aha),
): string[] {
  return SHAPE_KEYS.filter((k) => JSON.stringify(config[k]) !== JSON.stringify(preset[k]));
}

/** Minutes for `steps` steps of `perStepMs`, plus what only the first step pays. */
export function expectedMinutes(perStepMs: number, steps: number, firstExtraMs = 0): number {
  return (perStepMs * steps + firstExtraMs) / 60_000;
}
