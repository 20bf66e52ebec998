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
import { createEngine, type Engine } from '../../src/engine/engine';
import { parameterCount, type LlamaConfig } from '../../src/core/model-config';
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import type { RewardFunction } from '../../src/rewards/rewards';
import { planRunMemory } from '../../src/train/run';
import { GrpoTrainer, type TrainerTokenizer } from '../../src/grpo/trainer';
import { findKnownModel, knownModelConfig } from '../../src/model/known-models';
import { initLlamaWeights } from '../../src/model/init';
import type { Problem, Task } from '../../src/tasks/types';
import { machineInfo } from './machine';

const MiB = 2 ** 20;

/** Token ids 1…4 spell the prompt; the model's other ids decode to nothing. Id 0 is EOS, which a
 * random model over 151,936 ids draws too rarely to end a completion early. */
const tokenizer: TrainerTokenizer = {
  eosTokenIds: [0],
  padTokenId: 0,
  encode: (text: string) => [...text].map((ch) => 1 + ('abcd'.indexOf(ch) & 3)),
  decode: (ids: readonly number[]) =>
    ids.map((id) => (id >= 1 && id <= 4 ? 'abcd'[id - 1] : '')).join(''),
} as TrainerTokenizer;

const task: Task = {
  name: 'bench',
  description: 'one fixed prompt (memory benchmark)',
  generate: (seed: number, count: number): Problem[] =>
    Array.from({ length: count }, (_, i) => ({
      id: `bench-${seed}-${i}`,
      task: 'bench',
      question: 'abcd',
      reference: null,
      verifier: { kind: 'none' },
    })),
  formatPrompt: (problem) => ({ kind: 'text', text: problem.question }),
  verify: () => null,
};

const reward: RewardFunction = {
  name: 'custom:length',
  compute: ({ completion }) => completion.length / 8,
};

/** The workload: B 1 × G 2, a 4-token prompt, 4 new tokens. */
const WORKLOAD: Partial<ConfigInput> = {
  perStepPrompts: 1,
  numGenerations: 2,
  maxPromptLength: 4,
  maxCompletionLength: 4,
  beta: 0,
  temperature: 1,
  learningRate: 1e-5,
  lrScheduler: 'constant',
  rewards: ['custom:length'],
  customRewards: { length: 'function reward({ completion }) { return completion.length / 8; }' },
  steps: 100,
  seed: 1,
};
const LORA: Partial<ConfigInput> = {
  usePeft: true,
  loraR: 16,
  loraAlpha: 32,
  loraTargetModules: ['all-linear'],
};

interface StepRun {
  name: string;
  model: string;
  parameters: number;
  options: Partial<ConfigInput>;
  measuredPeakBytes: number;
  plannedPeakBytes: number;
  /** |measured − planned| / measured. */
  planError: number;
  /** Wall seconds of each measured trainStep (after one warm-up step that compiles pipelines). */
  stepSeconds: number[];
  /** Training tokens of a step: N·(P + Tc) sequences × columns. */
  tokensPerStep: number;
  /** Median tokens per second over the measured steps. */
  tokensPerSecond: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function runSteps(
  engine: Engine,
  name: string,
  modelName: string,
  config: LlamaConfig,
  weights: Map<string, Float32Array>,
  options: Partial<ConfigInput>,
  steps: number,
): Promise<StepRun> {
  const cfg = resolveConfig({ ...WORKLOAD, ...options });
  const before = engine.memory.liveBytes;
  engine.memory.resetPeak();
  const trainer = new GrpoTrainer({
    engine,
    config: cfg,
    modelConfig: config,
    weights,
    tokenizer,
    task,
    rewardFunctions: [reward],
  });
  const seconds: number[] = [];
  let columns = 0;
  try {
    for (let s = 0; s <= steps; s++) {
      const t0 = performance.now();
      const report = await trainer.trainStep();
      const dt = (performance.now() - t0) / 1000;
      const L = Math.max(...report.groups.flatMap((g) => g.completions.map((c) => c.logp.length)));
      columns = cfg.maxPromptLength + L;
      process.stderr.write(
        `  ${name}: step ${s}${s === 0 ? ' (warm-up)' : ''} ${dt.toFixed(1)} s\n`,
      );
      if (s > 0) seconds.push(dt);
    }
  } finally {
    trainer.destroy();
  }
  const measured = engine.memory.peakBytes - before;
  const plan = planRunMemory(config, cfg, engine.device.limits);
  const tokensPerStep = cfg.perStepPrompts * cfg.numGenerations * columns;
  return {
    name,
    model: modelName,
    parameters: parameterCount(config),
    options,
    measuredPeakBytes: measured,
    plannedPeakBytes: plan.peakBytes,
    planError: Math.abs(measured - plan.peakBytes) / measured,
    stepSeconds: seconds,
    tokensPerStep,
    tokensPerSecond: tokensPerStep / median(seconds),
  };
}

function modelConfig(name: string): LlamaConfig {
  const known = findKnownModel(name);
  if (!known) throw new Error(`unknown model '${name}'`);
  return knownModelConfig(known);
}

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
