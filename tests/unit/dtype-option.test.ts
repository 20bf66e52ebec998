// The config's dtype option (TRL ModelConfig's dtype values): its default, validation, CLI and URL
// spellings, and how src/model/parameters.ts turns it into the frozen weights' storage ('auto':
// the checkpoint's 16-bit format when every frozen matrix holds it exactly).
import { describe, expect, it } from 'vitest';
import { parameterSpecs, numel, type LlamaConfig } from '../../src/core/model-config';
import {
  configFromUrlParams,
  configToUrlParams,
  parseCliArgs,
  resolveConfig,
} from '../../src/grpo/config';
import { frozenDtypeOf, type WeightTensor } from '../../src/model/parameters';
import { roundToHalf } from '../../src/ref/half';
import { loadFixture } from '../fixtures/load';

describe('config dtype', () => {
  it("defaults to float32 and takes TRL's values only", () => {
    expect(resolveConfig({}).dtype).toBe('float32');
    for (const dtype of ['auto', 'bfloat16', 'float16', 'float32'] as const) {
      expect(resolveConfig({ dtype }).dtype).toBe(dtype);
    }
    expect(() => resolveConfig({ dtype: 'fp8' })).toThrow(/dtype/);
    expect(() => resolveConfig({ dtype: 16 })).toThrow(/dtype/);
  });

  it('round-trips through the command line and the URL', () => {
    expect(parseCliArgs(['--dtype', 'bfloat16']).dtype).toBe('bfloat16');
    const config = resolveConfig({ dtype: 'float16', usePeft: true });
    expect(resolveConfig(configFromUrlParams(configToUrlParams(config))).dtype).toBe('float16');
  });
});

describe('frozenDtypeOf', () => {
  const fx = loadFixture('llama_gqa');
  const cfg: LlamaConfig = fx.config;
  const withMatrices = (round: (d: Float32Array) => Float32Array) =>
    new Map(
      parameterSpecs(cfg).map((s) => {
        const data = fx.params.get(s.name)!;
        return [s.name, s.shape.length === 2 ? round(data) : data];
      }),
    );

  it('bfloat16 / float16 / float32 name the storage', () => {
    expect(frozenDtypeOf('bfloat16', cfg, fx.params)).toBe('bf16');
    expect(frozenDtypeOf('float16', cfg, fx.params)).toBe('f16');
    expect(
      frozenDtypeOf(
        'float32',
        cfg,
        withMatrices((d) => roundToHalf(d, 'bf16')),
      ),
    ).toBe('f32');
  });

  it("auto: bf16 / f16 when every matrix holds that format's values, else f32", () => {
    expect(frozenDtypeOf('auto', cfg, fx.params)).toBe('f32');
    expect(
      frozenDtypeOf(
        'auto',
        cfg,
        withMatrices((d) => roundToHalf(d, 'bf16')),
      ),
    ).toBe('bf16');
    expect(
      frozenDtypeOf(
        'auto',
        cfg,
        withMatrices((d) => roundToHalf(d, 'f16')),
      ),
    ).toBe('f16');
    // One matrix that is not bf16 keeps everything f32 (norms never count: they stay f32 anyway).
    const mixed = withMatrices((d) => roundToHalf(d, 'bf16'));
    const name = parameterSpecs(cfg).find((s) => s.shape.length === 2)!.name;
    mixed.set(name, fx.params.get(name)!);
    expect(frozenDtypeOf('auto', cfg, mixed)).toBe('f32');
    // 16-bit tensors given as shipped count in their own format.
    const spec = parameterSpecs(cfg).find((s) => s.shape.length === 2)!;
    const bits = new Uint16Array(numel(spec.shape)).fill(0x3c00);
    const given = new Map<string, WeightTensor>(withMatrices((d) => roundToHalf(d, 'f16')));
    given.set(spec.name, { format: 'f16', bits });
    expect(frozenDtypeOf('auto', cfg, given)).toBe('f16');
  });
});
