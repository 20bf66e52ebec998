// What the Recipes view shows of a multi-stage recipe (src/recipes/recipe.ts), as pure functions of
// the recipe and its timeline: the chart series across stages, the stage boundaries as labelled
// markers, each stage's line in the stage list (what it does, where it starts from, its progress),
// the recipe a pasted JSON text or an uploaded SFT JSONL makes, and the reasons of a rejection
// report in words. The component only places what these return.
import {
  BUILTIN_RECIPES,
  MODEL_PREFIX,
  parseRecipe,
  stageConfig,
  type Recipe,
  type RecipeStage,
  type StageResult,
  type TimelineRow,
} from '../../recipes/recipe-spec';
import type { RejectReason } from '../../recipes/rejection-sampling';
import { customRewardCode } from '../../rewards/reward-id';
import { parseSftJsonl } from '../../train/sft-data';
import { resolveSftConfig } from '../../train/sft-config';
import type { ChartSeries } from '../teach/plot';

/** The built-in recipes in the order the view offers them. */
export const BUILTIN_ORDER = [
  'r1-zero',
  'r1',
  'distill',
] as const satisfies readonly (keyof typeof BUILTIN_RECIPES)[];

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

const BASE_STORAGE = {
  auto: "the checkpoint's own format",
  float32: 'float32',
  bfloat16: 'bfloat16',
  float16: 'float16',
  nf4: '4-bit NF4 (QLoRA)',
} as const;

/** What a stage trains: '' for every weight, else its LoRA adapters and how the base is kept. */
function trainsWhat(c: {
  usePeft: boolean;
  loraR: number;
  dtype: keyof typeof BASE_STORAGE;
}): string {
  if (!c.usePeft) return '';
  return `, training LoRA adapters (r ${c.loraR}) on a frozen base stored ${BASE_STORAGE[c.dtype]}`;
}

/** One chart line of `key` over the timeline (steps without the metric are gaps). */
export function timelineSeries(
  rows: readonly TimelineRow[],
  key: string,
  label = key,
  color?: string,
): ChartSeries {
  return {
    label,
    color,
    points: rows.map((r) => ({ x: r.step, y: r.metrics[key] ?? NaN })),
  };
}

/**
 * `key` drawn as one line per stage that logs it ('cold-start (sft)', 'rl (grpo)'), so that no
 * line joins the last step of one stage to the first of the next: an SFT stage's cross-entropy
 * and a GRPO stage's policy loss are different quantities.
 */
export function stageSeries(
  recipe: Recipe,
  rows: readonly TimelineRow[],
  key: string,
): ChartSeries[] {
  return recipe.stages
    .map((stage, index) => ({
      label: `${stage.name} (${stage.kind})`,
      points: rows
        .filter((r) => r.stage === index)
        .map((r) => ({ x: r.step, y: r.metrics[key] ?? NaN })),
    }))
    .filter((s) => s.points.some((p) => Number.isFinite(p.y)));
}

/** The timeline step stage `index` starts after (its first step is this + 1). */
export function stageStart(rows: readonly TimelineRow[], index: number): number {
  let last = 0;
  for (const r of rows) if (r.stage < index && r.step > last) last = r.step;
  return last;
}

/**
 * A marker half a step before each started stage's first step, labelled with its name; stages
 * that start at the same place (a rejection-sample stage trains no step) share one marker.
 */
export function stageMarkers(
  recipe: Recipe,
  rows: readonly TimelineRow[],
  stageIndex: number,
): { x: number; label: string }[] {
  const out: { x: number; label: string }[] = [];
  const last = Math.min(stageIndex, recipe.stages.length - 1);
  for (let i = 0; i <= last; i++) {
    const x = stageStart(rows, i) + 0.5;
    const name = recipe.stages[i].name;
    const same = out.find((m) => m.x === x);
    if (same) same.label = `${same.label} · ${name}`;
    else out.push({ x, label: name });
  }
  return out;
}

/** What a stage does, in one line. */
export function describeStage(recipe: Recipe, index: number): string {
  const s: RecipeStage = recipe.stages[index];
  const from =
    !s.from || s.from === 'previous'
      ? index === 0
        ? 'the loaded model'
        : `'${recipe.stages[index - 1].name}'`
      : s.from === 'base'
        ? 'the loaded model (base)'
        : s.from.startsWith(MODEL_PREFIX)
          ? `the model ${s.from.slice(MODEL_PREFIX.length)} (command line only)`
          : `'${s.from}'`;
  if (s.kind === 'sft') {
    const d = s.data;
    const data =
      'coldStart' in d
        ? `${d.coldStart.count} careful cold-start traces`
        : 'stage' in d
          ? `the completions '${d.stage}' kept`
          : `a JSONL set (${parseSftJsonl(d.jsonl).rows.length} rows)`;
    return `SFT on ${data}, from ${from}${trainsWhat(resolveSftConfig(s.options))}`;
  }
  if (s.kind === 'grpo') {
    const c = stageConfig(recipe, index);
    return `GRPO, ${c.steps} steps (${s.preset ?? 'aha'} preset, ${plural(c.numGenerations, 'completion')} × ${plural(c.perStepPrompts, 'prompt')}), from ${from}${trainsWhat(c)}`;
  }
  return `rejection sampling: ${s.options.k} completions of each of ${s.prompts} training prompts, the verified ones kept, with ${from}`;
}

/** The stage's optimizer steps when they are known before it starts (GRPO), else null. */
export function plannedSteps(recipe: Recipe, index: number): number | null {
  const s = recipe.stages[index];
  if (s.kind === 'grpo') return stageConfig(recipe, index).steps;
  if (s.kind === 'rejection-sample') return 0;
  return null;
}

export type StageState = 'done' | 'current' | 'pending';

export interface StageLine {
  index: number;
  name: string;
  kind: RecipeStage['kind'];
  description: string;
  state: StageState;
  /** Steps trained so far (the stage's highest stageStep on the timeline). */
  done: number;
  /** The stage's steps, when known. */
  total: number | null;
}

/** Every stage with its place in the run. `totals` are the steps each stage announced at start. */
export function stageLines(
  recipe: Recipe,
  rows: readonly TimelineRow[],
  stageIndex: number,
  results: readonly StageResult[],
  totals: Readonly<Record<number, number>>,
): StageLine[] {
  return recipe.stages.map((s, i) => {
    let done = 0;
    for (const r of rows) if (r.stage === i && r.stageStep > done) done = r.stageStep;
    const result = results.find((r) => r.stage === i);
    return {
      index: i,
      name: s.name,
      kind: s.kind,
      description: describeStage(recipe, i),
      state: i < stageIndex ? 'done' : i === stageIndex ? 'current' : 'pending',
      done,
      total: result?.steps ?? totals[i] ?? plannedSteps(recipe, i),
    };
  });
}

/**
 * The custom reward code a recipe's stages carry (each stage's options.customRewards), by id; the
 * same id in two stages with different code is kept apart as '<stage>/<id>', so the consent
 * dialog shows every source that would run. Empty when the recipe runs no code of its own.
 */
export function recipeRewardCode(recipe: Recipe): Record<string, string> {
  const code: Record<string, string> = {};
  for (const stage of recipe.stages) {
    const custom = (stage.options as { customRewards?: unknown } | undefined)?.customRewards;
    for (const [id, source] of Object.entries(customRewardCode({ customRewards: custom }))) {
      const key = id in code && code[id] !== source ? `${stage.name}/${id}` : id;
      code[key] = source;
    }
  }
  return code;
}

/** A pasted recipe: the checked recipe, or the message of what is wrong with it. */
export function readRecipeText(text: string): { recipe: Recipe } | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: `not JSON: ${(err as Error).message}` };
  }
  let recipe: Recipe;
  try {
    recipe = parseRecipe(value);
  } catch (err) {
    return { error: (err as Error).message };
  }
  // The page trains the model it loaded; another model is the command line's (it reads folders).
  const other = recipe.stages.find((st) => st.from?.startsWith(MODEL_PREFIX));
  if (other)
    return {
      error: `stage '${other.name}' starts from "${other.from}": another model runs with npm run recipe only; here every stage trains the loaded model`,
    };
  return { recipe };
}

export interface SftUploadOptions {
  learningRate: number;
  numTrainEpochs: number;
  perDeviceTrainBatchSize: number;
  maxLength: number;
  /** LoRA adapters on a frozen base stored in `dtype` (nf4: QLoRA); off: a full fine-tune. */
  usePeft?: boolean;
  loraR?: number;
  dtype?: 'float32' | 'bfloat16' | 'nf4';
}

/** A one-stage recipe: SFT of the loaded model on an uploaded JSONL (TRL's SFT formats). */
export function sftRecipe(
  fileName: string,
  jsonl: string,
  options: SftUploadOptions,
): { recipe: Recipe; rows: number } | { error: string } {
  const { rows, issues } = parseSftJsonl(jsonl);
  if (issues.length) return { error: `${fileName} line ${issues[0].line}: ${issues[0].message}` };
  if (rows.length === 0) return { error: `${fileName} has no examples` };
  const base =
    fileName
      .replace(/\.[^.]*$/, '')
      .replace(/[^\w.-]+/g, '-')
      .slice(0, 40) || 'data';
  try {
    const recipe = parseRecipe({
      name: `SFT on ${fileName}`,
      seed: 1,
      stages: [{ kind: 'sft', name: `sft-${base}`, data: { jsonl }, options: { ...options } }],
    });
    return { recipe, rows: rows.length };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

const REASONS: Record<RejectReason, string> = {
  wrong: 'wrong answer',
  'no-answer': 'no <answer>',
  unverifiable: 'no verifier',
  format: 'format',
  truncated: 'cut off (no EOS)',
  'too-short': 'too short',
  'too-long': 'too long',
  language: 'language mix',
  duplicate: 'duplicate',
};

/** A rejection reason in words. */
export const reasonText = (r: RejectReason) => REASONS[r] ?? r;
