// Tokenizer from local files only: the tiny byte-level BPE fixture (tests/fixtures/tiny-tokenizer,
// written by make-tiny-tokenizer.mjs) through @huggingface/transformers. Ids are worked out by hand
// from the fixture's layout: 0-2 specials, 3 + byte for single bytes, 259+ one per merge.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadTokenizer, type Tokenizer } from '../../src/formats/tokenizer';
import { ModelFileError } from '../../src/formats/errors';

const dir = 'tests/fixtures/tiny-tokenizer';
const files = new Map<string, Uint8Array>([
  ['tokenizer.json', new Uint8Array(readFileSync(`${dir}/tokenizer.json`))],
  ['tokenizer_config.json', new Uint8Array(readFileSync(`${dir}/tokenizer_config.json`))],
]);
const byteId = (ch: string) => 3 + ch.charCodeAt(0);
const ID = { endoftext: 0, imStart: 1, imEnd: 2, Gthe: 261, he: 260, think: 271, Gan: 264 };

describe('tiny BPE tokenizer from local files', () => {
  let tok: Tokenizer;
  it('loads with the fixture vocab, specials and EOS', async () => {
    tok = await loadTokenizer(files, { eosTokenIds: [ID.endoftext] });
    expect(tok.vocabSize).toBe(272);
    expect(tok.eosTokenIds).toEqual([ID.endoftext, ID.imEnd]);
    expect(tok.bosTokenId).toBe(ID.imStart);
    expect(tok.padTokenId).toBe(ID.imEnd);
    expect(tok.specialTokens.map((t) => t.id).sort()).toEqual([0, 1, 2]);
    expect(tok.hasChatTemplate).toBe(true);
    expect(tok.tokenToId('Ġthe')).toBe(ID.Gthe);
    expect(tok.idToToken(ID.think)).toBe('think');
  });

  it('applies merges in rank order (hand-computed ids)', () => {
    expect(tok.encode(' the')).toEqual([ID.Gthe]);
    // 'the' has no leading space: t + he (the merge 'Ġt he' needs Ġt)
    expect(tok.encode('the')).toEqual([byteId('t'), ID.he]);
    expect(tok.encode('think an')).toEqual([ID.think, ID.Gan]);
    expect(tok.encode('12+3')).toEqual([267, byteId('+'), byteId('3')]);
    // specials in text are matched as whole tokens
    expect(tok.encode('<|im_end|>x')).toEqual([ID.imEnd, byteId('x')]);
  });

  it('round-trips arbitrary text, including non-ASCII, through encode/decode', () => {
    for (const text of [
      'Hello world! 12+3=15',
      '  leading spaces and\ttabs\nnewlines ',
      '<think>the answer</think> <answer>42</answer>',
      'naïve café — 数学 🙂',
    ]) {
      const ids = tok.encode(text);
      expect(ids.every((id) => id >= 0 && id < tok.vocabSize)).toBe(true);
      expect(tok.decode(ids)).toBe(text);
    }
  });

  it('decodes with and without special tokens; one string per token', () => {
    const ids = [ID.imStart, ...tok.encode('the answer'), ID.imEnd];
    expect(tok.decode(ids)).toBe('<|im_start|>the answer<|im_end|>');
    expect(tok.decode(ids, { skipSpecialTokens: true })).toBe('the answer');
    // ' think' → Ġt (rank 0) + h + ink: 'Ġt h' is not a merge, so the 'think' merge never applies.
    expect(tok.tokenStrings(tok.encode(' the think'))).toEqual([' the', ' t', 'h', 'ink']);
    expect(tok.decode([])).toBe('');
  });

  it('renders the chat template (default system prompt, generation prompt) and tokenizes it', () => {
    const messages = [{ role: 'user', content: 'What is 2+2?' }];
    const text = tok.applyChatTemplate(messages, { addGenerationPrompt: true });
    expect(text).toBe(
      '<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n' +
        '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n',
    );
    const ids = tok.encodeChat(messages, { addGenerationPrompt: true });
    expect(ids[0]).toBe(ID.imStart);
    expect(ids.filter((id) => id === ID.imStart)).toHaveLength(3);
    expect(ids.filter((id) => id === ID.imEnd)).toHaveLength(2);
    expect(tok.decode(ids)).toBe(text);
    const withSystem = tok.applyChatTemplate([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ]);
    expect(withSystem).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n',
    );
  });

  it('takes the chat template from chat_template.jinja when tokenizer_config.json has none', async () => {
    const config = JSON.parse(new TextDecoder().decode(files.get('tokenizer_config.json')));
    delete config.chat_template;
    const base = await loadTokenizer(
      new Map([
        ['tokenizer.json', files.get('tokenizer.json')!],
        ['tokenizer_config.json', new TextEncoder().encode(JSON.stringify(config))],
      ]),
    );
    expect(base.hasChatTemplate).toBe(false);
    expect(() => base.applyChatTemplate([{ role: 'user', content: 'x' }])).toThrow(
      /no chat template/,
    );
    const jinja = await loadTokenizer(
      new Map([
        ['tokenizer.json', files.get('tokenizer.json')!],
        ['tokenizer_config.json', new TextEncoder().encode(JSON.stringify(config))],
        [
          'chat_template.jinja',
          new TextEncoder().encode(
            '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}',
          ),
        ],
      ]),
    );
    expect(jinja.applyChatTemplate([{ role: 'user', content: 'q' }])).toBe('[user]q');
  });

  it('missing tokenizer.json gives a ModelFileError naming it', async () => {
    await expect(loadTokenizer(new Map())).rejects.toThrow(ModelFileError);
    await expect(loadTokenizer(new Map())).rejects.toThrow(/^tokenizer\.json: missing/);
  });
});
