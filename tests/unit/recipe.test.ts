// Recipe files (src/recipes/recipe.ts): what parseRecipe accepts and the message each mistake gets,
// the built-in recipes, the stage seeds, the cold-start set (right, careful, never held out), and
// which stage would fully fine-tune the loaded model (refused on a 4-bit one).
import { describe, expect, it } from 'vitest';
import {
  BUILTIN_RECIPES,
  builtinRecipe,
  coldStartRows,
  coldStartTraces,
  fullStageOnBase,
  parseRecipe,
  RECIPE_GRPO_STEPS,
  reviveRecipeState,
  stageConfig,
  stageSeed,
} from '../../src/recipes/recipe-spec';
import { isHeldOut } from '../../src/tasks/traces';
import { grpoStage, rejectionStage, sftStage } from '../support/recipe-stages';

const sft = { kind: 'sft', name: 'a', data: { coldStart: { count: 4 } } };

describe('parseRecipe', () => {
  it('fills defaults: from previous, preset aha, seed 1', () => {
    const r = parseRecipe({ name: ' x ', stages: [sft, { kind: 'grpo', name: 'b' }] });
    expect(r).toEqual({
      name: 'x',
      description: undefined,
      seed: 1,
      stages: [
        {
          kind: 'sft',
          name: 'a',
          from: 'previous',
          data: { coldStart: { count: 4 } },
          options: {},
        },
        { kind: 'grpo', name: 'b', from: 'previous', preset: 'aha', options: {} },
      ],
    });
  });

  it.each([
    [null, 'expected a JSON object'],
    [{ name: '', stages: [sft] }, '"name" must be a non-empty string'],
    [{ name: 'x', stages: [] }, '"stages" must be a non-empty array'],
    [{ name: 'x', seed: -1, stages: [sft] }, '"seed" must be an integer ≥ 0'],
    [
      { name: 'x', stages: [{ kind: 'dpo' }] },
      'stage 1: "kind" must be one of sft, grpo, rejection-sample',
    ],
    [{ name: 'x', stages: [sft, sft] }, "stage 2: the name 'a' is used twice"],
    [
      { name: 'x', stages: [{ ...sft, from: 'later' }] },
      '"from" names \'later\', which is not an earlier stage',
    ],
    [{ name: 'x', stages: [{ ...sft, data: { stage: 'nope' } }] }, "data.stage names 'nope'"],
    [{ name: 'x', stages: [{ ...sft, data: {} }] }, '"data" must be'],
    [{ name: 'x', stages: [{ ...sft, options: { learningRate: -1 } }] }, "stage 1 ('a'):"],
    [
      { name: 'x', stages: [{ kind: 'grpo', options: { numGenerations: 0 } }] },
      "stage 1 ('grpo-1'):",
    ],
    [{ name: 'x', stages: [{ kind: 'grpo', preset: 'nope' }] }, 'unknown preset "nope"'],
    [
      { name: 'x', stages: [{ kind: 'rejection-sample', prompts: 0, options: { k: 2 } }] },
      '"prompts" must be an integer ≥ 1',
    ],
    [{ name: 'x', stages: [{ kind: 'rejection-sample', prompts: 4, options: {} }] }, 'options.k'],
  ])('%j → %s', (value, message) => {
    expect(() => parseRecipe(value)).toThrow(message);
  });

  it('an sft stage may train on an earlier rejection-sample stage only', () => {
    const rs = { kind: 'rejection-sample', name: 'rs', prompts: 4, options: { k: 2 } };
    expect(
      parseRecipe({ name: 'x', stages: [rs, { ...sft, data: { stage: 'rs' } }] }).stages[1],
    ).toMatchObject({
      data: { stage: 'rs' },
    });
    expect(() =>
      parseRecipe({ name: 'x', stages: [sft, { ...sft, name: 'b', data: { stage: 'a' } }] }),
    ).toThrow("data.stage names 'a', which is not an earlier rejection-sample stage");
  });
});

describe('built-in recipes', () => {
  it('parse, and spend the same GRPO steps', () => {
    const grpoSteps = (name: string) =>
      builtinRecipe(name)
        .stages.map((s, i, all) =>
          s.kind === 'grpo' ? stageConfig({ name, seed: 1, stages: all }, i).steps : 0,
        )
        .reduce((a, b) => a + b, 0);
    expect(Object.keys(BUILTIN_RECIPES)).toEqual(['r1-zero', 'r1', 'distill']);
    expect(grpoSteps('r1-zero')).toBe(RECIPE_GRPO_STEPS);
    expect(grpoSteps('r1')).toBe(RECIPE_GRPO_STEPS);
    expect(grpoSteps('distill')).toBe(RECIPE_GRPO_STEPS);
    expect(builtinRecipe('r1').stages.map((s) => s.kind)).toEqual([
      'sft',
      'grpo',
      'rejection-sample',
      'sft',
      'grpo',
    ]);
    expect(builtinRecipe('distill').stages[2]).toMatchObject({
      from: 'base',
      data: { stage: 'teacher-samples' },
    });
    expect(builtinRecipe('r1', 7).seed).toBe(7);
    expect(() => builtinRecipe('r2')).toThrow("no built-in recipe 'r2' (r1-zero, r1, distill)");
  });

  it("the first stage keeps the recipe's seed (R1-Zero = the aha preset's run); later stages draw their own", () => {
    const r = builtinRecipe('r1', 3);
    expect(stageSeed(r, 0)).toBe(3);
    expect(stageSeed(r, 1)).not.toBe(3);
    expect(stageSeed(r, 1)).not.toBe(stageSeed(r, 4));
    expect(stageConfig(builtinRecipe('r1-zero', 3), 0)).toMatchObject({
      seed: 3,
      steps: RECIPE_GRPO_STEPS,
      learningRate: 6e-4,
    });
    expect(stageConfig(r, 4).seed).toBe(stageSeed(r, 4));
  });
});

describe('cold-start set', () => {
  it('careful, reflecting traces with a right answer, none held out, the same for a seed', () => {
    const traces = coldStartTraces(1, 40);
    expect(traces).toHaveLength(40);
    expect(coldStartTraces(1, 40)).toEqual(traces);
    expect(coldStartTraces(2, 40)).not.toEqual(traces);
    for (const t of traces) {
      expect(t.style).toBe('careful');
      expect(t.correct).toBe(true);
      expect(isHeldOut(t.problem)).toBe(false);
      // Every careful trace reflects: "wait" after a miss or "check again" after a hit.
      expect(t.completion).toMatch(
        /^<think>backward: .*(wait|check again).*<\/think><answer>.+<\/answer>$/,
      );
    }
    const rows = coldStartRows(1, 40);
    expect(rows[3]).toEqual({
      kind: 'prompt-completion',
      line: 4,
      prompt: traces[3].prompt,
      completion: traces[3].completion,
    });
  });
});

describe('reviveRecipeState', () => {
  it('turns the nulls JSON wrote for NaN back into NaN', () => {
    const state = reviveRecipeState(
      JSON.parse(
        JSON.stringify({
          recipe: builtinRecipe('r1-zero'),
          stageIndex: 0,
          results: [],
          datasets: {},
          timeline: [{ step: 1, stage: 0, stageStep: 1, metrics: { a: NaN, b: 2 } }],
        }),
      ),
    );
    expect(state.timeline[0].metrics.a).toBeNaN();
    expect(state.timeline[0].metrics.b).toBe(2);
  });
});

describe('fullStageOnBase (a 4-bit model trains only under LoRA)', () => {
  const [sft, grpo, rs] = [sftStage, grpoStage, rejectionStage];
  const LORA = { usePeft: true };
  const first = (...stages: object[]) =>
    fullStageOnBase(parseRecipe({ name: 'r', stages }))?.name ?? null;

  it('finds the full stage that starts from the loaded model, through rejection-sample stages', () => {
    expect(first(sft('a'))).toBe('a');
    expect(first(sft('a', LORA), grpo('b'))).toBeNull(); // b starts from a's merged weights
    expect(first(rs('s'), grpo('b'))).toBe('b');
    expect(first(grpo('a', LORA), rs('s', 'a'), sft('c', {}, 's'))).toBeNull();
    expect(first(grpo('a', LORA), sft('c', {}, 'base'))).toBe('c');
    expect(first(grpo('a', LORA), rs('s', 'base'), sft('c', {}, 's'))).toBe('c');
    expect(first(grpo('a', LORA), sft('c', LORA, 'base'))).toBeNull();
  });
});
