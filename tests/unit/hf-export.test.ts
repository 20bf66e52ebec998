// HF export → load round trip: the exported folder loads back with identical config, weights,
// generation defaults and tokenizer files (F32 exactly; BF16 to bf16 precision; sharded).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { exportHfFolder } from '../../src/export/hf-export';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { filesSource } from '../../src/formats/model-source';
import { ModelFileError } from '../../src/formats/errors';
import { parameterSpecs, parseHfConfig, type LlamaConfig } from '../../src/core/model-config';

const qwen = parseHfConfig({
  architectures: ['Qwen2ForCausalLM'],
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  vocab_size: 272,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
  rope_theta: 1000000,
  rms_norm_eps: 1e-6,
  bos_token_id: null,
  eos_token_id: [2, 0],
});

function randomWeights(config: LlamaConfig) {
  let s = 12345;
  const out = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(config)) {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      data[i] = (s / 2 ** 31 - 0.5) * 0.2; // not exactly representable in bf16
    }
    out.set(spec.name, data);
  }
  return out;
}

const tokenizerFiles = new Map([
  ['tokenizer.json', new Uint8Array(readFileSync('tests/fixtures/tiny-tokenizer/tokenizer.json'))],
  [
    'tokenizer_config.json',
    new Uint8Array(readFileSync('tests/fixtures/tiny-tokenizer/tokenizer_config.json')),
  ],
]);

const load = (files: Map<string, Uint8Array>) =>
  loadHfFolder(filesSource([...files].map(([name, bytes]) => new File([bytes.slice()], name))));

describe('exportHfFolder', () => {
  it('F32 export → load is identical (config, weights, generation, tokenizer files)', async () => {
    const tensors = randomWeights(qwen);
    const files = exportHfFolder({
      config: qwen,
      tensors,
      tokenizerFiles,
      generation: { temperature: 0.6, topP: 0.95, doSample: true },
    });
    expect([...files.keys()]).toEqual([
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    const model = await load(files);
    expect(model.config).toEqual(qwen);
    expect([...model.tensors.keys()]).toEqual([...tensors.keys()]);
    for (const [name, data] of tensors) expect(model.tensors.get(name)).toEqual(data);
    expect(model.generation).toMatchObject({
      eosTokenIds: [2, 0],
      temperature: 0.6,
      topP: 0.95,
      doSample: true,
    });
    expect(model.tokenizerFiles).toEqual(tokenizerFiles);
    const configJson = JSON.parse(new TextDecoder().decode(files.get('config.json')));
    expect(configJson).toMatchObject({ model_type: 'qwen2', torch_dtype: 'float32' });
  });

  it('BF16 sharded export loads back within bf16 rounding (half an ulp: ≤ 2^-8 relative)', async () => {
    const llama = { ...qwen, architecture: 'LlamaForCausalLM' as const, attentionBias: false };
    const tensors = randomWeights(llama);
    const files = exportHfFolder({ config: llama, tensors, dtype: 'BF16', maxShardBytes: 6000 });
    const shards = [...files.keys()].filter((f) => f.endsWith('.safetensors'));
    expect(shards.length).toBeGreaterThan(1);
    expect(shards[0]).toBe(`model-00001-of-${String(shards.length).padStart(5, '0')}.safetensors`);
    const index = JSON.parse(new TextDecoder().decode(files.get('model.safetensors.index.json')));
    expect(index.metadata.total_size).toBe(
      [...tensors.values()].reduce((a, t) => a + t.length * 2, 0),
    );
    const model = await loadHfFolder(
      filesSource([...files].map(([name, bytes]) => new File([bytes.slice()], name))),
      { requireTokenizer: false },
    );
    expect(model.config).toEqual(llama);
    for (const [name, data] of tensors) {
      const got = model.tensors.get(name)!;
      expect(model.storedDtypes.get(name)).toBe('BF16');
      for (let i = 0; i < data.length; i++) {
        expect(Math.abs(got[i] - data[i])).toBeLessThanOrEqual(Math.abs(data[i]) * 2 ** -8);
      }
    }
  });

  it('refuses to export a missing or mis-sized tensor', () => {
    const tensors = randomWeights(qwen);
    tensors.set('model.norm.weight', new Float32Array(7));
    expect(() => exportHfFolder({ config: qwen, tensors })).toThrow(
      "model.safetensors (tensor 'model.norm.weight'): has 7 values but shape [8] needs 8",
    );
    tensors.delete('model.norm.weight');
    expect(() => exportHfFolder({ config: qwen, tensors })).toThrow(ModelFileError);
  });
});
