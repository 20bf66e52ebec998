// `npm run eval -- --model <folder|bundled|run/checkpoint-N> [--compare <folder>] [--k 4] [options]`
// Evaluates a model on the run config's held-out prompts: greedy accuracy, pass@k, cons@k, format
// and reflection rates. With --compare, a second model on exactly the same prompts and draws,
// side by side. --json <file> writes the full reports (every completion).
import { writeFileSync } from 'node:fs';
import { isHelpRequested, parseCliArgs, resolveConfig } from '../grpo/config';
import { evaluate, type EvalReport } from '../train/evaluate';
import { renderPrompt } from '../grpo/trainer';
import { GpuLlama } from '../model/llama';
import { Sampler } from '../model/sampler';
import { trainEvalStream } from '../tasks/index';
import { commandHelp, EVAL, flagCount, runCommand, takeCommandFlags } from './_flags';
import { loadModel, loadTask, openEngine } from './_session';

async function main(args: string[]) {
  if (isHelpRequested(args)) {
    console.log(commandHelp(EVAL));
    return;
  }
  const { flags, rest } = takeCommandFlags(EVAL, args);
  const compare = flags.get('compare')?.[0];
  const k = flagCount(EVAL, flags, 'k', 4);
  const jsonOut = flags.get('json')?.[0];
  const config = resolveConfig(parseCliArgs(rest));
  const task = await loadTask(config);
  // Only the held-out problems are used: the training stream is drawn lazily, so never built.
  const { eval: problems } = trainEvalStream(
    task,
    config.seed,
    config.steps * config.perStepPrompts,
    config.evalPrompts,
  );
  if (problems.length === 0) throw new Error('no held-out prompts: set --eval-prompts');
  const engine = await openEngine();
  try {
    const reports: { model: string; report: EvalReport }[] = [];
    for (const name of [config.model, ...(compare ? [compare] : [])]) {
      const loaded = await loadModel(name);
      const model = GpuLlama.load(engine, loaded.hf.config, loaded.hf.tensors);
      try {
        const render = (p: (typeof problems)[number]) =>
          renderPrompt(task, loaded.tokenizer, p, config.template, config);
        const report = await evaluate(
          {
            sampler: new Sampler(engine, model),
            tokenizer: loaded.tokenizer,
            task,
            renderPrompt: render,
          },
          problems,
          {
            k,
            temperature: config.temperature,
            topP: config.topP,
            topK: config.topK,
            minP: config.minP ?? 0,
            repetitionPenalty: config.repetitionPenalty ?? 1,
            maxCompletionLength: config.maxCompletionLength,
            seed: config.seed,
          },
        );
        reports.push({ model: name, report });
      } finally {
        model.destroy();
      }
    }
    const keys = Object.keys(reports[0].report.metrics) as (keyof EvalReport['metrics'])[];
    console.log(`${problems.length} held-out prompts, k = ${k}`);
    console.log(
      ['metric'.padEnd(24), ...reports.map((r) => r.model.slice(-28).padStart(28))].join(' '),
    );
    for (const key of keys) {
      console.log(
        [key.padEnd(24), ...reports.map((r) => r.report.metrics[key].toFixed(4).padStart(28))].join(
          ' ',
        ),
      );
    }
    if (jsonOut) writeFileSync(jsonOut, JSON.stringify(reports, null, 2));
  } finally {
    engine.destroy();
  }
}

runCommand(() => main(process.argv.slice(2)));
