// `npm run recipe -- --compare`: R1-Zero vs R1 vs distillation on the bundled model, measured on
// the aha demo's held-out Countdown prompts (never in the pretraining corpus nor in any stage's
// prompts) with the same sampling seed for every model, per seed. Two recipes per seed cover the
// three arms: 'distill' (its first stage, GRPO from the base model, IS the R1-Zero run: its weights
// are evaluated as R1-Zero, then rejection-sampled as the teacher, and the base model is fine-tuned
// on the kept samples) and 'r1' (cold start → GRPO → rejection sampling → SFT → GRPO), each stage's
// weights evaluated. Writes report.json, README.md and SVG timelines to the out folder
// (docs/recipe by default). Every seed run is reported; nothing is picked.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../grpo/config';
import { evaluate, type EvalReport } from '../train/evaluate';
import { PRESETS } from '../grpo/presets';
import {
  builtinRecipe,
  RECIPE_GRPO_STEPS,
  recipeScoringTask,
  type Recipe,
  type RecipeState,
  type StageResult,
} from '../recipes/recipe-spec';
import {
  COMPARISON_ARMS,
  type ComparisonArm,
  type HeldOut,
  type SeedStat,
} from '../recipes/recipe-comparison';
import { renderPrompt } from '../grpo/trainer';
import { wilsonInterval } from '../core/wilson';
import { lineChartSvg, type ChartSeries } from '../formats/svg-chart';
import { GpuLlama } from '../model/llama';
import { Sampler } from '../model/sampler';
import {
  AHA_REPORT_PROMPTS,
  AHA_REPORT_SEED,
  AHA_SELECTION_PROMPTS,
  ahaPrompts,
  type AhaPromptSet,
} from '../tasks/traces';
import { recipeFolder } from './_recipe';
import { loadModel, openEngine } from './_session';
import { mdCode, mdText } from '../export/markdown';
import { writeFileAtomic } from './_atomic-files';

type Metrics = EvalReport['metrics'];

const heldOut = (m: Metrics): HeldOut => ({
  accuracy: m.sample_accuracy,
  reflection: m.reflection_rate,
  length: m.mean_length,
  format: m.sample_format_rate,
  accuracyReflecting: m.accuracy_reflecting,
  accuracyNotReflecting: m.accuracy_not_reflecting,
});

export interface ArmStage {
  recipe: string;
  stage: string;
  kind: string;
  steps: number;
  seconds: number;
  /** Held-out rates of the weights the stage ended with (absent for rejection-sample). */
  eval?: HeldOut;
  rejection?: StageResult['rejection'];
}

export interface SeedComparison {
  seed: number;
  /** The final model of each arm. */
  arms: Record<ComparisonArm, HeldOut>;
  stages: ArmStage[];
  timelines: Record<string, RecipeState['timeline']>;
  seconds: number;
}

export interface CompareOptions {
  seeds: number[];
  outDir: string;
  model: string;
  command: string;
  /** 'selection': the disjoint held-out set choices are made on (docs/recipe/selection.md). */
  prompts?: AhaPromptSet;
  /** Samples per held-out prompt (default 1: the aha report's prompts, one draw each). */
  k?: number;
  /** Every SFT stage's learning rate instead of the built-in recipes' (the selection knob). */
  sftLearningRate?: number;
  /** Only the first n held-out prompts (tests). */
  promptLimit?: number;
  /** Other recipes than the built-in ones (tests run shortened ones); same stage names. */
  recipes?: { r1: (seed: number) => Recipe; distill: (seed: number) => Recipe };
}

const COLORS = ['#2563eb', '#dc2626', '#16a34a'];

const stats = (xs: number[]): SeedStat => ({
  mean: xs.reduce((a, b) => a + b, 0) / xs.length,
  min: Math.min(...xs),
  max: Math.max(...xs),
  values: xs,
});

export async function compareRecipes(o: CompareOptions): Promise<void> {
  const started = performance.now();
  const promptSet = o.prompts ?? 'report';
  const k = o.k ?? 1;
  const withSftRate = (recipe: Recipe): Recipe =>
    o.sftLearningRate === undefined
      ? recipe
      : {
          ...recipe,
          stages: recipe.stages.map((s) =>
            s.kind === 'sft'
              ? { ...s, options: { ...s.options, learningRate: o.sftLearningRate } }
              : s,
          ),
        };
  const recipeOf = o.recipes ?? {
    r1: (seed: number) => withSftRate(builtinRecipe('r1', seed)),
    distill: (seed: number) => withSftRate(builtinRecipe('distill', seed)),
  };
  const model = await loadModel(o.model);
  const problems = ahaPrompts(
    promptSet,
    promptSet === 'selection' ? AHA_SELECTION_PROMPTS : AHA_REPORT_PROMPTS,
  ).slice(0, o.promptLimit);
  const aha = resolveConfig(PRESETS.aha);
  const countdown = recipeScoringTask();
  const engine = await openEngine();
  const work = join(tmpdir(), `recipe-compare-${process.pid}`);
  try {
    /** Held-out rates of `weights`, with the same prompts and draws for every model. */
    const evaluateWeights = async (weights: ReadonlyMap<string, Float32Array>) => {
      const llama = GpuLlama.load(engine, model.hf.config, weights);
      try {
        const report = await evaluate(
          {
            sampler: new Sampler(engine, llama),
            tokenizer: model.tokenizer,
            task: countdown,
            renderPrompt: (p) => renderPrompt(countdown, model.tokenizer, p, aha.template),
          },
          problems,
          {
            k,
            temperature: aha.temperature,
            maxCompletionLength: aha.maxCompletionLength,
            seed: AHA_REPORT_SEED,
            batchSize: 200,
          },
        );
        return heldOut(report.metrics);
      } finally {
        llama.destroy();
      }
    };
    const base = await evaluateWeights(model.hf.tensors);
    console.log(`base: ${JSON.stringify(base)}`);
    const seeds: SeedComparison[] = [];
    for (const seed of o.seeds) {
      const seedStarted = performance.now();
      const stages: ArmStage[] = [];
      const timelines: Record<string, RecipeState['timeline']> = {};
      for (const name of ['distill', 'r1'] as const) {
        const recipe = recipeOf[name](seed);
        const { state } = await recipeFolder({
          engine,
          model,
          recipe,
          runDir: join(work, `${name}-seed-${seed}`),
          log: (line) => console.log(`seed ${seed} ${name}: ${line}`),
          hooks: {
            onStageEnd: async (result, info) => {
              const entry: ArmStage = {
                recipe: recipe.name,
                stage: result.name,
                kind: result.kind,
                steps: result.steps,
                seconds: result.seconds,
                rejection: result.rejection,
              };
              if (result.kind !== 'rejection-sample') {
                entry.eval = await evaluateWeights(info.weights);
                console.log(
                  `seed ${seed} ${name} after ${result.name}: ${JSON.stringify(entry.eval)}`,
                );
              }
              stages.push(entry);
            },
          },
        });
        timelines[recipe.name] = state.timeline;
      }
      const after = (recipe: string, stage: string) =>
        stages.find((s) => s.recipe === recipe && s.stage === stage)!.eval!;
      seeds.push({
        seed,
        arms: {
          'R1-Zero': after('Distillation', 'teacher-rl'),
          R1: after('R1', 'final-rl'),
          Distillation: after('Distillation', 'student-sft'),
        },
        stages,
        timelines,
        seconds: (performance.now() - seedStarted) / 1000,
      });
      // A long measurement keeps what it has: the seeds so far, should a later one fail.
      mkdirSync(o.outDir, { recursive: true });
      writeFileAtomic(join(o.outDir, 'partial.json'), JSON.stringify({ base, seeds }) + '\n');
    }
    const durationSeconds = (performance.now() - started) / 1000;
    const summary = Object.fromEntries(
      COMPARISON_ARMS.map((arm) => [
        arm,
        {
          accuracy: stats(seeds.map((s) => s.arms[arm].accuracy)),
          reflection: stats(seeds.map((s) => s.arms[arm].reflection)),
          length: stats(seeds.map((s) => s.arms[arm].length)),
          format: stats(seeds.map((s) => s.arms[arm].format)),
        },
      ]),
    );
    const report = {
      command: o.command,
      machine: {
        cpu: cpus()[0]?.model ?? 'unknown',
        cores: cpus().length,
        adapter: engine.gpu.adapter,
      },
      durationSeconds,
      promptSet,
      heldOutPrompts: problems.length,
      samplesPerPrompt: k,
      grpoStepsPerArm: RECIPE_GRPO_STEPS,
      recipes: { r1: recipeOf.r1(o.seeds[0]), distill: recipeOf.distill(o.seeds[0]) },
      base,
      summary,
      seeds,
    };
    mkdirSync(o.outDir, { recursive: true });
    writeFileAtomic(join(o.outDir, 'report.json'), JSON.stringify(report, null, 2) + '\n');
    writeReportViews(o.outDir, report);
    rmSync(join(o.outDir, 'partial.json'), { force: true });
    console.log(`wrote ${o.outDir} in ${(durationSeconds / 60).toFixed(1)} min`);
  } finally {
    engine.destroy();
    rmSync(work, { recursive: true, force: true });
  }
}

type CompareReport = Parameters<typeof markdownReport>[0] & { recipes?: unknown };

/** README.md, the SVG timelines and summary.json (the report without timelines, what the app
 * shows beside the Paper view) from a report. */
function writeReportViews(outDir: string, report: CompareReport): void {
  for (const [file, svg] of Object.entries(timelinePlots(report.seeds)))
    writeFileSync(join(outDir, file), svg);
  writeFileSync(join(outDir, 'README.md'), markdownReport(report));
  const { seeds, recipes: _recipes, ...head } = report;
  writeFileSync(
    join(outDir, 'summary.json'),
    JSON.stringify({ ...head, seeds: seeds.map(({ timelines: _t, ...rest }) => rest) }, null, 1) +
      '\n',
  );
}

/** `--render`: the views of an existing report.json again (after a change to how they are
 * written), without training anything. */
export function renderReport(outDir: string): void {
  const report = JSON.parse(readFileSync(join(outDir, 'report.json'), 'utf8')) as CompareReport;
  writeReportViews(outDir, report);
  console.log(`rewrote README.md, the plots and summary.json of ${outDir}`);
}

/** Training-time curves of seed 1's (first seed's) R1 timeline with its stage boundaries. */
function timelinePlots(seeds: SeedComparison[]): Record<string, string> {
  const out: Record<string, string> = {};
  const curve = (recipe: string, key: string): ChartSeries[] =>
    seeds.map((s, i) => ({
      name: `seed ${s.seed}`,
      color: COLORS[i % COLORS.length],
      width: 1.5,
      points: (s.timelines[recipe] ?? [])
        .filter((r) => Number.isFinite(r.metrics[key]))
        .map((r) => [r.step, r.metrics[key]] as [number, number]),
    }));
  out['r1-accuracy.svg'] = lineChartSvg({
    title: 'R1 recipe: training accuracy (GRPO stages) by timeline step',
    xLabel: 'step (across stages)',
    yLabel: 'accuracy',
    yMin: 0,
    yMax: 1,
    series: curve('R1', 'accuracy'),
  });
  out['r1-sft-loss.svg'] = lineChartSvg({
    title: 'R1 recipe: SFT loss (cold start, then SFT on rejection samples)',
    xLabel: 'step (across stages)',
    yLabel: 'loss',
    series: curve('R1', 'loss').map((s) => ({
      ...s,
      // GRPO's loss is another quantity: only the SFT stages' rows.
      points: s.points.filter(([step]) => {
        const row = seeds
          .find((x) => `seed ${x.seed}` === s.name)!
          .timelines.R1.find((r) => r.step === step);
        return row !== undefined && 'mean_token_accuracy' in row.metrics;
      }),
    })),
  });
  return out;
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '–');
const num = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');

function markdownReport(report: {
  command: string;
  machine: { cpu: string; cores: number; adapter: { vendor: string; architecture: string } };
  durationSeconds: number;
  promptSet: string;
  heldOutPrompts: number;
  samplesPerPrompt: number;
  base: HeldOut;
  summary: Record<string, Record<'accuracy' | 'reflection' | 'length' | 'format', SeedStat>>;
  seeds: SeedComparison[];
}): string {
  const r = report;
  // Each model is scored on n completions: the 95% Wilson interval of its accuracy says how much of
  // a difference between two rows sampling alone could make.
  const n = r.heldOutPrompts * r.samplesPerPrompt;
  const interval = (rate: number) => {
    const { low, high } = wilsonInterval(Math.round(rate * n), n);
    return `${pct(rate)} (${pct(low)}–${pct(high)})`;
  };
  const row = (name: string, h: HeldOut) =>
    `| ${mdText(name)} | ${interval(h.accuracy)} | ${pct(h.reflection)} | ${pct(h.accuracyReflecting)} vs ${pct(h.accuracyNotReflecting)} | ${num(h.length)} | ${pct(h.format)} |`;
  const header =
    '| model | accuracy (95% interval) | reflection rate | accuracy reflecting vs not | mean length | format |\n| --- | --- | --- | --- | --- | --- |';
  const lines = [
    '# R1-Zero vs R1 vs distillation, measured',
    '',
    `Command: ${mdCode(r.command)} — ${(r.durationSeconds / 60).toFixed(1)} minutes on ${r.machine.cores} × ${mdText(r.machine.cpu)}, WebGPU adapter ${mdText(`${r.machine.adapter.vendor} ${r.machine.adapter.architecture}`)}.`,
    `${r.heldOutPrompts} held-out Countdown prompts (the ${r.promptSet} set of \`npm run aha\`), ${r.samplesPerPrompt} samples each at temperature 1, the same draws for every model.`,
    '',
    'Arms (the bundled model, every GRPO stage the aha preset with its steps set): **R1-Zero** is GRPO alone;',
    '**R1** is a cold start (SFT on careful, reflecting traces) → GRPO → rejection sampling → SFT of the',
    'base model on the kept samples (two epochs, as R1 §2.3.3) → GRPO, with the same GRPO steps in total; **Distillation** is the',
    'base model fine-tuned on the R1-Zero model’s rejection-sampled (verified) outputs. Recipes:',
    '`src/recipes/recipe-spec.ts` BUILTIN_RECIPES; how the stage options were chosen: [selection.md](selection.md).',
    '',
    '## Final models, mean over seeds (lowest to highest)',
    '',
    '| arm | accuracy | reflection rate | mean length | format |',
    '| --- | --- | --- | --- | --- |',
    `| base model | ${pct(r.base.accuracy)} | ${pct(r.base.reflection)} | ${num(r.base.length)} | ${pct(r.base.format)} |`,
    ...COMPARISON_ARMS.map((arm) => {
      const s = r.summary[arm];
      const span = (x: SeedStat, f: (v: number) => string) =>
        `${f(x.mean)} (${f(x.min)}–${f(x.max)})`;
      return `| ${arm} | ${span(s.accuracy, pct)} | ${span(s.reflection, pct)} | ${span(s.length, num)} | ${span(s.format, pct)} |`;
    }),
    '',
    `Each model's accuracy is measured on ${n} completions; at the base model's rate its 95% Wilson ` +
      `interval is ${interval(r.base.accuracy)}, so differences of a few points between rows are ` +
      'within what sampling alone gives. The tables below give every model’s interval.',
    '',
  ];
  for (const s of r.seeds) {
    lines.push(`## Seed ${s.seed} (${(s.seconds / 60).toFixed(1)} min), every stage`, '', header);
    lines.push(row('base model', r.base));
    for (const st of s.stages) {
      if (st.eval)
        lines.push(row(`${st.recipe} · ${st.stage} (${st.kind}, ${st.steps} steps)`, st.eval));
      else if (st.rejection)
        lines.push(
          `| ${mdText(`${st.recipe} · ${st.stage}`)} (rejection sampling) | kept ${st.rejection.kept} of ${st.rejection.sampled} (yield ${pct(st.rejection.yield)}) | | | | |`,
        );
    }
    lines.push('');
  }
  lines.push('![R1 training accuracy](r1-accuracy.svg) ![R1 SFT loss](r1-sft-loss.svg)', '');
  return lines.join('\n');
}
