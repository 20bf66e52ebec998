// The name a model loaded from local files goes by (src/app/lib/model-name.ts) and what an exported
// adapter_config.json's base_model_name_or_path says (baseModelName in src/export/peft-adapter.ts):
// the folder's name, else config.json's _name_or_path, else architecture and size; never
// "4 selected files".
import { describe, expect, it } from 'vitest';
import {
  describeChosen,
  describedName,
  folderName,
  nameFromConfig,
} from '../../src/app/lib/model-name';
import { baseModelName, exportPeftAdapter, PEFT_CONFIG_FILE } from '../../src/export/peft-adapter';
import { parseHfConfig } from '../../src/core/model-config';
import { loraAdapterSpecs, type LoraOptions } from '../../src/core/lora';

const picked = (...paths: string[]) =>
  paths.map((p) => ({ name: p.split('/').pop()!, webkitRelativePath: p }));
const loose = (...names: string[]) => names.map((name) => ({ name }));

describe('model name', () => {
  it("is the picked directory's name (webkitRelativePath's first segment)", () => {
    const files = picked('SmolLM2-135M/config.json', 'SmolLM2-135M/model.safetensors');
    expect(folderName(files)).toBe('SmolLM2-135M');
    expect(describeChosen(files)).toBe('folder SmolLM2-135M (2 files)');
  });

  it("is the dropped directory's name (the paths inside the drop)", () => {
    const files = loose('config.json', 'model.safetensors', 'tokenizer.json');
    const paths = ['tiny/config.json', 'tiny/weights/model.safetensors', 'tiny/tokenizer.json'];
    expect(folderName(files, paths)).toBe('tiny');
  });

  it('has no folder for loose files, or files from several folders', () => {
    expect(folderName(loose('config.json', 'model.safetensors'))).toBeNull();
    expect(folderName(picked('a/config.json', 'b/model.safetensors'))).toBeNull();
    expect(folderName(loose('config.json'), ['config.json'])).toBeNull();
    expect(folderName([])).toBeNull();
    expect(describeChosen(loose('config.json', 'a', 'b', 'c'))).toBe('4 selected files');
  });

  it("falls back to config.json's _name_or_path: a hub id whole, a local path's last part", () => {
    expect(nameFromConfig({ _name_or_path: 'HuggingFaceTB/SmolLM2-135M' })).toBe(
      'HuggingFaceTB/SmolLM2-135M',
    );
    expect(nameFromConfig({ _name_or_path: '/home/me/models/qwen-tiny/' })).toBe('qwen-tiny');
    expect(nameFromConfig({ _name_or_path: './out/checkpoint-500' })).toBe('checkpoint-500');
    expect(nameFromConfig({ _name_or_path: 'C:\\models\\llama' })).toBe('llama');
    expect(nameFromConfig({ _name_or_path: '  ' })).toBeNull();
    expect(nameFromConfig({ _name_or_path: 3 })).toBeNull();
    expect(nameFromConfig({})).toBeNull();
    expect(nameFromConfig(null)).toBeNull();
  });

  it('else says what the model is', () => {
    expect(describedName('LlamaForCausalLM', 1_254_000)).toBe(
      'LlamaForCausalLM (1.25 M parameters)',
    );
  });
});

describe("adapter_config.json's base_model_name_or_path", () => {
  it('keeps a folder name or path, makes a hub URL its id, drops "(bundled)"', () => {
    expect(baseModelName('SmolLM2-135M')).toBe('SmolLM2-135M');
    expect(baseModelName('/data/models/SmolLM2-135M')).toBe('/data/models/SmolLM2-135M');
    expect(baseModelName('https://huggingface.co/HuggingFaceTB/SmolLM2-135M/resolve/main/')).toBe(
      'HuggingFaceTB/SmolLM2-135M',
    );
    expect(baseModelName('https://huggingface.co/Qwen/Qwen2.5-0.5B')).toBe('Qwen/Qwen2.5-0.5B');
    expect(baseModelName('https://example.org/models/x/')).toBe('https://example.org/models/x/');
    expect(baseModelName('tiny-reasoner (bundled)')).toBe('tiny-reasoner');
    expect(baseModelName('')).toBeNull();
    expect(baseModelName(null)).toBeNull();
  });

  it('is what an exported adapter of a folder model carries', () => {
    const config = parseHfConfig({
      architectures: ['LlamaForCausalLM'],
      hidden_size: 8,
      intermediate_size: 16,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 2,
      vocab_size: 11,
      max_position_embeddings: 16,
    });
    const options: LoraOptions = {
      r: 2,
      alpha: 4,
      targetModules: ['q_proj'],
      useRslora: false,
      dropout: 0,
    };
    const adapters = new Map(
      loraAdapterSpecs(config, options).map((s) => [
        s.name,
        new Float32Array(s.shape[0] * s.shape[1]),
      ]),
    );
    const lora = { options, adapters };
    const name = folderName(picked('my-model/config.json', 'my-model/model.safetensors'));
    const files = exportPeftAdapter({ config, lora, baseModelNameOrPath: name });
    const written = JSON.parse(new TextDecoder().decode(files.get(PEFT_CONFIG_FILE)));
    expect(written.base_model_name_or_path).toBe('my-model');
  });
});
