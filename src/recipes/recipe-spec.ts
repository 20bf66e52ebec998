// A recipe: DeepSeek-R1's training pipeline in miniature, as a list of stages run one after the
// other on one model (docs/grpo.md §9). A stage is
//   sft               supervised fine-tuning (src/train/sft.ts) on a dataset: the built-in cold-start
//                     set, a JSONL text, or the set an earlier rejection-sample stage kept;
//   grpo              a GRPO run (src/train/run.ts) from a preset plus options;
//   rejection-sample  k completions per training prompt, keeping the verified ones
//                     (src/recipes/rejection-sampling.ts): a dataset for a later sft stage.
// Each stage starts from the weights the previous one ended with, or from `from`: 'base' (the
// recipe's model as loaded) or an earlier stage's name (distillation: a student starts from the base
// model and learns from the teacher stage's samples). A rejection-sample stage changes no weights:
// a stage after it starts from the weights it sampled with.
//
// This file is what a recipe is, without running one: its types, the JSON parser, the built-in
// recipes, the cold-start set, each stage's seed and config, and the timeline's JSON revival. It
// loads no GPU code, so the page (src/app) shows and checks recipes with it; the runner that
// trains the stages is RecipeRun in recipe.ts.
import { mixSeeds } from '../core/rng';
import { createCountdownTask } from '../tasks/countdown';
import {
  DEFAULT_TRACE_MIX,
  generateTraces,
  TINY_COUNTDOWN_OPTIONS,
  type Trace,
} from '../tasks/traces';
import { resolveConfig, type Config, type ConfigInput } from '../grpo/config';
import { PRESETS, type PresetName } from '../grpo/presets';
import type { RejectionSamplingOptions } from './rejection-sampling';
import type { MetricsRow } from '../core/metrics-row';
import { resolveSftConfig, type SftConfig } from '../train/sft-config';
import type { SftRow } from '../train/sft-data';
import { checkCount, overLimitMessage } from '../core/limits';
import { formatBytes } from '../core/format';
import { COLD_START_LIMIT, REJECTION_LIMITS } from './limits';

export type StageKind = 'sft' | 'grpo' | 'rejection-sample';

/** Where an sft stage's examples come from. */
export type SftDataSource =
  /** `count` careful (reflecting, backward-search) Countdown traces whose answer is right, in the
   * r1-zero template: R1's "long chain-of-thought" cold-start data, in miniature. */
  | { coldStart: { count: number } }
  /** The completions an earlier rejection-sample stage kept. */
  | { stage: string }
  /** A JSONL text in TRL's SFT formats (the CLI reads `path` into it). */
  | { jsonl: string };

interface StageBase {
  /** Unique in the recipe; names the stage's checkpoints and its rows. */
  name: string;
  /** 'previous' (default), 'base', an earlier stage's name, or 'model:<ref>' (sft / grpo: another
   * model with the same tokenizer, a distillation student; the CLI reads a Hugging Face folder). */
  from?: string;
}

export interface SftStage extends StageBase {
  kind: 'sft';
  data: SftDataSource;
  /** SFTConfig options (camelCase, src/train/sft.ts); seed defaults to the recipe's. */
  options?: Partial<Record<keyof SftConfig, unknown>>;
}

export interface GrpoStage extends StageBase {
  kind: 'grpo';
  /** The preset the options apply to (default 'aha'). */
  preset?: PresetName;
  options?: Partial<ConfigInput>;
}

export interface RejectionStage extends StageBase {
  kind: 'rejection-sample';
  /** The preset whose task, template and sampling length the prompts use (default 'aha'). */
  preset?: PresetName;
  /** Training prompts sampled (never held-out ones: the preset's task excludes them). */
  prompts: number;
  options: Partial<Omit<RejectionSamplingOptions, 'seed'>> & { k: number; seed?: number };
}

export type RecipeStage = SftStage | GrpoStage | RejectionStage;

export interface Recipe {
  name: string;
  description?: string;
  /** Every stage's seed unless its options name one. */
  seed: number;
  stages: RecipeStage[];
}

/** One row of the recipe's timeline: `step` counts across stages (the x axis of every chart). */
export interface TimelineRow extends MetricsRow {
  /** The stage's index in recipe.stages. */
  stage: number;
  /** The step within its stage. */
  stageStep: number;
}

/** What a finished stage produced. */
export interface StageResult {
  stage: number;
  name: string;
  kind: StageKind;
  /** The stage's optimizer steps (0 for rejection-sample). */
  steps: number;
  /** The timeline step at which the stage ended. */
  endStep: number;
  seconds: number;
  /** rejection-sample: counts (the samples themselves are in the hook's report). */
  rejection?: {
    sampled: number;
    kept: number;
    yield: number;
    perPrompt: { problemId: string; kept: number; sampled: number }[];
  };
  /** The last row's metrics (sft / grpo). */
  last?: Record<string, number>;
}

/** The recipe's progress as JSON: with the current stage's latest checkpoint it resumes the run. */
export interface RecipeState {
  recipe: Recipe;
  /** The stage under way (recipe.stages.length when all are done). */
  stageIndex: number;
  results: StageResult[];
  /** The JSONL sets rejection-sample stages kept, by stage name. */
  datasets: Record<string, string>;
  timeline: TimelineRow[];
}

/** `"from": "model:<ref>"`: a stage starts from another model (a distillation student). */
/** The run id a recipe's stage keeps its checkpoints under: `<runId>/<index>-<name>`. */
export const stageRunId = (runId: string, index: number, name: string) =>
  `${runId}/${index}-${name}`;

export const MODEL_PREFIX = 'model:';

const KINDS: readonly StageKind[] = ['sft', 'grpo', 'rejection-sample'];

/** Checks a recipe read from JSON; every problem names the stage and the field. */
export function parseRecipe(value: unknown): Recipe {
  const fail = (message: string): never => {
    throw new Error(`recipe: ${message}`);
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    fail('expected a JSON object with "name", "seed" and "stages"');
  const r = value as Record<string, unknown>;
  if (typeof r.name !== 'string' || r.name.trim() === '') fail('"name" must be a non-empty string');
  const seed = r.seed ?? 1;
  if (!Number.isInteger(seed) || (seed as number) < 0)
    fail(`"seed" must be an integer ≥ 0, got ${JSON.stringify(seed)}`);
  if (!Array.isArray(r.stages) || r.stages.length === 0) fail('"stages" must be a non-empty array');
  const names = new Set<string>();
  const producesWeights = new Set<string>();
  const datasets = new Set<string>();
  const stages = (r.stages as unknown[]).map((raw, i): RecipeStage => {
    const where = `stage ${i + 1}`;
    if (typeof raw !== 'object' || raw === null) fail(`${where} must be an object`);
    const s = raw as Record<string, unknown>;
    if (!KINDS.includes(s.kind as StageKind))
      fail(`${where}: "kind" must be one of ${KINDS.join(', ')}, got ${JSON.stringify(s.kind)}`);
    const name = s.name ?? `${s.kind}-${i + 1}`;
    if (typeof name !== 'string' || !/^[\w.-]{1,64}$/.test(name))
      fail(`${where}: "name" must be 1–64 letters, digits, '.', '_' or '-'`);
    if (names.has(name as string)) fail(`${where}: the name '${name}' is used twice`);
    const from = s.from ?? 'previous';
    if (typeof from !== 'string') fail(`${where} ('${name}'): "from" must be a string`);
    const model = (from as string).startsWith(MODEL_PREFIX);
    if (model && s.kind === 'rejection-sample')
      fail(
        `${where} ('${name}'): a rejection-sample stage samples from a stage's weights, not from "${from}"`,
      );
    if (model && (from as string).length === MODEL_PREFIX.length)
      fail(`${where} ('${name}'): "from": "model:<folder>" names no model`);
    if (!model && from !== 'previous' && from !== 'base' && !names.has(from as string))
      fail(`${where} ('${name}'): "from" names '${from}', which is not an earlier stage`);
    names.add(name as string);
    if (s.options !== undefined && (typeof s.options !== 'object' || s.options === null))
      fail(`${where} ('${name}'): "options" must be an object`);
    const options = (s.options ?? {}) as Record<string, unknown>;
    const preset = s.preset ?? 'aha';
    if (s.kind !== 'sft' && !(typeof preset === 'string' && preset in PRESETS))
      fail(
        `${where} ('${name}'): unknown preset ${JSON.stringify(preset)} (${Object.keys(PRESETS).join(', ')})`,
      );
    if (s.kind === 'sft') {
      const d = s.data as Record<string, unknown> | undefined;
      let data: SftDataSource;
      if (d && typeof d === 'object' && 'coldStart' in d) {
        const count = (d.coldStart as { count?: unknown } | null)?.count;
        try {
          checkCount('data.coldStart.count', count, 1, COLD_START_LIMIT);
        } catch (err) {
          fail(`${where} ('${name}'): ${(err as Error).message}`);
        }
        data = { coldStart: { count: count as number } };
      } else if (d && typeof d === 'object' && typeof d.stage === 'string') {
        if (!datasets.has(d.stage))
          fail(
            `${where} ('${name}'): data.stage names '${d.stage}', which is not an earlier rejection-sample stage`,
          );
        data = { stage: d.stage };
      } else if (d && typeof d === 'object' && typeof d.jsonl === 'string') {
        data = { jsonl: d.jsonl };
      } else {
        return fail(
          `${where} ('${name}'): "data" must be {"coldStart": {"count": N}}, {"stage": "<rejection stage>"} or {"jsonl": "<text>"} (the CLI also reads {"path": "file.jsonl"})`,
        );
      }
      // Checks the options now rather than after the earlier stages have trained.
      try {
        resolveSftConfig(options);
      } catch (err) {
        fail(`${where} ('${name}'): ${(err as Error).message}`);
      }
      producesWeights.add(name as string);
      return { kind: 'sft', name: name as string, from: from as string, data, options };
    }
    if (s.kind === 'grpo') {
      try {
        resolveConfig({ ...PRESETS[preset as PresetName], ...options });
      } catch (err) {
        fail(`${where} ('${name}'): ${(err as Error).message}`);
      }
      producesWeights.add(name as string);
      return {
        kind: 'grpo',
        name: name as string,
        from: from as string,
        preset: preset as PresetName,
        options,
      };
    }
    const prompts = s.prompts;
    // Every count before any stage runs: a bad one would otherwise stop the recipe mid-way.
    try {
      checkCount('"prompts"', prompts, 1, REJECTION_LIMITS.prompts);
      checkCount('options.k (completions per prompt)', options.k, 1, REJECTION_LIMITS.k);
      if (options.batchSize !== undefined)
        checkCount('options.batchSize', options.batchSize, 1, REJECTION_LIMITS.batchSize);
      const samples = (prompts as number) * (options.k as number);
      if (samples > REJECTION_LIMITS.samples.max)
        throw new RangeError(
          overLimitMessage(`"prompts" × options.k =`, samples, REJECTION_LIMITS.samples),
        );
    } catch (err) {
      fail(`${where} ('${name}'): ${(err as Error).message}`);
    }
    datasets.add(name as string);
    return {
      kind: 'rejection-sample',
      name: name as string,
      from: from as string,
      preset: preset as PresetName,
      prompts: prompts as number,
      options: options as RejectionStage['options'],
    };
  });
  return {
    name: (r.name as string).trim(),
    description: typeof r.description === 'string' ? r.description : undefined,
    seed: seed as number,
    stages,
  };
}

// ---------------------------------------------------------------------------------------------
// Built-in recipes (the bundled model, Countdown). GRPO budgets are equal across recipes so the
// comparison is of what is done with them: R1-Zero's GRPO steps = the R1 recipe's two GRPO stages.

/** GRPO steps of R1-Zero, and of R1's two RL stages together. */
export const RECIPE_GRPO_STEPS = 20;

const rl = (steps: number): Partial<ConfigInput> => ({ steps, saveSteps: 10 });

export const BUILTIN_RECIPES = {
  'r1-zero': {
    name: 'R1-Zero',
    description:
      'Pure RL: GRPO from the base model with format and accuracy rewards (the aha preset).',
    seed: 1,
    stages: [{ kind: 'grpo', name: 'rl', preset: 'aha', options: rl(RECIPE_GRPO_STEPS) }],
  },
  r1: {
    name: 'R1',
    description:
      'Cold start on careful chain-of-thought examples, reasoning RL, rejection sampling of the RL model’s verified answers, SFT of the base model on them (two epochs), and a last RL stage (DeepSeek-R1 §2.3).',
    seed: 1,
    stages: [
      {
        kind: 'sft',
        name: 'cold-start',
        data: { coldStart: { count: 256 } },
        options: {
          learningRate: 3e-4,
          numTrainEpochs: 1,
          perDeviceTrainBatchSize: 16,
          maxLength: 128,
          saveSteps: 8,
        },
      },
      { kind: 'grpo', name: 'reasoning-rl', preset: 'aha', options: rl(RECIPE_GRPO_STEPS / 2) },
      {
        kind: 'rejection-sample',
        name: 'rejection',
        preset: 'aha',
        prompts: 64,
        options: { k: 4, temperature: 1 },
      },
      {
        kind: 'sft',
        name: 'sft',
        // R1 §2.3.3 fine-tunes the base model (DeepSeek-V3-Base) for two epochs on the new set.
        from: 'base',
        data: { stage: 'rejection' },
        options: {
          learningRate: 3e-4,
          numTrainEpochs: 2,
          perDeviceTrainBatchSize: 16,
          maxLength: 128,
          saveSteps: 8,
        },
      },
      { kind: 'grpo', name: 'final-rl', preset: 'aha', options: rl(RECIPE_GRPO_STEPS / 2) },
    ],
  },
  distill: {
    name: 'Distillation',
    description:
      'A teacher trained by RL (R1-Zero’s GRPO), its verified outputs rejection-sampled, and the base model fine-tuned on them (DeepSeek-R1 §4.1).',
    seed: 1,
    stages: [
      { kind: 'grpo', name: 'teacher-rl', preset: 'aha', options: rl(RECIPE_GRPO_STEPS) },
      {
        kind: 'rejection-sample',
        name: 'teacher-samples',
        preset: 'aha',
        prompts: 64,
        options: { k: 4, temperature: 1 },
      },
      {
        kind: 'sft',
        name: 'student-sft',
        from: 'base',
        data: { stage: 'teacher-samples' },
        options: {
          learningRate: 3e-4,
          numTrainEpochs: 2,
          perDeviceTrainBatchSize: 16,
          maxLength: 128,
          saveSteps: 8,
        },
      },
    ],
  },
} satisfies Record<string, Recipe>;

export function builtinRecipe(name: string, seed?: number): Recipe {
  const recipe = (BUILTIN_RECIPES as Record<string, Recipe>)[name];
  if (!recipe)
    throw new Error(`no built-in recipe '${name}' (${Object.keys(BUILTIN_RECIPES).join(', ')})`);
  return parseRecipe(structuredClone({ ...recipe, seed: seed ?? recipe.seed }));
}

/** The cold-start traces: careful Countdown traces (backward search, reflecting) whose answer is
 * right. Held-out problems never appear (the trace generator draws training problems only). */
export function coldStartTraces(seed: number, count: number): Trace[] {
  const mix = { ...DEFAULT_TRACE_MIX, arithmeticShare: 0, checkRate: 1 };
  // Some careful traces run out of tries before they hit the target: draw until `count` are right.
  for (let n = count * 2; ; n *= 2) {
    const right = generateTraces(mixSeeds(seed, 0xc01d), n, mix).filter((t) => t.correct);
    if (right.length >= count) return right.slice(0, count);
    if (n > count * 64) throw new Error(`cold start: only ${right.length} right traces in ${n}`);
  }
}

/** The cold-start set as SFT prompt/completion rows (the r1-zero template's prompt). */
export function coldStartRows(seed: number, count: number): SftRow[] {
  return coldStartTraces(seed, count).map((t, i) => ({
    kind: 'prompt-completion',
    line: i + 1,
    prompt: t.prompt,
    completion: t.completion,
  }));
}

/** Stage `index`'s seed unless its options set one: the recipe's seed for the first stage (so a
 * one-stage GRPO recipe is exactly the preset's run with that seed), a derived one after it, so
 * that a later GRPO stage does not redraw the first stage's prompts and samples. */
export const stageSeed = (recipe: Recipe, index: number) =>
  index === 0 ? recipe.seed : mixSeeds(recipe.seed, 0x57a9e + index);

/** The preset's config for a grpo or rejection-sample stage (a grpo stage's options over the
 * preset, the stage's seed unless they set one). */
export function stageConfig(recipe: Recipe, index: number): Config {
  const stage = recipe.stages[index];
  if (stage.kind === 'sft') throw new Error(`stage '${stage.name}' is an sft stage`);
  return resolveConfig({
    ...PRESETS[stage.preset ?? 'aha'],
    seed: stageSeed(recipe, index),
    ...(stage.kind === 'grpo' ? stage.options : {}),
  });
}

/**
 * The first sft or grpo stage that fully fine-tunes the loaded model itself (it starts from the
 * base, directly or through rejection-sample stages, which pass their start on) without LoRA, or
 * null. On a 4-bit checkpoint such a stage is refused, as a full `npm run sft` or `npm run train`
 * of it is: only adapters train on a quantised base.
 */
export function fullStageOnBase(recipe: Recipe): RecipeStage | null {
  for (let i = 0; i < recipe.stages.length; i++) {
    const stage = recipe.stages[i];
    if (stage.kind === 'rejection-sample' || !startsFromBase(recipe, i)) continue;
    if (!stageUsesLora(recipe, i)) return stage;
  }
  return null;
}

/** Whether stage `index` starts from the loaded model itself: directly, as the first stage, or
 * through rejection-sample stages, which pass their start on. */
export function startsFromBase(recipe: Recipe, index: number): boolean {
  const stage = recipe.stages[index];
  const from = stage.from ?? 'previous';
  if (from === 'base') return true;
  if (from.startsWith(MODEL_PREFIX)) return false;
  const source = from === 'previous' ? index - 1 : recipe.stages.findIndex((s) => s.name === from);
  if (source < 0) return true; // the first stage starts from the loaded model
  return recipe.stages[source].kind === 'rejection-sample' && startsFromBase(recipe, source);
}

/** Training stage `index`'s resolved adapter and base-storage options (its SFT or GRPO config). */
export function stageTrainingOptions(
  recipe: Recipe,
  index: number,
): Pick<SftConfig, 'usePeft' | 'dtype' | 'useBnbNestedQuant'> {
  const stage = recipe.stages[index];
  return stage.kind === 'sft' ? resolveSftConfig(stage.options) : stageConfig(recipe, index);
}

/** Whether training stage `index` trains LoRA adapters (usePeft) rather than every weight. */
export const stageUsesLora = (recipe: Recipe, index: number): boolean =>
  stageTrainingOptions(recipe, index).usePeft;

/** A RecipeState read back from JSON: JSON writes a NaN metric (a rate of an empty group) as
 * null; it is NaN again here, so a resumed timeline equals the one that was stored. */
export function reviveRecipeState(value: RecipeState): RecipeState {
  return {
    ...value,
    timeline: value.timeline.map((row) => ({
      ...row,
      metrics: Object.fromEntries(
        Object.entries(row.metrics).map(([k, v]) => [k, v === null ? NaN : v]),
      ),
    })),
  };
}

/** Countdown with the tiny reasoner's options: the task the built-in recipes are scored by. */
export const recipeScoringTask = () => createCountdownTask(TINY_COUNTDOWN_OPTIONS);

/** The preflight's memory plans in one line, as the page's recipe log and `npm run recipe` show
 * them: `memory plans at peak (budget 4.00 GiB): 'cold-start' 16.2 MiB, 'rl' 66.9 GiB (does not fit)`. */
export function stagePlansText(
  plans: readonly { name: string; peakBytes: number; fits: boolean }[],
  budgetBytes: number,
): string {
  const stages = plans.map(
    (p) => `'${p.name}' ${formatBytes(p.peakBytes)}${p.fits ? '' : ' (does not fit)'}`,
  );
  return `memory plans at peak (budget ${formatBytes(budgetBytes)}): ${stages.join(', ')}`;
}
