// The shape of the recipe comparison's summary (`npm run recipe -- --compare`, written by
// src/cli/_recipe-compare.ts to docs/recipe/summary.json): shared by the command that writes it and
// the Paper view that shows it, in a module of its own so the page's chunk takes no trainer code.

/** The arms `npm run recipe -- --compare` compares (src/cli/_recipe-compare.ts). */
export const COMPARISON_ARMS = ['R1-Zero', 'R1', 'Distillation'] as const;
export type ComparisonArm = (typeof COMPARISON_ARMS)[number];

/** A model's held-out numbers in the comparison report. */
export interface HeldOut {
  accuracy: number;
  reflection: number;
  length: number;
  format: number;
  accuracyReflecting: number;
  accuracyNotReflecting: number;
}

/** A number over the comparison's seeds. */
export interface SeedStat {
  mean: number;
  min: number;
  max: number;
  values: number[];
}

/** The summary part of the comparison report: summary.json, which the Paper view shows. */
export interface ComparisonSummary {
  durationSeconds: number;
  heldOutPrompts: number;
  samplesPerPrompt: number;
  grpoStepsPerArm: number;
  base: HeldOut;
  summary: Record<ComparisonArm, Record<'accuracy' | 'reflection' | 'length' | 'format', SeedStat>>;
  seeds: { seed: number; arms: Record<ComparisonArm, HeldOut> }[];
}
