// The engine's counters (src/engine/counters.ts) over one GRPO step and the checkpoint snapshot
// after it: submits, CPU waits on the GPU, dispatches, bytes uploaded and read back, pipelines
// compiled, per step phase. They do not depend on the machine, so SwiftShader gives the same
// numbers as a GPU (for the same kernel variants). Two steps are built here: the aha preset's first
// step (the bundled tiny reasoner, as `npm run aha` trains it) and one LoRA GRPO step at
// Qwen2.5-0.5B's shape (random bf16 weights, LoRA r 16, the workload of bench/lib/grpo-step-workload.ts).
// `npm run bench -- --counters` prints both (bench/node/counters.ts); the GPU benchmark calls
// collectStepCounters too.
import {
  COUNT_NAMES,
  COUNTER_PHASES,
  diffCounts,
  totalCounts,
  type CounterSnapshot,
  type PhaseCounts,
} from '../../src/engine/counters';
import type { Engine } from '../../src/engine/engine';
import { resolveConfig } from '../../src/grpo/config';
import { PRESETS } from '../../src/grpo/presets';
import { GrpoTrainer } from '../../src/grpo/trainer';
import { initLlamaWeights } from '../../src/model/init';
import { createTask } from '../../src/tasks/index';
import { TINY_COUNTDOWN_OPTIONS } from '../../src/tasks/traces';
import { createTrainer, loadModel } from '../../src/cli/_session';
import { LORA, modelConfig, reward, task, tokenizer, WORKLOAD } from './grpo-step-workload';
import { table } from './stats';

export interface StepCounters {
  name: string;
  /** Counts per phase (the step, then its checkpoint snapshot). */
  phases: CounterSnapshot;
  total: PhaseCounts;
  sequences: number;
  /** Decode steps of the sampler: the longest completion (tokens drawn per sequence). */
  decodedTokens: number;
}

/**
 * Runs `trainer`'s next step and a checkpoint snapshot, and returns what the engine counted
 * meanwhile (nothing before: the trainer's construction and its pipeline compiles are left out).
 */
export async function collectStepCounters(
  engine: Engine,
  trainer: GrpoTrainer,
  name: string,
): Promise<StepCounters> {
  const before = engine.counters.snapshot();
  const report = await trainer.trainStep();
  await trainer.snapshot();
  const phases = diffCounts(engine.counters.snapshot(), before);
  const completions = report.groups.flatMap((g) => g.completions);
  return {
    name,
    phases,
    total: totalCounts(phases),
    sequences: completions.length,
    decodedTokens: Math.max(...completions.map((c) => c.tokens.length)),
  };
}

/** The aha preset's first step: the bundled model, Countdown, as `npm run aha` trains seed 1. */
export async function ahaStepCounters(engine: Engine): Promise<StepCounters> {
  const config = resolveConfig({ ...PRESETS.aha });
  const model = await loadModel(config.model);
  // As src/cli/aha.ts: the preset's task keeps the held-out prompts out; rewards score Countdown.
  const trainer = createTrainer(
    engine,
    config,
    model,
    createTask(config.task, config.taskOptions),
    createTask('countdown', TINY_COUNTDOWN_OPTIONS),
  );
  try {
    return await collectStepCounters(engine, trainer, 'aha preset, step 1');
  } finally {
    trainer.destroy();
  }
}

/** One LoRA GRPO step at Qwen2.5-0.5B's shape: random weights stored bf16, LoRA r 16 all-linear. */
export async function qwenLoraStepCounters(engine: Engine): Promise<StepCounters> {
  const qwen = modelConfig('qwen2.5-0.5b');
  const trainer = new GrpoTrainer({
    engine,
    config: resolveConfig({ ...WORKLOAD, ...LORA, dtype: 'bfloat16' }),
    modelConfig: qwen,
    weights: initLlamaWeights(qwen, 1),
    tokenizer,
    task,
    rewardFunctions: [reward],
  });
  try {
    return await collectStepCounters(engine, trainer, 'Qwen2.5-0.5B LoRA r 16, bf16 base, step 1');
  } finally {
    trainer.destroy();
  }
}

/** One table per step: a row per phase that did anything, then the total. */
export function countersTable(run: StepCounters): string {
  const rows = COUNTER_PHASES.filter((p) => COUNT_NAMES.some((k) => run.phases[p][k] !== 0)).map(
    (p) => [p, ...COUNT_NAMES.map((k) => String(run.phases[p][k]))],
  );
  rows.push(['total', ...COUNT_NAMES.map((k) => String(run.total[k]))]);
  return table(['phase', ...COUNT_NAMES], rows);
}
