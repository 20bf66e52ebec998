// Memory plan: byte counts worked out by hand for a tiny config, the fit boundary, that every
// suggestion really fits (and is the largest that does), and the buffers flagged for splitting.
import { describe, expect, it } from 'vitest';
import { formatBytes } from '../../src/core/format';
import { planMemory, type DeviceMemoryLimits } from '../../src/model/memory-plan';
import { parameterCount, parseHfConfig } from '../../src/core/model-config';

// C=8, I=12, V=272, L=2, H=2, Hkv=1, D=4, untied:
// P = 2·V·C + L·(C + H·D·C + 2·Hkv·D·C + C·H·D + C + 3·I·C) + C
//   = 4352 + 2·(8 + 64 + 64 + 64 + 8 + 288) + 8 = 5352
const tiny = parseHfConfig({
  architectures: ['LlamaForCausalLM'],
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  vocab_size: 272,
  max_position_embeddings: 64,
});
const P = 5352;
const roomy: DeviceMemoryLimits = {
  maxBufferSize: 2 ** 30,
  maxStorageBufferBindingSize: 2 ** 27,
  totalBudget: 2 ** 30,
};
const run = { config: tiny, numPrompts: 2, groupSize: 3, promptLength: 5, completionLength: 7 };

describe('planMemory byte counts (tiny config, by hand)', () => {
  it('parameters, gradients, moments and reference copy are 4, 4, 8 and 4 bytes per parameter', () => {
    expect(parameterCount(tiny)).toBe(P);
    const noKl = planMemory({ ...run, beta: 0 }, roomy);
    expect(noKl.byCategory.parameters).toBe(4 * P);
    expect(noKl.byCategory.gradients).toBe(4 * P);
    expect(noKl.byCategory.optimizer).toBe(8 * P);
    expect(noKl.byCategory.reference).toBe(0);
    const kl = planMemory({ ...run, beta: 0.04 }, roomy);
    expect(kl.byCategory.reference).toBe(4 * P);
    expect(kl.peakBytes - noKl.peakBytes).toBe(4 * P);
  });

  it('KV cache, attention probabilities and logits have the sizes of their shapes', () => {
    const plan = planMemory({ ...run, beta: 0, microBatch: 4 }, roomy);
    const total = (name: string) => {
      const b = plan.buffers.find((x) => x.name === name)!;
      return b.bytes * b.count;
    };
    const N = 6,
      T = 12,
      M = 4;
    // k and v, L layers, (N, T, Hkv·D) f32
    expect(total('kv cache (k and v, per layer)')).toBe(2 * 2 * N * T * 1 * 4 * 4);
    // (M, H, T, T) per layer
    expect(total('attention probabilities')).toBe(2 * M * 2 * T * T * 4);
    // (M, Tc, V)
    expect(total('logits (completion positions)')).toBe(M * 7 * 272 * 4);
    expect(plan.peakBytes).toBe(
      plan.persistentBytes + Math.max(plan.samplingBytes, plan.trainingBytes),
    );
    expect(plan.persistentBytes).toBe(16 * P + 8 * N * 7 * 4);
  });

  it('micro-batching shrinks training activations in proportion and leaves the rest', () => {
    const full = planMemory({ ...run, beta: 0 }, roomy);
    const half = planMemory({ ...run, beta: 0, microBatch: 3 }, roomy);
    expect(full.input.microBatch).toBe(6);
    expect(half.trainingBytes * 2).toBe(full.trainingBytes);
    expect(half.samplingBytes).toBe(full.samplingBytes);
  });
});

describe('fit decisions and advice', () => {
  it('fits exactly at the peak and not one byte below', () => {
    const peak = planMemory({ ...run, beta: 0 }, roomy).peakBytes;
    const at = planMemory({ ...run, beta: 0 }, { ...roomy, totalBudget: peak });
    expect(at.fits).toBe(true);
    expect(at.message).toMatch(/^Fits: peak/);
    const below = planMemory({ ...run, beta: 0 }, { ...roomy, totalBudget: peak - 1 });
    expect(below.fits).toBe(false);
    expect(below.message).toMatch(/^Does not fit: N = 2×3 = 6 sequences of 5 \+ 7 tokens need/);
  });

  it('each suggestion is the largest value that fits', () => {
    const big = { ...run, numPrompts: 4, groupSize: 8, completionLength: 40, beta: 0.1 };
    const full = planMemory(big, roomy);
    // A budget between "persistent + small activations" and the full peak.
    const budget = Math.floor(full.persistentBytes + 0.4 * full.trainingBytes);
    const limits = { ...roomy, totalBudget: budget };
    const plan = planMemory(big, limits);
    expect(plan.fits).toBe(false);
    const fitsWith = (change: object) => planMemory({ ...big, ...change }, limits).fits;
    const num = (re: RegExp) => Number(plan.suggestions.find((s) => re.test(s))!.match(re)![1]);

    const c = num(/at most (\d+) tokens instead of 40/);
    expect(fitsWith({ completionLength: c })).toBe(true);
    expect(fitsWith({ completionLength: c + 1 })).toBe(false);
    const m = num(/micro-batches of (\d+) sequences instead of 32/);
    expect(fitsWith({ microBatch: m })).toBe(true);
    expect(fitsWith({ microBatch: m + 1 })).toBe(false);
    const g = num(/G = (\d+) instead of 8/);
    expect(fitsWith({ groupSize: g })).toBe(true);
    expect(fitsWith({ groupSize: g + 1 })).toBe(false);
    expect(plan.message).toContain('To fit: ');
    expect(plan.message).toContain('the peak is set by training activations');
  });

  it('suggests β = 0 when dropping the reference copy is enough', () => {
    const noKl = planMemory({ ...run, beta: 0 }, roomy).peakBytes;
    const plan = planMemory({ ...run, beta: 0.04 }, { ...roomy, totalBudget: noKl });
    expect(plan.fits).toBe(false);
    expect(plan.suggestions[0]).toBe(
      `set β = 0 (no KL term): saves the reference copy of the weights (${formatBytes(4 * P)})`,
    );
  });

  it('says to pick a smaller model when the weights alone do not fit', () => {
    const plan = planMemory({ ...run, beta: 0 }, { ...roomy, totalBudget: 16 * P - 1 });
    expect(plan.suggestions[0]).toMatch(/^pick a smaller model: .* alone need 83\.6 KiB/);
  });
});

describe('buffers too large for one binding or one buffer', () => {
  it('flags the embedding (once, with its gradient and moments) and the logits', () => {
    // embed_tokens is 272·8·4 = 8704 bytes; logits (6, 7, 272) = 45696 bytes.
    const limits = {
      maxBufferSize: 40000,
      maxStorageBufferBindingSize: 8192,
      totalBudget: 2 ** 30,
    };
    const plan = planMemory({ ...run, beta: 0.1 }, limits);
    const byName = new Map(plan.oversized.map((o) => [o.name, o]));
    expect(byName.get('model.embed_tokens.weight')).toEqual({
      name: 'model.embed_tokens.weight',
      category: 'parameters',
      bytes: 8704,
      limit: 'maxStorageBufferBindingSize',
      limitBytes: 8192,
      parts: 2,
      splitByModel: true,
    });
    expect(byName.get('lm_head.weight')!.parts).toBe(2);
    expect(byName.get('lm_head.weight')!.splitByModel).toBe(true);
    expect(byName.get('logits (completion positions)')).toMatchObject({
      bytes: 45696,
      limit: 'maxBufferSize',
      parts: 2,
      splitByModel: false,
    });
    expect(plan.oversized.filter((o) => o.name.startsWith('model.embed_tokens'))).toHaveLength(1);
    expect(plan.oversized.some((o) => o.name.startsWith('model.layers'))).toBe(false);
    expect(plan.message).toContain(
      '2 tensors exceed a per-buffer limit and must be split (the model stores them as row chunks ' +
        'automatically): model.embed_tokens.weight 8.50 KiB > maxStorageBufferBindingSize 8.00 KiB (2 parts)',
    );
    expect(plan.message).toContain(
      'must be split, which the engine does not do: lower the micro-batch or the completion length: ' +
        'logits (completion positions) 44.6 KiB > maxBufferSize',
    );
  });

  it('rejects nonsense inputs', () => {
    expect(() => planMemory({ ...run, groupSize: 0, beta: 0 }, roomy)).toThrow(/groupSize/);
    expect(() => planMemory({ ...run, microBatch: 7, beta: 0 }, roomy)).toThrow(
      /exceeds N = B·G = 6/,
    );
  });
});
