// `npm run bench:gpu [-- --tiny] [--out file] [--aha-steps n] [--aha-max-seconds s]
// [--skip matmul,sweep,counters,reductions,aha,lora]`: the benchmark of the path a real GPU runs, in Node on
// WebGPU (Dawn on Vulkan). Built to be run the moment a machine with a GPU is at hand, and to keep
// working on SwiftShader (`--tiny`: small shapes, one aha step), so it never rots.
// It writes bench/results/<date>-<gpu>.json with:
//   1. matmul GFLOP/s at the model shapes (bundled tiny reasoner, Qwen2.5-0.5B decode / prefill /
//      training rows; B as f32, packed bf16 and NF4 weights) and at 4096², for every matmul variant
//      (MATMUL_VARIANTS: the staged tiles GPUs ran before, the emulation path, the GPU kernels),
//      each as a fraction of the device's fp32 peak (GPU_PEAKS, by device name); then the
//      load-time sweep's choice at Qwen's shapes, the reduction kernels' variants, and what one
//      CPU wait on the GPU costs;
//   2. the aha preset's wall time (95 steps, the bundled model, as `npm run aha` trains one seed);
//   3. one LoRA GRPO step at Qwen2.5-0.5B's shape (random bf16 weights, r 16 all-linear): its time,
//      the engine's peak GPU bytes beside the memory plan, and the memory the driver reports
//      (nvidia-smi, where there is one).
// Every matmul is checked against a float64 dot product on sampled entries before it is timed.
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { promisify } from 'node:util';
import { createStorageBuffer, readF32, writeBuffer } from '../../src/engine/buffers';
import { COUNTER_PHASES, diffTimes, type TimeSnapshot } from '../../src/engine/counters';
import { createEngine, type Engine } from '../../src/engine/engine';
import type { KernelTuning } from '../../src/engine/pipelines';
import { resolveConfig } from '../../src/grpo/config';
import { PRESETS } from '../../src/grpo/presets';
import {
  MATMUL_VARIANTS,
  MatmulKernel,
  type MatmulShape,
  type MatmulVariant,
} from '../../src/kernels/matmul';
import {
  describeMatmulChoice,
  modelMatmulShapes,
  sweepMatmulVariants,
} from '../../src/kernels/matmul-sweep';
import { LOGPROB_GATHER_VARIANTS, runLogprobGather } from '../../src/kernels/logprob';
import { RMSNORM_VARIANTS, runRmsNorm } from '../../src/kernels/rmsnorm';
import { initLlamaWeights } from '../../src/model/init';
import { packHalfBits, toHalfBits, widenHalfBits } from '../../src/ref/half';
import { dequantizeNf4, quantizeNf4 } from '../../src/ref/nf4';
import { packNf4 } from '../../src/ref/nf4-matmul';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { Run } from '../../src/train/run';
import { loadModel } from '../../src/cli/_session';
import { LORA, modelConfig, runSteps } from '../lib/grpo-step-workload';
import {
  ahaStepCounters,
  countersTable,
  qwenLoraStepCounters,
  type StepCounters,
} from '../lib/step-counters';
import { fmt, summarize, type Stat } from '../lib/stats';
import { machineInfo } from './machine';

/** fp32 (non-tensor-core) peak TFLOP/s by device name, from the vendors' data sheets. */
export const GPU_PEAKS: { pattern: RegExp; name: string; fp32Tflops: number }[] = [
  { pattern: /h200/i, name: 'NVIDIA H200', fp32Tflops: 66.9 },
  { pattern: /h100.*pcie/i, name: 'NVIDIA H100 PCIe', fp32Tflops: 51.2 },
  { pattern: /h100/i, name: 'NVIDIA H100 SXM', fp32Tflops: 66.9 },
  { pattern: /a100/i, name: 'NVIDIA A100', fp32Tflops: 19.5 },
  { pattern: /l40s/i, name: 'NVIDIA L40S', fp32Tflops: 91.6 },
  { pattern: /\bl4\b/i, name: 'NVIDIA L4', fp32Tflops: 30.3 },
  { pattern: /a10\b/i, name: 'NVIDIA A10', fp32Tflops: 31.2 },
  { pattern: /rtx 4090/i, name: 'NVIDIA RTX 4090', fp32Tflops: 82.6 },
  { pattern: /rtx 3090/i, name: 'NVIDIA RTX 3090', fp32Tflops: 35.6 },
  { pattern: /\bt4\b/i, name: 'NVIDIA T4', fp32Tflops: 8.1 },
  { pattern: /v100/i, name: 'NVIDIA V100', fp32Tflops: 15.7 },
  { pattern: /m4 max/i, name: 'Apple M4 Max', fp32Tflops: 17.0 },
  { pattern: /m2 pro/i, name: 'Apple M2 Pro', fp32Tflops: 6.8 },
];

export function devicePeak(text: string): { name: string; fp32Tflops: number } | null {
  return GPU_PEAKS.find((p) => p.pattern.test(text)) ?? null;
}

interface Options {
  tiny: boolean;
  out: string | null;
  ahaSteps: number | null;
  /** Stop the aha run after this many seconds (--aha-max-seconds; default: no cap). */
  ahaMaxSeconds: number;
  skip: Set<string>;
  /** Matmul variants to time (--variants; default every one). */
  variants: Set<string> | null;
}

function parseOptions(argv: string[]): Options {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const ahaSteps = value('--aha-steps');
  return {
    tiny: argv.includes('--tiny'),
    out: value('--out') ?? null,
    ahaSteps: ahaSteps === undefined ? null : Number(ahaSteps),
    ahaMaxSeconds: Number(value('--aha-max-seconds') ?? Infinity),
    skip: new Set((value('--skip') ?? '').split(',').filter(Boolean)),
    variants: value('--variants') ? new Set(value('--variants')!.split(',')) : null,
  };
}

/** A labelled product: `rows` of activations times a (K → N) weight, as the model runs it. */
interface MatmulCase {
  label: string;
  shape: MatmulShape;
}

function matmulCases(tiny: boolean): MatmulCase[] {
  // y = x·Wᵀ with HF (out, in) weights is TRANS_B; the tied LM head too.
  const linear = (label: string, M: number, K: number, N: number, bDtype?: 'bf16' | 'nf4') => ({
    label,
    shape: { M, K, N, transB: true, ...(bDtype ? { bDtype } : {}) },
  });
  if (tiny) {
    return [
      linear('tiny-reasoner q (32×80 · 80×80ᵀ)', 32, 80, 80),
      linear('decode-like 16×96 · 256×96ᵀ', 16, 96, 256),
      linear('odd 33×97 · 65×97ᵀ bf16', 33, 97, 65, 'bf16'),
      linear('odd 33×96 · 65×96ᵀ nf4', 33, 96, 65, 'nf4'),
      { label: 'square 128²', shape: { M: 128, K: 128, N: 128 } },
    ];
  }
  return [
    linear('tiny-reasoner MLP up (2560×80 → 320)', 2560, 80, 320),
    linear('Qwen0.5B decode q (32 rows, 896 → 896)', 32, 896, 896),
    linear('Qwen0.5B decode MLP up (32, 896 → 4864) bf16', 32, 896, 4864, 'bf16'),
    linear('Qwen0.5B decode MLP up (32, 896 → 4864) nf4', 32, 896, 4864, 'nf4'),
    linear('Qwen0.5B decode LM head (32, 896 → 151936) bf16', 32, 896, 151936, 'bf16'),
    linear('Qwen0.5B train MLP up (1024, 896 → 4864)', 1024, 896, 4864),
    linear('Qwen0.5B train MLP down (1024, 4864 → 896)', 1024, 4864, 896),
    linear('Qwen0.5B train MLP up bf16 (1024, 896 → 4864)', 1024, 896, 4864, 'bf16'),
    linear('Qwen0.5B train MLP up nf4 (1024, 896 → 4864)', 1024, 896, 4864, 'nf4'),
    { label: 'square 4096² (A·B)', shape: { M: 4096, K: 4096, N: 4096 } },
    linear('square 4096² (x·Wᵀ)', 4096, 4096, 4096),
  ];
}

/**
 * Every matmul variant timed side by side (MATMUL_VARIANTS): 'staged64' is the GPU path before the
 * GPU kernels, 'emulation' the barrier-free path SwiftShader takes, the rest the GPU kernels.
 */
const PATHS: { name: string; tuning: Partial<KernelTuning> }[] = (
  Object.keys(MATMUL_VARIANTS) as MatmulVariant[]
).map((variant) => ({
  name: variant,
  tuning: { avoidBarriers: variant === 'emulation', matmulSmall: variant, matmulLarge: variant },
}));

function randomValues(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = ((s >>> 0) / 2 ** 32 - 0.5) * 2;
  }
  return out;
}

interface MatmulResult {
  label: string;
  path: string;
  M: number;
  N: number;
  K: number;
  dtype: string;
  gflops: Stat;
  fractionOfPeak: number | null;
  maxRelError: number;
  repsPerSubmit: number;
}

async function timeMatmul(
  engine: Engine,
  c: MatmulCase,
  pathName: string,
  peakTflops: number | null,
  runs: number,
): Promise<MatmulResult> {
  const { device } = engine;
  const { M, N, K, transB = false } = c.shape;
  const bf16 = c.shape.bDtype === 'bf16';
  const nf4 = c.shape.bDtype === 'nf4';
  const aValues = randomValues(M * K, 1);
  const bRaw = randomValues(K * N, 2);
  // The weights as the model stores them: bf16 words packed two per u32 (src/ref/half.ts), or
  // NF4 codes then block absmax (src/ref/nf4-matmul.ts packNf4); checked against their values.
  const bits = bf16 ? toHalfBits(bRaw, 'bf16') : null;
  const quantized = nf4 ? quantizeNf4(bRaw) : null;
  const packed = bits
    ? { words: packHalfBits(bits), rounded: widenHalfBits(bits, 'bf16') }
    : quantized
      ? { words: packNf4(quantized), rounded: dequantizeNf4(quantized) }
      : null;
  const bValues = packed ? packed.rounded : bRaw;
  const a = createStorageBuffer(device, aValues.byteLength, 'bench a');
  const b = createStorageBuffer(device, packed ? packed.words.byteLength : bRaw.byteLength, 'b');
  const out = createStorageBuffer(device, M * N * 4, 'bench c');
  const kernel = new MatmulKernel(device, engine.pipelines);
  try {
    writeBuffer(device, a, aValues);
    writeBuffer(device, b, packed ? packed.words : bRaw);
    const args = { ...c.shape, a, b, c: out };
    await kernel.prepare(c.shape);
    // Correctness first: sampled entries against a float64 dot product.
    await engine.run((enc) => kernel.encode(enc, args), 'bench matmul check');
    const result = await readF32(device, out, M * N);
    let maxRelError = 0;
    const samples = Math.min(M * N, 256);
    for (let s = 0; s < samples; s++) {
      const index = Math.floor((s * (M * N - 1)) / Math.max(1, samples - 1));
      const row = Math.floor(index / N);
      const col = index % N;
      let sum = 0;
      let scale = 0;
      for (let k = 0; k < K; k++) {
        const bv = transB ? bValues[col * K + k] : bValues[k * N + col];
        sum += aValues[row * K + k] * bv;
        scale += Math.abs(aValues[row * K + k] * bv);
      }
      maxRelError = Math.max(maxRelError, Math.abs(result[index] - sum) / Math.max(scale, 1e-30));
    }
    if (!(maxRelError <= 1e-4)) {
      throw new Error(`${c.label} on ${pathName}: relative error ${maxRelError} > 1e-4`);
    }
    // Enough products per submit that one takes ≳ 20 ms on the device measured by the first try,
    // so the submit-and-wait overhead is amortised.
    const flop = 2 * M * N * K;
    let reps = 1;
    for (;;) {
      const t0 = performance.now();
      await engine.run((enc) => {
        for (let r = 0; r < reps; r++) kernel.encode(enc, args);
      }, 'bench matmul calibrate');
      const ms = performance.now() - t0;
      if (ms >= 20 || reps >= 256) break;
      reps = Math.min(256, reps * Math.max(2, Math.ceil(20 / Math.max(ms, 0.05))));
    }
    const gflops: number[] = [];
    for (let r = 0; r < runs + 1; r++) {
      const t0 = performance.now();
      await engine.run((enc) => {
        for (let i = 0; i < reps; i++) kernel.encode(enc, args);
      }, 'bench matmul');
      const seconds = (performance.now() - t0) / 1000;
      if (r > 0) gflops.push((flop * reps) / seconds / 1e9);
    }
    const stat = summarize(gflops, 'GFLOP/s');
    return {
      label: c.label,
      path: pathName,
      M,
      N,
      K,
      dtype: bf16 ? 'bf16 B' : nf4 ? 'nf4 B' : 'f32',
      gflops: stat,
      fractionOfPeak: peakTflops ? stat.median / (peakTflops * 1000) : null,
      maxRelError,
      repsPerSubmit: reps,
    };
  } finally {
    a.destroy();
    b.destroy();
    out.destroy();
  }
}

/** GPU memory in use as the driver reports it (nvidia-smi), or null where there is none. */
async function driverMemoryMiB(): Promise<number | null> {
  try {
    const { stdout } = await promisify(execFile)(
      'nvidia-smi',
      ['--query-gpu=memory.used', '--format=csv,noheader,nounits'],
      { timeout: 5000 },
    );
    const value = Number(stdout.trim().split('\n')[0]);
    return Number.isFinite(value) ? value : null;
  } catch {
    return null;
  }
}

/** Polls the driver's memory while `work` runs; returns the largest reading beside the result. */
async function withDriverPeak<T>(
  work: () => Promise<T>,
): Promise<{ value: T; peakMiB: number | null }> {
  let peak: number | null = null;
  let polling = true;
  const poll = (async () => {
    while (polling) {
      const used = await driverMemoryMiB();
      if (used === null) return;
      peak = Math.max(peak ?? 0, used);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  try {
    return { value: await work(), peakMiB: peak };
  } finally {
    polling = false;
    await poll;
  }
}

/**
 * What one CPU wait on the GPU costs, whatever the work: an empty submit followed by
 * onSubmittedWorkDone, and a 4-byte readback (copy + mapAsync). Decoding that waits after every
 * token pays the first once per token.
 */
async function roundTrips(engine: Engine, reps: number) {
  const { device } = engine;
  const src = createStorageBuffer(device, 4, 'bench round trip');
  try {
    const submit: number[] = [];
    const readback: number[] = [];
    for (let i = 0; i < reps + 2; i++) {
      let t0 = performance.now();
      device.queue.submit([device.createCommandEncoder().finish()]);
      await device.queue.onSubmittedWorkDone();
      const dt = performance.now() - t0;
      t0 = performance.now();
      await readF32(device, src, 1);
      if (i >= 2) {
        submit.push(dt);
        readback.push(performance.now() - t0);
      }
    }
    return { submitAndWaitMs: summarize(submit, 'ms'), readbackMs: summarize(readback, 'ms') };
  } finally {
    src.destroy();
  }
}

/** The reduction kernels' variants (log-prob gather over the vocabulary, RMSNorm forward + backward),
 * each timed at a Qwen2.5-0.5B shape: milliseconds per call, median [min–max] of 5 submits. */
async function reductionVariants(engine: Engine, tiny: boolean) {
  const gatherShape = tiny ? { R: 4, V: 4099 } : { R: 256, V: 151936 };
  const normShape = tiny ? { rows: 16, C: 97 } : { rows: 2048, C: 896 };
  const repeats = tiny ? 1 : 10;
  const rows: { kernel: string; variant: string; shape: string; ms: Stat }[] = [];
  for (const v of LOGPROB_GATHER_VARIANTS) {
    const r = await runLogprobGather(engine, gatherShape, v.tuning, { iterations: 5, repeats });
    rows.push({
      kernel: 'logprob gather',
      variant: v.name,
      shape: `R ${gatherShape.R} × V ${gatherShape.V}`,
      ms: summarize(r.msPerForward, 'ms'),
    });
  }
  for (const v of RMSNORM_VARIANTS) {
    const r = await runRmsNorm(engine, normShape, v.tuning, { iterations: 5, repeats });
    rows.push({
      kernel: 'rmsnorm fwd+bwd',
      variant: v.name,
      shape: `${normShape.rows} × ${normShape.C}`,
      ms: summarize(r.msPerStep, 'ms'),
    });
  }
  return rows;
}

/**
 * Seconds per step phase, wall-clock and the part of it the CPU waited on the GPU: a phase whose
 * wall time is far above its wait is bound by host work (encoding, uploads, JS), not by the GPU.
 * Phases that took no time are left out.
 */
function phaseSeconds(
  times: TimeSnapshot,
): Record<string, { wall: number; wait: number; encode: number }> {
  const out: Record<string, { wall: number; wait: number; encode: number }> = {};
  for (const phase of COUNTER_PHASES) {
    const { wallMs, waitMs, encodeMs } = times[phase];
    if (wallMs >= 0.5)
      out[phase] = { wall: wallMs / 1000, wait: waitMs / 1000, encode: encodeMs / 1000 };
  }
  return out;
}

/**
 * The aha preset trained as `npm run aha` trains one seed. `maxSeconds` stops it early (a lent GPU's
 * minutes are counted): the result then says how many steps ran and projects the whole run.
 */
async function ahaWallTime(engine: Engine, steps: number, maxSeconds: number) {
  const model = await loadModel('bundled');
  const config = resolveConfig({ ...PRESETS.aha, steps, seed: 1 });
  const run = new Run({
    engine,
    config,
    model: { config: model.hf.config, weights: model.hf.tensors, tokenizer: model.tokenizer },
    runId: 'bench-gpu-aha',
    sandboxFactory: nodeSandboxFactory(),
    hooks: {
      onStep: (report) => {
        if (report.step === 1 || report.step % 10 === 0 || report.step === steps) {
          process.stderr.write(
            `  aha step ${report.step}/${steps}: ${report.metrics.step_time.toFixed(2)} s, ` +
              `reward ${report.metrics.reward.toFixed(3)}\n`,
          );
        }
      },
    },
  });
  try {
    const t0 = performance.now();
    const timesBefore = engine.counters.timeSnapshot();
    const ended = await run.runUntil(() => (performance.now() - t0) / 1000 > maxSeconds);
    const seconds = (performance.now() - t0) / 1000;
    const phases = phaseSeconds(diffTimes(engine.counters.timeSnapshot(), timesBefore));
    console.log(
      `  where the time went (s, wall / of it waiting on the GPU / encoding): ` +
        Object.entries(phases)
          .map(
            ([phase, t]) =>
              `${phase} ${t.wall.toFixed(1)} / ${t.wait.toFixed(1)} / ${t.encode.toFixed(1)}`,
          )
          .join(', '),
    );
    const stepTimes = run.history.map((row) => row.metrics.step_time);
    const last = run.history.at(-1)?.metrics ?? {};
    return {
      steps,
      stepsRun: run.history.length,
      stoppedByTimeCap: ended === 'stopped',
      wallSeconds: seconds,
      projectedWallSeconds: (seconds / Math.max(1, run.history.length)) * steps,
      stepSeconds: summarize(stepTimes, 's'),
      finalReward: last.reward ?? null,
      finalAccuracy: last.accuracy ?? null,
      phaseSeconds: phases,
    };
  } finally {
    run.destroy();
  }
}

const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 40) || 'gpu';

async function main(argv: string[]) {
  const options = parseOptions(argv);
  const started = performance.now();
  const probe = await createEngine();
  const adapter = probe.gpu.adapter;
  probe.destroy();
  const deviceText = `${adapter.vendor} ${adapter.architecture} ${adapter.device} ${adapter.description}`;
  const peak = devicePeak(deviceText);
  console.log(
    `# bench:gpu — ${deviceText.trim()}${adapter.isSoftware ? ' (software emulation: CPU speed, not GPU speed)' : ''}`,
  );
  console.log(
    `features: ${adapter.features.join(', ') || 'none'}; fp32 peak: ${peak ? `${peak.fp32Tflops} TFLOP/s (${peak.name})` : 'unknown device'}`,
  );

  // Written after every section, so a run cut short (a lent GPU's minutes end) keeps what it measured.
  const date = new Date().toISOString().slice(0, 10);
  const out = resolve(
    options.out ??
      `bench/results/${date}-${slug(adapter.description || adapter.device || adapter.architecture)}${options.tiny ? '-tiny' : ''}.json`,
  );
  const result: Record<string, unknown> = {
    benchmark: 'bench:gpu',
    date: new Date().toISOString(),
    tiny: options.tiny,
    argv,
    machine: machineInfo(),
    adapter,
    peak,
  };
  const save = (section: Record<string, unknown>) => {
    Object.assign(result, section, { seconds: (performance.now() - started) / 1000 });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  };
  const matmuls: MatmulResult[] = [];
  if (!options.skip.has('matmul')) {
    console.log('\n## matmul GFLOP/s, median [min–max] of 5 submits (after a warm-up)');
    console.log('| product | path | GFLOP/s | of fp32 peak | max rel. error |');
    console.log('| --- | --- | ---: | ---: | ---: |');
    for (const path of PATHS.filter((p) => !options.variants || options.variants.has(p.name))) {
      const engine = await createEngine({ tuning: path.tuning });
      try {
        for (const c of matmulCases(options.tiny)) {
          const r = await timeMatmul(engine, c, path.name, peak?.fp32Tflops ?? null, 5);
          matmuls.push(r);
          console.log(
            `| ${r.label} | ${r.path} | ${fmt(r.gflops.median)} [${fmt(r.gflops.min)}–${fmt(r.gflops.max)}] | ` +
              `${r.fractionOfPeak === null ? '–' : `${(100 * r.fractionOfPeak).toFixed(1)}%`} | ${r.maxRelError.toExponential(1)} |`,
          );
        }
      } finally {
        engine.destroy();
      }
      save({ matmul: matmuls });
    }
  }

  const engine = await createEngine();
  if (!options.skip.has('sweep')) {
    // The load-time sweep, as a model load runs it, at Qwen2.5-0.5B's shapes (bf16 base).
    const shapes = options.tiny
      ? modelMatmulShapes((await loadModel('bundled')).hf.config, { decodeRows: 4, trainRows: 32 })
      : modelMatmulShapes(modelConfig('qwen2.5-0.5b'), { dtype: 'bf16' });
    const sweep = await sweepMatmulVariants(engine, shapes, {
      force: true,
      cache: false,
      apply: false,
    });
    save({ sweep });
    console.log(`\n## load-time sweep (${shapes.length} shapes): ${describeMatmulChoice(sweep)}`);
    for (const [cls, totals] of Object.entries(sweep.totals)) {
      const cells = Object.entries(totals ?? {}).map(([v, ms]) => `${v} ${fmt(ms)} ms`);
      console.log(`${cls}: ${cells.join(', ')}`);
    }
  }
  try {
    const waits = await roundTrips(engine, options.tiny ? 10 : 50);
    save({ waits });
    console.log(
      `\n## one CPU wait on the GPU: empty submit + onSubmittedWorkDone ${fmt(waits.submitAndWaitMs.median)} ms ` +
        `[${fmt(waits.submitAndWaitMs.min)}–${fmt(waits.submitAndWaitMs.max)}], 4-byte readback ${fmt(waits.readbackMs.median)} ms ` +
        `[${fmt(waits.readbackMs.min)}–${fmt(waits.readbackMs.max)}]`,
    );
    if (!options.skip.has('counters')) {
      // Machine-independent: the same numbers as `npm run bench -- --counters` on any adapter with
      // the same kernel variants.
      const counters: StepCounters[] = [await ahaStepCounters(engine)];
      if (!options.tiny) counters.push(await qwenLoraStepCounters(engine));
      for (const r of counters) {
        console.log(
          `\n## counters: ${r.name} (${r.sequences} sequences, ${r.decodedTokens} decode steps)`,
        );
        console.log(countersTable(r));
      }
      save({ counters });
    }
    if (!options.skip.has('reductions')) {
      console.log('\n## reduction variants: ms per call, median [min–max] of 5 submits');
      const reductions = await reductionVariants(engine, options.tiny);
      save({ reductions });
      for (const r of reductions) {
        console.log(
          `| ${r.kernel} | ${r.variant} | ${r.shape} | ${fmt(r.ms.median)} [${fmt(r.ms.min)}–${fmt(r.ms.max)}] |`,
        );
      }
    }
    if (!options.skip.has('aha')) {
      const steps = options.ahaSteps ?? (options.tiny ? 1 : PRESETS.aha.steps);
      console.log(`\n## aha preset: ${steps} steps of the bundled model (seed 1)`);
      const aha = await ahaWallTime(engine, steps, options.ahaMaxSeconds);
      save({ aha });
      console.log(
        `${aha.stepsRun} steps${aha.stoppedByTimeCap ? ` (stopped at the ${options.ahaMaxSeconds} s cap; ${steps} projected at ${aha.projectedWallSeconds.toFixed(0)} s)` : ''}, ` +
          `wall ${aha.wallSeconds.toFixed(1)} s; step ${fmt(aha.stepSeconds.median)} s median [${fmt(aha.stepSeconds.min)}–${fmt(aha.stepSeconds.max)}]`,
      );
    }
    if (!options.skip.has('lora')) {
      // --tiny: the bundled model's shape (SwiftShader takes minutes over even SmolLM2-135M's).
      const name = options.tiny ? 'tiny-reasoner' : 'qwen2.5-0.5b';
      const config = options.tiny ? (await loadModel('bundled')).hf.config : modelConfig(name);
      console.log(
        `\n## one LoRA GRPO step at ${name}'s shape (random bf16 weights, r 16 all-linear)`,
      );
      const weights = initLlamaWeights(config, 1);
      const before = await driverMemoryMiB();
      const { value, peakMiB } = await withDriverPeak(() =>
        runSteps(
          engine,
          'LoRA r 16 + bf16 base',
          name,
          config,
          weights,
          { ...LORA, dtype: 'bfloat16' },
          1,
        ),
      );
      save({ lora: { ...value, driverMemoryBeforeMiB: before, driverMemoryPeakMiB: peakMiB } });
      console.log(
        `step ${value.stepSeconds.map((s) => s.toFixed(2)).join(', ')} s; engine peak ${(value.measuredPeakBytes / 2 ** 20).toFixed(0)} MiB, ` +
          `plan ${(value.plannedPeakBytes / 2 ** 20).toFixed(0)} MiB; driver ${peakMiB === null ? 'n/a' : `${peakMiB} MiB peak (${before} MiB before)`}`,
      );
    }
  } finally {
    engine.destroy();
  }

  save({ seconds: (performance.now() - started) / 1000 });
  console.log(`\nwrote ${out} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exit(1);
});
