// The memory benchmark, in Node on WebGPU (SwiftShader here): real GRPO steps at Qwen2.5-0.5B's full
// shape (24 layers, C 896, I 4864, V 151936, tied, q/k/v bias) with random weights stored as bf16
// under LoRA r = 16 on every linear layer, small G and lengths so it finishes in minutes. Prints
// the engine's measured peak of GPU storage bytes beside the memory plan (planRunMemory, what the
// playground and `npm run plan` show): they must agree within 10%. Then tokens/s of a LoRA step vs
// a full fine-tune step on the same model and workload (a smaller shape by default: a full f32
// fine-tune of 0.5B parameters needs 8 GiB of emulated GPU memory; --compare-model qwen2.5-0.5b
// runs it at the full shape).
//
// Usage: `node bench/run.mjs --memory [--steps 2] [--compare-model smollm2-135m|qwen2.5-0.5b]
// [--json file]` (bench/run.mjs bundles this file like the other Node benchmarks).
import { writeFileSync } from 'node:fs';
import { createEngine } from '../../src/engine/engine';
import { initLlamaWeights } from '../../src/model/init';
import { machineInfo } from './machine';
import { LORA, modelConfig, runSteps, type StepRun } from '../lib/grpo-step-workload';

const MiB = 2 ** 20;

async function main(argv: string[]) {
  const arg = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const steps = Number(arg('--steps') ?? 2);
  const compareModel = arg('--compare-model') ?? 'smollm2-135m';
  const jsonOut = arg('--json');
  const engine = await createEngine();
  const started = performance.now();
  try {
    const runs: StepRun[] = [];
    // 1. Qwen2.5-0.5B's shape, LoRA r 16 all-linear on a bf16 base: measured peak vs plan.
    const qwen = modelConfig('qwen2.5-0.5b');
    process.stderr.write('initialising Qwen2.5-0.5B-shaped random weights…\n');
    let weights = initLlamaWeights(qwen, 1);
    runs.push(
      await runSteps(
        engine,
        'LoRA r 16 + bf16 base',
        'qwen2.5-0.5b',
        qwen,
        weights,
        { ...LORA, dtype: 'bfloat16' },
        steps,
      ),
    );
    // 2. LoRA vs full fine-tune (f32) on one model: tokens/s of a step.
    const cmp = compareModel === 'qwen2.5-0.5b' ? qwen : modelConfig(compareModel);
    if (cmp !== qwen) {
      process.stderr.write(`initialising ${compareModel}-shaped random weights…\n`);
      weights = initLlamaWeights(cmp, 1);
    }
    runs.push(
      await runSteps(engine, 'LoRA r 16 (f32 base)', compareModel, cmp, weights, LORA, steps),
    );
    runs.push(await runSteps(engine, 'full fine-tune f32', compareModel, cmp, weights, {}, steps));
    const [lora, full] = [runs[1], runs[2]];
    const result = {
      benchmark: 'memory',
      date: new Date().toISOString(),
      machine: machineInfo(),
      adapter: engine.gpu.adapter,
      workload: { prompts: 1, generations: 2, promptTokens: 4, newTokens: 4, measuredSteps: steps },
      runs,
      loraVsFull: {
        model: compareModel,
        loraTokensPerSecond: lora.tokensPerSecond,
        fullTokensPerSecond: full.tokensPerSecond,
        ratio: lora.tokensPerSecond / full.tokensPerSecond,
      },
      seconds: (performance.now() - started) / 1000,
    };
    console.log(
      `\n## Memory: measured peak vs plan, tokens/s of LoRA vs full (${result.machine.cpu})`,
    );
    console.log('run | model | measured peak | planned peak | plan error | tokens/s (median)');
    for (const r of runs) {
      console.log(
        `${r.name} | ${r.model} | ${(r.measuredPeakBytes / MiB).toFixed(1)} MiB | ` +
          `${(r.plannedPeakBytes / MiB).toFixed(1)} MiB | ${(100 * r.planError).toFixed(3)}% | ${r.tokensPerSecond.toFixed(2)}`,
      );
    }
    console.log(
      `LoRA ÷ full tokens/s on ${compareModel}: ${result.loraVsFull.ratio.toFixed(2)}× ` +
        `(${result.loraVsFull.ratio >= 1 ? 'LoRA is not slower per token' : 'LoRA is SLOWER per token'})`,
    );
    const worst = Math.max(...runs.map((r) => r.planError));
    console.log(
      `plan within 10% of the measured peak on every run: ${worst <= 0.1 ? 'yes' : 'NO'}`,
    );
    if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify(result, null, 2)}\n`);
    if (worst > 0.1) process.exitCode = 1;
  } finally {
    engine.destroy();
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exit(1);
});
