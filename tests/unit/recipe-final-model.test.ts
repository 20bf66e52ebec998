// The dtype of a recipe's final-model/ folder (src/cli/_recipe.ts finalModelDtype), as
// `npm run train -- --export` picks it: BF16 when the weights that end the recipe were trained
// on an NF4 base (dequantised, adapters merged in), F32 otherwise; a rejection-sample stage
// passes its start weights through, so the stage behind it decides. On a 4-bit checkpoint, a
// LoRA stage that starts from it trains on its NF4 base whatever its dtype says: BF16 too.
import { describe, expect, it } from 'vitest';
import { finalModelDtype } from '../../src/cli/_recipe';
import { parseRecipe } from '../../src/recipes/recipe-spec';
import { grpoStage, rejectionStage, sftStage } from '../support/recipe-stages';

const NF4 = { usePeft: true, dtype: 'nf4' };
const [sft, grpo, rejection] = [sftStage, grpoStage, rejectionStage];
const dtype = (...stages: object[]) => finalModelDtype(parseRecipe({ name: 'r', stages }));

describe('finalModelDtype', () => {
  it('is BF16 after an NF4 (QLoRA) stage, F32 after a float32 or LoRA-only one', () => {
    expect(dtype(grpo('rl', NF4))).toBe('BF16');
    expect(dtype(grpo('rl'))).toBe('F32');
    expect(dtype(grpo('rl', { usePeft: true, dtype: 'bfloat16' }))).toBe('F32');
    expect(dtype(grpo('rl', NF4), sft('sft'))).toBe('F32');
    // An SFT stage decides the same way: QLoRA ends in BF16, LoRA on a 16-bit base in F32.
    expect(dtype(grpo('rl'), sft('sft', NF4))).toBe('BF16');
    expect(dtype(sft('sft', { usePeft: true, dtype: 'bfloat16' }))).toBe('F32');
    expect(dtype(sft('sft', NF4), rejection('rs'))).toBe('BF16');
  });

  it('is BF16 after a LoRA stage on a 4-bit checkpoint it starts from, whatever its dtype says', () => {
    const quantised = (...stages: object[]) =>
      finalModelDtype(parseRecipe({ name: 'r', stages }), true);
    const LORA = { usePeft: true };
    expect(quantised(grpo('rl', LORA))).toBe('BF16');
    expect(quantised(sft('sft', LORA))).toBe('BF16');
    expect(quantised(rejection('rs'), sft('sft', LORA))).toBe('BF16');
    // A LoRA stage after a LoRA stage starts from its merged f32 weights, not the 4-bit base.
    expect(quantised(sft('sft', LORA), grpo('rl', LORA))).toBe('F32');
    expect(quantised(sft('sft', LORA), grpo('rl', LORA, 'base'))).toBe('BF16');
    expect(dtype(grpo('rl', LORA))).toBe('F32');
  });

  it('looks through rejection-sample stages to the stage whose weights they pass on', () => {
    expect(dtype(grpo('rl', NF4), rejection('rs'))).toBe('BF16');
    expect(dtype(grpo('a', NF4), grpo('b'), rejection('rs', 'a'))).toBe('BF16');
    expect(dtype(grpo('a', NF4), rejection('rs', 'base'))).toBe('F32');
    expect(dtype(rejection('rs'))).toBe('F32');
  });
});
