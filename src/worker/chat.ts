// The chat box's one sampling request, shared by the trainer worker (GPU sampler) and the CPU
// fallback (reference sampler): the same length check, the same sampling settings (temperature 0 is
// greedy; no top-k/top-p, so the reply shows the model as it is) and the same reply shape.
import type { ChatOptions, ChatReply } from './protocol';

interface ChatTokenizer {
  eosTokenIds: number[];
  padTokenId: number;
  decode(ids: ArrayLike<number>, options: { skipSpecialTokens: boolean }): string;
}

interface ChatSampler {
  generate(
    prompts: number[][],
    options: ReturnType<typeof chatSampleOptions>,
  ): Promise<{ completions: number[][]; finished: boolean[] }>;
}

/** Refuses an empty message or one the model's positions cannot hold, before any sampling. */
export function checkChatLength(ids: readonly number[], maxPositions: number): void {
  if (ids.length === 0) throw new Error('Type a message first.');
  if (ids.length >= maxPositions)
    throw new Error(`The message is longer than the model's ${maxPositions} positions.`);
}

export function chatSampleOptions(
  opts: ChatOptions,
  tokenizer: Pick<ChatTokenizer, 'eosTokenIds' | 'padTokenId'>,
  maxNewTokens: number,
) {
  return {
    maxNewTokens,
    temperature: Math.max(opts.temperature, 1e-3),
    greedy: opts.temperature === 0,
    topK: 0,
    topP: 1,
    // A fresh draw for every message: chat is for trying the model, not for reproducing a run.
    seed: (Math.random() * 2 ** 31) | 0,
    stream: 0,
    eosTokenIds: tokenizer.eosTokenIds,
    padTokenId: tokenizer.padTokenId,
  };
}

/** Samples one reply to `ids` and decodes it as text (never HTML: the page renders it as text). */
export async function sampleChatReply(
  sampler: ChatSampler,
  tokenizer: ChatTokenizer,
  prompt: string,
  ids: number[],
  opts: ChatOptions,
  maxNewTokens: number,
): Promise<ChatReply> {
  const out = await sampler.generate([ids], chatSampleOptions(opts, tokenizer, maxNewTokens));
  return {
    prompt,
    text: tokenizer.decode(out.completions[0], { skipSpecialTokens: true }),
    tokens: out.completions[0].length,
    truncated: !out.finished[0],
  };
}
