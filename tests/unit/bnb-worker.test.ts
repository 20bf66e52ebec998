// A bitsandbytes 4-bit checkpoint (tests/fixtures/bnb4bit/nf4-nested, written by
// make_bnb_folder.py in bitsandbytes' layout, nested statistics) through the trainer worker as the
// page uses it (issue #37 acceptance): it loads as NF4 (config dtype 'auto' keeps the 4-bit base), a full
// fine-tune is refused with a message naming usePeft, two LoRA steps train with a finite loss, and
// the Hugging Face export writes the merged weights as BF16 (dequantised base + B·A, as PEFT's merge);
// a recipe stage that would fully fine-tune it is refused, and the same SFT stage with LoRA trains.
// The command line's train path (the folder opened as `npm run train` opens it) refuses a full
// fine-tune of it the same way (and `npm run recipe` a stage that would), and trains 2 LoRA steps on it and exports the merged model as BF16.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadModel, openModel } from '../../src/cli/_session';
import { trainFolder } from '../../src/cli/_train';
import { resolveConfig } from '../../src/grpo/config';
import { folderSource } from '../../src/formats/model-source';
import { parseSafetensors } from '../../src/formats/safetensors';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { GrpoStorage } from '../../src/storage/index';
import { createTrainerApi } from '../../src/worker/trainer-api';
import type { RecipeEvent } from '../../src/worker/recipe-service';
import { parseRecipe, type Recipe } from '../../src/recipes/recipe-spec';
import { recipeFolder } from '../../src/cli/_recipe';
import { testEngine } from '../kernels/harness';
import { listen, stepReport, tinyRunConfig } from '../support/worker-steps';

const FOLDER = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/bnb4bit/nf4-nested');
const Q = 'model.layers.0.self_attn.q_proj.weight';

describe('a bitsandbytes 4-bit folder in the trainer worker', { timeout: 600_000 }, () => {
  it('loads NF4, refuses a full fine-tune, trains 2 LoRA steps and exports BF16', async () => {
    const api = createTrainerApi({
      createEngine: testEngine,
      sandboxFactory: () => nodeSandboxFactory(),
      openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
      modelSource: () => folderSource(FOLDER),
    });
    const events = listen(api);
    // Short chat prompts with their own system turn: the fixture's tokenizer is per character,
    // so a short prompt keeps the steps fast (the default system prompt is ~300 tokens).
    const text = ['1+1', '2+2', '3+1', '2+3'].map((q, i) =>
      JSON.stringify({
        messages: [
          { role: 'system', content: 'Add.' },
          { role: 'user', content: q },
        ],
        answer: `${i}`,
      }),
    );
    const config = (usePeft: boolean) =>
      tinyRunConfig({
        task: 'jsonl',
        taskOptions: {},
        template: 'chat',
        // 'auto' keeps the checkpoint's NF4 (the default 'float32' would dequantise the base).
        dtype: 'auto',
        usePeft,
        loraR: 2,
        loraAlpha: 4,
      });
    await expect(
      api.loadModel({ kind: 'bundled' }, config(false), text.join('\n')),
    ).rejects.toThrow(/4-bit \(NF4\) quantised.*usePeft/);

    const { model } = await api.loadModel({ kind: 'bundled' }, config(true), text.join('\n'));
    expect(model.storedDtypes).toContain('NF4');
    for (let step = 1; step <= 2; step++) {
      const report = await stepReport(api, events);
      expect(report.step).toBe(step);
      expect(Number.isFinite(report.metrics.loss)).toBe(true);
    }

    const files = await api.exportModel('hf');
    const weights = files.find((f) => f.name === 'model.safetensors')!;
    const exported = parseSafetensors(weights.bytes, 'model.safetensors').tensors;
    expect(exported.get(Q)!.dtype).toBe('BF16');
    // The merged projection is the dequantised base moved by the trained adapter.
    const base = parseSafetensors(
      new Uint8Array(readFileSync(join(FOLDER, 'expected_dequantized.safetensors'))),
      'expected_dequantized.safetensors',
    ).tensors.get(Q)!.data;
    const merged = exported.get(Q)!.data;
    let moved = 0;
    for (let i = 0; i < base.length; i++) moved = Math.max(moved, Math.abs(merged[i] - base[i]));
    expect(moved).toBeGreaterThan(0);
    expect(moved).toBeLessThan(1);

    // A recipe on it: a stage that would fully fine-tune the 4-bit model is refused before it
    // starts; the same SFT stage with LoRA trains.
    const sftOn4Bit = (usePeft: boolean): Recipe => ({
      name: 'sft-on-4bit',
      seed: 1,
      stages: [
        {
          kind: 'sft',
          name: 'tune',
          data: { jsonl: JSON.stringify({ prompt: '1+1=', completion: '2' }) },
          options: { maxSteps: 1, usePeft, loraR: 2, loraAlpha: 4 },
        },
      ],
    });
    await expect(api.startRecipe(sftOn4Bit(false))).rejects.toThrow(
      "Stage 'tune' would fully fine-tune the loaded model, a 4-bit (NF4) quantised checkpoint",
    );
    const stageStarts: RecipeEvent[] = [];
    api.setRecipeListener((e) => {
      if (e.type === 'recipe-stage-start') stageStarts.push(e);
    });
    await api.startRecipe(sftOn4Bit(true));
    expect(await api.runRecipe()).toEqual({ outcome: 'finished' });
    // The stage trained on the checkpoint as stored: its frozen base stayed 4-bit on the GPU (the
    // recipe streams the loaded model's reader; it used to widen it to f32 on the host first, and
    // the stage then stored that f32 copy).
    expect(stageStarts).toHaveLength(1);
    const memory = (stageStarts[0] as Extract<RecipeEvent, { type: 'recipe-stage-start' }>).memory!;
    expect(memory.baseDtype).toBe('nf4');
    expect(memory.peakBytes).toBeGreaterThan(0);
  });

  it('the command line trains 2 LoRA steps on it as stored and exports the merged model as BF16', async () => {
    const model = await openModel(FOLDER);
    expect(model.hf.weights.storedDtypes.get(Q)).toBe('NF4');
    const runDir = mkdtempSync(join(tmpdir(), 'bnb-cli-lora-'));
    const exportDir = join(runDir, 'export');
    try {
      await trainFolder({
        engine: await testEngine(),
        model,
        identity: { name: 'm', sha256: '' },
        // The byte-level test tokenizer spells a Countdown prompt in ~550 tokens.
        config: resolveConfig(
          tinyRunConfig({
            ...{ usePeft: true, loraR: 2, loraAlpha: 4, steps: 2, maxPromptLength: 640 },
            ...{ perStepPrompts: 1, numGenerations: 2, evalPrompts: 0 },
          }),
        ),
        runDir,
        exportDir,
        log: () => {},
      });
      const metrics = readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').trim().split('\n');
      expect(metrics).toHaveLength(2);
      for (const line of metrics) expect(Number.isFinite(JSON.parse(line).loss)).toBe(true);
      const exported = parseSafetensors(
        new Uint8Array(readFileSync(join(exportDir, 'model.safetensors'))),
        'model.safetensors',
      ).tensors;
      expect(exported.get(Q)!.dtype).toBe('BF16');
      expect(JSON.parse(readFileSync(join(exportDir, 'config.json'), 'utf8')).torch_dtype).toBe(
        'bfloat16',
      );
    } finally {
      await model.hf.weights.close();
      rmSync(runDir, { recursive: true, force: true });
    }
  });

  it('npm run recipe trains a LoRA stage on it as stored (NF4 base) and writes the final model as BF16', async () => {
    const model = await openModel(FOLDER);
    const runDir = mkdtempSync(join(tmpdir(), 'bnb-recipe-'));
    const lines: string[] = [];
    try {
      const { outcome } = await recipeFolder({
        engine: await testEngine(),
        model,
        recipe: parseRecipe({
          name: 'qlora-sft',
          stages: [
            {
              kind: 'sft',
              name: 'tune',
              data: { jsonl: JSON.stringify({ prompt: '1+1=', completion: '2' }) },
              options: { maxSteps: 1, usePeft: true, loraR: 2, loraAlpha: 4 },
            },
          ],
        }),
        runDir,
        log: (line) => lines.push(line),
      });
      expect(outcome).toBe('finished');
      expect(lines.find((l) => l.startsWith('stage 1/1'))).toMatch(
        /^stage 1\/1: sft 'tune', 1 steps; memory plan: .+ at peak, base stored as nf4$/,
      );
      // Merged into the dequantised 4-bit base, as `npm run train -- --export` writes it.
      const final = parseSafetensors(
        new Uint8Array(readFileSync(join(runDir, 'final-model', 'model.safetensors'))),
        'model.safetensors',
      ).tensors;
      expect(final.get(Q)!.dtype).toBe('BF16');
    } finally {
      await model.hf.weights.close();
      rmSync(runDir, { recursive: true, force: true });
    }
  });

  it('the command line trains on it as stored: a full fine-tune is refused', async () => {
    const model = await loadModel(FOLDER);
    expect(model.hf.storedDtypes.get(Q)).toBe('NF4');
    const runDir = mkdtempSync(join(tmpdir(), 'bnb-cli-'));
    try {
      const run = trainFolder({
        engine: await testEngine(),
        model,
        identity: { name: 'm', sha256: '' },
        config: resolveConfig(tinyRunConfig({ usePeft: false })),
        runDir,
        log: () => {},
      });
      await expect(run).rejects.toThrow(/4-bit \(NF4\) quantised.*usePeft/);
      // npm run recipe refuses a stage that would fully fine-tune it, before the recipe starts.
      const recipe = recipeFolder({
        engine: await testEngine(),
        model,
        recipe: parseRecipe({
          name: 'full-sft',
          stages: [{ kind: 'sft', name: 'tune', data: { coldStart: { count: 2 } } }],
        }),
        runDir: join(runDir, 'recipe'),
        log: () => {},
      });
      await expect(recipe).rejects.toThrow(
        "Stage 'tune' would fully fine-tune the loaded model, a 4-bit (NF4) quantised checkpoint",
      );
    } finally {
      rmSync(runDir, { recursive: true, force: true });
    }
  });
});
