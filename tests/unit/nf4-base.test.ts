// NF4 bases without a GPU (issue #37). Merged export: a run whose frozen projections are stored NF4
// exports its merged model as BF16 safetensors, each adapted projection bf16(dequantised W + s·B·A)
// as PEFT's merge of a 4-bit base into a bf16 model gives it, the other tensors bf16 of what the
// run read back; an f32 / bf16-stored base keeps the exact F32 export. Refusals: dtype nf4 without
// LoRA (resolveConfig) and a pre-quantised checkpoint's full fine-tune (Run's checkQuantisedBase).
// A pre-quantised checkpoint keeps its NF4 base whatever dtype says, in storage and in the plan.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { numel, parameterSpecs, parseHfConfig } from '../../src/core/model-config';
import { loraAdapterSpecs, loraScaling, type LoraOptions } from '../../src/core/lora';
import { exportDtypeOf, exportHfFolder } from '../../src/export/hf-export';
import { parseSafetensorsWeights } from '../../src/formats/safetensors';
import { NF4_NEEDS_PEFT, resolveConfig } from '../../src/grpo/config';
import {
  frozenDtypeOf,
  isNf4Quantised,
  storedDtypeOf,
  toF32,
  toNf4,
  type WeightTensor,
} from '../../src/model/parameters';
import { planRunMemory } from '../../src/train/run';
import { checkQuantisedBase } from '../../src/model/parameters';
import { BNB_NF4_PEAK_BYTES, BNB_RUN_OPTIONS } from '../e2e/support/bnb-plan';
import { bf16BitsToF32, f32ToBf16Bits, type HalfTensor } from '../../src/ref/half';

const config = parseHfConfig({
  architectures: ['LlamaForCausalLM'],
  hidden_size: 16,
  intermediate_size: 24,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  vocab_size: 20,
  max_position_embeddings: 32,
  tie_word_embeddings: false,
  rms_norm_eps: 1e-6,
  bos_token_id: null,
  eos_token_id: 2,
});
const lora: LoraOptions = {
  r: 2,
  alpha: 6,
  targetModules: ['q_proj', 'down_proj'],
  useRslora: false,
  dropout: 0,
};

function seeded(n: number, seed: number, scale: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return (s / 2 ** 31 - 0.5) * scale;
  });
}

describe('merged export of an NF4 base', () => {
  it('is BF16: adapted projections bf16(dequant + s·B·A), the rest bf16 of the stored values', () => {
    const specs = parameterSpecs(config);
    // What readParameters gives for an NF4 run: projections dequantised, tables bf16, rest f32.
    const tensors = new Map<string, Float32Array>();
    specs.forEach((spec, i) => {
      const data = seeded(numel(spec.shape), 7 + i, 0.3);
      const dtype = storedDtypeOf(spec, 'nf4');
      const stored =
        dtype === 'nf4'
          ? toF32(toNf4(data))
          : dtype === 'bf16'
            ? Float32Array.from(data, (x) => bf16BitsToF32(f32ToBf16Bits(x)))
            : data;
      tensors.set(spec.name, stored);
    });
    const adapters = new Map(
      loraAdapterSpecs(config, lora).map((spec, i) => [
        spec.name,
        seeded(numel(spec.shape), 100 + i, 0.5), // B non-zero: the merge changes the weight
      ]),
    );
    const dtypes = specs.map((spec) => storedDtypeOf(spec, 'nf4'));
    expect(exportDtypeOf(dtypes)).toBe('BF16');
    expect(exportDtypeOf(specs.map((spec) => storedDtypeOf(spec, 'bf16')))).toBe('F32');
    expect(exportDtypeOf(specs.map((spec) => storedDtypeOf(spec, 'f32')))).toBe('F32');

    const files = exportHfFolder({
      config,
      tensors,
      lora: { options: lora, adapters },
      dtype: exportDtypeOf(dtypes),
    });
    const written = parseSafetensorsWeights(files.get('model.safetensors')!, 'model.safetensors');
    const configJson = JSON.parse(new TextDecoder().decode(files.get('config.json')));
    expect(configJson.torch_dtype).toBe('bfloat16');
    const s = loraScaling(lora);
    let adapted = 0;
    for (const spec of specs) {
      const t = written.get(spec.name)!;
      expect(t.dtype, spec.name).toBe('BF16');
      const bits = (t.data as HalfTensor).bits;
      const W = tensors.get(spec.name)!;
      const path = spec.name.replace(/\.weight$/, '');
      const A = adapters.get(`${path}.lora_A.weight`);
      const B = adapters.get(`${path}.lora_B.weight`);
      const [outDim, inDim] = spec.shape;
      const want = new Uint16Array(W.length);
      for (let e = 0; e < W.length; e++) {
        let delta = 0;
        if (A && B) {
          const [o, i] = [Math.floor(e / inDim), e % inDim];
          for (let k = 0; k < lora.r; k++) delta += B[o * lora.r + k] * A[k * inDim + i];
        }
        want[e] = f32ToBf16Bits(Math.fround(W[e] + s * delta));
      }
      expect(Array.from(bits), spec.name).toEqual(Array.from(want));
      if (A && B) {
        adapted++;
        expect(isNf4Quantised(spec.name)).toBe(true);
        expect(outDim * inDim).toBe(W.length);
        // The merge moved the weight off its NF4 grid.
        expect(bits.some((b, e) => b !== f32ToBf16Bits(W[e]))).toBe(true);
      }
    }
    expect(adapted).toBe(2);
  });
});

describe('a 4-bit base trains adapters only', () => {
  it('dtype nf4 without usePeft is refused by name; with it the config resolves', () => {
    expect(() => resolveConfig({ dtype: 'nf4' })).toThrow(NF4_NEEDS_PEFT);
    expect(resolveConfig({ dtype: 'nf4', usePeft: true, useBnbNestedQuant: true })).toMatchObject({
      dtype: 'nf4',
      useBnbNestedQuant: true,
    });
  });

  it('a checkpoint holding NF4 tensors cannot be fully fine-tuned', () => {
    const q = 'model.layers.0.self_attn.q_proj.weight';
    const weights = new Map<string, WeightTensor>([
      ['model.norm.weight', new Float32Array(4)],
      [q, toNf4(seeded(128, 3, 1))],
    ]);
    expect(() => checkQuantisedBase({ usePeft: false }, weights)).toThrow(
      `This model is 4-bit (NF4) quantised (${q})`,
    );
    expect(() => checkQuantisedBase({ usePeft: true }, weights)).not.toThrow();
    const plain = new Map([[q, seeded(128, 3, 1)]]);
    expect(() => checkQuantisedBase({ usePeft: false }, plain)).not.toThrow();
  });
});

describe('a pre-quantised (bitsandbytes 4-bit) checkpoint stays 4-bit whatever dtype says', () => {
  const q = 'model.layers.0.self_attn.q_proj.weight';
  const nf4Map = new Map<string, WeightTensor>([[q, toNf4(seeded(128, 3, 1))]]);
  const reader = {
    storedDtypes: new Map([
      [q, 'NF4'],
      ['model.embed_tokens.weight', 'BF16'],
    ]),
    read: () => Promise.reject(new Error('not read: the stored dtypes decide')),
  };
  const bf16Reader = { ...reader, storedDtypes: new Map([[q, 'BF16']]) };

  it('frozenDtypeOf keeps nf4 for every dtype; a reader says auto from its stored dtypes', () => {
    for (const option of ['auto', 'float32', 'bfloat16', 'float16', 'nf4'] as const) {
      expect(frozenDtypeOf(option, config, nf4Map)).toBe('nf4');
      expect(frozenDtypeOf(option, config, reader)).toBe('nf4');
    }
    expect(frozenDtypeOf('auto', config, bf16Reader)).toBe('bf16');
    expect(frozenDtypeOf('float32', config, bf16Reader)).toBe('f32');
    expect(() => checkQuantisedBase({ usePeft: false }, reader)).toThrow(`(${q})`);
  });

  it("the page's plan of the bnb-4bit fixture (default dtype) is the NF4 plan the e2e spec expects", () => {
    const model = parseHfConfig(
      JSON.parse(readFileSync('tests/fixtures/bnb4bit/nf4-nested/config.json', 'utf8')),
      'config.json',
    );
    const run = resolveConfig(BNB_RUN_OPTIONS);
    expect(run.dtype).toBe('float32');
    const limits = { maxBufferSize: 2 ** 28, maxStorageBufferBindingSize: 2 ** 27 };
    // The e2e's Chromium runs on SwiftShader: the emulation path's kernels, no GPU partials.
    const software = { avoidBarriers: true, vectorLoads: true };
    const plan = (w?: 'prequantised') => planRunMemory(model, run, limits, undefined, w, software);
    expect(plan('prequantised').peakBytes).toBe(BNB_NF4_PEAK_BYTES);
    const nf4Run = resolveConfig({ ...BNB_RUN_OPTIONS, dtype: 'nf4' });
    expect(plan('prequantised').peakBytes).toBe(
      planRunMemory(model, nf4Run, limits, undefined, undefined, software).peakBytes,
    );
    expect(plan().peakBytes).toBeGreaterThan(BNB_NF4_PEAK_BYTES);
  });
});
