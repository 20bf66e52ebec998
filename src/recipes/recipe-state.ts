// A recipe's saved progress (RecipeState: the CLI's state.json and each stage checkpoint's
// recipe_state.json, the page's stored recipe run) read back field by field. A tampered or damaged
// file gives a RecipeStateError naming the file and the field (issue 33: it gave raw TypeErrors
// such as "value.timeline.map is not a function", and a stageIndex of 1e9 reported the recipe
// finished); a valid one is revived as reviveRecipeState does (a null metric is NaN again).
import { metricNameProblem } from '../core/metrics-row';
import { parseRecipe, reviveRecipeState, type RecipeState, type StageKind } from './recipe-spec';

/** One field of a saved recipe state that is missing or wrong. */
export class RecipeStateError extends Error {
  override name = 'RecipeStateError';
  constructor(
    /** The file (or record) as the user knows it: '<run>/state.json'. */
    readonly file: string,
    /** The field's path in the JSON: 'timeline[3].stageStep'. */
    readonly field: string,
    detail: string,
  ) {
    super(`${file}: '${field}' ${detail}`);
  }
}

/** Timeline rows and results a state may hold: far above any run (a GRPO stage's steps are
 * bounded), low enough that a tampered file cannot make the reader work for minutes. */
export const RECIPE_STATE_MAX_ROWS = 1_000_000;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const shown = (v: unknown) => {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 60)}...` : text;
};
const isCount = (v: unknown, min: number): v is number =>
  Number.isSafeInteger(v) && (v as number) >= min;

/**
 * The RecipeState in `value` (parsed JSON), checked field by field: the recipe (parseRecipe), a
 * stageIndex within 0 … stages.length (the length: every stage done), results of stages before it,
 * datasets of text, and timeline rows with increasing steps, stages in range and metrics that are
 * numbers (or null: NaN) under metric names. `file` names the source in every message.
 */
export function parseRecipeState(value: unknown, file: string): RecipeState {
  const fail = (field: string, detail: string): never => {
    throw new RecipeStateError(file, field, detail);
  };
  if (!isObject(value)) return fail('(top level)', `must be a JSON object, got ${shown(value)}`);
  if (!isObject(value.recipe))
    fail('recipe', `must be a recipe object, got ${shown(value.recipe)}`);
  let recipe;
  try {
    recipe = parseRecipe(value.recipe);
  } catch (err) {
    return fail('recipe', `is not a valid recipe (${(err as Error).message})`);
  }
  const stages = recipe.stages.length;
  const stageIndex = value.stageIndex;
  if (!isCount(stageIndex, 0) || stageIndex > stages)
    fail(
      'stageIndex',
      `must be an integer in [0, ${stages}] (the recipe's stages), got ${shown(stageIndex)}`,
    );

  if (!Array.isArray(value.results)) fail('results', `must be a list, got ${shown(value.results)}`);
  const results = value.results as unknown[];
  if (results.length > stages)
    fail('results', `has ${results.length} entries for ${stages} stages`);
  results.forEach((r, i) => {
    const at = `results[${i}]`;
    if (!isObject(r)) return fail(at, `must be an object, got ${shown(r)}`);
    if (!isCount(r.stage, 0) || r.stage >= (stageIndex as number))
      fail(
        `${at}.stage`,
        `must be an integer below stageIndex ${stageIndex as number}, got ${shown(r.stage)}`,
      );
    const stage = recipe.stages[r.stage as number];
    if (r.name !== stage.name) fail(`${at}.name`, `must be '${stage.name}', got ${shown(r.name)}`);
    if (r.kind !== (stage.kind as StageKind))
      fail(`${at}.kind`, `must be '${stage.kind}', got ${shown(r.kind)}`);
    for (const key of ['steps', 'endStep'] as const)
      if (!isCount(r[key], 0)) fail(`${at}.${key}`, `must be an integer ≥ 0, got ${shown(r[key])}`);
    if (typeof r.seconds !== 'number' || !(r.seconds >= 0) || !Number.isFinite(r.seconds))
      fail(`${at}.seconds`, `must be a number ≥ 0, got ${shown(r.seconds)}`);
    if (r.last !== undefined) checkMetrics(r.last, `${at}.last`, fail);
    if (r.rejection !== undefined) {
      const j = r.rejection;
      if (!isObject(j) || !isCount(j.sampled, 0) || !isCount(j.kept, 0) || j.kept > j.sampled)
        fail(`${at}.rejection`, 'must be { sampled, kept ≤ sampled, yield, perPrompt }');
      if (!Array.isArray((j as Record<string, unknown>).perPrompt))
        fail(`${at}.rejection.perPrompt`, 'must be a list');
    }
  });

  if (!isObject(value.datasets))
    fail('datasets', `must be an object, got ${shown(value.datasets)}`);
  for (const [name, text] of Object.entries(value.datasets as Record<string, unknown>))
    if (typeof text !== 'string')
      fail(`datasets.${name}`, `must be JSONL text, got ${shown(text)}`);

  if (!Array.isArray(value.timeline))
    fail('timeline', `must be a list of rows, got ${shown(value.timeline)}`);
  const timeline = value.timeline as unknown[];
  if (timeline.length > RECIPE_STATE_MAX_ROWS)
    fail('timeline', `has ${timeline.length} rows, more than ${RECIPE_STATE_MAX_ROWS}`);
  let previous = 0;
  timeline.forEach((row, i) => {
    const at = `timeline[${i}]`;
    if (!isObject(row)) return fail(at, `must be an object, got ${shown(row)}`);
    if (!isCount(row.step, previous + 1))
      fail(
        `${at}.step`,
        `must be an integer above the previous row's ${previous}, got ${shown(row.step)}`,
      );
    previous = row.step as number;
    if (!isCount(row.stage, 0) || row.stage > Math.min(stageIndex as number, stages - 1))
      fail(
        `${at}.stage`,
        `must be a stage index up to stageIndex ${stageIndex as number}, got ${shown(row.stage)}`,
      );
    if (!isCount(row.stageStep, 1))
      fail(`${at}.stageStep`, `must be an integer ≥ 1, got ${shown(row.stageStep)}`);
    checkMetrics(row.metrics, `${at}.metrics`, fail);
  });
  return reviveRecipeState({ ...(value as unknown as RecipeState), recipe });
}

function checkMetrics(
  metrics: unknown,
  at: string,
  fail: (field: string, detail: string) => never,
): void {
  if (!isObject(metrics)) return fail(at, `must be an object of metrics, got ${shown(metrics)}`);
  for (const [name, v] of Object.entries(metrics)) {
    const problem = metricNameProblem(name);
    if (problem) fail(at, `has a key that is not a metric: ${problem}`);
    if (v !== null && typeof v !== 'number')
      fail(`${at}.${name}`, `must be a number or null, got ${shown(v)}`);
  }
}
