// SFT data as TRL's SFTTrainer reads it, on a real tokenizer with a ChatML chat template
// (tests/fixtures/tiny-tokenizer): the four row formats, line-numbered errors, completion-only and
// assistant-only loss masks read back as text, EOS appended to plain completions, max_length.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, type Tokenizer } from '../../src/formats/tokenizer';
import {
  parseSftJsonl,
  SFT_TOKENIZE_DEFAULTS,
  tokenizeSftRow,
  type SftExample,
  type SftRow,
} from '../../src/train/sft-data';
import type { TrainerTokenizer } from '../../src/grpo/trainer';

const DIR = 'tests/fixtures/tiny-tokenizer';
let tok: Tokenizer;

beforeAll(async () => {
  const files = new Map(
    ['tokenizer.json', 'tokenizer_config.json'].map((f) => [
      f,
      new Uint8Array(readFileSync(`${DIR}/${f}`)),
    ]),
  );
  tok = await loadTokenizer(files, { eosTokenIds: [2] }); // <|im_end|>
});

const text = (ids: number[]) => tok.decode(ids, { skipSpecialTokens: false });
/** The text of the tokens that carry loss, and of those that do not, in the completion part. */
function split(e: SftExample) {
  const on = e.completion.filter((_, i) => e.mask[i] === 1);
  const off = e.completion.filter((_, i) => e.mask[i] === 0);
  return { prompt: text(e.prompt), loss: text(on), noLoss: text(off) };
}

describe('parseSftJsonl', () => {
  it('reads the four formats and names every bad line', () => {
    const file =
      '\uFEFF{"prompt": "2+2=", "completion": " 4"}\r' +
      '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n' +
      '{"text": "abc"}\r\n' +
      '{"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}\n' +
      '\n' +
      'not json\n' +
      '{"prompt": "x"}\n' +
      '{"messages": [{"role": "user", "content": "only a question"}]}\n' +
      '{"prompt": "x", "completion": ""}\n';
    const { rows, issues } = parseSftJsonl(file);
    expect(rows.map((r) => [r.kind, r.line])).toEqual([
      ['prompt-completion', 1],
      ['messages', 2],
      ['text', 3],
      ['chat-prompt-completion', 4],
    ]);
    expect(issues.map((i) => i.line)).toEqual([6, 7, 8, 9]);
    expect(issues[0].message).toMatch(/^not valid JSON/);
    expect(issues.slice(1).map((i) => i.message)).toEqual([
      'expected "prompt" and "completion", "messages" or "text"',
      '"messages" has no assistant turn',
      '"completion" is empty',
    ]);
  });
});

describe('tokenizeSftRow', () => {
  const pc: SftRow = {
    kind: 'prompt-completion',
    line: 1,
    prompt: 'What is 2+2?',
    completion: ' 4',
  };
  const conversation: SftRow = {
    kind: 'messages',
    line: 2,
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      { role: 'user', content: 'bye' },
      { role: 'assistant', content: 'ciao' },
    ],
  };

  it('prompt-completion: loss on the completion and the appended EOS only (TRL default)', () => {
    const e = tokenizeSftRow(pc, tok)!;
    expect(split(e)).toEqual({ prompt: 'What is 2+2?', loss: ' 4<|im_end|>', noLoss: '' });
    expect(e.tokens).toBe(e.prompt.length + e.completion.length);
    expect(e.completion[e.completion.length - 1]).toBe(2);
  });

  it('completion_only_loss false: every token but the first carries loss', () => {
    const e = tokenizeSftRow(pc, tok, { ...SFT_TOKENIZE_DEFAULTS, completionOnlyLoss: false })!;
    expect(e.prompt).toHaveLength(1);
    expect(text(e.prompt) + split(e).loss).toBe('What is 2+2? 4<|im_end|>');
    expect(e.mask.every((m) => m === 1)).toBe(true);
  });

  it('messages with assistant_only_loss: loss on the assistant turns exactly', () => {
    const e = tokenizeSftRow(conversation, tok, {
      ...SFT_TOKENIZE_DEFAULTS,
      assistantOnlyLoss: true,
    })!;
    const s = split(e);
    expect(s.prompt).toBe(
      '<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(s.loss).toBe('hello<|im_end|>\nciao<|im_end|>\n');
    expect(s.noLoss).toBe('<|im_start|>user\nbye<|im_end|>\n<|im_start|>assistant\n');
    // Without it (TRL's default) the whole conversation after the first token carries loss.
    const all = tokenizeSftRow(conversation, tok)!;
    expect(all.prompt).toHaveLength(1);
    expect(all.mask.every((m) => m === 1)).toBe(true);
  });

  it('conversational prompt-completion: loss on the completion turn', () => {
    const e = tokenizeSftRow(
      {
        kind: 'chat-prompt-completion',
        line: 3,
        prompt: [{ role: 'user', content: 'q' }],
        completion: [{ role: 'assistant', content: 'a' }],
      },
      tok,
    )!;
    expect(split(e)).toEqual({
      prompt:
        '<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n',
      loss: 'a<|im_end|>\n',
      noLoss: '',
    });
  });

  it('max_length truncates from the end; a row left without loss tokens is null', () => {
    const full = tokenizeSftRow(pc, tok)!;
    const cut = tokenizeSftRow(pc, tok, { ...SFT_TOKENIZE_DEFAULTS, maxLength: full.tokens - 1 })!;
    expect(cut.tokens).toBe(full.tokens - 1);
    expect(cut.completion).toEqual(full.completion.slice(0, -1));
    expect(
      tokenizeSftRow(pc, tok, { ...SFT_TOKENIZE_DEFAULTS, maxLength: full.prompt.length }),
    ).toBeNull();
  });

  it('a chat row without a chat template is refused with the reason', () => {
    // A base model's tokenizer: encode/decode only (TrainerTokenizer's chat methods are optional).
    const plain: TrainerTokenizer = {
      eosTokenIds: tok.eosTokenIds,
      padTokenId: tok.padTokenId,
      encode: (t, o) => tok.encode(t, o),
      decode: (ids, o) => tok.decode(ids, o),
    };
    expect(() => tokenizeSftRow(conversation, plain)).toThrow(
      'SFT: a "messages" row needs a tokenizer with a chat template',
    );
  });
});
