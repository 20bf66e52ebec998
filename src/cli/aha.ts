// `npm run aha -- [--seeds 1,2,3] [--out docs/aha] [--k 4] [--model <folder>] [--prompts selection]
//                 [--option value …]`
// The "aha moment" demo, measured as docs/grpo.md §7 asks: runs the 'aha' preset (the bundled
// tiny reasoner, Countdown, format + accuracy rewards only) headless on Node WebGPU for each seed,
// evaluates the base and the trained model on the same held-out prompts (never in the pretraining
// corpus nor in the RL prompts), and writes report.json, README.md and SVG plots to the out folder.
// The claim is the pair: reflection rises AND reflecting completions are right more often.
// `--prompts selection` evaluates on a second, disjoint held-out set instead: the preset's options
// are chosen there, so the reported prompts never steer a choice.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { isHelpRequested, parseCliArgs, resolveConfig, type Config } from '../grpo/config';
import type { BestEval, EvalRecord } from '../train/eval-during-training';
import { evaluate, type EvalItem, type EvalReport } from '../train/evaluate';
import { PRESETS } from '../grpo/presets';
import { nodeSandboxFactory } from '../rewards/reward-sandbox-node';
import { Run } from '../train/run';
import { lineChartSvg, type ChartSeries } from '../formats/svg-chart';
import { createTask } from '../tasks/index';
import {
  AHA_REPORT_PROMPTS,
  AHA_REPORT_SEED,
  AHA_SELECTION_PROMPTS,
  ahaPrompts,
  TINY_COUNTDOWN_OPTIONS,
  type AhaPromptSet,
} from '../tasks/traces';
import { AHA, commandHelp, flagCount, flagCounts, runCommand, takeCommandFlags } from './_flags';
import { loadModel, openEngine } from './_session';
import { mdCode, mdText } from '../export/markdown';
import { rewardErrorSummary } from './_train';

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c'];

interface SeedResult {
  seed: number;
  base: EvalReport['metrics'];
  final: EvalReport['metrics'];
  history: { step: number; metrics: Record<string, number> }[];
  /** Evaluations during training on the run's eval prompts (evalSteps > 0), and the one loaded. */
  evals: EvalRecord[];
  loadedBest: BestEval | null;
  examples: {
    question: string;
    before: string;
    beforeCorrect: boolean | null;
    after: string;
    afterCorrect: boolean | null;
  }[];
  trainSeconds: number;
}

/** The completion an example shows: the first sample, or the greedy one when k = 0. */
const shown = (item: EvalItem) => item.samples[0] ?? item.greedy ?? { text: '', correct: null };

const stats = (xs: number[]) => {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return { mean, min: Math.min(...xs), max: Math.max(...xs), values: xs };
};

async function main(args: string[]) {
  // Without this check --help would be skipped as a config flag and start the whole demo.
  if (isHelpRequested(args)) {
    console.log(commandHelp(AHA));
    return;
  }
  const { flags, rest } = takeCommandFlags(AHA, args);
  const flag = (name: string) => flags.get(name)?.[0];
  // Counts and their limits are declared with the flags (AHA in _flags.ts).
  const seeds = flagCounts(AHA, flags, 'seeds', [1, 2, 3]);
  const outDir = resolve(flag('out') ?? 'docs/aha');
  const promptSet = (flag('prompts') ?? 'report') as AhaPromptSet;
  if (promptSet !== 'report' && promptSet !== 'selection') {
    throw new Error(`--prompts must be 'report' or 'selection', not '${String(promptSet)}'`);
  }
  // The selection set holds half as many prompts (all the held-out pool has left), so twice the
  // samples each: both evaluations score 400 completions.
  const k = flagCount(AHA, flags, 'k', promptSet === 'selection' ? 4 : 2);
  const evalBatch = flagCount(AHA, flags, 'eval-batch', 200);
  const overrides = parseCliArgs(rest);
  const started = performance.now();
  // The preset's model unless `--model <folder>` names another (a candidate model, say).
  const presetConfig = resolveConfig({ ...PRESETS.aha, ...overrides });
  const model = await loadModel(presetConfig.model);
  // The same held-out prompts for every seed and for base vs trained.
  const heldOut = ahaPrompts(
    promptSet,
    promptSet === 'selection' ? AHA_SELECTION_PROMPTS : AHA_REPORT_PROMPTS,
  );
  const engine = await openEngine();
  try {
    // Scores and verifies the held-out evaluation; training uses the preset's task, whose
    // excludeHeldOut option keeps the held-out problems out of the RL prompts (as in the browser).
    const countdown = createTask('countdown', TINY_COUNTDOWN_OPTIONS);
    const results: SeedResult[] = [];
    let config: Config | null = null;
    // The base model is the same for every seed: it is evaluated once, on the same held-out prompts
    // and with the same sampling seed, and each seed's final model is compared with it.
    let base: EvalReport | null = null;
    for (const seed of seeds) {
      config = resolveConfig({ ...PRESETS.aha, ...overrides, seed });
      // Evaluations during training are on the run's eval split (disjoint from its training prompts
      // and from both held-out sets). No checkpoint hook: the demo saves nothing, so the save policy
      // reads nothing back from the GPU.
      let loadedBest: BestEval | null = null;
      const run = new Run({
        engine,
        config,
        model: { config: model.hf.config, weights: model.hf.tensors, tokenizer: model.tokenizer },
        runId: `aha-seed-${seed}`,
        scoringTask: countdown,
        sandboxFactory: nodeSandboxFactory(),
        hooks: {
          onStep: (report) => {
            const m = report.metrics;
            const errors = rewardErrorSummary(report);
            console.log(
              `seed ${seed} step ${report.step}/${config!.steps} reward ${m.reward.toFixed(3)} acc ${m.accuracy.toFixed(3)} ` +
                `refl ${m.reflection_rate.toFixed(3)} len ${m['completions/mean_length'].toFixed(1)} ${m.step_time.toFixed(1)}s` +
                (errors ? `  REWARD ERRORS: ${errors}` : ''),
            );
          },
          onEval: (e) => {
            console.log(
              `seed ${seed} step ${e.step} eval_accuracy ${e.metrics.eval_accuracy.toFixed(3)} ` +
                `(${run.trainer.evalProblems.length} prompts × ${config!.evalGenerations}, ${e.metrics.eval_time.toFixed(1)}s)`,
            );
          },
          onBestLoaded: ({ best }) => {
            loadedBest = best;
            console.log(
              `seed ${seed}: loaded the best evaluation's weights, step ${best.step} (eval_accuracy ${best.evalAccuracy.toFixed(3)})`,
            );
          },
        },
      });
      try {
        const evalOptions = {
          k,
          temperature: config.temperature,
          maxCompletionLength: config.maxCompletionLength,
          seed: AHA_REPORT_SEED,
          batchSize: evalBatch,
        };
        const ctx = run.evalContext;
        if (!base) {
          base = await evaluate(ctx, heldOut, evalOptions);
          console.log(`base (shared by every seed): ${JSON.stringify(base.metrics)}`);
        }
        const before: EvalReport = base;
        const t0 = performance.now();
        await run.runUntil();
        const trainSeconds = (performance.now() - t0) / 1000;
        const final = await evaluate(ctx, heldOut, evalOptions);
        console.log(`seed ${seed} final: ${JSON.stringify(final.metrics)}`);
        results.push({
          seed,
          base: before.metrics,
          final: final.metrics,
          history: run.history,
          evals: run.evals.history,
          loadedBest,
          examples: heldOut.slice(0, 5).map((problem, i) => ({
            question: problem.question,
            before: shown(before.items[i]).text,
            beforeCorrect: shown(before.items[i]).correct,
            after: shown(final.items[i]).text,
            afterCorrect: shown(final.items[i]).correct,
          })),
          trainSeconds,
        });
      } finally {
        run.destroy();
      }
    }
    const seconds = (performance.now() - started) / 1000;
    const perSeed = results.map((r) => ({
      seed: r.seed,
      accuracyGainPoints: 100 * (r.final.sample_accuracy - r.base.sample_accuracy),
      reflectionRatio: r.final.reflection_rate / r.base.reflection_rate,
      reflectingMoreAccurate: r.final.accuracy_reflecting > r.final.accuracy_not_reflecting,
    }));
    const summary = {
      accuracyGainPoints: stats(perSeed.map((s) => s.accuracyGainPoints)),
      reflectionRatio: stats(perSeed.map((s) => s.reflectionRatio)),
      baseAccuracy: stats(results.map((r) => r.base.sample_accuracy)),
      finalAccuracy: stats(results.map((r) => r.final.sample_accuracy)),
      baseReflection: stats(results.map((r) => r.base.reflection_rate)),
      finalReflection: stats(results.map((r) => r.final.reflection_rate)),
      finalAccuracyReflecting: stats(results.map((r) => r.final.accuracy_reflecting)),
      finalAccuracyNotReflecting: stats(results.map((r) => r.final.accuracy_not_reflecting)),
    };
    const targets = {
      accuracyUp25Points: perSeed.every((s) => s.accuracyGainPoints >= 25),
      reflectionDoubled: perSeed.every((s) => s.reflectionRatio >= 2),
      reflectingMoreAccurate: perSeed.every((s) => s.reflectingMoreAccurate),
    };
    const report = {
      preset: 'aha',
      config,
      command: args.length ? `npm run aha -- ${args.join(' ')}` : 'npm run aha',
      machine: {
        cpu: cpus()[0]?.model ?? 'unknown',
        cores: cpus().length,
        adapter: engine.gpu.adapter,
      },
      durationSeconds: seconds,
      heldOutPrompts: heldOut.length,
      promptSet,
      samplesPerPrompt: k,
      perSeed,
      summary,
      targets,
      seeds: results,
    };
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'report.json'), JSON.stringify(report, null, 2));
    const curve = (key: string, name: string): ChartSeries[] => [
      ...results.map((r, i) => ({
        name: `${name}, seed ${r.seed}`,
        color: COLORS[i % COLORS.length],
        width: 1.5,
        points: r.history.map((h) => [h.step, h.metrics[key]] as [number, number]),
      })),
    ];
    const plots: Record<string, string> = {
      'accuracy.svg': lineChartSvg({
        title: 'Training accuracy (sampled completions)',
        xLabel: 'step',
        yLabel: 'accuracy',
        yMin: 0,
        yMax: 1,
        series: curve('accuracy', 'accuracy'),
      }),
      'reflection.svg': lineChartSvg({
        title: 'Reflection rate ("wait" in <think>)',
        xLabel: 'step',
        yLabel: 'share of completions',
        yMin: 0,
        yMax: 1,
        series: curve('reflection_rate', 'reflection'),
      }),
      'reflect-accuracy.svg': lineChartSvg({
        title: 'Accuracy of reflecting vs non-reflecting completions',
        xLabel: 'step',
        yLabel: 'accuracy',
        yMin: 0,
        yMax: 1,
        series: results.flatMap((r, i) => [
          {
            name: `reflecting, seed ${r.seed}`,
            color: COLORS[i % COLORS.length],
            points: r.history.map(
              (h) => [h.step, h.metrics['reflection/accuracy_reflecting']] as [number, number],
            ),
          },
          {
            name: `not reflecting, seed ${r.seed}`,
            color: COLORS[i % COLORS.length],
            dashed: true,
            width: 1.5,
            points: r.history.map(
              (h) => [h.step, h.metrics['reflection/accuracy_not_reflecting']] as [number, number],
            ),
          },
        ]),
      }),
      'length.svg': lineChartSvg({
        title: 'Completion length',
        xLabel: 'step',
        yLabel: 'tokens',
        series: curve('completions/mean_length', 'mean length'),
      }),
    };
    for (const [name, svg] of Object.entries(plots)) writeFileSync(join(outDir, name), svg);
    writeFileSync(join(outDir, 'README.md'), markdownReport(report, results));
    console.log(
      `wrote ${outDir} in ${(seconds / 60).toFixed(1)} min; targets: ${JSON.stringify(targets)}`,
    );
  } finally {
    // Also after a failed seed: the GPU device and (via run.destroy) any reward sandbox.
    engine.destroy();
  }
}

function markdownReport(
  report: {
    durationSeconds: number;
    machine: { cpu: string; cores: number; adapter: { vendor: string; architecture: string } };
    command: string;
    heldOutPrompts?: number;
    promptSet: AhaPromptSet;
    samplesPerPrompt: number;
    summary: Record<string, { mean: number; min: number; max: number }>;
    targets: Record<string, boolean>;
  },
  results: SeedResult[],
): string {
  const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : 'n/a');
  // The targets are judged per seed; the mean and the spread show how far a seed can land from it.
  const { accuracyGainPoints: gain, reflectionRatio: ratio } = report.summary;
  const { finalAccuracyReflecting: reflecting, finalAccuracyNotReflecting: notReflecting } =
    report.summary;
  const meanLine =
    results.length > 1
      ? `Over the ${results.length} seeds, mean (lowest to highest): accuracy gain +${gain.mean.toFixed(1)} points (+${gain.min.toFixed(1)} to +${gain.max.toFixed(1)}); reflection rate ×${ratio.mean.toFixed(2)} (×${ratio.min.toFixed(2)} to ×${ratio.max.toFixed(2)}); trained accuracy of reflecting completions ${pct(reflecting.mean)} (${pct(reflecting.min)} to ${pct(reflecting.max)}) vs ${pct(notReflecting.mean)} (${pct(notReflecting.min)} to ${pct(notReflecting.max)}) for the rest.\n\n`
      : '';
  const rows = results.map(
    (r) =>
      `| ${r.seed} | ${pct(r.base.sample_accuracy)} → ${pct(r.final.sample_accuracy)} | ${pct(r.base.reflection_rate)} → ${pct(r.final.reflection_rate)} | ` +
      `${pct(r.final.accuracy_reflecting)} vs ${pct(r.final.accuracy_not_reflecting)} | ${r.base.mean_length.toFixed(1)} → ${r.final.mean_length.toFixed(1)} |`,
  );
  const loaded = results.filter((r) => r.loadedBest);
  const loadedNote = loaded.length
    ? `With \`loadBestModelAtEnd\` the trained model is the best evaluation during training: ${loaded
        .map(
          (r) =>
            `seed ${r.seed} step ${r.loadedBest!.step} (eval accuracy ${pct(r.loadedBest!.evalAccuracy)})`,
        )
        .join(', ')}.\n\n`
    : '';
  const examples = results[0]?.examples
    .map(
      (e) =>
        `- **${mdText(e.question)}**\n  - before (${e.beforeCorrect ? 'right' : 'wrong'}): ${mdCode(e.before)}\n  - after (${e.afterCorrect ? 'right' : 'wrong'}): ${mdCode(e.after)}`,
    )
    .join('\n');
  return `# The aha demo, measured

Command: ${mdCode(report.command)} — ${(report.durationSeconds / 60).toFixed(1)} minutes on ${report.machine.cores} × ${mdText(report.machine.cpu)},
WebGPU adapter ${mdText(`${report.machine.adapter.vendor} ${report.machine.adapter.architecture}`)}.
${report.heldOutPrompts} held-out Countdown prompts (never in the pretraining corpus or the RL prompts${report.promptSet === 'selection' ? "; the selection set, disjoint from the reported one, on which the preset's options are chosen" : ''}), ${report.samplesPerPrompt} samples each at temperature 1.

| seed | accuracy (base → trained) | reflection rate | trained: accuracy reflecting vs not | mean length |
| --- | --- | --- | --- | --- |
${rows.join('\n')}

${meanLine}${loadedNote}${report.promptSet === 'report' ? "The preset's learning rate was chosen beforehand on other held-out prompts and another seed: [selection.md](selection.md).\n\n" : ''}Targets (every seed): accuracy +25 points: **${report.targets.accuracyUp25Points ? 'met' : 'not met'}**; reflection rate at least doubled: **${report.targets.reflectionDoubled ? 'met' : 'not met'}**; reflecting completions more accurate at the end: **${report.targets.reflectingMoreAccurate ? 'met' : 'not met'}**.

![accuracy](accuracy.svg) ![reflection](reflection.svg)
![reflecting vs not](reflect-accuracy.svg) ![length](length.svg)

Same prompts before and after (seed ${results[0]?.seed}):

${examples}
`;
}

runCommand(() => main(process.argv.slice(2)), true);
