// A scored arm of the findings comparison (src/recipes/recipe-findings.ts ArmEval) for the tests that
// judge or show made-up results: 200 held-out problems, `correct` right and `reflecting` reflecting,
// every completion formatted and in one language, 40 tokens long.
import type { ArmEval } from '../../src/recipes/recipe-findings';

export const armEval = (correct: number, reflecting = 50): ArmEval => ({
  n: 200,
  correct,
  accuracy: correct / 200,
  reflecting,
  reflection: reflecting / 200,
  format: 1,
  languageConsistency: 1,
  length: 40,
  accuracyReflecting: NaN,
  accuracyNotReflecting: NaN,
});
