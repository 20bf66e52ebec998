// The NF4 (QLoRA) benchmark, in Node on WebGPU (SwiftShader here; a real GPU with
// GRPO_USE_SYSTEM_VULKAN=1): real GRPO steps at a known model's full shape (Qwen2.5-1.5B by
// default: 28 layers, C 1536, I 8960, V 151936, tied, q/k/v bias) on a 4-bit NF4 base with LoRA
// r 16 on every linear layer and gradient checkpointing.
//
// 1. Random weights are written as BF16 to a temporary safetensors folder one tensor at a time
//    (never the whole model in memory).
// 2. The streamed load: the app's loader (openHfFolder's WeightReader) feeds GpuLlama.loadStreamed,
//    which quantises each projection to NF4 as it is read and uploads it before the next read,
//    while host memory is sampled every 20 ms (peak RSS and ArrayBuffer bytes above the baseline)
//    and the bytes the loader holds are counted (tests/support/counting-source.ts, the meter
//    tests/unit/streamed-load.test.ts bounds). Its GPU parameter bytes are checked against the
//    plan's. The model is then freed.
// 3. The steps: GrpoTrainer takes its weights as a map (it has no streamed path yet), so the
//    tensors are read again as stored (BF16: half the bytes of f32; the host holds them all) and
//    the trainer quantises them as it uploads. The engine's measured peak of GPU storage bytes is
//    printed beside the memory plan (planRunMemory, what the playground and `npm run plan` show;
//    the plan must be within 10% or the run exits 1).
//
// Usage: `node bench/run.mjs --nf4 [--model qwen2.5-1.5b] [--steps 2] [--generations 2]
// [--prompt-tokens 8] [--new-tokens 8] [--standard] [--layers N] [--keep dir] [--json file]`.
// --standard is the guide's run (1 prompt × 8 completions, 256 + 256 tokens: for a real GPU);
// --layers N cuts the decoder to N layers to try the benchmark quickly (the default is the full
// shape); --keep writes the folder there and leaves it.
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execSync } from 'node:child_process';
import { createEngine } from '../../src/engine/engine';
import { parameterCount } from '../../src/core/model-config';
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import { GrpoTrainer } from '../../src/grpo/trainer';
import { planRunMemory } from '../../src/train/run';
import { findKnownModel, knownModelConfig } from '../../src/model/known-models';
import { folderSource } from '../../src/formats/model-source';
import { openHfFolder, type StoredWeight } from '../../src/formats/hf-folder';
import { GpuLlama } from '../../src/model/llama';
import { counting } from '../../tests/support/counting-source';
import type { Task } from '../../src/tasks/types';
import { machineInfo } from './machine';
import { sampled, writeRandomBf16Folder } from '../lib/host-memory';
import { LORA, median, reward, tokenizer, WORKLOAD } from '../lib/grpo-step-workload';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** A fixed prompt of `tokens` tokens (ids 1…4 of the workload's tokenizer). */
function promptTask(tokens: number): Task {
  const question = 'abcd'.repeat(Math.ceil(tokens / 4)).slice(0, tokens);
  return {
    name: 'bench',
    description: `one fixed ${tokens}-token prompt (NF4 benchmark)`,
    generate: (seed, count) =>
      Array.from({ length: count }, (_, i) => ({
        id: `bench-${seed}-${i}`,
        task: 'bench',
        question,
        reference: null,
        verifier: { kind: 'none' as const },
      })),
    formatPrompt: (problem) => ({ kind: 'text', text: problem.question }),
    verify: () => null,
  };
}

async function main(argv: string[]) {
  const arg = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const standard = argv.includes('--standard');
  const modelName = arg('--model') ?? 'qwen2.5-1.5b';
  const steps = Number(arg('--steps') ?? 2);
  const generations = Number(arg('--generations') ?? (standard ? 8 : 2));
  const promptTokens = Number(arg('--prompt-tokens') ?? (standard ? 256 : 8));
  const newTokens = Number(arg('--new-tokens') ?? (standard ? 256 : 8));
  const layers = arg('--layers');
  const keep = arg('--keep');
  const jsonOut = arg('--json');
  const known = findKnownModel(modelName);
  if (!known) throw new Error(`unknown model '${modelName}'`);
  const json = {
    ...known.json,
    ...(layers ? { num_hidden_layers: Number(layers) } : {}),
  };
  const config = knownModelConfig({ ...known, json });
  const started = performance.now();

  // 1. The folder: random BF16 weights, streamed to disk.
  const dir = keep ?? mkdtempSync(join(tmpdir(), 'grpo-nf4-bench-'));
  if (keep) mkdirSync(dir, { recursive: true });
  process.stderr.write(`writing ${parameterCount(config)} random BF16 weights to ${dir}…\n`);
  const t0 = performance.now();
  const fileBytes = writeRandomBf16Folder(dir, json, config);
  const writeSeconds = (performance.now() - t0) / 1000;

  const engine = await createEngine();
  try {
    // 2. The streamed load into the GPU, host memory sampled and the loader's bytes counted.
    process.stderr.write('streamed load (NF4) through the app loader…\n');
    const meter = counting(folderSource(dir));
    const opened = await openHfFolder(meter.source, { requireTokenizer: false });
    meter.releaseAll(); // config and headers: read once the folder is open
    // The buffer the source handed out for a tensor (a pre-quantised NF4 one: its codes).
    const bufferOf = (t: StoredWeight): ArrayBufferLike => {
      if (t instanceof Float32Array) return t.buffer;
      const { bits, codes } = t as { bits?: Uint16Array; codes?: Uint8Array };
      return (bits ?? codes)!.buffer;
    };
    const lora = { r: 16, alpha: 32, targetModules: 'all-linear' as const, useRslora: false };
    const load = await sampled(() =>
      GpuLlama.loadStreamed(
        engine,
        config,
        opened.weights,
        { lora: { ...lora, dropout: 0 }, frozenDtype: 'nf4', gradientCheckpointing: true },
        (_name, data) => meter.release(bufferOf(data as StoredWeight)),
      ),
    );
    await load.result.ready;
    const streamedParameterBytes = load.result.parameters.parameterBytes;
    load.result.destroy();
    const largestTensorBytes = opened.weights.largestTensorBytes;
    await opened.weights.close();

    // 3. The steps: the trainer takes a map, read again as stored (BF16).
    const reread = await openHfFolder(folderSource(dir), { requireTokenizer: false });
    const weights = new Map<string, StoredWeight>();
    for (const spec of reread.weights.specs)
      weights.set(spec.name, await reread.weights.read(spec.name));
    await reread.weights.close();
    const options: Partial<ConfigInput> = {
      ...WORKLOAD,
      ...LORA,
      dtype: 'nf4',
      gradientCheckpointing: true,
      perStepPrompts: 1,
      numGenerations: generations,
      maxPromptLength: promptTokens,
      maxCompletionLength: newTokens,
    };
    const cfg = resolveConfig(options);
    const before = engine.memory.liveBytes;
    engine.memory.resetPeak();
    process.stderr.write('uploading (NF4) and training…\n');
    const upload = await sampled(
      async () =>
        new GrpoTrainer({
          engine,
          config: cfg,
          modelConfig: config,
          weights,
          tokenizer,
          task: promptTask(promptTokens),
          rewardFunctions: [reward],
        }),
    );
    const trainer = upload.result;
    const stepSeconds: number[] = [];
    let longest = 0;
    try {
      for (let s = 0; s < steps; s++) {
        const t = performance.now();
        const report = await trainer.trainStep();
        const dt = (performance.now() - t) / 1000;
        for (const g of report.groups)
          for (const c of g.completions) longest = Math.max(longest, c.logp.length);
        stepSeconds.push(dt);
        process.stderr.write(
          `  step ${s}${s === 0 ? ' (compiles pipelines)' : ''}: ${dt.toFixed(1)} s, loss ${report.metrics.loss}\n`,
        );
      }
    } finally {
      trainer.destroy();
    }
    const measured = engine.memory.peakBytes - before;
    const { limits } = engine.device;
    const plan = planRunMemory(config, cfg, limits, undefined, weights, engine.pipelines.tuning);
    const planError = Math.abs(measured - plan.peakBytes) / measured;
    let commit = 'unknown';
    let dirty: string[] = [];
    try {
      commit = execSync('git rev-parse HEAD', { encoding: 'utf8' }).trim();
      dirty = execSync('git status --porcelain --untracked-files=no', { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
    } catch {
      // not a git checkout
    }
    const result = {
      benchmark: 'nf4',
      date: new Date().toISOString(),
      commit,
      uncommittedFiles: dirty,
      machine: machineInfo(),
      adapter: engine.gpu.adapter,
      model: {
        name: known.repo,
        layers: config.numLayers,
        fullShape: !layers,
        parameters: parameterCount(config),
      },
      workload: {
        prompts: 1,
        generations,
        promptTokens,
        newTokens,
        longestCompletion: longest,
        steps,
        lora: { r: 16, targetModules: 'all-linear' },
        dtype: 'nf4',
        gradientCheckpointing: true,
      },
      folder: { bytes: fileBytes, writeSeconds },
      streamedLoad: {
        loader: 'openHfFolder WeightReader → GpuLlama.loadStreamed (NF4)',
        seconds: load.seconds,
        rssBeforeBytes: load.before.rss,
        rssPeakBytes: load.peak.rss,
        rssAboveBaselineBytes: load.rssAboveBaseline,
        arrayBuffersAboveBaselineBytes: load.arrayBuffersAboveBaseline,
        loaderHeldPeakBytes: meter.peak,
        largestTensorBytes,
        gpuParameterBytes: streamedParameterBytes,
        plannedParameterBytes: plan.byCategory.parameters,
      },
      trainerUpload: {
        note: 'GrpoTrainer from a map of every tensor as stored (BF16), read after the streamed load',
        seconds: upload.seconds,
        rssAboveBaselineBytes: upload.rssAboveBaseline,
        arrayBuffersAboveBaselineBytes: upload.arrayBuffersAboveBaseline,
      },
      gpu: {
        measuredPeakBytes: measured,
        plannedPeakBytes: plan.peakBytes,
        planError,
        plannedByCategory: plan.byCategory,
      },
      stepSeconds,
      medianStepSeconds: median(stepSeconds),
      seconds: (performance.now() - started) / 1000,
    };
    const m = (b: number) => `${(b / MiB).toFixed(1)} MiB`;
    console.log(
      `\n## NF4 benchmark: ${known.repo}${layers ? ` cut to ${layers} layers` : ''} (${result.machine.cpu})`,
    );
    console.log(
      `LoRA r 16 on an NF4 base, checkpointing; 1 × ${generations} completions, ${promptTokens} + ${newTokens} tokens (longest ${longest})`,
    );
    console.log(
      `folder: ${(fileBytes / GiB).toFixed(2)} GiB of BF16 written in ${writeSeconds.toFixed(1)} s`,
    );
    console.log(
      `streamed load (${load.seconds.toFixed(1)} s): host peak RSS ${m(load.peak.rss)} ` +
        `(+${m(load.rssAboveBaseline)} over ${m(load.before.rss)}; SwiftShader's GPU memory is host memory too), ` +
        `ArrayBuffers +${m(load.arrayBuffersAboveBaseline)}, loader held at most ${m(meter.peak)} ` +
        `(largest tensor ${m(largestTensorBytes)})`,
    );
    console.log(
      `GPU parameter bytes after the streamed load: ${streamedParameterBytes}, planned ${plan.byCategory.parameters}`,
    );
    console.log(
      `trainer's upload from a BF16 map (${upload.seconds.toFixed(1)} s): RSS +${m(upload.rssAboveBaseline)}, ArrayBuffers +${m(upload.arrayBuffersAboveBaseline)}`,
    );
    console.log(
      `GPU peak: measured ${m(measured)}, planned ${m(plan.peakBytes)} (${(100 * planError).toFixed(3)}% apart)`,
    );
    console.log(
      `steps: ${stepSeconds.map((s) => `${s.toFixed(1)} s`).join(', ')}; total ${result.seconds.toFixed(0)} s`,
    );
    if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify(result, null, 2)}\n`);
    if (planError > 0.1 || streamedParameterBytes !== plan.byCategory.parameters)
      process.exitCode = 1;
  } finally {
    engine.destroy();
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exit(1);
});
