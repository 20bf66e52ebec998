// evaluate()'s format rates judge the model's whole turn, as the format reward the run trained on
// does (docs/grpo.md §1, formatOkAfterPrompt): after a chat template that opens `<think>` in the
// prompt, a completion that closes it is formatted. The bundled model's real tokenizer and
// Countdown task; the generator returns one fixed completion for every prompt, so the test knows
// the text being judged.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { folderSource } from '../../src/formats/model-source';
import { loadTokenizer, type Tokenizer } from '../../src/formats/tokenizer';
import { renderPrompt } from '../../src/grpo/trainer';
import type { TextGenerator } from '../../src/model/sampler';
import { createTask } from '../../src/tasks';
import type { Problem, Task } from '../../src/tasks/types';
import { evaluate, type EvalContext } from '../../src/train/evaluate';

describe('evaluate: format rate after a template-opened <think>', () => {
  let tok: Tokenizer;
  let task: Task;
  let problems: Problem[];

  beforeAll(async () => {
    const loaded = await loadHfFolder(folderSource('public/models/tiny-reasoner'));
    tok = await loadTokenizer(loaded.tokenizerFiles, {
      eosTokenIds: loaded.generation.eosTokenIds,
    });
    task = createTask('countdown');
    problems = task.generate(3, 2);
  });

  /** Every prompt gets ` 7 </think> <answer> 7 </answer>` and EOS. */
  const generator = (): TextGenerator => ({
    async generate(prompts, o) {
      const ids = [
        ...tok.encode(' 7 </think> <answer> 7 </answer>', { addSpecialTokens: false }),
        o.eosTokenIds[0],
      ];
      return {
        completions: prompts.map(() => ids),
        finished: prompts.map(() => true),
        logps: prompts.map(() => new Float32Array(ids.length)),
      };
    },
  });

  const rates = async (suffix: string) => {
    const ctx: EvalContext = {
      sampler: generator(),
      tokenizer: tok,
      task,
      renderPrompt: (p) => {
        // DeepSeek-R1-Distill's generation prompt ends in "<think>\n" (suffix); '' is R1-Zero's.
        const text = renderPrompt(task, tok, p, 'r1-zero').text + suffix;
        return { text, ids: tok.encode(text) };
      },
    };
    const report = await evaluate(ctx, problems, {
      k: 2,
      temperature: 1,
      maxCompletionLength: 32,
      seed: 0,
    });
    return [report.metrics.greedy_format_rate, report.metrics.sample_format_rate];
  };

  it('counts the completion closing the prompt’s <think> as formatted', async () => {
    expect(await rates('<think>\n')).toEqual([1, 1]);
  });

  it('after a prompt without think markup, the same completion is not formatted', async () => {
    expect(await rates('')).toEqual([0, 0]);
  });
});
