// The model's tokenizer, built with @huggingface/transformers from the tokenizer files of a model
// folder (never from the network: remote loading is switched off and the tokenizer is constructed
// from the parsed tokenizer.json / tokenizer_config.json objects). Encode, decode, special tokens,
// EOS ids, and the chat template of instruct models (Jinja, as transformers' apply_chat_template).
// transformers is imported lazily: it is large, and only a loaded model needs it.

import { ModelFileError } from './errors';
import { parseJsonFile } from './model-source';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | (string & {});
  content: string;
}

export interface SpecialToken {
  id: number;
  content: string;
}

export interface Tokenizer {
  /** Number of ids the tokenizer can produce (model vocab + added tokens); ≤ config vocab_size. */
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  /** Ids that end a completion: generation_config's / config's EOS first, then the tokenizer's. */
  readonly eosTokenIds: number[];
  /** Pad id (tokenizer's pad token, else the first EOS). */
  readonly padTokenId: number;
  readonly specialTokens: SpecialToken[];
  readonly hasChatTemplate: boolean;
  /** Text → ids. `addSpecialTokens` (default true) adds BOS etc. as the model's post-processor says. */
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  /** Ids → text. */
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /**
   * One string per id (the Inspect and Learn token strips), whose concatenation is the decoded
   * text (tokenPieces): spaces kept for every tokenizer family; a token holding only part of a
   * character's bytes shows '' and the token that completes the character shows all of it.
   */
  tokenStrings(ids: readonly number[]): string[];
  idToToken(id: number): string | null;
  tokenToId(token: string): number | null;
  /** The chat template rendered as text (no tokenization). Throws if the model has no template. */
  applyChatTemplate(messages: ChatMessage[], options?: ChatTemplateOptions): string;
  /** The rendered chat template tokenized without adding special tokens again (as transformers). */
  encodeChat(messages: ChatMessage[], options?: ChatTemplateOptions): number[];
}

export interface ChatTemplateOptions {
  /** End with the assistant turn's opening (what the model continues); default false. */
  addGenerationPrompt?: boolean;
  /**
   * The template variable `enable_thinking` (Qwen3's thinking switch: false makes its generation
   * prompt end in an empty <think>\n\n</think> block). Left undefined when not given, as
   * transformers does; templates that do not read it ignore it.
   */
  enableThinking?: boolean;
}

/**
 * The first token id of the tokenizer files that lies outside a model's vocabulary, as a
 * ModelFileError naming the file and the token, or null when all fit. Checked at load: an id ≥
 * vocab_size would otherwise only fail once a prompt containing that token reached the embedding.
 * Reads tokenizer.json's model.vocab (token → id, or a Unigram list whose index is the id) and
 * added_tokens, and tokenizer_config.json's added_tokens_decoder.
 */
export function tokenizerIdProblem(
  files: ReadonlyMap<string, Uint8Array>,
  vocabSize: number,
): ModelFileError | null {
  const outside = (file: string, token: string, id: unknown) =>
    new ModelFileError(
      file,
      `token ${JSON.stringify(token)} has id ${JSON.stringify(id)}, outside vocab_size ${vocabSize} of ` +
        `config.json (ids 0…${vocabSize - 1}): the tokenizer does not belong to this model`,
    );
  const bad = (id: unknown) =>
    typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocabSize;
  const tokenizerBytes = files.get('tokenizer.json');
  if (tokenizerBytes) {
    const json = parseJsonFile(tokenizerBytes, 'tokenizer.json') as Record<string, unknown> | null;
    if (typeof json !== 'object' || json === null || Array.isArray(json)) {
      return new ModelFileError('tokenizer.json', 'expected a JSON object');
    }
    const model = json.model as Record<string, unknown> | null | undefined;
    const vocab = model && typeof model === 'object' ? model.vocab : undefined;
    if (Array.isArray(vocab)) {
      // Unigram: [[piece, score], …]; the id is the position.
      if (vocab.length > vocabSize) {
        const piece = vocab[vocabSize];
        return outside('tokenizer.json', Array.isArray(piece) ? String(piece[0]) : '?', vocabSize);
      }
    } else if (vocab && typeof vocab === 'object') {
      for (const [token, id] of Object.entries(vocab as Record<string, unknown>)) {
        if (bad(id)) return outside('tokenizer.json', token, id);
      }
    }
    if (Array.isArray(json.added_tokens)) {
      for (const t of json.added_tokens as Record<string, unknown>[]) {
        if (t && typeof t === 'object' && bad(t.id)) {
          return outside('tokenizer.json', String(t.content), t.id);
        }
      }
    }
  }
  const configBytes = files.get('tokenizer_config.json');
  if (configBytes) {
    const json = parseJsonFile(configBytes, 'tokenizer_config.json') as Record<string, unknown>;
    const decoder = json && typeof json === 'object' ? json.added_tokens_decoder : undefined;
    if (decoder && typeof decoder === 'object') {
      for (const [id, t] of Object.entries(decoder as Record<string, unknown>)) {
        if (bad(Number(id))) {
          const content = (t as { content?: unknown } | null)?.content;
          return outside('tokenizer_config.json', String(content ?? ''), Number(id));
        }
      }
    }
  }
  return null;
}

/**
 * Each token's text as the difference of decoded prefixes, so that the pieces concatenate to the
 * decoded text (issue 35). Decoding one token alone loses text: a SentencePiece decoder (Llama 2,
 * TinyLlama) strips the leading space of the first token it sees, so "▁saw" alone reads "saw" and
 * the token strips glued words together. Here each token is decoded after the tokens of the piece
 * before it, and its text is what it adds: the window's first token loses its space in both
 * decodes, so the difference keeps the new token's own. As in incremental detokenizers (vLLM,
 * TGI), a token whose decode ends in U+FFFD (part of a character's bytes) waits for the tokens that
 * complete the character: it gets '' and the completing token the whole character. Two short
 * decodes per token, linear in the length (decoding every prefix would be quadratic).
 *
 * `decode` must not clean up spaces (that reaches back into the previous piece). `full`, the text
 * as the tokenizer decodes it with its clean-up (" ." → "."), is then matched by dropping the
 * spaces the clean-up removed from the pieces; a text that differs otherwise keeps the raw pieces.
 */
export function tokenPieces(
  decode: (ids: readonly number[]) => string,
  ids: readonly number[],
  full?: string,
): string[] {
  const pieces: string[] = new Array<string>(ids.length).fill('');
  // ids[prefixStart, readStart) are the last shown piece's tokens (context, decodes to
  // prefixText); ids[readStart, t] the tokens not shown yet.
  let prefixStart = 0;
  let readStart = 0;
  let prefixText = '';
  for (let t = 0; t < ids.length; t++) {
    const text = decode(ids.slice(prefixStart, t + 1));
    if (text.endsWith('\uFFFD') && t < ids.length - 1) continue; // part of a character: wait
    if (text.startsWith(prefixText)) {
      pieces[t] = text.slice(prefixText.length);
      prefixStart = readStart;
      readStart = t + 1;
      prefixText = decode(ids.slice(prefixStart, readStart));
    } else {
      // The context decoded differently once followed (no decoder this project loads does this
      // without clean-up): show the token alone and restart the context from it.
      pieces[t] = decode([ids[t]]);
      prefixStart = t;
      readStart = t + 1;
      prefixText = pieces[t];
    }
  }
  if (full === undefined || pieces.join('') === full) return pieces;
  const aligned: string[] = [];
  let pos = 0;
  for (const piece of pieces) {
    let kept = '';
    for (const ch of piece) {
      if (full.startsWith(ch, pos)) {
        kept += ch;
        pos += ch.length;
      } else if (ch !== ' ') return pieces;
    }
    aligned.push(kept);
  }
  return pos === full.length ? aligned : pieces;
}

export interface TokenizerOptions {
  /** EOS ids from generation_config.json / config.json, listed before the tokenizer's own. */
  eosTokenIds?: number[];
  /** Overrides the tokenizer's chat template (e.g. a base model the user wants to chat-format). */
  chatTemplate?: string;
}

// Minimal view of transformers' PreTrainedTokenizer, the part this module calls.
interface HfTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): number[];
  decode(
    ids: number[],
    options?: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean },
  ): string;
  apply_chat_template(
    messages: ChatMessage[],
    options: {
      tokenize: false;
      add_generation_prompt?: boolean;
      chat_template?: string | null;
      enable_thinking?: boolean;
    },
  ): string;
  get_vocab(): Map<string, number>;
  chat_template: unknown;
  bos_token_id: number | undefined;
  eos_token_id: number | undefined;
  pad_token_id: number | undefined;
  all_special_ids: number[];
  all_special_tokens: string[];
}

async function transformers() {
  const mod = await import('@huggingface/transformers');
  // Belt and braces: this module never calls from_pretrained, and nothing else may fetch either.
  mod.env.allowRemoteModels = false;
  return mod;
}

const isId = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * Builds a tokenizer from parsed tokenizer.json and tokenizer_config.json objects. The class is
 * picked from tokenizer_config's `tokenizer_class` as AutoTokenizer does (LlamaTokenizerFast →
 * LlamaTokenizer …), falling back to the generic PreTrainedTokenizer.
 */
export async function createTokenizer(
  tokenizerJson: unknown,
  tokenizerConfig: Record<string, unknown>,
  options: TokenizerOptions = {},
): Promise<Tokenizer> {
  const mod = await transformers();
  const config = { ...tokenizerConfig };
  if (options.chatTemplate !== undefined) config.chat_template = options.chatTemplate;
  const className =
    typeof config.tokenizer_class === 'string'
      ? config.tokenizer_class.replace(/Fast$/, '')
      : 'PreTrainedTokenizer';
  const classes = mod as unknown as Record<string, unknown>;
  const Cls = (
    typeof classes[className] === 'function' && /Tokenizer$/.test(className)
      ? classes[className]
      : mod.PreTrainedTokenizer
  ) as new (json: unknown, cfg: unknown) => HfTokenizer;
  let hf: HfTokenizer;
  try {
    hf = new Cls(tokenizerJson, config);
  } catch (err) {
    throw new ModelFileError(
      'tokenizer.json',
      `could not build the tokenizer (${err instanceof Error ? err.message : String(err)})`,
    );
  }

  const vocab = hf.get_vocab();
  const idToTokenMap = new Map<number, string>();
  for (const [token, id] of vocab) idToTokenMap.set(id, token);
  // A loop, not Math.max(...ids): spreading 128k arguments (Llama 3, Qwen) overflows the stack.
  let vocabSize = 0;
  for (const id of idToTokenMap.keys()) if (id + 1 > vocabSize) vocabSize = id + 1;
  const specialTokens = hf.all_special_ids.map((id, i) => ({
    id,
    content: hf.all_special_tokens[i],
  }));
  const eosTokenIds = [...(options.eosTokenIds ?? [])];
  if (isId(hf.eos_token_id) && !eosTokenIds.includes(hf.eos_token_id)) {
    eosTokenIds.push(hf.eos_token_id);
  }
  const bosTokenId = isId(hf.bos_token_id) ? hf.bos_token_id : null;
  const padTokenId = isId(hf.pad_token_id) ? hf.pad_token_id : (eosTokenIds[0] ?? 0);
  const hasChatTemplate =
    typeof hf.chat_template === 'string' ||
    (typeof hf.chat_template === 'object' && hf.chat_template !== null);

  const applyChatTemplate = (messages: ChatMessage[], opts: ChatTemplateOptions = {}) => {
    if (!hasChatTemplate) {
      throw new ModelFileError(
        'tokenizer_config.json',
        'this model has no chat template (a base model?): use plain prompts, or pass chatTemplate',
      );
    }
    return hf.apply_chat_template(messages, {
      tokenize: false,
      add_generation_prompt: opts.addGenerationPrompt ?? false,
      // Passed on only when set: a template may test `enable_thinking is defined`.
      ...(opts.enableThinking === undefined ? {} : { enable_thinking: opts.enableThinking }),
    });
  };

  return {
    vocabSize,
    bosTokenId,
    eosTokenIds,
    padTokenId,
    specialTokens,
    hasChatTemplate,
    encode: (text, opts = {}) =>
      hf.encode(text, { add_special_tokens: opts.addSpecialTokens ?? true }),
    decode: (ids, opts = {}) =>
      ids.length === 0
        ? ''
        : hf.decode([...ids], { skip_special_tokens: opts.skipSpecialTokens ?? false }),
    tokenStrings: (ids) =>
      tokenPieces(
        (window) =>
          hf.decode([...window], {
            skip_special_tokens: false,
            clean_up_tokenization_spaces: false,
          }),
        ids,
        ids.length === 0 ? '' : hf.decode([...ids], { skip_special_tokens: false }),
      ),
    idToToken: (id) => idToTokenMap.get(id) ?? null,
    tokenToId: (token) => vocab.get(token) ?? null,
    applyChatTemplate,
    encodeChat: (messages, opts) =>
      hf.encode(applyChatTemplate(messages, opts), { add_special_tokens: false }),
  };
}

/**
 * Builds the tokenizer from a model folder's tokenizer files (LoadedHfModel.tokenizerFiles):
 * tokenizer.json (required), tokenizer_config.json, and chat_template.jinja / chat_template.json,
 * which newer repositories use instead of a template inside tokenizer_config.json.
 */
export async function loadTokenizer(
  files: ReadonlyMap<string, Uint8Array>,
  options: TokenizerOptions = {},
): Promise<Tokenizer> {
  const tokenizerBytes = files.get('tokenizer.json');
  if (!tokenizerBytes) {
    throw new ModelFileError(
      'tokenizer.json',
      'missing: the model needs tokenizer.json (the Hugging Face "fast" tokenizer file)',
    );
  }
  const tokenizerJson = parseJsonFile(tokenizerBytes, 'tokenizer.json');
  const configBytes = files.get('tokenizer_config.json');
  const config: Record<string, unknown> = {};
  if (configBytes) {
    const parsed = parseJsonFile(configBytes, 'tokenizer_config.json');
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new ModelFileError('tokenizer_config.json', 'expected a JSON object');
    }
    Object.assign(config, parsed);
  }
  // special_tokens_map.json fills tokens tokenizer_config.json leaves out (older repositories).
  const specialBytes = files.get('special_tokens_map.json');
  if (specialBytes) {
    const special = parseJsonFile(specialBytes, 'special_tokens_map.json');
    if (typeof special === 'object' && special !== null) {
      for (const [k, v] of Object.entries(special as Record<string, unknown>)) {
        if (config[k] === undefined) config[k] = v;
      }
    }
  }
  if (config.chat_template === undefined) {
    const jinja = files.get('chat_template.jinja');
    const json = files.get('chat_template.json');
    if (jinja) config.chat_template = new TextDecoder().decode(jinja);
    else if (json) {
      const parsed = parseJsonFile(json, 'chat_template.json') as { chat_template?: unknown };
      if (typeof parsed?.chat_template === 'string') config.chat_template = parsed.chat_template;
    }
  }
  return createTokenizer(tokenizerJson, config, options);
}
