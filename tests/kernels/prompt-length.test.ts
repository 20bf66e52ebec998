// When no training prompt fits maxPromptLength, the trainer's error says how long the shortest
// prompt is and which option to raise (--max-prompt-length), instead of only the limit.
import { describe, expect, it } from 'vitest';
import { makeTrainer } from '../support/tiny-trainer';

describe('prompt-length error', () => {
  it('names the shortest prompt length and the flag to change', async () => {
    const trainer = await makeTrainer({ maxPromptLength: 1 });
    // The tiny task's prompts are 'ab?', 'cd?', 'efg?' and 'h?': the shortest renders as 'h?'.
    const shortest = trainer.renderPrompt({
      id: 'x',
      task: 'echo',
      question: 'h?',
      reference: null,
      verifier: { kind: 'none' },
    }).ids.length;
    expect(shortest).toBeGreaterThan(1);
    await expect(trainer.trainStep()).rejects.toThrow(
      `no training prompt fits maxPromptLength = 1 tokens: the shortest prompt is ${shortest} ` +
        "tokens; raise --max-prompt-length (maxPromptLength in a config file or the playground's " +
        `options) to at least ${shortest}, or use shorter prompts`,
    );
  });
});
