// `npm run recipe -- <recipe.json | r1-zero | r1 | distill> [--out runs/x] [--seed N]`
// `npm run recipe -- --resume <run folder>`
// `npm run recipe -- --compare [--seeds 1,2,3] [--out docs/recipe] [--grpo-steps n] [--quick]`
// Runs a multi-stage recipe (src/recipes/recipe.ts: sft | grpo | rejection-sample stages) headless on
// Node WebGPU into a run folder (src/cli/_recipe.ts lists its files), or resumes one from its state
// and latest checkpoint. --compare puts the R1 paper's three findings to the bundled models by
// docs/recipe/protocol.md (src/cli/_recipe-compare.ts) and writes the report; --quick runs every
// arm shortened, as a smoke run. Exits 0 when the recipe finished.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isHelpRequested } from '../grpo/config';
import { parseRecipe } from '../recipes/recipe-spec';
import type { AhaPromptSet } from '../tasks/traces';
import { flagCount, flagCounts, RECIPE, recipeHelp, runCommand, takeCommandFlags } from './_flags';
import { formatStagePlans, planRecipeStages, recipeFolder, readRecipe } from './_recipe';
import { compareFindings, renderReport } from './_recipe-compare';
import {
  FINDINGS_DEFAULTS,
  QUICK,
  QUICK_PROMPTS,
  type FindingsOptions,
} from '../recipes/recipe-findings';
import { openModel, openEngine } from './_session';

function seedOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[0-9]+$/.test(text)) throw new Error(`--seed must be an integer ≥ 0, got '${text}'`);
  return Number(text);
}

function promptSet(text: string | undefined): AhaPromptSet | undefined {
  if (text === undefined || text === 'report' || text === 'selection') return text;
  throw new Error(`--prompts must be 'report' or 'selection', got '${text}'`);
}

function positive(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const x = Number(text);
  if (!(x > 0)) throw new Error(`--${flag} must be a positive number, got '${text}'`);
  return x;
}

async function main(argv: string[]) {
  if (isHelpRequested(argv)) {
    console.log(recipeHelp());
    return;
  }
  const { flags, rest } = takeCommandFlags(RECIPE, argv);
  const flag = (name: string) => flags.get(name)?.[0];
  const render = flag('render');
  if (render !== undefined) {
    renderReport(resolve(render));
    return;
  }
  const quick = flag('quick') !== undefined;
  if (flag('compare') !== undefined || quick) {
    if (rest.length) throw new Error(`--compare takes no recipe (got '${rest[0]}')`);
    const steps =
      flag('grpo-steps') === undefined ? undefined : flagCount(RECIPE, flags, 'grpo-steps', 1);
    const sftRate = positive('sft-learning-rate', flag('sft-learning-rate'));
    const sft = (o: Record<string, unknown>) =>
      sftRate === undefined ? o : { ...o, learningRate: sftRate };
    // --quick: every arm end to end in a few minutes (a smoke run, not a measurement).
    const options: Partial<FindingsOptions> = quick ? QUICK : {};
    const { outcome } = await compareFindings({
      seeds: flagCounts(RECIPE, flags, 'seeds', quick ? [1] : [1, 2, 3]),
      outDir: resolve(flag('out') ?? (quick ? 'runs/recipe-compare-quick/report' : 'docs/recipe')),
      workDir: resolve(
        flag('work') ?? (quick ? 'runs/recipe-compare-quick/work' : 'runs/recipe-compare'),
      ),
      model: flag('model') ?? 'bundled',
      student: flag('student') ?? FINDINGS_DEFAULTS.student,
      command: `npm run recipe -- ${argv.join(' ')}`,
      prompts: promptSet(flag('prompts')),
      k: flag('k') === undefined ? undefined : flagCount(RECIPE, flags, 'k', 0),
      promptLimit: quick ? QUICK_PROMPTS : undefined,
      options: {
        ...options,
        ...(steps === undefined ? {} : { reasonerSteps: steps, studentSteps: steps }),
        coldStartSft: sft(options.coldStartSft ?? FINDINGS_DEFAULTS.coldStartSft),
        distillSft: sft(options.distillSft ?? FINDINGS_DEFAULTS.distillSft),
      },
    });
    if (outcome !== 'finished') process.exitCode = 1;
    return;
  }
  const resumeDir = flag('resume');
  if (rest.length > 1) throw new Error(`one recipe at a time (got ${rest.join(', ')})`);
  let recipeArg = rest[0];
  let runDir: string;
  if (resumeDir) {
    runDir = resolve(resumeDir);
    const stored = join(runDir, 'recipe.json');
    if (!existsSync(stored))
      throw new Error(
        `--resume: ${runDir} has no recipe.json: the run was stopped before it started (start it again), or this is not a recipe run folder`,
      );
    if (recipeArg) throw new Error('--resume continues the stored recipe: give no recipe with it');
    recipeArg = stored;
  } else {
    if (!recipeArg)
      throw new Error(
        'name a recipe: a JSON file or r1-zero, r1, distill (npm run recipe -- --help)',
      );
    runDir = resolve(
      flag('out') ?? join('runs', `recipe-${new Date().toISOString().replace(/[:.]/g, '-')}`),
    );
  }
  const recipe = resumeDir
    ? parseRecipe(JSON.parse(readFileSync(recipeArg, 'utf8')))
    : await readRecipe(recipeArg, seedOf(flag('seed')));
  // Opened, not loaded: stages stream its weights into the GPU as stored (no f32 host copy).
  const model = await openModel(flag('model') ?? 'bundled');
  const engine = await openEngine();
  try {
    if (flag('plan') !== undefined) {
      const plans = await planRecipeStages({ engine, model, recipe });
      console.log(formatStagePlans(recipe, plans));
      if (plans.some((p) => !p.plan.fits)) process.exitCode = 1;
      return;
    }
    const { outcome } = await recipeFolder({
      engine,
      model,
      recipe,
      runDir,
      resume: !!resumeDir,
    });
    console.log(`recipe '${recipe.name}' ${outcome}: ${runDir}`);
    if (outcome !== 'finished') process.exitCode = 1;
  } finally {
    engine.destroy();
    await model.hf.weights.close();
  }
}

runCommand(() => main(process.argv.slice(2)));
