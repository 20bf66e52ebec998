// `npm run eval -- --model <folder|bundled|run/checkpoint-N> [--compare <folder>] [--k 4] [options]`
// Evaluates a model on the run config's held-out prompts: greedy accuracy, pass@k, cons@k, format
// and reflection rates. With --compare, a second model on exactly the same prompts and draws,
// side by side. --json <file> writes the full reports (every completion).
import { writeFileSync } from 'node:fs';
import { isHelpRequested, parseCliArgs, resolveConfig } from '../grpo/config';
import { evaluate, type EvalReport } from '../train/evaluate';
import { renderPrompt } from '../grpo/trainer';
import { GpuLlama } from '../model/llama';
import { frozenDtypeOf } from '../model/parameters';
import { Sampler } from '../model/sampler';
import { trainEvalStream } from '../tasks/index';
import { commandHelp, EVAL, flagCount, runCommand, takeCommandFlags } from './_flags';
import { loadTask, openEngine, openModel } from './_session';

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
      // Streamed into the GPU tensor by tensor: the host never holds the model widened to f32. A
      // 4-bit checkpoint stays NF4 on the GPU too (its values are the dequantised ones either
      // way); other weights are evaluated in f32, whatever the run's `dtype` trained the base in.
      const loaded = await openModel(name);
      const { config: modelConfig, weights } = loaded.hf;
      let model: GpuLlama;
      try {
        model = await GpuLlama.loadStreamed(engine, modelConfig, weights, {
          frozenDtype: frozenDtypeOf('float32', modelConfig, weights),
        });
      } finally {
        await weights.close();
      }
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
