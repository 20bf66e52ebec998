// Host memory of a recipe's stages on a model of a known shape, in Node on WebGPU (SwiftShader
// here): what `npm run recipe` and the page's Recipes view hold on the host while a recipe runs.
//
// 1. Random BF16 weights of the shape (Qwen2.5-0.5B by default; --layers N cuts the decoder) are
//    written to a temporary folder tensor by tensor, with the bundled model's tokenizer files (its
//    449 ids fit any vocabulary here).
// 2. The folder is opened as `npm run recipe` opens it (openModel: a reader; --whole loads it
//    whole in f32 instead, as the recipe did before it streamed), and a RecipeRun trains two LoRA
//    SFT stages, the second from the first's end weights (one step each, r 16 on every linear
//    layer, the base stored as --dtype), while host memory is sampled every 20 ms.
// 3. Printed: the model's bytes as stored and in f32, the peak RSS and ArrayBuffer bytes above
//    the baseline taken before the model is opened (or loaded), the bytes read back from the GPU,
//    the time. RSS includes SwiftShader's GPU buffers, which live in host memory.
//
// Usage: `node bench/run.mjs --recipe-memory [--model qwen2.5-0.5b] [--layers N]
// [--dtype bfloat16|nf4|float32] [--whole] [--keep dir] [--json file]`.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parameterCount } from '../../src/core/model-config';
import { totalCounts } from '../../src/engine/counters';
import { createEngine } from '../../src/engine/engine';
import { findKnownModel, knownModelConfig } from '../../src/model/known-models';
import { RecipeRun } from '../../src/recipes/recipe';
import { parseRecipe, recipeScoringTask } from '../../src/recipes/recipe-spec';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { BUNDLED_MODEL_DIR, loadModel, openModel } from '../../src/cli/_session';
import { sampled, writeRandomBf16Folder } from '../lib/host-memory';
import { machineInfo } from './machine';

const MiB = 2 ** 20;

async function main(argv: string[]) {
  const arg = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const modelName = arg('--model') ?? 'qwen2.5-0.5b';
  const layers = arg('--layers');
  const dtype = arg('--dtype') ?? 'bfloat16';
  const whole = argv.includes('--whole');
  const keep = arg('--keep');
  const jsonOut = arg('--json');
  const known = findKnownModel(modelName);
  if (!known) throw new Error(`unknown model '${modelName}'`);
  const json = { ...known.json, ...(layers ? { num_hidden_layers: Number(layers) } : {}) };
  const config = knownModelConfig({ ...known, json });
  const parameters = parameterCount(config);

  const dir = keep ?? mkdtempSync(join(tmpdir(), 'grpo-recipe-memory-'));
  mkdirSync(dir, { recursive: true });
  const fileBytes = writeRandomBf16Folder(dir, json, config);
  for (const name of ['tokenizer.json', 'tokenizer_config.json'])
    copyFileSync(join(BUNDLED_MODEL_DIR, name), join(dir, name));
  console.log(
    `# recipe host memory: ${modelName}${layers ? ` cut to ${layers} layers` : ''}, ` +
      `${(parameters / 1e6).toFixed(1)} M parameters: ${(fileBytes / MiB).toFixed(0)} MiB as BF16, ` +
      `${((parameters * 4) / MiB).toFixed(0)} MiB in f32; the model ${whole ? 'loaded whole (f32)' : 'opened (streamed)'}`,
  );

  const engine = await createEngine();
  const lora = { usePeft: true, loraR: 16, loraAlpha: 32, dtype };
  const sft = { maxSteps: 1, perDeviceTrainBatchSize: 1, maxLength: 48, ...lora };
  const recipe = parseRecipe({
    name: 'two LoRA stages',
    seed: 1,
    stages: [
      { kind: 'sft', name: 'tune', data: { coldStart: { count: 2 } }, options: sft },
      { kind: 'sft', name: 'polish', data: { coldStart: { count: 2 } }, options: sft },
    ],
  });
  try {
    const readbackBefore = totalCounts(engine.counters.snapshot()).readbackBytes;
    // The window opens before the model does: a whole load's f32 copy counts.
    const run = await sampled(async () => {
      const model = whole ? await loadModel(dir) : await openModel(dir);
      const weights = 'weights' in model.hf ? model.hf.weights : model.hf.tensors;
      try {
        const recipeRun = new RecipeRun({
          engine,
          recipe,
          runId: 'bench-recipe-memory',
          base: { config: model.hf.config, weights, tokenizer: model.tokenizer },
          sandboxFactory: nodeSandboxFactory(),
          scoringTask: recipeScoringTask(),
        });
        return await recipeRun.run();
      } finally {
        if ('weights' in model.hf) await model.hf.weights.close();
      }
    });
    const readback = totalCounts(engine.counters.snapshot()).readbackBytes - readbackBefore;
    console.log(
      `two LoRA SFT stages (r 16, base ${dtype}), the second from the first's end: ${run.result}, ` +
        `${run.seconds.toFixed(1)} s; host peak above the start (before the model was opened): RSS ` +
        `${(run.rssAboveBaseline / MiB).toFixed(0)} MiB, ArrayBuffers ` +
        `${(run.arrayBuffersAboveBaseline / MiB).toFixed(0)} MiB; read back from the GPU ` +
        `${(readback / MiB).toFixed(1)} MiB`,
    );
    const result = {
      benchmark: 'recipe-memory',
      date: new Date().toISOString(),
      argv,
      machine: machineInfo(),
      adapter: engine.gpu.adapter,
      model: modelName,
      layers: config.numLayers,
      parameters,
      fileBytes,
      dtype,
      whole,
      outcome: run.result,
      seconds: run.seconds,
      rssAboveBaselineBytes: run.rssAboveBaseline,
      arrayBuffersAboveBaselineBytes: run.arrayBuffersAboveBaseline,
      readbackBytes: readback,
    };
    if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    engine.destroy();
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
