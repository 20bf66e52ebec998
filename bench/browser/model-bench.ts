// Page side of the whole-model comparisons (forward, sampling, training step): our engine against
// onnxruntime-web, transformers.js and tfjs on the same weights, fetched from the driver's
// /bench-models/<id>/ (see model-files.ts). Every engine's first result is checked before it is
// timed (logits against onnxruntime's CPU EP, greedy tokens against ours, training losses against
// ours); a failed check is reported as an error, never as a figure.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-webgpu';
import * as ort from 'onnxruntime-web/webgpu';
import { AutoModelForCausalLM, env as hfEnv, Tensor as HfTensor } from '@huggingface/transformers';
import { createEngine, type Engine } from '../../src/engine/engine';
import { readF32 } from '../../src/engine/buffers';
import { parseSafetensors } from '../../src/formats/safetensors';
import { parameterCount, parseHfConfig, type LlamaConfig } from '../../src/core/model-config';
import { GpuLlama } from '../../src/model/llama';
import { Sampler } from '../../src/model/sampler';
import {
  LOGITS_REL_TOLERANCE,
  LOSS_REL_TOLERANCE,
  type ForwardRun,
  type ForwardWorkload,
  type ModelBenchResult,
  type SamplingRun,
  type SamplingWorkload,
  type TrainingRun,
  type TrainingWorkload,
} from './models';
import { TfjsLlama } from './tfjs-llama';
import { isOurEngine, pathOf, pathTuning, type OurPath } from './paths';
import { ourTrainStep } from '../lib/our-train-step';

const log = (line: string) => console.log(`[page] ${line}`);

/** URLs transformers.js fetched (all same-origin: anything else throws). */
export const hfFetched: string[] = [];

/** transformers.js: local files from this server only, no Cache API, ORT's wasm from /ort/. */
export function configureTransformers(): void {
  hfEnv.allowRemoteModels = false;
  hfEnv.allowLocalModels = true;
  hfEnv.localModelPath = '/bench-models/';
  hfEnv.useBrowserCache = false;
  hfEnv.useWasmCache = false;
  hfEnv.fetch = (input: string | URL, init?: RequestInit) => {
    const url = new URL(String(input), location.href);
    if (url.origin !== location.origin)
      throw new Error(`transformers.js tried to fetch ${url.href} (not this server)`);
    hfFetched.push(url.pathname);
    return fetch(url, init);
  };
  // transformers.js and this page share one onnxruntime-web module (same package in node_modules).
  ort.env.wasm.wasmPaths = '/ort/';
  ort.env.wasm.numThreads = 1;
}

/** One engine (device) per kernel path, each created with the path's tuning, kept for the page. */
const ourEngines = new Map<OurPath, Promise<Engine>>();

/** Our engine on one kernel path (paths.ts); the matmul page (page.ts) shares it. */
export function ourEngineFor(path: OurPath): Promise<Engine> {
  let engine = ourEngines.get(path);
  if (!engine) ourEngines.set(path, (engine = createEngine({ tuning: pathTuning(path) })));
  return engine;
}

interface LoadedModel {
  id: string;
  config: LlamaConfig;
  tensors: Map<string, Float32Array>;
}
let cached: LoadedModel | null = null;

async function fetchBytes(path: string): Promise<Uint8Array> {
  const res = await fetch(path);
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

/** The model's config and weights as our engine loads them (one model kept at a time). */
async function loadModel(id: string): Promise<LoadedModel> {
  if (cached?.id === id) return cached;
  cached = null;
  const base = `/bench-models/${id}/`;
  const config = parseHfConfig(
    JSON.parse(new TextDecoder().decode(await fetchBytes(base + 'config.json'))),
  );
  const parsed = parseSafetensors(
    await fetchBytes(base + 'model.safetensors'),
    'model.safetensors',
  );
  cached = { id, config, tensors: new Map([...parsed.tensors].map(([k, t]) => [k, t.data])) };
  return cached;
}

/** Seeded token ids in [0, V) (xorshift32). */
function tokenIds(n: number, V: number, seed: number): Uint32Array {
  const out = new Uint32Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = (x >>> 0) % V;
  }
  return out;
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** max|a − b| / max|b| over the whole arrays. */
function relError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return diff / Math.max(scale, 1e-30);
}

async function timed(warmup: number, runs: number, fn: () => Promise<void>): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn();
  const seconds: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    seconds.push((performance.now() - t0) / 1000);
  }
  return seconds;
}

const fmtSeconds = (s: number[]) => s.map((x) => x.toFixed(2)).join(', ');

// ---------------------------------------------------------------------------------------------
// (b) Forward: logits (N, T, V) for N sequences of T tokens, no padding.

interface ForwardRunner {
  /** One forward: upload the tokens, compute, read the logits back (N·T·V floats). */
  run(): Promise<Float32Array>;
  dispose(): Promise<void> | void;
}

async function oursForward(
  m: LoadedModel,
  path: OurPath,
  tokens: Uint32Array,
  N: number,
  T: number,
) {
  const eng = await ourEngineFor(path);
  const model = GpuLlama.load(eng, m.config, m.tensors);
  await model.ready;
  const keyStart = new Uint32Array(N);
  const positions = new Uint32Array(N * T).map((_, i) => i % T);
  const V = m.config.vocabSize;
  return {
    async run() {
      const batch = model.uploadBatch(tokens, keyStart, positions, N, T);
      let logits: GPUBuffer | null = null;
      await eng.run(async (enc) => {
        logits = model.forward(enc, batch, { start: 0, count: T }).logits;
      }, 'bench.forward');
      return readF32(eng.device, logits!, N * T * V);
    },
    dispose: () => model.destroy(),
  } satisfies ForwardRunner;
}

async function ortForward(
  id: string,
  provider: 'webgpu' | 'wasm',
  tokens: Uint32Array,
  N: number,
  T: number,
) {
  const session = await ort.InferenceSession.create(
    await fetchBytes(`/bench-models/${id}/plain.onnx`),
    { executionProviders: [provider], graphOptimizationLevel: 'all' },
  );
  const ids = BigInt64Array.from(tokens, (v) => BigInt(v));
  const mask = new BigInt64Array(N * T).fill(1n);
  return {
    async run() {
      const out = await session.run({
        input_ids: new ort.Tensor('int64', ids, [N, T]),
        attention_mask: new ort.Tensor('int64', mask, [N, T]),
      });
      const data = (await out.logits.getData(true)) as Float32Array;
      for (const t of Object.values(out)) t.dispose();
      return data;
    },
    dispose: () => session.release(),
  } satisfies ForwardRunner;
}

export async function forward(
  id: string,
  w: ForwardWorkload,
  engines: ForwardRun['engine'][],
): Promise<ModelBenchResult<ForwardRun, ForwardWorkload>> {
  const m = await loadModel(id);
  const { N, T } = w;
  const tokens = tokenIds(N * T, m.config.vocabSize, 7);
  // The reference logits: onnxruntime's CPU (wasm) EP on the same ONNX graph, computed first.
  const order = [...engines].sort((a, b) => Number(b === 'ort-wasm') - Number(a === 'ort-wasm'));
  let reference: Float32Array | null = null;
  const runs: ForwardRun[] = [];
  for (const engine of order) {
    const r: ForwardRun = { engine, seconds: [], relError: NaN };
    let runner: ForwardRunner | null = null;
    try {
      runner = isOurEngine(engine)
        ? await oursForward(m, pathOf(engine), tokens, N, T)
        : await ortForward(id, engine === 'ort-webgpu' ? 'webgpu' : 'wasm', tokens, N, T);
      // The first run compiles kernels and is the one checked; it is not timed (nor are the
      // w.warmup runs after it).
      const logits = await runner.run();
      if (engine === 'ort-wasm') reference = logits;
      if (!reference) throw new Error('no reference logits (ort-wasm failed)');
      r.relError = relError(logits, reference);
      if (!(r.relError <= LOGITS_REL_TOLERANCE))
        throw new Error(
          `logits differ from ort-wasm: max rel. error ${r.relError} > ${LOGITS_REL_TOLERANCE}`,
        );
      r.seconds = await timed(w.warmup, w.runs, async () => void (await runner!.run()));
      log(
        `forward ${id} ${engine}: ${fmtSeconds(r.seconds)} s (rel err ${r.relError.toExponential(1)})`,
      );
    } catch (e) {
      r.error = errorText(e);
      log(`forward ${id} ${engine}: FAILED ${r.error}`);
    } finally {
      await runner?.dispose();
    }
    runs.push(r);
  }
  return {
    model: id,
    label: id,
    parameters: parameterCount(m.config),
    workload: w,
    runs: engines.map((e) => runs.find((r) => r.engine === e)!),
    notes: [],
  };
}

// ---------------------------------------------------------------------------------------------
// (c) Sampling: B prompts × G completions, P prompt + M new tokens each, no EOS stop, KV cache.

interface SampleRunner {
  /** Generates `newTokens` tokens for every sequence; returns them (N rows). */
  run(newTokens: number, greedy: boolean, stream: number): Promise<number[][]>;
  dispose(): Promise<void> | void;
}

async function oursSampler(
  m: LoadedModel,
  path: OurPath,
  prompts: number[][],
): Promise<SampleRunner> {
  const eng = await ourEngineFor(path);
  const model = GpuLlama.load(eng, m.config, m.tensors);
  await model.ready;
  const sampler = new Sampler(eng, model);
  return {
    async run(newTokens, greedy, stream) {
      const out = await sampler.generate(prompts, {
        maxNewTokens: newTokens,
        temperature: 1,
        topK: 0,
        topP: 1,
        greedy,
        seed: 17,
        stream,
        eosTokenIds: [],
        padTokenId: 0,
      });
      return out.completions;
    },
    dispose: () => model.destroy(),
  };
}

async function transformersSampler(
  id: string,
  device: 'webgpu' | 'wasm',
  prompts: number[][],
): Promise<SampleRunner> {
  const model = await AutoModelForCausalLM.from_pretrained(id, { dtype: 'fp32', device });
  const N = prompts.length;
  const P = prompts[0].length;
  const ids = prompts.flat();
  const tensor = (values: number[]) =>
    new HfTensor(
      'int64',
      BigInt64Array.from(values, (v) => BigInt(v)),
      [N, P],
    );
  return {
    async run(newTokens, greedy) {
      const output = (await model.generate({
        input_ids: tensor(ids),
        attention_mask: tensor(ids.map(() => 1)),
        max_new_tokens: newTokens,
        do_sample: !greedy,
        temperature: 1,
        top_k: 0,
        // No end-of-sequence stop: every sequence generates exactly newTokens tokens.
        eos_token_id: null,
      } as unknown as Parameters<typeof model.generate>[0])) as InstanceType<typeof HfTensor>;
      const rows = output.tolist() as bigint[][];
      return rows.map((row) => row.slice(P).map(Number));
    },
    async dispose() {
      await model.dispose();
    },
  };
}

export async function sampling(
  id: string,
  w: SamplingWorkload,
  engines: SamplingRun['engine'][],
): Promise<ModelBenchResult<SamplingRun, SamplingWorkload>> {
  const m = await loadModel(id);
  const V = m.config.vocabSize;
  // B distinct prompts of P tokens, each repeated G times (GRPO's group layout), N = B·G.
  const prompts: number[][] = [];
  for (let b = 0; b < w.B; b++) {
    const p = Array.from(tokenIds(w.promptTokens, V, 31 + b));
    for (let g = 0; g < w.G; g++) prompts.push(p);
  }
  // Ours first (both paths): the first of ours that runs gives the reference greedy tokens.
  const order = [...engines].sort((a, b) => Number(isOurEngine(b)) - Number(isOurEngine(a)));
  let oursGreedy: number[][] | null = null;
  const runs: SamplingRun[] = [];
  for (const engine of order) {
    const r: SamplingRun = { engine, seconds: [], greedyMatches: NaN };
    let runner: SampleRunner | null = null;
    try {
      runner = isOurEngine(engine)
        ? await oursSampler(m, pathOf(engine), prompts)
        : await transformersSampler(
            id,
            engine === 'transformers.js-webgpu' ? 'webgpu' : 'wasm',
            prompts,
          );
      // Untimed check: greedy tokens, compared with ours (same weights, so the same argmax
      // unless two logits are within rounding of each other).
      const greedy = await runner.run(w.greedyCheckTokens, true, 0);
      if (isOurEngine(engine)) oursGreedy ??= greedy;
      r.greedyMatches = oursGreedy
        ? greedy.filter((row, i) => row.join() === oursGreedy![i].join()).length
        : NaN;
      let stream = 1;
      r.seconds = await timed(w.warmup, w.runs, async () => {
        const out = await runner!.run(w.newTokens, false, stream++);
        if (out.length !== prompts.length || out.some((c) => c.length !== w.newTokens))
          throw new Error(`expected ${prompts.length} × ${w.newTokens} new tokens`);
      });
      log(
        `sampling ${id} ${engine}: ${fmtSeconds(r.seconds)} s (greedy match ${r.greedyMatches}/${prompts.length})`,
      );
    } catch (e) {
      r.error = errorText(e);
      log(`sampling ${id} ${engine}: FAILED ${r.error}`);
    } finally {
      await runner?.dispose();
    }
    runs.push(r);
  }
  return {
    model: id,
    label: id,
    parameters: parameterCount(m.config),
    workload: w,
    runs: engines.map((e) => runs.find((r) => r.engine === e)!),
    notes: [],
  };
}

// ---------------------------------------------------------------------------------------------
// (d) One training step: forward, mean next-token cross-entropy over all N·T tokens, backward,
// Adam (β = 0.9, 0.999, ε = 1e-8, no weight decay, no clipping) on every weight.

interface TrainRunner {
  /** One step; returns the loss before its update. */
  step(): Promise<number>;
  dispose(): void;
}

async function oursTrainer(
  m: LoadedModel,
  path: OurPath,
  inputs: Uint32Array,
  targets: Uint32Array,
  w: TrainingWorkload,
): Promise<TrainRunner> {
  const trainer = ourTrainStep(await ourEngineFor(path), m, inputs, targets, w);
  return { step: () => trainer.step(), dispose: () => trainer.dispose() };
}

async function tfjsTrainer(
  m: LoadedModel,
  inputs: Uint32Array,
  targets: Uint32Array,
  w: TrainingWorkload,
): Promise<TrainRunner> {
  if (tf.getBackend() !== 'webgpu') {
    if (!(await tf.setBackend('webgpu'))) throw new Error('tfjs: the webgpu backend did not start');
    await tf.ready();
  }
  const model = new TfjsLlama(m.config, m.tensors, w.T);
  const optimizer = tf.train.adam(w.learningRate, 0.9, 0.999, 1e-8);
  const tokens = tf.tensor2d(Int32Array.from(inputs), [w.N, w.T], 'int32');
  const labels = tf.tensor1d(Int32Array.from(targets), 'int32');
  const varList = [...model.vars.values()];
  return {
    async step() {
      const cost = optimizer.minimize(() => model.loss(tokens, labels), true, varList);
      if (!cost) throw new Error('tfjs: minimize returned no cost');
      // Reading the cost waits for the whole step (the updates were submitted before it).
      const [loss] = await cost.data();
      cost.dispose();
      return loss;
    },
    dispose() {
      optimizer.dispose();
      tf.dispose([tokens, labels]);
      model.dispose();
    },
  };
}

export async function training(
  id: string,
  w: TrainingWorkload,
  engines: TrainingRun['engine'][],
): Promise<ModelBenchResult<TrainingRun, TrainingWorkload>> {
  const m = await loadModel(id);
  const { N, T } = w;
  // N sequences of T + 1 tokens: inputs are the first T, targets the next T.
  const seq = tokenIds(N * (T + 1), m.config.vocabSize, 53);
  const inputs = new Uint32Array(N * T);
  const targets = new Uint32Array(N * T);
  for (let n = 0; n < N; n++) {
    inputs.set(seq.subarray(n * (T + 1), n * (T + 1) + T), n * T);
    targets.set(seq.subarray(n * (T + 1) + 1, (n + 1) * (T + 1)), n * T);
  }
  // Ours first (both paths): the first of ours that runs gives the reference losses.
  const order = [...engines].sort((a, b) => Number(isOurEngine(b)) - Number(isOurEngine(a)));
  let oursLosses: number[] | null = null;
  const runs: TrainingRun[] = [];
  for (const engine of order) {
    const r: TrainingRun = { engine, seconds: [], losses: [] };
    let runner: TrainRunner | null = null;
    try {
      runner = isOurEngine(engine)
        ? await oursTrainer(m, pathOf(engine), inputs, targets, w)
        : await tfjsTrainer(m, inputs, targets, w);
      // Two untimed steps from the same weights: the loss before and after one update must
      // agree with ours (same model, same gradients, same Adam step).
      r.losses = [await runner.step(), await runner.step()];
      if (isOurEngine(engine)) oursLosses ??= r.losses;
      if (!oursLosses) throw new Error('no reference losses (ours failed)');
      r.losses.forEach((loss, i) => {
        const rel = Math.abs(loss - oursLosses![i]) / Math.abs(oursLosses![i]);
        if (!(rel <= LOSS_REL_TOLERANCE))
          throw new Error(
            `loss ${i === 0 ? 'before' : 'after'} the first update ${loss} vs ours ${oursLosses![i]} (rel. diff ${rel} > ${LOSS_REL_TOLERANCE})`,
          );
      });
      // The two checked steps are the first warm-up steps.
      r.seconds = await timed(Math.max(0, w.warmup - 2), w.runs, async () => {
        const loss = await runner!.step();
        if (!Number.isFinite(loss)) throw new Error(`non-finite loss ${loss}`);
      });
      log(`training ${id} ${engine}: ${fmtSeconds(r.seconds)} s (losses ${r.losses.join(', ')})`);
    } catch (e) {
      r.error = errorText(e);
      log(`training ${id} ${engine}: FAILED ${r.error}`);
    } finally {
      runner?.dispose();
    }
    runs.push(r);
  }
  return {
    model: id,
    label: id,
    parameters: parameterCount(m.config),
    workload: w,
    runs: engines.map((e) => runs.find((r) => r.engine === e)!),
    notes: [],
  };
}

/** Forget the cached weights (the driver swaps the served model next). */
export function unloadModel(): void {
  cached = null;
}

export const transformersVersion = () => hfEnv.version;
