// LoRA adapters in and out on the GPU (src/export/peft-adapter.ts, GrpoTrainer.setAdapters, the
// worker API): a trained adapter exported as a PEFT folder and imported into a fresh trainer gives
// the same tokens and log-probs bit for bit; the worker's Compare under LoRA decodes the base side
// with the adapters off, exactly as a run without LoRA decodes the base model; its exports are the
// merged model (HF, ONNX) and the adapter (PEFT); the command line's --export writes both.
import 'fake-indexeddb/auto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { exportOnnx } from '../../src/export/onnx-export';
import {
  exportPeftAdapter,
  loraConfigFields,
  mergeLoraWeights,
  parsePeftAdapter,
  PEFT_CONFIG_FILE,
  PEFT_WEIGHTS_FILE,
} from '../../src/export/peft-adapter';
import { loadModel } from '../../src/cli/_session';
import { trainFolder } from '../../src/cli/_train';
import { weightsIdentity } from '../../src/train/checkpoint';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { filesSource, folderSource } from '../../src/formats/model-source';
import { parseSafetensors } from '../../src/formats/safetensors';
import { resolveConfig, type ConfigInput } from '../../src/grpo/config';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { initLlamaWeights } from '../../src/model/init';
import type { GrpoTrainer } from '../../src/grpo/trainer';
import { loraAdapterSpecs, type LoraOptions } from '../../src/core/lora';
import { GrpoStorage } from '../../src/storage/index';
import { createTrainerApi } from '../../src/worker/trainer-api';
import { makeTrainer, modelConfig, tokenizer } from '../support/tiny-trainer';
import { tinyHfFolder } from '../support/tiny-hf-model';
import { testEngine } from './harness';

/** Greedy and sampled tokens with their log-probs on fixed prompts and seed. */
async function decode(trainer: GrpoTrainer) {
  const prompts = ['ab?', 'cd?', 'efg?'].map((p) => tokenizer.encode(p));
  const common = { maxNewTokens: 4, temperature: 1, topK: 0, topP: 1, seed: 3, eosTokenIds: [] };
  return [
    await trainer.sampler.generate(prompts, { ...common, greedy: true, stream: 0 }),
    await trainer.sampler.generate(prompts, { ...common, stream: 1 }),
  ];
}

const filesOf = (map: Map<string, Uint8Array>) =>
  [...map].map(([name, bytes]) => ({ name, bytes }));

describe('PEFT adapter round trip through a trainer', { timeout: 600_000 }, () => {
  it('export → import into a fresh trainer gives the same log-probs bit for bit', async () => {
    const lora = {
      usePeft: true,
      loraR: 4,
      loraAlpha: 8,
      loraTargetModules: ['q_proj', 'v_proj', 'down_proj'],
    };
    const trained = await makeTrainer({ ...lora, beta: 0.04 });
    // Two steps move B away from 0 (checked: an untrained adapter would make this test vacuous).
    await trained.trainStep();
    await trained.trainStep();
    const adapters = await trained.policy.readAdapters();
    expect(
      [...adapters].some(([n, t]) => n.endsWith('lora_B.weight') && t.some((x) => x !== 0)),
    ).toBe(true);
    const files = exportPeftAdapter({
      config: modelConfig,
      lora: { options: trained.policy.lora!, adapters },
    });
    const imported = parsePeftAdapter(
      { config: files.get(PEFT_CONFIG_FILE)!, weights: files.get(PEFT_WEIGHTS_FILE)! },
      modelConfig,
    );

    // A fresh trainer of the adapter's shape (its seed's init replaced by the import).
    const fresh = await makeTrainer({
      ...loraConfigFields(imported.options),
      beta: 0.04,
      seed: 99,
    });
    const untrained = await decode(fresh);
    fresh.setAdapters(imported.options, imported.adapters);
    expect(await fresh.policy.readAdapters()).toEqual(adapters);
    const [a, b] = [await decode(trained), await decode(fresh)];
    expect(b).toEqual(a);
    expect(untrained).not.toEqual(a);

    // A run of another shape refuses the adapter, naming the option that differs.
    const other = await makeTrainer({ ...lora, loraR: 2 });
    expect(() => other.setAdapters(imported.options, imported.adapters)).toThrow(
      /loraR \(4\).*\(2\)/,
    );
    const full = await makeTrainer({});
    expect(() => full.setAdapters(imported.options, imported.adapters)).toThrow(/usePeft is off/);
    for (const t of [trained, fresh, other, full]) t.destroy();
  });
});

// ---- the worker API (as tests/unit/app-trainer-api.test.ts drives it) --------------------------

async function tinyApi() {
  const folder = await tinyHfFolder();
  const api = createTrainerApi({
    createEngine: testEngine,
    sandboxFactory: () => nodeSandboxFactory(),
    openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
    modelSource: () => filesSource(folder.blobs, 'tiny test model'),
  });
  return { folder, api };
}

const runConfig = (overrides: Partial<ConfigInput> = {}): Partial<ConfigInput> => ({
  task: 'countdown',
  taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
  perStepPrompts: 2,
  numGenerations: 2,
  maxPromptLength: 100,
  maxCompletionLength: 4,
  steps: 10,
  saveSteps: 100,
  evalPrompts: 2,
  seed: 5,
  ...overrides,
});

describe('worker API under LoRA', { timeout: 600_000 }, () => {
  it('compares against the base with adapters off, exports merged + adapter, imports adapters', async () => {
    const { folder, api } = await tinyApi();
    await api.loadModel({ kind: 'bundled' }, runConfig());
    await expect(api.exportModel('peft')).rejects.toThrow(/usePeft is off/);
    const plain = await api.compare(2);
    // Without LoRA at step 0 both sides are the loaded weights.
    expect(plain.after).toEqual(plain.before);

    // A "trained" adapter: random non-zero A and B, large enough to change the greedy tokens.
    const options: LoraOptions = {
      r: 2,
      alpha: 16,
      targetModules: 'all-linear',
      useRslora: false,
      dropout: 0,
    };
    let s = 17;
    const adapters = new Map(
      loraAdapterSpecs(folder.config, options).map((spec) => {
        const data = new Float32Array(spec.shape[0] * spec.shape[1]);
        for (let i = 0; i < data.length; i++) {
          s = (s * 1103515245 + 12345) % 2 ** 31;
          data[i] = s / 2 ** 31 - 0.5;
        }
        return [spec.name, data] as const;
      }),
    );
    const adapterFiles = exportPeftAdapter({ config: folder.config, lora: { options, adapters } });
    const state = await api.importAdapter(filesOf(adapterFiles));
    expect(state.step).toBe(0);
    expect(state.config).toMatchObject({ usePeft: true, loraR: 2, loraAlpha: 16, seed: 5 });

    const withLora = await api.compare(2);
    // The base side is the base model's decode, bit for bit the no-LoRA run's; the trained side
    // is not (the adapters are on).
    expect(withLora.before).toEqual(plain.before);
    expect(withLora.after.items.map((i) => i.greedy)).not.toEqual(
      plain.before.items.map((i) => i.greedy),
    );

    // Exports: the adapter as imported; HF and ONNX merged (W + s·B·A), never the bare base.
    const peft = await api.exportModel('peft');
    expect(peft.map((f) => f.name)).toEqual([PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE]);
    expect(peft[1].bytes).toEqual(adapterFiles.get(PEFT_WEIGHTS_FILE));
    const base = initLlamaWeights(folder.config, 5);
    const merged = mergeLoraWeights(folder.config, base, { options, adapters });
    const hf = await api.exportModel('hf');
    const loaded = await loadHfFolder(
      filesSource(hf.map((f) => new File([f.bytes.slice()], f.name))),
    );
    for (const [name, data] of merged) expect(loaded.tensors.get(name), name).toEqual(data);
    expect(loaded.tensors.get('model.layers.0.self_attn.q_proj.weight')).not.toEqual(
      base.get('model.layers.0.self_attn.q_proj.weight'),
    );
    const onnx = await api.exportModel('onnx');
    expect(onnx[0].bytes).toEqual(exportOnnx({ config: folder.config, tensors: merged }));

    // An adapter of another model's shape is refused with the tensor named.
    const wrong = exportPeftAdapter({
      config: { ...folder.config, hiddenSize: 24 },
      lora: {
        options,
        adapters: new Map(
          loraAdapterSpecs({ ...folder.config, hiddenSize: 24 }, options).map((spec) => [
            spec.name,
            new Float32Array(spec.shape[0] * spec.shape[1]),
          ]),
        ),
      },
    });
    await expect(api.importAdapter(filesOf(wrong))).rejects.toThrow(
      /q_proj\.lora_A\.weight.*shape/,
    );
    await expect(api.importAdapter(filesOf(wrong).slice(0, 1))).rejects.toThrow(
      /adapter_model\.safetensors is missing/,
    );
  });
});

describe('npm run train -- --use_peft … --export <folder>', { timeout: 600_000 }, () => {
  it('writes the merged model and the PEFT adapter in adapter/', async () => {
    const work = mkdtempSync(join(tmpdir(), 'lora-export-'));
    try {
      const folder = await tinyHfFolder();
      const model = await loadModel(folder.writeTo(join(work, 'model')));
      const exportDir = join(work, 'final');
      const lines: string[] = [];
      await trainFolder({
        engine: await testEngine(),
        model,
        identity: await weightsIdentity(model.folder, model.hf.tensors),
        config: resolveConfig(
          runConfig({
            usePeft: true,
            loraR: 2,
            loraAlpha: 4,
            steps: 2,
            evalPrompts: 0,
            learningRate: 0.05,
          }),
        ),
        runDir: join(work, 'run'),
        exportDir,
        log: (line) => lines.push(line),
      });
      expect(lines.some((l) => l.includes('PEFT adapter'))).toBe(true);
      expect(readdirSync(join(exportDir, 'adapter')).sort()).toEqual([
        PEFT_CONFIG_FILE,
        PEFT_WEIGHTS_FILE,
      ]);
      const adapter = parsePeftAdapter(
        {
          config: readFileSync(join(exportDir, 'adapter', PEFT_CONFIG_FILE)),
          weights: readFileSync(join(exportDir, 'adapter', PEFT_WEIGHTS_FILE)),
        },
        folder.config,
      );
      expect(adapter.baseModelNameOrPath).toBe(model.folder);
      // The folder's weights are the base with that adapter merged in.
      const merged = mergeLoraWeights(folder.config, model.hf.tensors, adapter);
      const exported = await loadHfFolder(folderSource(exportDir));
      for (const [name, data] of merged) expect(exported.tensors.get(name), name).toEqual(data);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
  it('loadBestModelAtEnd keeps the best adapters: best-model/ is them merged, + adapter/', async () => {
    const work = mkdtempSync(join(tmpdir(), 'lora-best-'));
    try {
      const folder = await tinyHfFolder();
      const model = await loadModel(folder.writeTo(join(work, 'model')));
      const runDir = join(work, 'run');
      await trainFolder({
        engine: await testEngine(),
        model,
        identity: await weightsIdentity(model.folder, model.hf.tensors),
        config: resolveConfig(
          runConfig({
            usePeft: true,
            loraR: 2,
            loraAlpha: 4,
            steps: 3,
            saveSteps: 1,
            evalSteps: 1,
            evalGenerations: 1,
            loadBestModelAtEnd: true,
            learningRate: 0.05,
            // Text lengths differ between completions: non-zero advantages, so adapters move.
            rewards: ['custom:chars'],
            customRewards: {
              chars: 'function reward({ completion }) { return completion.length; }',
            },
          }),
        ),
        runDir,
        log: () => {},
      });
      const evals = readFileSync(join(runDir, 'evals.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { step: number; eval_accuracy: number });
      const top = Math.max(...evals.map((e) => e.eval_accuracy));
      const best = evals.find((e) => e.eval_accuracy === top)!.step;
      const checkpointAdapters = (step: number) =>
        parseSafetensors(
          readFileSync(join(runDir, `checkpoint-${step}`, 'adapter_model.safetensors')),
          'x',
        ).tensors;
      const adapter = parsePeftAdapter(
        {
          config: readFileSync(join(runDir, 'best-model', 'adapter', PEFT_CONFIG_FILE)),
          weights: readFileSync(join(runDir, 'best-model', 'adapter', PEFT_WEIGHTS_FILE)),
        },
        folder.config,
      );
      // The best evaluation's adapters (its step's checkpoint), not the last step's.
      for (const [name, t] of checkpointAdapters(best))
        expect(adapter.adapters.get(name)).toEqual(t.data);
      // This random model scores 0 everywhere, so the first evaluation stays the best: the last
      // step's adapters (moved since) must not be what was loaded.
      expect(best).toBeLessThan(3);
      const last = checkpointAdapters(3);
      expect(
        [...last].some(
          ([name, t]) => !adapter.adapters.get(name)!.every((v, i) => v === t.data[i]),
        ),
      ).toBe(true);
      const merged = mergeLoraWeights(folder.config, model.hf.tensors, adapter);
      const exported = await loadHfFolder(folderSource(join(runDir, 'best-model')));
      for (const [name, data] of merged) expect(exported.tensors.get(name), name).toEqual(data);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
