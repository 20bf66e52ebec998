// The workload of the Node GRPO-step benchmarks (bench/node/memory.ts, bench/node/gpu.ts): a fixed
// 4-token prompt, a length reward, B 1 × G 2 with 4 new tokens, on a known model's shape with
// random weights; runSteps times real GrpoTrainer steps (one warm-up) and measures the engine's
// peak GPU bytes beside the memory plan (planRunMemory).
import type { Engine } from '../../src/engine/engine';
import { parameterCount, type LlamaConfig } from '../../src/core/model-config';
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import type { RewardFunction } from '../../src/rewards/rewards';
import { planRunMemory } from '../../src/train/run';
import { GrpoTrainer, type TrainerTokenizer } from '../../src/grpo/trainer';
import { findKnownModel, knownModelConfig } from '../../src/model/known-models';
import type { Problem, Task } from '../../src/tasks/types';

/** Token ids 1…4 spell the prompt; the model's other ids decode to nothing. Id 0 is EOS, which a
 * random model over 151,936 ids draws too rarely to end a completion early. */
export const tokenizer: TrainerTokenizer = {
  eosTokenIds: [0],
  padTokenId: 0,
  encode: (text: string) => [...text].map((ch) => 1 + ('abcd'.indexOf(ch) & 3)),
  decode: (ids: readonly number[]) =>
    ids.map((id) => (id >= 1 && id <= 4 ? 'abcd'[id - 1] : '')).join(''),
} as TrainerTokenizer;

export const task: Task = {
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

export const reward: RewardFunction = {
  name: 'custom:length',
  compute: ({ completion }) => completion.length / 8,
};

/** The workload: B 1 × G 2, a 4-token prompt, 4 new tokens. */
export const WORKLOAD: Partial<ConfigInput> = {
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
export const LORA: Partial<ConfigInput> = {
  usePeft: true,
  loraR: 16,
  loraAlpha: 32,
  loraTargetModules: ['all-linear'],
};

export interface StepRun {
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

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

export async function runSteps(
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
  // With the engine's kernels: on a GPU its split-K and row-split partials count (memory-plan.ts).
  const { tuning } = engine.pipelines;
  const plan = planRunMemory(config, cfg, engine.device.limits, undefined, undefined, tuning);
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

export function modelConfig(name: string): LlamaConfig {
  const known = findKnownModel(name);
  if (!known) throw new Error(`unknown model '${name}'`);
  return knownModelConfig(known);
}
