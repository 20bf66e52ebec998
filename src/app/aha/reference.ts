// The committed `npm run aha` result the Aha panel overlays on a live run: reference.json, the
// slice of docs/aha/report.json that scripts/aha-reference.mjs writes (per-seed per-step curves,
// held-out evaluations before and after, summary, config, machine, durations), typed here, and
// what the panel draws and says from it. tests/unit/aha-reference.test.ts keeps the JSON equal to
// what the script makes of the committed report.
import type { Point } from '../teach/plot';
import data from './reference.json';

/** The held-out evaluation's numbers (src/cli/aha.ts: base before training, final after). */
export interface ReferenceEval {
  greedy_accuracy: number;
  sample_accuracy: number;
  reflection_rate: number;
  accuracy_reflecting: number;
  accuracy_not_reflecting: number;
  mean_length: number;
  [key: string]: number;
}

export interface ReferenceSeed {
  seed: number;
  trainSeconds: number;
  base: ReferenceEval;
  final: ReferenceEval;
  steps: number[];
  /** Metric key (a docs/grpo.md §6 name, as the live history has it) → value per step; null = gap. */
  curves: Record<string, (number | null)[]>;
}

export interface SummaryStat {
  mean: number;
  min: number;
  max: number;
  values: number[];
}

export interface AhaReference {
  source: string;
  command: string;
  preset: string;
  heldOutPrompts: number;
  samplesPerPrompt: number;
  machine: {
    cpu: string | null;
    cores: number | null;
    adapter: string;
    isSoftware: boolean | null;
  };
  /** The whole command: every seed's training and both held-out evaluations. */
  durationSeconds: number;
  config: Record<string, unknown>;
  summary: Record<string, SummaryStat>;
  targets: Record<string, boolean>;
  seeds: ReferenceSeed[];
}

export const AHA_REFERENCE = data as unknown as AhaReference;

/** One seed's curve of `key` as chart points (null → NaN, a gap). */
export function referenceSeries(seed: ReferenceSeed, key: string): Point[] {
  const values = seed.curves[key] ?? [];
  return seed.steps.map((x, i) => ({ x, y: values[i] ?? NaN }));
}

/** Steps the reference trained per seed (the preset's `steps`). */
export function referenceSteps(ref: AhaReference = AHA_REFERENCE): number {
  return Math.max(0, ...ref.seeds.map((s) => s.steps.length));
}

export interface ReferenceTiming {
  steps: number;
  /** The whole `npm run aha` (all seeds, evaluations included). */
  totalMinutes: number;
  seeds: number;
  /** Training time of one seed: least and most over the seeds (minutes). */
  seedMinutes: [number, number];
  /** Seconds per step, training time over steps: least and most over the seeds. */
  stepSeconds: [number, number];
  cores: number | null;
  adapter: string;
}

export function referenceTiming(ref: AhaReference = AHA_REFERENCE): ReferenceTiming {
  const minutes = ref.seeds.map((s) => s.trainSeconds / 60);
  const perStep = ref.seeds.map((s) => s.trainSeconds / s.steps.length);
  return {
    steps: referenceSteps(ref),
    totalMinutes: ref.durationSeconds / 60,
    seeds: ref.seeds.length,
    seedMinutes: [Math.min(...minutes), Math.max(...minutes)],
    stepSeconds: [Math.min(...perStep), Math.max(...perStep)],
    cores: ref.machine.cores,
    adapter: ref.machine.adapter,
  };
}
