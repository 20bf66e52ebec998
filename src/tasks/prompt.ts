// Prompt formatting shared by every task: the R1-Zero template (docs/grpo.md §8, DeepSeek-R1 Table
// 1, verbatim) for base models, and chat messages for instruct models, whose tokenizer applies its
// own chat template.

import type { ChatMessage, FormattedPrompt, Problem, PromptTemplate } from './types';

/** DeepSeek-R1 Table 1, verbatim; `{prompt}` is replaced by the question. */
export const R1_ZERO_TEMPLATE =
  'A conversation between User and Assistant. The user asks a question, and the Assistant solves it. ' +
  'The assistant first thinks about the reasoning process in the mind and then provides the user with ' +
  'the answer. The reasoning process and answer are enclosed within <think> </think> and ' +
  '<answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> ' +
  '<answer> answer here </answer>. User: {prompt}. Assistant:';

/** The instruction part of the template (everything before "User:"), as a chat system message. */
export const R1_ZERO_SYSTEM = R1_ZERO_TEMPLATE.slice(0, R1_ZERO_TEMPLATE.indexOf(' User:'));

/** promptThinkTail's markup without its end anchor (the TRL export's rewards.py compiles the same
 * text). The block's content holds no think tag, so a match starts at the last <think>. */
export const PROMPT_THINK_TAIL_PATTERN =
  '<think>(?:(?:(?!</?think>)[\\s\\S])*</think>)?[ \\t\\n\\v\\f\\r]*';
const PROMPT_THINK_TAIL_RE = new RegExp(`${PROMPT_THINK_TAIL_PATTERN}$`);

/**
 * The think markup a rendered prompt ends with, which belongs to the model's turn (docs/grpo.md §1,
 * format): an opened `<think>` (DeepSeek-R1-Distill's and TinyZero's generation prompts end in
 * one; the model then writes its reasoning and `</think>`), or a whole `<think>…</think>` block
 * (Qwen3's template with enable_thinking false ends in an empty one; the model writes only the
 * answer). '' for any other prompt: the R1-Zero text and the R1 system message quote the tags in
 * their instructions, mid-text, which does not count. Only ASCII whitespace may follow the markup.
 */
export function promptThinkTail(prompt: string): string {
  const m = PROMPT_THINK_TAIL_RE.exec(prompt);
  return m ? m[0] : '';
}

/** The template already adds ". Assistant:"; a question's own final period would double it. */
function templateQuestion(question: string): string {
  const trimmed = question.replace(/[ \t\n\v\f\r]+$/, '');
  return trimmed.endsWith('.') ? trimmed.slice(0, -1) : trimmed;
}

export function formatPrompt(problem: Problem, template: PromptTemplate): FormattedPrompt {
  if (template === 'r1-zero') {
    // A chat-form dataset row in the text template: its non-assistant turns, in order.
    const question = problem.messages
      ? problem.messages
          .filter((m) => m.role !== 'assistant')
          .map((m) => m.content)
          .join('\n')
      : problem.question;
    return {
      kind: 'text',
      text: R1_ZERO_TEMPLATE.replace('{prompt}', () => templateQuestion(question)),
    };
  }
  if (template === 'chat') {
    const turns: ChatMessage[] = problem.messages
      ? problem.messages.map((m) => ({ ...m }))
      : [{ role: 'user', content: problem.question }];
    if (turns[0]?.role !== 'system') turns.unshift({ role: 'system', content: R1_ZERO_SYSTEM });
    return { kind: 'chat', messages: turns };
  }
  throw new RangeError(`unknown prompt template ${String(template)}`);
}
