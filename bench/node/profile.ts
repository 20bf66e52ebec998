// Where the time of one training step and of B×G decoding goes, kernel by kernel and shape by
// shape: the llama-100m benchmark model (bench/browser/models.ts, seeded random weights) on Node
// WebGPU, each compute pass timed with timestamp queries (bench/lib/gpu-profile.ts) and keyed by
// its label and dispatch grid. The workloads are the side-by-side benchmark's (issue 9 (c), (d)),
// so the table says which kernels to make faster to move those ratios.
//
// Usage: `npm run bench -- --only profile [--models tiny-reasoner]` (bench/run.mjs bundles it).
import { createEngine } from '../../src/engine/engine';
import { GpuLlama } from '../../src/model/llama';
import { Sampler } from '../../src/model/sampler';
import { PassProfiler, type PassTotals } from '../lib/gpu-profile';
import { ourTrainStep } from '../lib/our-train-step';
import { buildModelWeights } from '../browser/model-files';
import { BENCH_MODELS } from '../browser/models';

export interface KernelRow {
  pass: string;
  ms: number;
  count: number;
  share: number;
}

export interface ProfileResult {
  bench: 'profile';
  model: string;
  training: { wallMs: number; busyMs: number; kernels: KernelRow[] };
  sampling: { wallMs: number; busyMs: number; kernels: KernelRow[] };
}

function rows(totals: PassTotals): KernelRow[] {
  return [...totals.passes]
    .map(([pass, { ms, count }]) => ({ pass, ms, count, share: ms / totals.busyMs }))
    .sort((a, b) => b.ms - a.ms);
}

export async function profileModel(root: string, id: string): Promise<ProfileResult> {
  const model = BENCH_MODELS.find((m) => m.id === id);
  if (!model) throw new Error(`unknown bench model '${id}'`);
  const { config, tensors } = buildModelWeights(root, model);
  const engine = await createEngine();
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
  return { bench: 'profile', model: id, training, sampling };
}

function printProfile(r: ProfileResult, top: number): void {
  for (const [name, part] of [
    ['training step', r.training],
    ['sampling', r.sampling],
  ] as const) {
    console.log(
      `\n${r.model}, ${name}: wall ${part.wallMs.toFixed(0)} ms, kernels busy ${part.busyMs.toFixed(0)} ms`,
    );
    console.log('pass (dispatch grid)                        ms   count  share');
    for (const k of part.kernels.slice(0, top)) {
      console.log(
        `${k.pass.padEnd(40)} ${k.ms.toFixed(1).padStart(8)} ${String(k.count).padStart(6)} ${(100 * k.share).toFixed(1).padStart(5)}%`,
      );
    }
  }
}

async function main(argv: string[]) {
  const modelIndex = argv.indexOf('--model');
  const id = modelIndex >= 0 ? argv[modelIndex + 1] : 'llama-100m';
  const result = await profileModel(process.cwd(), id);
  printProfile(result, 25);
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : e);
    process.exit(1);
  },
);
