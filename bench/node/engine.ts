// The engine benchmark, in Node on WebGPU (Dawn): a random ~1M-parameter Llama, sampling
// tokens/s for B×G batched decode with a KV cache (src/model/sampler.ts), and the time of one whole
// GRPO training step (src/grpo/trainer.ts) split by GPU submission label. Warm-up runs (pipeline
// compilation) are excluded; every figure is the median and spread of several runs. It runs once per
// kernel path (bench/browser/paths.ts: the GPU path with barriers, the barrier-free emulation path),
// each on its own engine created with that path's tuning, one after the other in this process.
//
// Usage: `npm run bench -- --only engine [--paths gpu,emulation]` (bench/run.mjs bundles this file
// and bench/cli.ts runs it in a child: `engine.js [--quick] [--paths gpu,emulation] [--out f]`,
// which writes an array of results, one per path).
import { writeFileSync } from 'node:fs';
import type { AdapterSummary } from '../../src/engine/device';
import { createEngine, type Engine } from '../../src/engine/engine';
import { resolveConfig } from '../../src/grpo/config';
import type { RewardFunction } from '../../src/rewards/rewards';
import { GrpoTrainer, type TrainerTokenizer } from '../../src/grpo/trainer';
import { parameterCount, type LlamaConfig } from '../../src/core/model-config';
import { initLlamaWeights } from '../../src/model/init';
import { GpuLlama } from '../../src/model/llama';
import { Sampler } from '../../src/model/sampler';
import type { Problem, Task } from '../../src/tasks/types';
import { rateOf, summarize, timeRuns, type Stat } from '../lib/stats';
import { PassProfiler, type PassTotals } from '../lib/gpu-profile';
import { machineInfo, type MachineInfo } from './machine';
import {
  OUR_ENGINE,
  OUR_PATHS,
  parsePaths,
  PATH_NOTE,
  pathTuning,
  type OurPath,
} from '../browser/paths';

/** ~1.05M parameters: 4 layers, C = 128, I = 384, 4 heads over 2 kv-heads, V = 1024, untied head. */
export const BENCH_MODEL: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 128,
  intermediateSize: 384,
  numLayers: 4,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 32,
  vocabSize: 1024,
  maxPositions: 128,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  attentionBias: false,
  bosTokenId: null,
  eosTokenIds: [],
};

/** B prompts × G completions, fixed lengths: no EOS exists, so every completion runs to full length. */
export const BENCH_WORKLOAD = {
  prompts: 2, // B
  generations: 8, // G
  promptTokens: 16,
  newTokens: 32,
};

/** KL coefficient of the benchmarked step (R1's), so that the reference forward is measured. */
const STEP_BETA = 0.001;

/**
 * The parts of one GRPO step, in order. The GPU phases are submission wall times (encode + GPU +
 * wait); rewards, readbacks and other host work happen between submissions, while the GPU idles.
 * A submission that does not wait (engine.run with wait: false, as the update's micro-batches go
 * out) shows only its encoding; its GPU time lands in the next one that waits. So the update's
 * three parts are also summed ('update'), which holds wherever the waits fall.
 */
const STEP_PHASES = [
  'sampling',
  'rewards',
  'update (reference + policy + optimizer)',
  'reference forward',
  'policy forward+backward',
  'optimizer (clip + AdamW)',
  'readbacks',
  'other host work',
  'GPU idle (outside submissions)',
] as const;

export interface EngineBenchResult {
  bench: 'engine';
  /** Which kernels ran (createEngine tuning avoidBarriers false for 'gpu', true for 'emulation'). */
  path: OurPath;
  /** The path's name in tables: 'ours GPU path' or 'ours emulation'. */
  pathLabel: string;
  machine: MachineInfo;
  runtime: string;
  adapter: AdapterSummary;
  model: { config: LlamaConfig; parameters: number };
  workload: typeof BENCH_WORKLOAD & {
    sequences: number;
    warmup: number;
    runs: number;
    /** KL coefficient of the GRPO step (> 0: the reference forward runs). */
    beta: number;
    /** Readbacks awaited outside a GPU submission in one GRPO step. */
    readbacksPerStep: number;
  };
  figures: Record<string, Stat>;
  /** One extra run of each, with per-kernel GPU time from timestamp queries (null without them). */
  profile: { sampling: KernelProfile; grpoStep: KernelProfile } | null;
  notes: string[];
}

export interface KernelProfile {
  wallMs: number;
  /** Σ kernel time: the GPU is idle for wallMs − busyMs (host work, waits, readbacks). */
  busyMs: number;
  kernels: { label: string; ms: number; count: number }[];
}

function kernelProfile(wallMs: number, totals: PassTotals): KernelProfile {
  return {
    wallMs,
    busyMs: totals.busyMs,
    kernels: [...totals.passes.entries()]
      .map(([label, { ms, count }]) => ({ label, ms, count }))
      .sort((a, b) => b.ms - a.ms),
  };
}

/** One byte-ish token per character: ids are char codes mod V, so any text round-trips to ids. */
class BenchTokenizer implements TrainerTokenizer {
  readonly eosTokenIds: number[] = [];
  readonly padTokenId = 0;
  constructor(private readonly vocab: number) {}
  encode(text: string): number[] {
    return Array.from(text, (ch) => ch.charCodeAt(0) % this.vocab);
  }
  decode(ids: readonly number[]): string {
    return String.fromCharCode(...ids.map((id) => 32 + (id % 95)));
  }
}

/** Fixed-length prompts of lowercase letters, a deterministic function of (seed, index). */
function benchTask(promptTokens: number): Task {
  return {
    name: 'bench',
    description: 'fixed-length synthetic prompts for the engine benchmark',
    generate(seed, count): Problem[] {
      return Array.from({ length: count }, (_, i) => ({
        id: `bench-${seed}-${i}`,
        task: 'bench',
        question: Array.from({ length: promptTokens }, (_, t) =>
          String.fromCharCode(97 + ((seed * 31 + i * 7 + t * 13) % 26)),
        ).join(''),
        reference: null,
        verifier: { kind: 'none' },
      }));
    },
    formatPrompt: (problem) => ({ kind: 'text', text: problem.question }),
    verify: () => null,
  };
}

/** A cheap rule reward with some spread inside each group (so advantages are not all zero). */
const vowelShare: RewardFunction = {
  name: 'custom:vowels',
  compute: ({ completion }) =>
    completion.length ? (completion.match(/[aeiou]/g)?.length ?? 0) / completion.length : 0,
};

/** The same reward, adding the seconds spent computing it to `clock.seconds`. */
function timedReward(reward: RewardFunction, clock: { seconds: number }): RewardFunction {
  return {
    ...reward,
    compute(input) {
      const t0 = performance.now();
      try {
        return reward.compute(input);
      } finally {
        clock.seconds += (performance.now() - t0) / 1000;
      }
    },
  };
}

/**
 * Times every readback (src/engine/buffers.ts readBuffer: its staging buffers are labelled
 * 'readback') by wrapping GPUBuffer.prototype.mapAsync while `measure` runs. Only maps awaited
 * outside a GPU submission count, so no second is counted twice with a submission's own time.
 */
async function withReadbackClock<T>(
  clock: { seconds: number; count: number },
  submissions: { open: number },
  measure: () => Promise<T>,
): Promise<T> {
  const proto = (globalThis as { GPUBuffer?: { prototype: GPUBuffer } }).GPUBuffer?.prototype;
  if (!proto) throw new Error('GPUBuffer is not a global: cannot time readbacks');
  const mapAsync = proto.mapAsync;
  proto.mapAsync = async function (this: GPUBuffer, ...args: Parameters<GPUBuffer['mapAsync']>) {
    const counted = this.label === 'readback' && submissions.open === 0;
    const t0 = performance.now();
    try {
      return await mapAsync.apply(this, args);
    } finally {
      if (counted) {
        clock.seconds += (performance.now() - t0) / 1000;
        clock.count++;
      }
    }
  };
  try {
    return await measure();
  } finally {
    proto.mapAsync = mapAsync;
  }
}

/** Progress goes to stderr so that stdout stays the result. */
const logProgress = (line: string) => process.stderr.write(`  [engine] ${line}\n`);
const runLabel = (run: number) => (run < 0 ? 'warm-up' : `run ${run + 1}`);

/**
 * Wraps engine.run to add each submission's wall time (encode + GPU + wait) to its label;
 * `depth.open` counts the submissions in flight (so readbacks inside one are not counted twice).
 */
function timedEngine(engine: Engine, sink: Map<string, number>, depth = { open: 0 }): Engine {
  return {
    ...engine,
    // Every argument passes through (labels, and whatever run options the engine takes).
    async run(...args: Parameters<Engine['run']>) {
      const label = args[1] ?? 'engine.run';
      const t0 = performance.now();
      depth.open++;
      try {
        return await engine.run(...args);
      } finally {
        depth.open--;
        sink.set(label, (sink.get(label) ?? 0) + (performance.now() - t0) / 1000);
      }
    },
  };
}

export async function runEngineBench(options: {
  quick: boolean;
  path: OurPath;
}): Promise<EngineBenchResult> {
  const machine = machineInfo();
  const engine = await createEngine({ tuning: pathTuning(options.path) });
  const progress = (line: string) => logProgress(`${options.path}: ${line}`);
  const W = BENCH_WORKLOAD;
  const N = W.prompts * W.generations;
  const warmup = 1;
  const runs = options.quick ? 2 : 5;
  const weights = initLlamaWeights(BENCH_MODEL, 1);
  const tokenizer = new BenchTokenizer(BENCH_MODEL.vocabSize);
  const task = benchTask(W.promptTokens);
  const figures: Record<string, Stat> = {};
  const profiler = engine.gpu.hasFeature('timestamp-query')
    ? new PassProfiler(engine.device)
    : null;
  const profiles: Partial<Record<'sampling' | 'grpoStep', KernelProfile>> = {};
  let readbacksPerStep = 0;

  // 1. Sampling: N = B·G sequences, prefill of the prompts then one decode step per new token.
  {
    const model = GpuLlama.load(engine, BENCH_MODEL, weights);
    await model.ready;
    const sampler = new Sampler(engine, model);
    const prompts = task
      .generate(3, W.prompts)
      .flatMap((p) => Array.from({ length: W.generations }, () => tokenizer.encode(p.question)));
    const generate = (s: Sampler, stream: number) =>
      s.generate(prompts, {
        maxNewTokens: W.newTokens,
        temperature: 1,
        topK: 0,
        topP: 1,
        seed: 11,
        stream,
        eosTokenIds: [],
      });
    const seconds = await timeRuns(warmup, runs, async (run) => {
      const t0 = performance.now();
      const out = await generate(sampler, run + 100);
      // The workload must not shrink silently (an EOS would stop sequences early).
      if (out.completions.some((c) => c.length !== W.newTokens))
        throw new Error('sampling benchmark: a completion stopped early');
      progress(`sampling ${runLabel(run)}: ${((performance.now() - t0) / 1000).toFixed(2)} s`);
    });
    figures['sampling tokens/s'] = rateOf(seconds, N * W.newTokens, 'tok/s');
    figures['sampling ms per decode step'] = summarize(
      seconds.map((s) => (s * 1000) / W.newTokens),
      'ms',
    );
    if (profiler) {
      profiler.reset();
      const t0 = performance.now();
      await generate(new Sampler(profiler.wrap(engine), model), 99);
      profiles.sampling = kernelProfile(performance.now() - t0, profiler.totals);
      progress('sampling: profiled run done');
    }
    model.destroy();
  }

  // 2. One whole GRPO step (sampling → rewards → advantages → reference → forward/backward →
  // AdamW → metrics), split into the time of each labelled GPU submission, of the reward
  // functions and of the readbacks; the rest of the host time is packing, uploads and bookkeeping.
  {
    const labels = new Map<string, number>();
    const depth = { open: 0 };
    const rewardClock = { seconds: 0 };
    const readbackClock = { seconds: 0, count: 0 };
    const config = resolveConfig({
      rewards: ['custom:vowels'],
      customRewards: { vowels: 'function reward() { return 0; }' },
      perStepPrompts: W.prompts,
      numGenerations: W.generations,
      maxPromptLength: W.promptTokens,
      maxCompletionLength: W.newTokens,
      temperature: 1,
      learningRate: 1e-3,
      lrScheduler: 'constant',
      // R1's β: the reference model's forward pass is part of the step.
      beta: STEP_BETA,
      steps: 1000,
      evalPrompts: 0,
      seed: 5,
    });
    // The trainer keeps the engine it was built with: route its submissions through a switch so
    // that one extra step can run under the profiler.
    const timed = timedEngine(engine, labels, depth);
    let active = timed;
    const trainer = new GrpoTrainer({
      engine: { ...engine, run: (...args) => active.run(...args) },
      config,
      modelConfig: BENCH_MODEL,
      weights,
      tokenizer,
      task,
      rewardFunctions: [timedReward(vowelShare, rewardClock)],
    });
    const phases = Object.fromEntries(STEP_PHASES.map((name) => [name, [] as number[]])) as Record<
      (typeof STEP_PHASES)[number],
      number[]
    >;
    const seconds = await withReadbackClock(readbackClock, depth, () =>
      timeRuns(warmup, runs, async (run) => {
        labels.clear();
        rewardClock.seconds = 0;
        readbackClock.seconds = 0;
        readbackClock.count = 0;
        const t0 = performance.now();
        const report = await trainer.trainStep();
        const total = (performance.now() - t0) / 1000;
        if (report.skipped) throw new Error(`GRPO step skipped its update: ${report.skipped}`);
        progress(`GRPO step ${runLabel(run)}: ${total.toFixed(2)} s`);
        if (run < 0) return;
        const get = (...names: string[]) => names.reduce((s, n) => s + (labels.get(n) ?? 0), 0);
        const gpu = [...labels.values()].reduce((a, b) => a + b, 0);
        const idle = total - gpu;
        phases.sampling.push(get('prefill', 'decode'));
        phases.rewards.push(rewardClock.seconds);
        phases['update (reference + policy + optimizer)'].push(
          get('reference', 'zero-grad', 'policy', 'optimizer'),
        );
        phases['reference forward'].push(get('reference'));
        phases['policy forward+backward'].push(get('zero-grad', 'policy'));
        phases['optimizer (clip + AdamW)'].push(get('optimizer'));
        phases.readbacks.push(readbackClock.seconds);
        phases['other host work'].push(idle - rewardClock.seconds - readbackClock.seconds);
        phases['GPU idle (outside submissions)'].push(idle);
        readbacksPerStep = readbackClock.count;
      }),
    );
    figures['GRPO step ms'] = summarize(
      seconds.map((s) => s * 1000),
      'ms',
    );
    for (const [name, values] of Object.entries(phases)) {
      figures[`  ${name} ms`] = summarize(
        values.map((s) => s * 1000),
        'ms',
      );
    }
    const trainTokens = N * (W.promptTokens + W.newTokens);
    // Over the whole update (the reference forward included): its parts need not wait apart.
    figures['update tokens/s (ref fwd + fwd+bwd + AdamW)'] = summarize(
      phases['update (reference + policy + optimizer)'].map((s) => trainTokens / s),
      'tok/s',
    );
    if (profiler) {
      profiler.reset();
      active = profiler.wrap(timed);
      const t0 = performance.now();
      await trainer.trainStep();
      profiles.grpoStep = kernelProfile(performance.now() - t0, profiler.totals);
      active = timed;
      progress('GRPO step: profiled run done');
    }
    trainer.destroy();
  }
  profiler?.destroy();

  const adapter = engine.gpu.adapter;
  engine.destroy();
  return {
    bench: 'engine',
    path: options.path,
    pathLabel: OUR_ENGINE[options.path],
    machine,
    runtime: `Node ${process.version}, npm 'webgpu' (Dawn)`,
    adapter,
    model: { config: BENCH_MODEL, parameters: parameterCount(BENCH_MODEL) },
    workload: { ...W, sequences: N, warmup, runs, beta: STEP_BETA, readbacksPerStep },
    figures,
    profile:
      profiles.sampling && profiles.grpoStep
        ? { sampling: profiles.sampling, grpoStep: profiles.grpoStep }
        : null,
    notes: [
      PATH_NOTE[options.path],
      adapter.isSoftware
        ? 'Software WebGPU (CPU emulation): these are CPU figures, not GPU speed.'
        : 'Hardware WebGPU adapter.',
      'A phase is the wall time of its GPU submissions (encode + GPU + wait); a submission that does not wait shows only its encoding and its GPU time lands in the next that waits, so the update is also given whole.',
      "'GPU idle (outside submissions)' = rewards + readbacks + other host work (packing, uploads, bookkeeping).",
    ],
  };
}

async function main(argv: string[]) {
  const quick = argv.includes('--quick');
  const outIndex = argv.indexOf('--out');
  const pathsIndex = argv.indexOf('--paths');
  const paths = pathsIndex >= 0 ? parsePaths(argv[pathsIndex + 1] ?? '') : [...OUR_PATHS];
  const results: EngineBenchResult[] = [];
  for (const path of paths) results.push(await runEngineBench({ quick, path }));
  const json = JSON.stringify(results, null, 2);
  if (outIndex >= 0) writeFileSync(argv[outIndex + 1], json);
  else console.log(json);
}

main(process.argv.slice(2)).then(
  // Dawn keeps handles that hold the event loop open; the result is written, so leave.
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : e);
    process.exit(1);
  },
);
