// A tiny random Llama as a Hugging Face folder (config, safetensors, the bundled model's word-level
// tokenizer, so R1-Zero prompts are a few dozen tokens and steps are fast): as in-memory files for
// the worker API (a ModelSource of blobs) and written to disk for the command line.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportHfFolder } from '../../src/export/hf-export';
import { loadTokenizer } from '../../src/formats/tokenizer';
import type { LlamaConfig } from '../../src/core/model-config';
import { initLlamaWeights } from '../../src/model/init';
import { tinyTokenizerFiles } from '../../src/tasks/traces';

const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

export const tokenizerFiles = (() => {
  const files = tinyTokenizerFiles();
  return new Map<string, Uint8Array>([
    ['tokenizer.json', json(files.tokenizerJson)],
    ['tokenizer_config.json', json(files.tokenizerConfig)],
  ]);
})();

/** The folder's config and files; `blobs` are File-like objects for filesSource. */
export async function tinyHfFolder(overrides: Partial<LlamaConfig> = {}) {
  const tokenizer = await loadTokenizer(tokenizerFiles);
  const config: LlamaConfig = {
    architecture: 'LlamaForCausalLM',
    hiddenSize: 16,
    intermediateSize: 32,
    numLayers: 1,
    numHeads: 2,
    numKvHeads: 1,
    headDim: 8,
    vocabSize: tokenizer.vocabSize,
    maxPositions: 128,
    ropeTheta: 10000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: true,
    attentionBias: false,
    bosTokenId: null,
    eosTokenIds: tokenizer.eosTokenIds,
    ...overrides,
  };
  const files = exportHfFolder({ config, tensors: initLlamaWeights(config, 5), tokenizerFiles });
  return {
    config,
    files,
    blobs: [...files].map(([name, bytes]) => ({
      name,
      size: bytes.byteLength,
      arrayBuffer: async () => bytes.slice().buffer,
    })),
    /** Writes the folder to `dir` (created) and returns it. */
    writeTo(dir: string): string {
      mkdirSync(dir, { recursive: true });
      for (const [name, bytes] of files) writeFileSync(join(dir, name), bytes);
      return dir;
    },
  };
}

/**
 * Gives the folder at `dir` another tokenizer: every ordinary entry's id in tokenizer.json reversed
 * (the added tokens keep theirs), so numbers encode differently. Returns `dir`.
 */
export function reverseVocabulary(dir: string): string {
  const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
  const vocab = tok.model.vocab as Record<string, number>;
  const added = new Set((tok.added_tokens as { content: string }[]).map((t) => t.content));
  const keys = Object.keys(vocab).filter((k) => !added.has(k));
  const ids = keys.map((k) => vocab[k]).reverse();
  keys.forEach((k, i) => (vocab[k] = ids[i]));
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tok));
  return dir;
}
