// Where the time of one training step and of B×G decoding goes, kernel by kernel and shape by
// shape: the llama-100m benchmark model (bench/browser/models.ts, seeded random weights) on Node
// WebGPU, each compute pass timed with timestamp queries (bench/lib/gpu-profile.ts) and keyed by
// its label and dispatch grid. The workloads are the side-by-side benchmark's (sampling and the
// training step), so the table says which kernels to make faster to move those ratios. Then the barrier-free matmul
// at llama-100m's shapes with scalar loads (matmul.wgsl) and with vec4 loads (matmul_vec4.wgsl),
// side by side in one process.
//
// With --aha: real GRPO steps of the aha preset (src/grpo/presets.ts) on the bundled model, or on the
// Hugging Face folder after --model-dir (a candidate base model), kernel by kernel: what `npm run
// aha`'s 45 minutes are spent on.
//
// --path gpu|emulation picks our kernel path (bench/browser/paths.ts) through the engine's tuning:
// gpu = the kernels a real GPU runs (workgroup barriers), emulation = the barrier-free variants.
// Without it the engine decides from the adapter as the app does (emulation on SwiftShader). The
// scalar/vec4 comparison is of the barrier-free kernel and is skipped with --path gpu.
//
// Usage: `node bench/run.mjs --profile [--model tiny-reasoner] [--path gpu|emulation]`,
//        `node bench/run.mjs --profile --aha [--model-dir <folder>] [--steps 3] [--path …]`,
//        `node bench/run.mjs --profile --tiles [--path …]`.
import { createStorageBuffer, uploadStorageBuffer } from '../../src/engine/buffers';
import { createEngine, type Engine } from '../../src/engine/engine';
import { PipelineCache } from '../../src/engine/pipelines';
import { MatmulKernel, type MatmulArgs } from '../../src/kernels/matmul';
import { GpuLlama } from '../../src/model/llama';
import { Sampler } from '../../src/model/sampler';
import { PassProfiler, type PassTotals } from '../lib/gpu-profile';
import { ourTrainStep } from '../lib/our-train-step';
import { summarize, timeRuns } from '../lib/stats';
import { buildModelWeights } from '../browser/model-files';
import { BENCH_MODELS } from '../browser/models';
import { MatmulTileVariant } from '../kernels/matmul-tiles';
import { createTrainer, loadModel } from '../../src/cli/_session';
import { resolveConfig } from '../../src/grpo/config';
import { PRESETS } from '../../src/grpo/presets';
import { createTask } from '../../src/tasks/index';
import { TINY_COUNTDOWN_OPTIONS } from '../../src/tasks/traces';
import { OUR_ENGINE, parsePaths, pathTuning, type OurPath } from '../browser/paths';

/** The engine on `path`, or as the adapter decides (the app's default) when no path is given. */
const engineOn = (path: OurPath | null) => createEngine(path ? { tuning: pathTuning(path) } : {});

/** What the tables say about the kernels that ran. */
function pathText(engine: Engine, path: OurPath | null): string {
  const chosen = engine.pipelines.tuning.avoidBarriers ? 'emulation' : 'gpu';
  return `${OUR_ENGINE[chosen]} (${path ? '--path' : 'adapter default'})`;
}

export interface KernelRow {
  pass: string;
  ms: number;
  count: number;
  share: number;
}

/** Per-step (or per-run) wall time, GPU busy time and the kernels behind it. */
export interface ProfilePart {
  wallMs: number;
  busyMs: number;
  kernels: KernelRow[];
}

export interface ProfileResult {
  bench: 'profile';
  model: string;
  /** The kernel path that ran, as pathText words it. */
  path: string;
  training: ProfilePart;
  sampling: ProfilePart;
}

function rows(totals: PassTotals): KernelRow[] {
  return [...totals.passes]
    .map(([pass, { ms, count }]) => ({ pass, ms, count, share: ms / totals.busyMs }))
    .sort((a, b) => b.ms - a.ms);
}

export async function profileModel(
  root: string,
  id: string,
  path: OurPath | null = null,
): Promise<ProfileResult> {
  const model = BENCH_MODELS.find((m) => m.id === id);
  if (!model) throw new Error(`unknown bench model '${id}'`);
  const { config, tensors } = buildModelWeights(root, model);
  const engine = await engineOn(path);
  const pathWords = pathText(engine, path);
  if (!engine.gpu.hasFeature('timestamp-query')) {
    throw new Error('the profile needs the timestamp-query feature');
  }
  const profiler = new PassProfiler(engine.device, { byDispatch: true });
  const profiled = profiler.wrap(engine);

  // (d)'s training step (the browser benchmark's own code), one warm-up step, one profiled.
  const { N, T } = model.training;
  const V = config.vocabSize;
  const tokens = new Uint32Array(N * T).map((_, i) => (i * 7919 + 13) % V);
  const trainer = ourTrainStep(
    engine,
    { config, tensors },
    tokens,
    tokens.map((t) => (t + 1) % V),
    model.training,
  );
  await trainer.step();
  profiler.reset();
  let t0 = performance.now();
  const loss = await trainer.step(profiled);
  const training = {
    wallMs: performance.now() - t0,
    busyMs: profiler.totals.busyMs,
    kernels: rows(profiler.totals),
  };
  if (!Number.isFinite(loss)) throw new Error(`training loss ${loss}`);
  trainer.dispose();

  // (c)'s decoding: B prompts × G completions with the KV cache.
  const { B, G, promptTokens, newTokens } = model.sampling;
  const prompts = Array.from({ length: B * G }, (_, n) =>
    Array.from({ length: promptTokens }, (_, i) => (Math.floor(n / G) * 31 + i * 17 + 5) % V),
  );
  const llama = GpuLlama.load(engine, config, tensors);
  await llama.ready;
  const generate = (sampler: Sampler) =>
    sampler.generate(prompts, {
      maxNewTokens: newTokens,
      temperature: 1,
      topK: 0,
      topP: 1,
      seed: 3,
      stream: 0,
      eosTokenIds: [],
    });
  await generate(new Sampler(engine, llama));
  profiler.reset();
  t0 = performance.now();
  await generate(new Sampler(profiled, llama));
  const sampling = {
    wallMs: performance.now() - t0,
    busyMs: profiler.totals.busyMs,
    kernels: rows(profiler.totals),
  };
  llama.destroy();
  profiler.destroy();
  engine.destroy();
  return { bench: 'profile', model: id, path: pathWords, training, sampling };
}

type MatmulShape = Pick<MatmulArgs, 'M' | 'N' | 'K' | 'transA' | 'transB'> & { name: string };

/** llama-100m's matmul shapes in (c) decoding (8 rows) and (d) training (32 rows). */
const LOAD_SHAPES: MatmulShape[] = [
  { name: 'decode x·Wᵀ, gate/up', M: 8, N: 2048, K: 768, transB: true },
  { name: 'decode x·Wᵀ, down', M: 8, N: 768, K: 2048, transB: true },
  { name: 'train x·Wᵀ, q/o', M: 32, N: 768, K: 768, transB: true },
  { name: 'train dX = dY·W, down', M: 32, N: 768, K: 2048 },
  { name: 'train dW = dYᵀ·X, gate/up', M: 2048, N: 768, K: 32, transA: true },
  { name: 'train dW, tied embedding', M: 32000, N: 768, K: 32, transA: true },
];

export interface LoadRow {
  shape: string;
  scalarGflops: number;
  vec4Gflops: number;
}

/** GFLOP/s (median of 3 submissions of 5 products) of the scalar- and vec4-load kernels. */
export async function compareMatmulLoads(engine: Engine): Promise<LoadRow[]> {
  const out: LoadRow[] = [];
  for (const { name, ...shape } of LOAD_SHAPES) {
    const a = uploadStorageBuffer(engine.device, new Float32Array(shape.M * shape.K).fill(0.5));
    const b = uploadStorageBuffer(engine.device, new Float32Array(shape.N * shape.K).fill(0.25));
    const c = createStorageBuffer(engine.device, shape.M * shape.N * 4);
    const gflops: number[] = [];
    for (const vectorLoads of [false, true]) {
      const pipelines = new PipelineCache(engine.device, { avoidBarriers: true, vectorLoads });
      const kernel = new MatmulKernel(engine.device, pipelines);
      const run = async () => {
        await engine.run(async (enc) => {
          for (let i = 0; i < 5; i++) kernel.encode(enc, { a, b, c, ...shape });
        });
      };
      const seconds = summarize(await timeRuns(1, 3, run), 's').median / 5;
      gflops.push((2 * shape.M * shape.N * shape.K) / (seconds * 1e9));
    }
    for (const buf of [a, b, c]) buf.destroy();
    out.push({
      shape: `${name} (${shape.M}×${shape.N}×${shape.K})`,
      scalarGflops: gflops[0],
      vec4Gflops: gflops[1],
    });
  }
  return out;
}

/**
 * `steps` GRPO steps of the aha preset after one warm-up step, all kernels of sampling and update
 * together (the wall time also holds tokenizing, rewards and the readbacks).
 */
export async function profileAhaSteps(
  modelDir: string,
  steps: number,
  path: OurPath | null = null,
): Promise<{ model: string; path: string; part: ProfilePart }> {
  const config = resolveConfig({ ...PRESETS.aha, model: modelDir });
  const model = await loadModel(config.model);
  const engine = await engineOn(path);
  const pathWords = pathText(engine, path);
  const profiler = new PassProfiler(engine.device, { byDispatch: true });
  // As `npm run aha` sets its trainer up (src/cli/aha.ts).
  const trainer = createTrainer(
    profiler.wrap(engine),
    config,
    model,
    createTask(config.task, config.taskOptions),
    createTask('countdown', TINY_COUNTDOWN_OPTIONS),
  );
  await trainer.trainStep();
  profiler.reset();
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) await trainer.trainStep();
  const part = {
    wallMs: (performance.now() - t0) / steps,
    busyMs: profiler.totals.busyMs / steps,
    kernels: rows(profiler.totals).map((k) => ({ ...k, ms: k.ms / steps, count: k.count / steps })),
  };
  profiler.destroy();
  engine.destroy();
  return { model: model.folder, path: pathWords, part };
}

function printPart(title: string, part: ProfilePart, top: number): void {
  console.log(
    `\n${title}: wall ${part.wallMs.toFixed(0)} ms, kernels busy ${part.busyMs.toFixed(0)} ms`,
  );
  console.log('pass (dispatch grid)                        ms   count  share');
  for (const k of part.kernels.slice(0, top)) {
    console.log(
      `${k.pass.padEnd(40)} ${k.ms.toFixed(1).padStart(8)} ${String(Math.round(k.count)).padStart(6)} ${(100 * k.share).toFixed(1).padStart(5)}%`,
    );
  }
}

/** The bundled 354K tiny reasoner's products in an aha step (C = 80, I = 224; B·G = 32 rows
 * decoding, 2432 = 32 × 76 training): the shapes the tile comparison of bench/README.md was measured
 * at. (The earlier comparison, at the 205K model's C = 64, found no better tile than 64×64.) */
const AHA_SHAPES: MatmulShape[] = [
  { name: 'decode q/k/v/o', M: 32, N: 80, K: 80, transB: true },
  { name: 'decode gate/up', M: 32, N: 224, K: 80, transB: true },
  { name: 'decode down', M: 32, N: 80, K: 224, transB: true },
  { name: 'train x·Wᵀ, q', M: 2432, N: 80, K: 80, transB: true },
  { name: 'train x·Wᵀ, gate', M: 2432, N: 224, K: 80, transB: true },
  { name: 'train dX, down', M: 2432, N: 80, K: 224 },
  { name: 'train dW, q', M: 80, N: 80, K: 2432, transA: true },
  { name: 'train dW, gate', M: 224, N: 80, K: 2432, transA: true },
];

/** Milliseconds per product (median of 3 submissions of 10) for each barrier-free tile shape. */
async function compareTiles(engine: Engine): Promise<void> {
  // 20 threads across: 80-column tiles, C = 80 with no clamped columns (≤ 256 threads in all).
  const tiles = [
    ...[16, 8, 4].flatMap((wgY) => [16, 8, 4].map((wgX) => [wgX, wgY] as const)),
    ...[12, 8, 4].map((wgY) => [20, wgY] as const),
  ];
  console.log(
    `shape (M×N×K)                  ${tiles.map(([x, y]) => `${4 * y}×${4 * x}`.padStart(7)).join('')}`,
  );
  for (const { name, ...shape } of AHA_SHAPES) {
    const a = uploadStorageBuffer(engine.device, new Float32Array(shape.M * shape.K).fill(0.5));
    const b = uploadStorageBuffer(engine.device, new Float32Array(shape.N * shape.K).fill(0.25));
    const c = createStorageBuffer(engine.device, shape.M * shape.N * 4);
    const cells: string[] = [];
    for (const [wgX, wgY] of tiles) {
      const kernel = new MatmulTileVariant(engine.device, engine.pipelines, wgX, wgY);
      const run = async () => {
        await engine.run(async (enc) => {
          for (let i = 0; i < 10; i++) kernel.encode(enc, { a, b, c, ...shape });
        });
      };
      const ms = (summarize(await timeRuns(1, 3, run), 's').median / 10) * 1000;
      cells.push(ms.toFixed(3).padStart(7));
    }
    for (const buf of [a, b, c]) buf.destroy();
    console.log(`${`${name} (${shape.M}×${shape.N}×${shape.K})`.padEnd(31)}${cells.join('')}`);
  }
}

function printProfile(r: ProfileResult, top: number): void {
  for (const [name, part] of [
    ['training step', r.training],
    ['sampling', r.sampling],
  ] as const) {
    printPart(`${r.model}, ${name}, ${r.path}`, part, top);
  }
}

async function main(argv: string[]) {
  const flag = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const pathFlag = flag('--path');
  const path = pathFlag === undefined ? null : parsePaths(pathFlag, '--path');
  if (path && path.length !== 1) throw new Error('--path: name one path (gpu or emulation)');
  const onPath = path ? path[0] : null;
  if (argv.includes('--aha')) {
    const steps = Number(flag('--steps') ?? 3);
    const {
      model,
      path: words,
      part,
    } = await profileAhaSteps(flag('--model-dir') ?? 'bundled', steps, onPath);
    printPart(`aha preset, ${model}, one GRPO step (mean of ${steps}), ${words}`, part, 30);
    return;
  }
  if (argv.includes('--tiles')) {
    const engine = await engineOn(onPath);
    console.log(`matmul tiles, ${pathText(engine, onPath)}, ms per product`);
    await compareTiles(engine);
    engine.destroy();
    return;
  }
  const result = await profileModel(process.cwd(), flag('--model') ?? 'llama-100m', onPath);
  printProfile(result, 25);
  if (onPath === 'gpu') return; // the comparison below is of the barrier-free kernel
  const engine = await createEngine();
  console.log('\nbarrier-free matmul, llama-100m shapes   scalar loads   vec4 loads   GFLOP/s');
  for (const r of await compareMatmulLoads(engine)) {
    console.log(
      `${r.shape.padEnd(44)} ${r.scalarGflops.toFixed(2).padStart(8)} ${r.vec4Gflops.toFixed(2).padStart(12)}   ×${(r.vec4Gflops / r.scalarGflops).toFixed(2)}`,
    );
  }
  engine.destroy();
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : e);
    process.exit(1);
  },
);
