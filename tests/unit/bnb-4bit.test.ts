// src/formats/bnb-4bit.ts on folders laid out as transformers + bitsandbytes save a 4-bit model
// (tests/fixtures/bnb4bit/make_bnb_folder.py): every projection assembled from its bitsandbytes
// entries dequantises bit for bit to the numpy reference's values (expected_dequantized.safetensors),
// the other tensors are plain bf16, and every other quantisation config is refused by name.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parameterSpecs, parseHfConfig } from '../../src/core/model-config';
import {
  assembleNf4Tensor,
  bnbPartsFromHeader,
  bnbQuantStateName,
  bnbQuantizedWeights,
  bnbWeightName,
  isBnbComponent,
  parseQuantizationConfig,
  type BnbPart,
  type BnbQuantization,
} from '../../src/formats/bnb-4bit';
import { ModelFileError } from '../../src/formats/errors';
import { modelFileErrorOf as errorOf } from '../support/model-file-error';
import {
  parseSafetensors,
  parseSafetensorsHeader,
  writeSafetensors,
} from '../../src/formats/safetensors';
import { dequantizeNf4 } from '../../src/ref/nf4';

const DIR = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/bnb4bit');
const readJson = (path: string) =>
  JSON.parse(readFileSync(join(DIR, path), 'utf8')) as Record<string, unknown>;
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

function loadFolder(folder: string) {
  const configJson = readJson(`${folder}/config.json`);
  const quant = parseQuantizationConfig(configJson, 'config.json');
  const bytes = new Uint8Array(readFileSync(join(DIR, folder, 'model.safetensors')));
  const parts = bnbPartsFromHeader(bytes, parseSafetensorsHeader(bytes, 'model.safetensors'));
  const expected = parseSafetensors(
    new Uint8Array(readFileSync(join(DIR, folder, 'expected_dequantized.safetensors'))),
    'expected_dequantized.safetensors',
  ).tensors;
  return { configJson, quant: quant!, parts, expected, config: parseHfConfig(configJson) };
}

describe.each(['nf4-nested', 'nf4'])('bitsandbytes 4-bit folder %s', (folder) => {
  const { quant, parts, expected, config } = loadFolder(folder);

  it('quantization_config parses as bitsandbytes NF4', () => {
    expect(quant).toEqual({
      method: 'bitsandbytes-nf4',
      nested: folder === 'nf4-nested',
      blockSize: 64,
      computeDtype: 'bfloat16',
      skipModules: [],
    });
  });

  it('every projection assembles and dequantises bit for bit to the numpy reference', () => {
    let assembled = 0;
    for (const spec of parameterSpecs(config)) {
      if (!parts.has(bnbQuantStateName(spec.name))) {
        // Not 4-bit: embeddings, norms (and lm_head) stay bf16, as bitsandbytes leaves them.
        expect(parts.get(spec.name)?.dtype).toBe('BF16');
        expect(spec.name).not.toMatch(/_proj\.weight$/);
        continue;
      }
      const t = assembleNf4Tensor(spec.name, parts, spec.shape, quant, 'model.safetensors');
      expect(t.count).toBe(spec.shape[0] * spec.shape[1]);
      expect(t.absmax.length).toBe(Math.ceil(t.count / 64));
      const want = expected.get(spec.name)!;
      expect(want.shape).toEqual(spec.shape);
      expect(bits(dequantizeNf4(t))).toEqual(bits(want.data));
      assembled++;
    }
    expect(assembled).toBe(7 * config.numLayers);
    expect(expected.size).toBe(assembled);
  });

  it('groups the statistics entries under their weight', () => {
    const components = [...parts.keys()].filter(isBnbComponent);
    const perWeight = folder === 'nf4-nested' ? 5 : 3;
    expect(components.length).toBe(7 * perWeight);
    for (const c of components) expect(parts.has(bnbWeightName(c)!)).toBe(true);
    expect(isBnbComponent('model.layers.0.mlp.up_proj.weight')).toBe(false);
    expect(isBnbComponent('model.norm.weight')).toBe(false);
    expect([...bnbQuantizedWeights(parts.keys())].sort()).toEqual(
      parameterSpecs(config)
        .map((s) => s.name)
        .filter((n) => n.endsWith('_proj.weight'))
        .sort(),
    );
  });
});

describe('safetensors U8 entries', () => {
  it('parseSafetensors widens them exactly; writeSafetensors writes bytes 0…255', () => {
    const bytes = new Uint8Array(readFileSync(join(DIR, 'nf4-nested/model.safetensors')));
    const name = 'model.layers.0.self_attn.q_proj.weight';
    const parsed = parseSafetensors(bytes, 'model.safetensors').tensors.get(name)!;
    const raw = bnbPartsFromHeader(bytes, parseSafetensorsHeader(bytes, 'model.safetensors')).get(
      name,
    )!;
    expect(parsed.dtype).toBe('U8');
    expect(parsed.shape).toEqual([800, 1]);
    expect(Array.from(parsed.data)).toEqual(Array.from(raw.bytes));
    const written = writeSafetensors(
      [{ name: 'b', shape: [3], data: Float32Array.of(0, 7, 255) }],
      {},
      {
        dtype: 'U8',
      },
    );
    expect(Array.from(parseSafetensors(written, 'w').tensors.get('b')!.data)).toEqual([0, 7, 255]);
    expect(() =>
      writeSafetensors(
        [{ name: 'b', shape: [1], data: Float32Array.of(256) }],
        {},
        { dtype: 'U8' },
      ),
    ).toThrow(ModelFileError);
  });
});

describe('damaged bitsandbytes entries name the tensor', () => {
  const { quant, parts } = loadFolder('nf4-nested');
  const w = 'model.layers.0.self_attn.k_proj.weight';
  const shape = [20, 40];
  const withPart = (name: string, part: BnbPart | undefined) => {
    const m = new Map(parts);
    if (part) m.set(name, part);
    else m.delete(name);
    return m;
  };
  const json = (v: unknown): BnbPart => {
    const bytes = new TextEncoder().encode(JSON.stringify(v));
    return { dtype: 'U8', shape: [bytes.length], bytes };
  };
  const qsOf = () =>
    JSON.parse(new TextDecoder().decode(parts.get(bnbQuantStateName(w))!.bytes)) as Record<
      string,
      unknown
    >;

  it('a shape that disagrees with the model config', () => {
    const err = errorOf(() => assembleNf4Tensor(w, parts, [40, 20], quant, 'model.safetensors'));
    expect(err.message).toBe(
      `model.safetensors (tensor '${w}.quant_state.bitsandbytes__nf4'): quant_state.shape is [20,40], ` +
        `but the model config makes this weight [40, 20]`,
    );
  });

  it('missing statistics, wrong byte counts, a foreign code book, fp4', () => {
    expect(
      errorOf(() =>
        assembleNf4Tensor(w, withPart(`${w}.nested_absmax`, undefined), shape, quant, 'm'),
      ).message,
    ).toContain(`has no 'nested_absmax' entry ('${w}.nested_absmax')`);
    const codes = parts.get(w)!;
    expect(
      errorOf(() =>
        assembleNf4Tensor(
          w,
          withPart(w, { dtype: 'U8', shape: [399, 1], bytes: codes.bytes.subarray(0, 399) }),
          shape,
          quant,
          'm',
        ),
      ).message,
    ).toBe(
      `m (tensor '${w}'): 399 bytes of 4-bit codes (shape [399, 1]), but [20, 40] needs 400 (two per byte)`,
    );
    const map = new Float32Array(16).fill(0.5);
    expect(
      errorOf(() =>
        assembleNf4Tensor(
          w,
          withPart(`${w}.quant_map`, {
            dtype: 'F32',
            shape: [16],
            bytes: new Uint8Array(map.buffer),
          }),
          shape,
          quant,
          'm',
        ),
      ).message,
    ).toContain(`(tensor '${w}.quant_map'): quant_map [16] is not bitsandbytes' NF4 code book`);
    expect(
      errorOf(() =>
        assembleNf4Tensor(
          w,
          withPart(`${w}.quant_state.bitsandbytes__fp4`, json({ ...qsOf(), quant_type: 'fp4' })),
          shape,
          quant,
          'm',
        ),
      ).message,
    ).toContain(`quant_type 'fp4' is not supported`);
    expect(
      errorOf(() =>
        assembleNf4Tensor(
          w,
          withPart(bnbQuantStateName(w), json({ ...qsOf(), blocksize: 128 })),
          shape,
          quant,
          'm',
        ),
      ).message,
    ).toContain('quant_state.blocksize is 128, but only 64 is supported');
  });
});

describe('other quantisation configs are refused by name', () => {
  const base = readJson('nf4-nested/config.json');
  const qc = base.quantization_config as Record<string, unknown>;
  const withQc = (over: Record<string, unknown>) => ({
    ...base,
    quantization_config: { ...qc, ...over },
  });

  it('no quantization_config: null', () => {
    const { quantization_config: _, ...plain } = base;
    expect(parseQuantizationConfig(plain, 'config.json')).toBeNull();
  });

  it('GPTQ (the fixture folder)', () => {
    const err = errorOf(() => parseQuantizationConfig(readJson('gptq/config.json'), 'config.json'));
    expect(err.message).toBe(
      "config.json: quantization_config.quant_method 'gptq' (GPTQ) is not supported: this app loads " +
        "a bitsandbytes 4-bit NF4 checkpoint (load_in_4bit with bnb_4bit_quant_type 'nf4') or the " +
        "unquantised model folder (config dtype 'nf4' then quantises it at load)",
    );
  });

  it.each([
    [{ quant_method: 'awq' }, "'awq' (AWQ)"],
    [{ quant_method: 'compressed-tensors' }, "'compressed-tensors' (compressed-tensors)"],
    [{ quant_method: 'fp8' }, "'fp8' (FP8)"],
    [{ quant_method: 'hqq' }, "'hqq' (HQQ)"],
    [{ load_in_8bit: true, load_in_4bit: false }, 'bitsandbytes 8-bit (LLM.int8, load_in_8bit)'],
    [{ bnb_4bit_quant_type: 'fp4' }, "bitsandbytes 4-bit with bnb_4bit_quant_type 'fp4'"],
    [{ bnb_4bit_quant_storage: 'bfloat16' }, "bnb_4bit_quant_storage 'bfloat16'"],
  ])('%j', (over, named) => {
    const err = errorOf(() => parseQuantizationConfig(withQc(over), 'config.json'));
    expect(err.message).toContain(named);
    expect(err.message).toContain('is not supported');
  });

  it('reads double quantisation, compute dtype and skipped modules', () => {
    const q: BnbQuantization | null = parseQuantizationConfig(
      withQc({
        bnb_4bit_use_double_quant: false,
        bnb_4bit_compute_dtype: 'float32',
        llm_int8_skip_modules: ['lm_head'],
      }),
      'config.json',
    );
    expect(q).toEqual({
      method: 'bitsandbytes-nf4',
      nested: false,
      blockSize: 64,
      computeDtype: 'float32',
      skipModules: ['lm_head'],
    });
  });
});
