// The Paper view's recipe comparison (src/app/learn/RecipeComparison.svelte) renders the committed
// `npm run recipe -- --compare` summary: the base model and each arm's mean with its seed range.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import PaperBrief from '../../src/app/learn/PaperBrief.svelte';
import summary from '../../docs/recipe/summary.json';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

describe('Paper view: R1-Zero vs R1 vs distillation', () => {
  it('shows the committed summary: base rate and every arm with its range over seeds', () => {
    const { body } = render(PaperBrief);
    expect(body).toContain('On this playground’s model: R1-Zero vs R1 vs distillation');
    expect(body).toContain(pct(summary.base.accuracy));
    for (const arm of ['R1-Zero', 'R1', 'Distillation'] as const) {
      const a = (
        summary.summary as Record<string, { accuracy: { mean: number; min: number; max: number } }>
      )[arm].accuracy;
      expect(body).toContain(`${pct(a.mean)} (${pct(a.min)}–${pct(a.max)})`);
    }
    expect(body).toContain(`${summary.seeds.length} seeds`);
  });
});
