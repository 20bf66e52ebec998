// The format reward with chat templates that put <think> in the generation prompt (issue 36,
// docs/grpo.md §1 format): the prompts are the real renderings of tests/fixtures/chat-templates
// (Qwen3 with thinking on and off, Qwen2.5, Llama 3) and the R1-Zero text; an opened <think> at
// the end of a prompt is DeepSeek-R1-Distill's generation prompt ("<｜Assistant｜><think>\n") and
// TinyZero's R1 template's ("Assistant: Let me solve this step by step.\n<think>").
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formatOk, formatReward } from '../../src/rewards/rewards';
import { formatPrompt, promptThinkTail } from '../../src/tasks/prompt';

const GOLDENS = JSON.parse(readFileSync('tests/fixtures/chat-templates/goldens.json', 'utf8')) as {
  name: string;
  text: string;
}[];
const rendered = (name: string) => GOLDENS.find((g) => g.name === name)!.text;

const QWEN3_ON = rendered('qwen3 thinking on');
const QWEN3_OFF = rendered('qwen3 thinking off');
const R1_DISTILL = '<｜begin▁of▁sentence｜><｜User｜>What is 7 + 8?<｜Assistant｜><think>\n';
const TINYZERO =
  'A conversation between User and Assistant. … User: What is 7 + 8? Assistant: Let me solve this step by step.\n<think>';
const R1_ZERO = (
  formatPrompt({ id: 'p', question: 'What is 7 + 8?' } as never, 'r1-zero') as { text: string }
).text;

const score = (prompt: string, completion: string) =>
  formatReward.compute({ prompt, completion, problem: null as never });

describe('promptThinkTail', () => {
  it("finds the template's think markup at the end of the prompt, and nothing else", () => {
    expect(promptThinkTail(QWEN3_OFF)).toBe('<think>\n\n</think>\n\n');
    expect(promptThinkTail(R1_DISTILL)).toBe('<think>\n');
    expect(promptThinkTail(TINYZERO)).toBe('<think>');
    // Tags quoted in the instructions (R1-Zero text, the R1 system message) do not count.
    expect(R1_ZERO).toContain('<think> reasoning process here </think>');
    expect(QWEN3_ON).toContain('<think> reasoning process here </think>');
    for (const p of [
      R1_ZERO,
      QWEN3_ON,
      rendered('qwen2.5 system'),
      rendered('llama3 system'),
      '',
    ]) {
      expect(promptThinkTail(p)).toBe('');
    }
    expect(promptThinkTail('<think>\nfirst thought')).toBe('');
  });
});

describe('format reward after a prompt that holds think markup', () => {
  const full = '<think>\n7 plus 8 is 15.\n</think>\n\n<answer>15</answer>';

  it('Qwen3, thinking off: the answer alone completes the turn; a think block of its own too', () => {
    expect(score(QWEN3_OFF, '<answer>15</answer>')).toBe(1);
    expect(formatOk('<answer>15</answer>')).toBe(false); // what the reward said before
    expect(score(QWEN3_OFF, full)).toBe(1);
    expect(score(QWEN3_OFF, '15')).toBe(0);
    expect(score(QWEN3_OFF, 'more thought</think><answer>15</answer>')).toBe(0);
  });

  it('an opened <think>: the reasoning and </think> complete it; re-opening is not counted twice', () => {
    for (const prompt of [R1_DISTILL, TINYZERO]) {
      expect(score(prompt, '7 plus 8 is 15.\n</think>\n<answer>15</answer>')).toBe(1);
      expect(score(prompt, full)).toBe(1);
      expect(score(prompt, '<answer>15</answer>')).toBe(0);
      expect(score(prompt, '7 plus 8 is 15.</think></think><answer>15</answer>')).toBe(0);
      expect(score(prompt, '<think>a</think><think>b</think><answer>15</answer>')).toBe(0);
    }
  });

  it('prompts without think markup: unchanged (the model must write the whole block)', () => {
    for (const prompt of [R1_ZERO, QWEN3_ON, rendered('llama3 system'), '']) {
      expect(score(prompt, full)).toBe(1);
      expect(score(prompt, ` ${full}\n`)).toBe(1);
      expect(score(prompt, '<answer>15</answer>')).toBe(0);
      expect(score(prompt, '7 plus 8 is 15.\n</think>\n<answer>15</answer>')).toBe(0);
    }
  });
});
