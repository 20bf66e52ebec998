// Multi-stage recipes (src/recipes/recipe.ts) through `npm run recipe`'s run folder (src/cli/_recipe.ts)
// on Node WebGPU with the bundled model: a two-stage recipe (SFT 2 steps → GRPO 2 steps) stopped
// after 3 steps and resumed from its state and checkpoint logs the same timeline as one
// uninterrupted run, and so does one resumed after a LoRA stage (its adapter-only checkpoint merged
// onto the stored base); a rejection-sample stage's kept set is what the next SFT stage (a student
// from the base weights) trains on, with consistent counts and the same set for the same seed (the
// comparison, src/cli/_recipe-compare.ts, is tests/kernels/recipe-findings.test.ts).
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { recipeFolder } from '../../src/cli/_recipe';
import { loadModel, openEngine, type LoadedModel } from '../../src/cli/_session';
import type { Engine } from '../../src/engine/engine';
import { parseRecipe, type Recipe, type TimelineRow } from '../../src/recipes/recipe-spec';
import { reverseVocabulary, tinyHfFolder } from '../support/tiny-hf-model';
import { OVERSIZED } from '../support/two-stage-recipe';

const work = mkdtempSync(join(tmpdir(), 'grpo-recipe-'));
const SMALL_RL = {
  numGenerations: 4,
  perStepPrompts: 1,
  maxCompletionLength: 48,
  saveSteps: 1,
};
const SMALL_SFT = {
  perDeviceTrainBatchSize: 4,
  numTrainEpochs: 1,
  learningRate: 3e-4,
  maxLength: 128,
  saveSteps: 1,
};

const twoStage = (): Recipe =>
  parseRecipe({
    name: 'two-stage',
    seed: 3,
    stages: [
      { kind: 'sft', name: 'cold-start', data: { coldStart: { count: 8 } }, options: SMALL_SFT },
      // No checkpoint is due before the last step: a stop saves the stage's state itself.
      { kind: 'grpo', name: 'rl', options: { ...SMALL_RL, steps: 2, saveSteps: 10 } },
    ],
  });

/** The metrics of a timeline without the wall-clock ones (they differ run to run). */
const comparable = (rows: readonly TimelineRow[]) =>
  rows.map((r) => ({
    ...r,
    metrics: Object.fromEntries(
      Object.entries(r.metrics).filter(([k]) => k !== 'step_time' && k !== 'tokens_per_second'),
    ),
  }));

let engine: Engine;
let model: LoadedModel;
const quiet = () => {};

beforeAll(async () => {
  engine = await openEngine();
  model = await loadModel('bundled');
}, 120_000);

/**
 * `recipe` run whole in `<name>-whole`, then in `<name>-resumed` stopped after 3 timeline steps
 * (a stop in its second stage; no final model yet) and resumed with --resume; the second run's log
 * lines are kept.
 */
async function wholeAndResumed(recipe: () => Recipe, name: string) {
  const whole = await recipeFolder({
    engine,
    model,
    recipe: recipe(),
    runDir: join(work, `${name}-whole`),
    log: quiet,
  });
  const dir = join(work, `${name}-resumed`);
  const first = await recipeFolder({
    engine,
    model,
    recipe: recipe(),
    runDir: dir,
    stopAfterSteps: 3,
    log: quiet,
  });
  expect(first.outcome).toBe('stopped');
  expect(existsSync(join(dir, 'final-model'))).toBe(false);
  const lines: string[] = [];
  const second = await recipeFolder({
    engine,
    model,
    recipe: recipe(),
    runDir: dir,
    resume: true,
    log: (l) => lines.push(l),
  });
  return { whole, first, second, dir, lines };
}

describe('recipe run folder', { timeout: 900_000 }, () => {
  it('SFT 2 → GRPO 2, stopped after step 3 and resumed, equals one uninterrupted run', async () => {
    const { whole, first, second, dir, lines } = await wholeAndResumed(twoStage, 'two-stage');
    expect(whole.outcome).toBe('finished');
    expect(whole.state.timeline.map((r) => [r.step, r.stage, r.stageStep])).toEqual([
      [1, 0, 1],
      [2, 0, 2],
      [3, 1, 1],
      [4, 1, 2],
    ]);
    // SFT rows carry TRL's SFT metrics, GRPO rows the GRPO ones.
    expect(Object.keys(whole.state.timeline[0].metrics)).toContain('mean_token_accuracy');
    expect(Object.keys(whole.state.timeline[2].metrics)).toContain('reward');

    expect(first.outcome).toBe('stopped');
    expect(first.state.stageIndex).toBe(1);
    expect(existsSync(join(dir, '0-cold-start', 'checkpoint-2', 'trainer_state.json'))).toBe(true);
    expect(existsSync(join(dir, '1-rl', 'checkpoint-1', 'trainer_state.json'))).toBe(true);
    expect(lines[0]).toContain('resuming');
    expect(lines[0]).toContain('1-rl/checkpoint-1');
    expect(second.outcome).toBe('finished');
    expect(comparable(second.state.timeline)).toEqual(comparable(whole.state.timeline));
    const logged = readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n');
    expect(logged.map((l) => JSON.parse(l).stage_name)).toEqual([
      'cold-start',
      'cold-start',
      'rl',
      'rl',
    ]);
    expect(existsSync(join(dir, 'final-model', 'model.safetensors'))).toBe(true);
  });

  it('resumed after LoRA stages (SFT on an NF4 base, GRPO on a bf16 one): the next stage starts from their merged weights, as in one run', async () => {
    // A LoRA stage's checkpoints hold only adapters: resuming in the full stage rebuilds its start,
    // the GRPO LoRA stage's end weights, from that stage's start (the SFT LoRA stage's end weights,
    // rebuilt the same way from the recipe's base quantised to NF4 as that stage stored it), rounded
    // to bf16 as the GRPO stage stored them, with each stage's adapters merged
    // (RecipeRun.stageEndWeights). With β > 0 those are the full stage's frozen reference, which
    // its checkpoint names by identity: any other start is refused, or shows in the KL of the step
    // trained after the resume.
    const loraThenFull = (): Recipe =>
      parseRecipe({
        name: 'lora-then-full',
        seed: 5,
        stages: [
          {
            kind: 'sft',
            name: 'qlora-sft',
            data: { coldStart: { count: 4 } },
            options: { ...SMALL_SFT, maxSteps: 1, usePeft: true, loraR: 4, dtype: 'nf4' },
          },
          {
            kind: 'grpo',
            name: 'lora',
            options: { ...SMALL_RL, steps: 1, usePeft: true, loraR: 4, dtype: 'bfloat16' },
          },
          {
            kind: 'grpo',
            name: 'full',
            options: { ...SMALL_RL, steps: 2, saveSteps: 10, beta: 0.04 },
          },
        ],
      });
    const { whole, first, second, dir } = await wholeAndResumed(loraThenFull, 'lora-then-full');
    expect(whole.outcome).toBe('finished');
    expect(first.state.stageIndex).toBe(2);
    for (const stage of ['0-qlora-sft', '1-lora']) {
      expect(existsSync(join(dir, stage, 'checkpoint-1', 'adapter_model.safetensors'))).toBe(true);
      expect(existsSync(join(dir, stage, 'checkpoint-1', 'model.safetensors'))).toBe(false);
    }
    expect(second.outcome).toBe('finished');
    expect(comparable(second.state.timeline)).toEqual(comparable(whole.state.timeline));
  });

  it('a stage that would not fit stops the recipe before its first stage runs, saying which and why', async () => {
    const dir = join(work, 'oversized');
    const lines: string[] = [];
    await expect(
      recipeFolder({
        engine,
        model,
        recipe: parseRecipe(OVERSIZED),
        runDir: dir,
        log: (l) => lines.push(l),
      }),
    ).rejects.toThrow(
      /^Stage 'rl' \(2 of 2\) would not fit on this GPU, so the recipe stops before running a stage: Does not fit: N = 256×64 = 16384 sequences/,
    );
    expect(lines.find((l) => l.startsWith('memory plans'))).toMatch(
      /^memory plans at peak \(budget 4\.00 GiB\): 'cold-start' [\d.]+ MiB, 'rl' [\d.]+ GiB \(does not fit\)$/,
    );
    expect(lines.filter((l) => /^stage \d/.test(l))).toEqual([]);
    const metrics = join(dir, 'metrics.jsonl');
    expect(existsSync(metrics) ? readFileSync(metrics, 'utf8') : '').toBe('');
  });

  it('rejection sampling feeds a student SFT from the base weights; counts agree; same seed, same set', async () => {
    const recipe = (seed: number) =>
      parseRecipe({
        name: 'distill-small',
        seed,
        stages: [
          { kind: 'rejection-sample', name: 'samples', prompts: 4, options: { k: 4 } },
          {
            kind: 'sft',
            name: 'student',
            from: 'base',
            data: { stage: 'samples' },
            options: { ...SMALL_SFT, maxSteps: 1 },
          },
        ],
      });
    const a = await recipeFolder({
      engine,
      model,
      recipe: recipe(5),
      runDir: join(work, 'a'),
      log: quiet,
    });
    const b = await recipeFolder({
      engine,
      model,
      recipe: recipe(5),
      runDir: join(work, 'b'),
      log: quiet,
    });
    const c = await recipeFolder({
      engine,
      model,
      recipe: recipe(6),
      runDir: join(work, 'c'),
      log: quiet,
    });
    const rs = a.state.results[0].rejection!;
    expect(rs.sampled).toBe(16);
    expect(rs.perPrompt.reduce((s, p) => s + p.kept, 0)).toBe(rs.kept);
    const kept = readFileSync(join(work, 'a', '0-samples', 'sft.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(kept).toHaveLength(rs.kept);
    expect(rs.kept).toBeGreaterThan(0);
    const samples = readFileSync(join(work, 'a', '0-samples', 'samples.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(samples.filter((s) => s.kept).length).toBe(rs.kept);
    expect(samples.filter((s) => !s.kept).every((s) => s.reasons.length > 0)).toBe(true);
    expect(b.state.datasets).toEqual(a.state.datasets);
    expect(c.state.datasets.samples).not.toBe(a.state.datasets.samples);
    // The student trained one step on the kept set.
    expect(a.state.timeline).toHaveLength(1);
    expect(a.state.timeline[0].stage).toBe(1);
  });

  it('distillation into another model with the same tokenizer ("from": "model:<folder>"), and a refusal for another tokenizer', async () => {
    const student = await tinyHfFolder({ numLayers: 1, hiddenSize: 16 });
    const studentDir = student.writeTo(join(work, 'student'));
    const recipe = (from: string) =>
      parseRecipe({
        name: 'distill-student',
        seed: 5,
        stages: [
          { kind: 'rejection-sample', name: 'samples', prompts: 4, options: { k: 4 } },
          {
            kind: 'sft',
            name: 'student',
            from,
            data: { stage: 'samples' },
            options: { ...SMALL_SFT, maxSteps: 2 },
          },
        ],
      });
    const dir = join(work, 'student-run');
    const { state } = await recipeFolder({
      engine,
      model,
      recipe: recipe(`model:${studentDir}`),
      runDir: dir,
      log: quiet,
    });
    expect(state.timeline.map((r) => r.stageStep)).toEqual([1, 2]);
    // The student's architecture, not the teacher's, in its checkpoints and the final model.
    for (const sub of ['1-student/checkpoint-2', 'final-model']) {
      const config = JSON.parse(readFileSync(join(dir, sub, 'config.json'), 'utf8'));
      expect(config.num_hidden_layers).toBe(1);
      expect(config.hidden_size).toBe(16);
    }
    expect(model.hf.config.hiddenSize).not.toBe(16);

    // The same folder with two vocabulary entries swapped: another tokenizer.
    const other = join(work, 'other-tokenizer');
    reverseVocabulary(student.writeTo(other));
    await expect(
      recipeFolder({
        engine,
        model,
        recipe: recipe(`model:${other}`),
        runDir: join(work, 'refused'),
        log: quiet,
      }),
    ).rejects.toThrow(`the model '${other}' has another tokenizer than the recipe's model`);
  });
});
