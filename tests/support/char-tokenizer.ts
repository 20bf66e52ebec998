// A real, minimal character-level tokenizer for engine and trainer tests: id 0 is EOS (also used
// for padding), then one id per character of the alphabet. Unknown characters are an error.
import type { TrainerTokenizer } from '../../src/grpo/trainer';

export class CharTokenizer implements TrainerTokenizer {
  readonly eosTokenIds = [0];
  readonly padTokenId = 0;
  private readonly ids = new Map<string, number>();

  constructor(readonly alphabet: string) {
    [...alphabet].forEach((ch, i) => this.ids.set(ch, i + 1));
  }

  get vocabSize(): number {
    return this.ids.size + 1;
  }

  encode(text: string): number[] {
    return [...text].map((ch) => {
      const id = this.ids.get(ch);
      if (id === undefined) throw new Error(`CharTokenizer: '${ch}' is not in the alphabet`);
      return id;
    });
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    return ids
      .filter((id) => !(options.skipSpecialTokens && id === 0))
      .map((id) => (id === 0 ? '<eos>' : this.alphabet[id - 1]))
      .join('');
  }
}
