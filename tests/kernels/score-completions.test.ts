// scoreCompletions (src/grpo/score-completions.ts), the teacher-forced scoring the page's test hook
// uses: on a step's own prompts and sampled completions it gives exactly the log-probs the update
// records for the updated policy (logpAfter: the same forward and gather kernels), with LoRA
// adapters and without; rows keep each completion's length; scoring changes nothing in the run.
import { describe, expect, it } from 'vitest';
import { scoreCompletions } from '../../src/grpo/score-completions';
import type { GrpoTrainer, StepReport } from '../../src/grpo/trainer';
import { makeTrainer, tokenizer } from '../support/tiny-trainer';
import { testEngine } from './harness';

function stepRows(trainer: GrpoTrainer, report: StepReport) {
  const prompts: number[][] = [];
  const completions: number[][] = [];
  const after: number[][] = [];
  for (const g of report.groups) {
    for (const c of g.completions) {
      prompts.push(trainer.renderPrompt(g.problem).ids);
      completions.push(c.tokens);
      after.push(c.logpAfter!);
    }
  }
  return { prompts, completions, after };
}

describe('scoreCompletions', { timeout: 600_000 }, () => {
  for (const [name, overrides] of [
    ['LoRA adapters', { usePeft: true, loraR: 4, loraAlpha: 8, beta: 0.04 }],
    ['every weight', {}],
  ] as const) {
    it(`gives the update's own log-probs bit for bit (${name})`, async () => {
      const trainer = await makeTrainer({ ...overrides, maxCompletionLength: 5 }, undefined, true);
      const engine = await testEngine();
      const report = await trainer.trainStep();
      const { prompts, completions, after } = stepRows(trainer, report);
      // Ragged completions (EOS ends some early) exercise the row lengths.
      expect(new Set(completions.map((c) => c.length)).size).toBeGreaterThan(1);
      const opts = { padId: tokenizer.padTokenId, temperature: trainer.config.temperature };
      const scored = await scoreCompletions(engine, trainer.policy, prompts, completions, opts);
      expect(scored.map((r) => r.length)).toEqual(completions.map((c) => c.length));
      expect(scored.map((r) => Array.from(r))).toEqual(after);
      expect(scored.flatMap((r) => Array.from(r)).every((x) => x < 0 && Number.isFinite(x))).toBe(
        true,
      );
      // Scoring again gives the same numbers: nothing in the policy moved.
      const again = await scoreCompletions(engine, trainer.policy, prompts, completions, opts);
      expect(again).toEqual(scored);
      await expect(
        scoreCompletions(engine, trainer.policy, [[1]], [[trainer.policy.config.vocabSize]], opts),
      ).rejects.toThrow(/outside the vocabulary/);
      trainer.destroy();
    });
  }
});
