// `npm run recipe -- --compare`: the R1 paper's three findings put to the miniature, by the
// protocol written before any number (docs/recipe/protocol.md). Per seed, one recipe
// (src/recipes/recipe-findings.ts) trains every arm in a run folder under the work folder: the tiny
// reasoner's R1-Zero (the aha preset; finding 1's arm, finding 2's GRPO-alone arm and the teacher),
// the teacher's rejection samples, the student distilled from them, then GRPO on it, GRPO on the
// student alone, and cold start → GRPO on the tiny reasoner. Each arm's final weights are scored on
// the aha demo's held-out prompts with the same draws for every model; the models as loaded are
// scored once. Every seed run is reported; nothing is picked. A stopped or killed comparison
// continues where it was when run again with the same work folder (each seed's recipe resumes from
// its run folder; evaluations done are kept in it).
// Writes findings.json (what the Paper view reads), README.md and SVG plots to the out folder
// (docs/recipe by default), after removing what an earlier comparison wrote there.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../grpo/config';
import { evaluate } from '../train/evaluate';
import { PRESETS } from '../grpo/presets';
import {
  coldStartRows,
  recipeScoringTask,
  type Recipe,
  type RecipeState,
} from '../recipes/recipe-spec';
import {
  ARM_IDS,
  ARMS,
  FINDINGS_DEFAULTS,
  findingsRecipe,
  judgeFindings,
  movingMean,
  projectedSeconds,
  REACH_ACCURACY,
  REACH_WINDOW,
  STAGE,
  stepsToReach,
  type ArmEval,
  type ArmId,
  type FindingsOptions,
  type FindingsReport,
} from '../recipes/recipe-findings';
import { renderPrompt } from '../grpo/trainer';
import { wilsonInterval } from '../core/wilson';
import { lineChartSvg, type ChartSeries } from '../formats/svg-chart';
import { GpuLlama } from '../model/llama';
import { Sampler } from '../model/sampler';
import type { LlamaConfig } from '../core/model-config';
import type { WeightSource } from '../model/parameters';
import { languageConsistencyReward } from '../rewards/language-consistency';
import { checkpointFromFiles } from '../train/checkpoint';
import {
  AHA_REPORT_PROMPTS,
  AHA_REPORT_SEED,
  AHA_SELECTION_PROMPTS,
  ahaPrompts,
  type AhaPromptSet,
} from '../tasks/traces';
import { recipeFolder } from './_recipe';
import { newestCheckpoint } from './_run-folder';
import { loadModel, openEngine } from './_session';
import { mdCode, mdText } from '../export/markdown';
import { writeFileAtomic } from './_atomic-files';

export interface CompareOptions {
  seeds: number[];
  outDir: string;
  /** Where each seed's recipe run folder lives (kept: a second run resumes from it). */
  workDir: string;
  /** The tiny reasoner (teacher) and the student, as --model names them. */
  model: string;
  student: string;
  command: string;
  /** 'selection': the disjoint held-out set choices are made on (protocol.md). */
  prompts?: AhaPromptSet;
  /** Samples per held-out prompt (default 1). */
  k?: number;
  /** Only the first n held-out prompts (--quick, tests). */
  promptLimit?: number;
  /** Options over FINDINGS_DEFAULTS (--steps, --quick, tests). */
  options?: Partial<FindingsOptions>;
  /** Stop every seed's recipe after this many optimizer steps (tests: a kill mid-recipe). */
  stopAfterSteps?: number;
  log?: (line: string) => void;
}

/** The generated files of a comparison in the out folder (also those of the earlier, 20-step
 * comparison, replaced by a run of this one). protocol.md and selection.md are written by hand. */
const GENERATED = [
  'findings.json',
  'README.md',
  'partial.json',
  'accuracy-reasoner.svg',
  'accuracy-student.svg',
  'report.json',
  'summary.json',
  'r1-accuracy.svg',
  'r1-sft-loss.svg',
];

/** The arm a stage's weights are (stages that end no arm: undefined). */
const armOfStage = (stage: string): ArmId | undefined =>
  ARM_IDS.find((id) => ARMS[id].stage === stage);

export async function compareFindings(
  o: CompareOptions,
): Promise<{ outcome: 'finished' | 'stopped'; report?: FindingsReport }> {
  const started = performance.now();
  const log = o.log ?? ((line: string) => console.log(line));
  const elapsed = () => `[${((performance.now() - started) / 60_000).toFixed(1)} min]`;
  const promptSet = o.prompts ?? 'report';
  const k = o.k ?? 1;
  const options: FindingsOptions = { ...FINDINGS_DEFAULTS, ...o.options, student: o.student };
  const engine = await openEngine();
  const reasoner = await loadModel(o.model);
  const student = await loadModel(o.student);
  // Distillation trains the student on the teacher's text as tokens: refused now, not after the
  // teacher's 95 steps (the recipe would refuse it at the student's first stage).
  const probe = coldStartRows(0, 1)[0] as { prompt: string; completion: string };
  const text = probe.prompt + probe.completion;
  if (
    JSON.stringify(student.tokenizer.encode(text)) !==
    JSON.stringify(reasoner.tokenizer.encode(text))
  )
    throw new Error(
      `the student '${o.student}' has another tokenizer than '${o.model}' (distillation here needs the same one)`,
    );
  const problems = ahaPrompts(
    promptSet,
    promptSet === 'selection' ? AHA_SELECTION_PROMPTS : AHA_REPORT_PROMPTS,
  ).slice(0, o.promptLimit);
  const aha = resolveConfig(PRESETS.aha);
  const countdown = recipeScoringTask();
  try {
    /** Held-out numbers of `weights`, with the same prompts and draws for every model. */
    const evaluateWeights = async (
      config: LlamaConfig,
      weights: WeightSource,
    ): Promise<ArmEval> => {
      const llama = await GpuLlama.loadFrom(engine, config, weights);
      try {
        const report = await evaluate(
          {
            sampler: new Sampler(engine, llama),
            tokenizer: reasoner.tokenizer,
            task: countdown,
            renderPrompt: (p) => renderPrompt(countdown, reasoner.tokenizer, p, aha.template),
          },
          problems,
          {
            k,
            temperature: aha.temperature,
            maxCompletionLength: aha.maxCompletionLength,
            seed: AHA_REPORT_SEED,
            batchSize: 200,
            greedy: false,
          },
        );
        const samples = report.items.flatMap((i) => i.samples);
        const language = samples
          .map((s) => languageConsistencyReward(s.text, 'Latin'))
          .filter((x): x is number => x !== null);
        const m = report.metrics;
        return {
          n: samples.length,
          correct: samples.filter((s) => s.correct === true).length,
          accuracy: m.sample_accuracy,
          reflecting: samples.filter((s) => s.reflects).length,
          reflection: m.reflection_rate,
          format: m.sample_format_rate,
          languageConsistency: language.length
            ? language.reduce((a, b) => a + b, 0) / language.length
            : NaN,
          length: m.mean_length,
          accuracyReflecting: m.accuracy_reflecting,
          accuracyNotReflecting: m.accuracy_not_reflecting,
        };
      } finally {
        llama.destroy();
      }
    };
    const short = (e: ArmEval) =>
      `accuracy ${pct(e.accuracy)}, reflection ${pct(e.reflection)}, format ${pct(e.format)}`;
    const projected = projectedSeconds(options, o.seeds.length, problems.length * k);
    log(
      `projected ${(projected / 60).toFixed(0)} min on the 2-core machine of docs/recipe/protocol.md ` +
        `(${o.seeds.length} seed${o.seeds.length === 1 ? '' : 's'}); the running total is in brackets`,
    );
    const base = await evaluateWeights(reasoner.hf.config, reasoner.hf.tensors);
    log(`${elapsed()} ${ARMS.base.label}: ${short(base)}`);
    const studentBase = await evaluateWeights(student.hf.config, student.hf.tensors);
    log(`${elapsed()} ${ARMS.studentBase.label}: ${short(studentBase)}`);
    const perSeed: FindingsReport['perSeed'] = [];
    for (const seed of o.seeds) {
      const seedStarted = performance.now();
      const recipe = findingsRecipe(seed, options);
      const runDir = join(o.workDir, `seed-${seed}`);
      const resume = existsSync(join(runDir, 'recipe.json'));
      if (resume) {
        const stored = JSON.parse(readFileSync(join(runDir, 'recipe.json'), 'utf8')) as Recipe;
        if (JSON.stringify(stored) !== JSON.stringify(recipe))
          throw new Error(
            `${runDir} holds a run of other options than these: remove ${o.workDir} (or choose another --work) to start over`,
          );
      }
      // Evaluations of finished stages, kept beside the run so a resumed seed does not redo them.
      const evalsPath = join(runDir, 'evals.json');
      const evals: Partial<Record<ArmId, ArmEval>> = existsSync(evalsPath)
        ? JSON.parse(readFileSync(evalsPath, 'utf8'))
        : {};
      const { state, outcome } = await recipeFolder({
        engine,
        model: reasoner,
        recipe,
        runDir,
        resume,
        stopAfterSteps: o.stopAfterSteps,
        log: (line) => log(`seed ${seed}: ${line}`),
        hooks: {
          onStageEnd: async (result, info) => {
            const arm = armOfStage(result.name);
            log(`${elapsed()} seed ${seed}: '${result.name}' done in ${num(result.seconds)} s`);
            if (!arm) return;
            evals[arm] = await evaluateWeights(info.config, info.weights);
            writeFileAtomic(evalsPath, JSON.stringify(evals));
            log(`${elapsed()} seed ${seed}: ${ARMS[arm].label}: ${short(evals[arm])}`);
          },
        },
      });
      if (outcome === 'stopped') {
        log(`${elapsed()} seed ${seed}: stopped; run the same command again to continue`);
        return { outcome };
      }
      // A kill between a stage's end and its evaluation: the stage's last checkpoint has its weights.
      for (const [i, stage] of recipe.stages.entries()) {
        const arm = armOfStage(stage.name);
        if (!arm || evals[arm]) continue;
        const dir = newestCheckpoint(join(runDir, `${i}-${stage.name}`));
        if (!dir) throw new Error(`${runDir}: stage '${stage.name}' has no checkpoint`);
        const payload = checkpointFromFiles(
          (name) => new Uint8Array(readFileSync(join(dir, name))),
        ).payload;
        const weights = new Map(
          payload.tensors
            .filter((t) => !t.name.startsWith('optimizer.'))
            .map((t) => [t.name, t.data]),
        );
        evals[arm] = await evaluateWeights(payload.modelConfig, weights);
        writeFileAtomic(evalsPath, JSON.stringify(evals));
      }
      perSeed.push(seedResult(seed, (performance.now() - seedStarted) / 1000, state, evals));
      mkdirSync(o.outDir, { recursive: true });
      writeFileAtomic(
        join(o.outDir, 'partial.json'),
        JSON.stringify({ base, studentBase, perSeed }) + '\n',
      );
      log(`${elapsed()} seed ${seed} done in ${(perSeed.at(-1)!.seconds / 60).toFixed(1)} min`);
    }
    const report: FindingsReport = {
      version: 1,
      command: o.command,
      durationSeconds: (performance.now() - started) / 1000,
      machine: {
        cpu: cpus()[0]?.model ?? 'unknown',
        cores: cpus().length,
        adapter: `${engine.gpu.adapter.vendor} ${engine.gpu.adapter.architecture}`,
      },
      promptSet,
      heldOutPrompts: problems.length,
      samplesPerPrompt: k,
      seeds: o.seeds,
      options,
      base,
      studentBase,
      perSeed,
      findings: judgeFindings({ base, studentBase }, perSeed),
    };
    mkdirSync(o.outDir, { recursive: true });
    for (const file of GENERATED) rmSync(join(o.outDir, file), { force: true });
    writeFileAtomic(join(o.outDir, 'findings.json'), JSON.stringify(report, null, 1) + '\n');
    writeReportViews(o.outDir, report);
    // The seeds' run folders (checkpoints of every stage) served the resume; the report is written.
    rmSync(o.workDir, { recursive: true, force: true });
    log(
      `${elapsed()} wrote ${o.outDir} in ${(report.durationSeconds / 60).toFixed(1)} min: ` +
        report.findings.map((f) => `${f.title}: ${f.verdict}`).join('; '),
    );
    return { outcome: 'finished', report };
  } finally {
    engine.destroy();
  }
}

/** One seed's part of the report from its recipe state and evaluations. */
function seedResult(
  seed: number,
  seconds: number,
  state: RecipeState,
  arms: Partial<Record<ArmId, ArmEval>>,
): FindingsReport['perSeed'][number] {
  const index = (name: string) => state.recipe.stages.findIndex((s) => s.name === name);
  const accuracy = (name: string) =>
    state.timeline.filter((r) => r.stage === index(name)).map((r) => r.metrics.accuracy ?? NaN);
  const curves: Partial<Record<ArmId, number[]>> = {};
  for (const id of ARM_IDS) {
    const stage = ARMS[id].stage;
    if (stage && state.recipe.stages[index(stage)]?.kind === 'grpo') curves[id] = accuracy(stage);
  }
  const rejection = state.results.find((r) => r.name === STAGE.teacherSamples)?.rejection;
  return {
    seed,
    seconds,
    arms,
    stepsToReach: {
      r1Zero: stepsToReach(accuracy(STAGE.teacher)),
      coldStartRl: stepsToReach(accuracy(STAGE.coldStartRl)),
    },
    teacherSamples: { sampled: rejection?.sampled ?? 0, kept: rejection?.kept ?? 0 },
    stageSeconds: Object.fromEntries(state.results.map((r) => [r.name, r.seconds])),
    sftSteps: {
      coldStart: state.results.find((r) => r.name === STAGE.coldStart)?.steps ?? 0,
      distill: state.results.find((r) => r.name === STAGE.studentSft)?.steps ?? 0,
    },
    curves,
  };
}

/** README.md and the SVG plots from a findings report. */
function writeReportViews(outDir: string, report: FindingsReport): void {
  for (const [file, svg] of Object.entries(findingsPlots(report)))
    writeFileSync(join(outDir, file), svg);
  writeFileSync(join(outDir, 'README.md'), markdownReport(report));
}

/** `--render`: the views of an existing findings.json again (after a change to how they are
 * written), without training anything. */
export function renderReport(outDir: string): void {
  // A NaN rate is null in JSON; the formatters show either as '–'.
  const report = JSON.parse(readFileSync(join(outDir, 'findings.json'), 'utf8')) as FindingsReport;
  writeReportViews(outDir, report);
  console.log(`rewrote README.md and the plots of ${outDir}`);
}

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];

/** Training accuracy (moving mean) by GRPO step: the tiny reasoner's two GRPO arms, and the
 * student's, each seed a line. */
export function findingsPlots(report: FindingsReport): Record<string, string> {
  const series = (arms: ArmId[]): ChartSeries[] =>
    arms.flatMap((arm, a) =>
      report.perSeed.map((s, i) => ({
        name: `${ARMS[arm].label}, seed ${s.seed}`,
        color: COLORS[(a * 3 + i) % COLORS.length],
        width: 1.5,
        points: movingMean(s.curves[arm] ?? []).map((y, x) => [x + 1, y] as [number, number]),
      })),
    );
  const chart = (title: string, arms: ArmId[]) =>
    lineChartSvg({
      title,
      xLabel: 'GRPO step',
      yLabel: `training accuracy (mean of ${REACH_WINDOW} steps)`,
      yMin: 0,
      yMax: 1,
      series: series(arms),
    });
  return {
    'accuracy-reasoner.svg': chart('Tiny reasoner: GRPO alone vs cold start → GRPO', [
      'r1Zero',
      'coldStartRl',
    ]),
    'accuracy-student.svg': chart('Student: GRPO alone vs distilled, then GRPO', [
      'studentRl',
      'studentDistillRl',
    ]),
  };
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '–');
const num = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');

export function markdownReport(r: FindingsReport): string {
  const interval = (e: ArmEval, hits: number) => {
    const { low, high } = wilsonInterval(hits, e.n);
    return `${pct(hits / e.n)} (${pct(low)}–${pct(high)})`;
  };
  const row = (name: string, e: ArmEval | undefined) =>
    e
      ? `| ${mdText(name)} | ${interval(e, e.correct)} | ${interval(e, e.reflecting)} | ${pct(e.format)} | ${pct(e.languageConsistency)} | ${num(e.length)} |`
      : `| ${mdText(name)} | not measured | | | | |`;
  const header =
    '| model | accuracy (95% interval) | reflection rate (95% interval) | format | language consistency | mean length |\n| --- | --- | --- | --- | --- | --- |';
  const o = r.options;
  const lines = [
    '# The R1 paper’s three findings, measured in miniature',
    '',
    'Generated by the command below (src/cli/_recipe-compare.ts); the protocol it follows was written',
    'before any number: [protocol.md](protocol.md).',
    '',
    `Command: ${mdCode(r.command)} — **${(r.durationSeconds / 60).toFixed(1)} minutes** on ${r.machine.cores} × ${mdText(r.machine.cpu)}, WebGPU adapter ${mdText(r.machine.adapter)}.`,
    `Seeds ${r.seeds.join(', ')}; ${r.heldOutPrompts} held-out Countdown prompts (the ${r.promptSet} set of \`npm run aha\`), ${r.samplesPerPrompt} sample${r.samplesPerPrompt === 1 ? '' : 's'} each at temperature 1, the same draws for every model.`,
    `GRPO steps: ${o.reasonerSteps} on the tiny reasoner (R1-Zero and cold start → GRPO), ${o.studentSteps} on the student (${mdText(o.student)}: GRPO alone and distilled → GRPO). The teacher is each seed’s R1-Zero model, sampled on ${o.teacherPrompts} training prompts × ${o.teacherK}.`,
    '',
    '## Verdicts',
    '',
    '| finding | the paper | here | verdict |',
    '| --- | --- | --- | --- |',
    ...r.findings.map(
      (f) =>
        `| ${mdText(f.title)} | ${mdText(f.paper)} | ${f.comparisons.map((c) => mdText(c.text)).join('<br>')} | **${f.verdict}** |`,
    ),
    '',
    'A finding is reproduced only if it holds on every seed and the pooled 95% Wilson intervals separate',
    '(protocol.md, “Decision rule”). Reported beside the verdicts, not part of them:',
    '',
    ...r.findings.flatMap((f) => f.also.map((c) => `- ${mdText(f.title)}: ${mdText(c.text)}`)),
    '',
    '## Finding 2: cold start → GRPO vs GRPO alone, per seed',
    '',
    `| seed | accuracy (alone → cold start) | reflection | format | language consistency | GRPO steps to ${pct(REACH_ACCURACY)} training accuracy (mean of ${REACH_WINDOW}) |`,
    '| --- | --- | --- | --- | --- | --- |',
    ...r.perSeed.map((s) => {
      const a = s.arms.r1Zero;
      const b = s.arms.coldStartRl;
      const pair = (f: (e: ArmEval) => number) =>
        a && b ? `${pct(f(a))} → ${pct(f(b))}` : 'not measured';
      const reach = (x: number | null) => (x === null ? `not within ${o.reasonerSteps}` : `${x}`);
      return `| ${s.seed} | ${pair((e) => e.accuracy)} | ${pair((e) => e.reflection)} | ${pair((e) => e.format)} | ${pair((e) => e.languageConsistency)} | ${reach(s.stepsToReach.r1Zero)} → ${reach(s.stepsToReach.coldStartRl)} |`;
    }),
    '',
    '![tiny reasoner training accuracy](accuracy-reasoner.svg) ![student training accuracy](accuracy-student.svg)',
    '',
  ];
  for (const s of r.perSeed) {
    lines.push(
      `## Seed ${s.seed} (${(s.seconds / 60).toFixed(1)} min): every model`,
      '',
      `The teacher’s rejection sampling kept ${s.teacherSamples.kept} of ${s.teacherSamples.sampled} samples; the distillation trained ${s.sftSteps.distill} SFT steps on them, the cold start ${s.sftSteps.coldStart}.`,
      `Stage times (s): ${Object.entries(s.stageSeconds)
        .map(([name, t]) => `${name} ${num(t)}`)
        .join(', ')}.`,
      '',
      header,
      row(ARMS.base.label, r.base),
      row(ARMS.studentBase.label, r.studentBase),
      ...ARM_IDS.filter((id) => id !== 'base' && id !== 'studentBase').map((id) =>
        row(ARMS[id].label, s.arms[id]),
      ),
      '',
    );
  }
  return lines.join('\n');
}
