// Memory plan: byte counts worked out by hand for a tiny config, the fit boundary, that every
// suggestion really fits (and is the largest that does), and the buffers flagged for splitting.
import { describe, expect, it } from 'vitest';
import { formatBytes } from '../../src/core/format';
import {
  chooseMicroBatch,
  planLogitsChunkRows,
  planMemory,
  planPeakBytes,
  type DeviceMemoryLimits,
} from '../../src/model/memory-plan';
import { gradNormPartialsLength } from '../../src/kernels/grad-norm';
import { parameterCount, parameterSpecs, parseHfConfig } from '../../src/core/model-config';
import type { KernelTuning } from '../../src/engine/pipelines';
import { findKnownModel, knownModelConfig } from '../../src/model/known-models';

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
// The by-hand counts below are of the buffers every path allocates: the emulation path's
// kernels (a software adapter's), which take no per-call partials. The GPU path's partials are
// checked on their own (last describe).
const EMULATION: KernelTuning = { avoidBarriers: true, vectorLoads: true };
const run = {
  config: tiny,
  numPrompts: 2,
  groupSize: 3,
  promptLength: 5,
  completionLength: 7,
  kernels: EMULATION,
};

const GRADNORM_EXTRA = (tensors: number) => gradNormPartialsLength(tensors) * 4 + 2 * 16;

describe('planMemory byte counts (tiny config, by hand)', () => {
  it('full fine-tune: parameters, gradients, moments and reference copy are 4, 4, 8 and 4 bytes per parameter', () => {
    expect(parameterCount(tiny)).toBe(P);
    const tensors = parameterSpecs(tiny).length;
    const noKl = planMemory({ ...run, beta: 0 }, roomy);
    expect(noKl.byCategory.parameters).toBe(4 * P);
    expect(noKl.byCategory.gradients).toBe(4 * P);
    expect(noKl.byCategory.optimizer).toBe(8 * P + GRADNORM_EXTRA(tensors));
    expect(noKl.byCategory.reference).toBe(0);
    const kl = planMemory({ ...run, beta: 0.04 }, roomy);
    // The copy's weights, and its own forward activations (it scores in its own workspace).
    const refActs = kl.buffers
      .filter((b) => b.category === 'reference' && b.name.startsWith('reference forward'))
      .reduce((s, b) => s + b.bytes * b.count, 0);
    expect(kl.byCategory.reference).toBe(4 * P + refActs);
    // Its forward keeps what the policy's does: every training buffer but the backward's.
    const policyForward = kl.buffers
      .filter((b) => b.category === 'training' && !/backward|embedding|gradient/.test(b.name))
      .reduce((s, b) => s + b.bytes * b.count, 0);
    expect(refActs).toBe(policyForward);
    // Kept all run: the copy. Per update: the reference log-probs, (N, Tc) and a micro-batch's.
    expect(kl.persistentBytes - noKl.persistentBytes).toBe(kl.byCategory.reference);
    expect(kl.byCategory.grpo - noKl.byCategory.grpo).toBe(6 * 7 * 4 + 6 * 7 * 4);
  });

  it('LoRA: the base frozen (dtype bytes, no gradients, no moments), adapters f32 with both, no reference copy', () => {
    // r = 2, all-linear: per layer r·(in + out) for q (8+8), k (8+4), v (8+4), o (8+8),
    // gate (8+12), up (8+12), down (12+8) = 2·116 = 232; two layers → 464 adapter weights.
    const A = 464;
    const lora = { r: 2, targetModules: 'all-linear' as const };
    for (const [dtype, bytes] of [
      ['float32', 4],
      ['bfloat16', 2],
      ['float16', 2],
    ] as const) {
      const plan = planMemory({ ...run, beta: 0.04, lora, dtype }, roomy);
      // Matrices take `bytes` each; the 5 norm weights (40 values) stay f32.
      expect(plan.byCategory.parameters).toBe(bytes * (P - 40) + 4 * 40 + 4 * A);
      expect(plan.byCategory.gradients).toBe(4 * A);
      expect(plan.byCategory.optimizer).toBe(8 * A + GRADNORM_EXTRA(2 * 7 * 2));
      // β > 0: the reference is the policy with its adapters off.
      expect(plan.byCategory.reference).toBe(0);
    }
    // NF4 (QLoRA): each projection is one buffer of 4-bit codes padded to a word, ceil(n/8)
    // words, then one f32 absmax per 64 values, ceil(n/64) words: q and o (64 values) 32 + 4,
    // k and v (32) 16 + 4, gate, up and down (96) 48 + 8: 280 bytes a layer. The embedding and
    // the untied LM head stay bf16 (2 · 272 · 8 · 2 bytes), the norms f32, the adapters f32.
    const nf4 = planMemory({ ...run, beta: 0, lora, dtype: 'nf4' }, roomy);
    expect(nf4.byCategory.parameters).toBe(2 * 280 + 2 * 272 * 8 * 2 + 4 * 40 + 4 * A);
    expect(nf4.buffers.find((b) => b.name === 'model.layers.1.mlp.up_proj.weight')?.bytes).toBe(56);
    expect(nf4.byCategory.gradients).toBe(4 * A);
    // Only the weights change: activations, KV cache and optimizer are the bf16 plan's.
    const bf16 = planMemory({ ...run, beta: 0, lora, dtype: 'bfloat16' }, roomy);
    expect(nf4.peakBytes - bf16.peakBytes).toBe(
      nf4.byCategory.parameters - bf16.byCategory.parameters,
    );
    // A 4-bit base cannot be fully fine-tuned (the config refuses it too).
    expect(() => planMemory({ ...run, beta: 0, dtype: 'nf4' }, roomy)).toThrow(/nf4 needs LoRA/);
    // dtype only applies to frozen weights: a full fine-tune trains in f32 whatever it says.
    const full = planMemory({ ...run, beta: 0, dtype: 'bfloat16' }, roomy);
    expect(full.byCategory.parameters).toBe(4 * P);
  });

  it('KV cache, activations and logits have the sizes of their shapes', () => {
    const plan = planMemory({ ...run, beta: 0, microBatch: 3 }, roomy);
    const total = (name: string) => {
      const b = plan.buffers.find((x) => x.name === name)!;
      return b.bytes * b.count;
    };
    const [N, T, M, Tc, V, C, I] = [6, 12, 3, 7, 272, 8, 12];
    // k and v, L layers, (N, T, Hkv·D) f32
    expect(total('kv cache (k and v, per layer)')).toBe(2 * 2 * N * T * 1 * 4 * 4);
    // L + 1 residual-stream buffers (M·T, C)
    expect(total('residual stream act.x0…x2')).toBe(3 * M * T * C * 4);
    // gate, up, h per layer (M·T, I)
    expect(total('mlp gate, up, silu(gate)·up (per layer)')).toBe(2 * 3 * M * T * I * 4);
    // (M·Tc, V), and its gradient in the update's buffers
    expect(total('logits (one chunk of completion rows)')).toBe(M * Tc * V * 4);
    expect(total('logits gradient (one chunk of completion rows)')).toBe(M * Tc * V * 4);
    expect(plan.peakBytes).toBe(
      plan.persistentBytes + Math.max(plan.samplingBytes, plan.trainingBytes),
    );
    // The models' workspaces are kept between steps: the KV cache is alive while training.
    expect(plan.buffers.find((b) => b.name.startsWith('kv cache'))!.phase).toBe('run');
  });

  it('micro-batching shrinks training activations in proportion and leaves sampling alone', () => {
    const full = planMemory({ ...run, beta: 0 }, roomy);
    const half = planMemory({ ...run, beta: 0, microBatch: 3 }, roomy);
    expect(full.input.microBatch).toBe(6);
    // Every training buffer is per micro-batch (batch key starts: one word per sequence).
    expect(half.byCategory.training * 2).toBe(full.byCategory.training);
    expect(half.byCategory.sampling).toBe(full.byCategory.sampling);
  });

  it('gradient checkpointing keeps one shared set of layer intermediates and one recomputed output', () => {
    const kept = planMemory({ ...run, beta: 0 }, roomy);
    const ckpt = planMemory({ ...run, beta: 0, gradientCheckpointing: true }, roomy);
    // One layer's set: 3 (R, C) + 2 (R) + 3 (R, H·D) + 3 (R, Hkv·D) + (M, H, T) + 3 (R, I), R = 72.
    const R = 6 * 12;
    const perLayer = (3 * R * 8 + 2 * R + 3 * R * 8 + 3 * R * 4 + 6 * 2 * 12 + 3 * R * 12) * 4;
    // Two layers → one set, plus the recomputed layer output (R, C).
    expect(kept.byCategory.training - ckpt.byCategory.training).toBe(perLayer - R * 8 * 4);
  });

  it('chunked logits: rows per chunk keep logits + gradient within the MiB (head-chunks.ts)', () => {
    expect(planLogitsChunkRows(1000, 1024, 1)).toBe(128); // 2·128·1024·4 = 1 MiB
    expect(planLogitsChunkRows(1000, 1024, 0.9)).toBe(112); // 115 rows, down to a multiple of 4
    expect(planLogitsChunkRows(100, 1024, 1)).toBe(100);
    expect(planLogitsChunkRows(10, 2 ** 20, 1)).toBe(1);
    expect(planLogitsChunkRows(1000, 1024, 0)).toBe(1);
    // A chunk also fits one binding: 8192 / (1024·4) = 2 rows.
    expect(planLogitsChunkRows(1000, 1024, 1, 8192)).toBe(2);
    // Default 256 MiB: all 42 rows of the tiny run at once.
    const whole = planMemory({ ...run, beta: 0 }, roomy);
    expect(whole.input.logitsMemoryMiB).toBe(256);
    const oneRow = planMemory({ ...run, beta: 0, logitsMemoryMiB: 0 }, roomy);
    // (42, V) logits and gradient become (1, V) each, plus one row of head input (1, C).
    const training = (p: typeof whole) => p.byCategory.training;
    expect(training(whole) - training(oneRow)).toBe(2 * 41 * 272 * 4 - 8 * 4);
  });

  it('chooseMicroBatch picks the largest divisor of N that fits, null when none does', () => {
    const input = { ...run, numPrompts: 4, groupSize: 6, completionLength: 40, beta: 0 };
    const at = (m: number) => planPeakBytes({ ...input, microBatch: m });
    expect(chooseMicroBatch(input, at(24))).toBe(24);
    // Between the peaks of 8 and 12 sequences: 8 (9, 10, 11 do not divide 24).
    expect(chooseMicroBatch(input, at(12) - 1)).toBe(8);
    expect(chooseMicroBatch(input, at(1))).toBe(1);
    expect(chooseMicroBatch(input, at(1) - 1)).toBeNull();
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
    // Gradient accumulation needs a divisor of N = 32: the largest that fits.
    expect(32 % m).toBe(0);
    expect(fitsWith({ microBatch: m })).toBe(true);
    for (const larger of [2 * m, 4 * m].filter((v) => v < 32))
      expect(fitsWith({ microBatch: larger })).toBe(false);
    const g = num(/G = (\d+) instead of 8/);
    expect(fitsWith({ groupSize: g })).toBe(true);
    expect(fitsWith({ groupSize: g + 1 })).toBe(false);
    expect(plan.message).toContain('To fit: ');
  });

  it('suggests β = 0 when dropping the reference copy is enough', () => {
    const noKl = planMemory({ ...run, beta: 0 }, roomy).peakBytes;
    const plan = planMemory({ ...run, beta: 0.04 }, { ...roomy, totalBudget: noKl });
    expect(plan.fits).toBe(false);
    const reference = planMemory({ ...run, beta: 0.04 }, roomy).byCategory.reference;
    expect(plan.suggestions).toContain(
      `set β = 0 (no KL term): saves the reference copy (${formatBytes(reference)})`,
    );
  });

  // Projections dominate (C 64, I 256, V 32): where the weights decide the fit.
  const wide = {
    ...run,
    config: parseHfConfig({
      architectures: ['LlamaForCausalLM'],
      hidden_size: 64,
      intermediate_size: 256,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: 32,
      max_position_embeddings: 64,
    }),
    numPrompts: 1,
    groupSize: 2,
    beta: 0,
  };
  const lora16 = { r: 16, targetModules: 'all-linear' as const };

  it('a full fine-tune that fits only on a 4-bit base is told to train LoRA on NF4 (QLoRA)', () => {
    const budget = planPeakBytes({ ...wide, lora: lora16, dtype: 'nf4' });
    // Neither LoRA on f32 or bf16 nor bf16 with checkpointing fits; NF4 without it does.
    for (const dtype of ['float32', 'bfloat16'] as const)
      expect(planPeakBytes({ ...wide, lora: lora16, dtype })).toBeGreaterThan(budget);
    expect(
      planPeakBytes({ ...wide, lora: lora16, dtype: 'bfloat16', gradientCheckpointing: true }),
    ).toBeGreaterThan(budget);
    const plan = planMemory(wide, { ...roomy, totalBudget: budget });
    expect(plan.suggestions).toContain(
      'train LoRA adapters (usePeft, loraR 16) on a 4-bit NF4 base (dtype nf4, QLoRA)',
    );
    const tighter = planPeakBytes({
      ...wide,
      lora: lora16,
      dtype: 'nf4',
      gradientCheckpointing: true,
    });
    expect(tighter).toBeLessThan(budget);
    expect(planMemory(wide, { ...roomy, totalBudget: tighter }).suggestions).toContain(
      'train LoRA adapters (usePeft, loraR 16) on a 4-bit NF4 base (dtype nf4, QLoRA) with gradient checkpointing',
    );
  });

  it('LoRA on a 16-bit base that does not fit is told the NF4 peak', () => {
    const input = { ...wide, lora: lora16, dtype: 'bfloat16' as const };
    const nf4 = planPeakBytes({ ...input, dtype: 'nf4' });
    const plan = planMemory(input, { ...roomy, totalBudget: nf4 });
    expect(plan.fits).toBe(false);
    expect(plan.suggestions).toContain(
      `store the frozen base's projections as 4-bit NF4 (dtype nf4, QLoRA): peak ` +
        `${formatBytes(nf4)} instead of ${formatBytes(plan.peakBytes)}`,
    );
    // Already NF4: no such advice.
    const already = planMemory({ ...input, dtype: 'nf4' }, { ...roomy, totalBudget: nf4 - 1 });
    expect(already.suggestions.some((s) => s.includes('dtype nf4'))).toBe(false);
  });

  it('says to pick a smaller model when the weights alone do not fit', () => {
    const plan = planMemory({ ...run, beta: 0 }, { ...roomy, totalBudget: 16 * P - 1 });
    expect(plan.suggestions[0]).toMatch(
      /^pick a smaller model or train LoRA adapters \(usePeft\): .* alone need (\d+\.\d) KiB \(16 bytes per parameter\)$/,
    );
  });
});

describe('buffers too large for one binding or one buffer', () => {
  it('flags the embedding (once, with its gradient and moments); the logits come in chunks that fit', () => {
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
    // The logits come in row chunks that fit a binding: 8192 / (272·4) = 7 → 4 rows.
    expect(byName.has('logits (one chunk of completion rows)')).toBe(false);
    const logits = plan.buffers.find((b) => b.name === 'logits (one chunk of completion rows)')!;
    expect(logits.shape).toEqual([4, 272]);
    expect(plan.oversized.filter((o) => o.name.startsWith('model.embed_tokens'))).toHaveLength(1);
    expect(plan.oversized.some((o) => o.name.startsWith('model.layers'))).toBe(false);
    expect(plan.message).toContain(
      '2 tensors exceed a per-buffer limit and must be split (the model stores them as row chunks ' +
        'automatically): model.embed_tokens.weight 8.50 KiB > maxStorageBufferBindingSize 8.00 KiB (2 parts)',
    );
    expect(plan.message).not.toContain('which the engine does not do');
  });

  it('rejects nonsense inputs', () => {
    expect(() => planMemory({ ...run, groupSize: 0, beta: 0 }, roomy)).toThrow(/groupSize/);
    expect(() => planMemory({ ...run, microBatch: 7, beta: 0 }, roomy)).toThrow(
      /exceeds N = B·G = 6/,
    );
  });
});

describe("the GPU path's per-call partials (one run scratch per kernel, src/engine/memory.ts)", () => {
  // Qwen2.5-0.5B, LoRA r 16 on a bf16 base, 1 prompt × 2, 4 + 4 tokens: bench:gpu's LoRA step.
  const qwen = knownModelConfig(findKnownModel('qwen2.5-0.5b')!);
  const input = {
    config: qwen,
    numPrompts: 1,
    groupSize: 2,
    promptLength: 4,
    completionLength: 4,
    beta: 0,
    lora: { r: 16, targetModules: 'all-linear' as const },
    dtype: 'bfloat16' as const,
  };
  const entry = (plan: ReturnType<typeof planMemory>, name: string) =>
    plan.buffers.find((b) => b.name === name);

  it("plans each phase's largest split-K product under a GPU's default variants (splitk16x64 for ≤ 16 rows)", () => {
    const plan = planMemory(input, roomy);
    // Sampling: gate / up (N 4864, K 896) at the prefill's 4 rows: 76 column tiles leave room for
    // 3 splits (256 / 76) → 4 B × 3 × 4 × 4864.
    expect(entry(plan, 'GPU kernels: split-K partials (sampling)')).toMatchObject({
      phase: 'sampling',
      bytes: 4 * 3 * 4 * 4864,
    });
    // Update: the same products at the micro-batch's 2 × 8 = 16 rows (still ≤ 16: split).
    expect(entry(plan, 'GPU kernels: split-K partials (update)')).toMatchObject({
      phase: 'update',
      bytes: 4 * 3 * 16 * 4864,
    });
    // Qwen's 151,936-token vocabulary: sampling and the log-prob gather reduce 38 parts a row.
    expect(entry(plan, 'GPU kernels: sampling partials (rows × parts)')?.bytes).toBe(2 * 38 * 24);
    expect(entry(plan, 'GPU kernels: log-prob gather partials')?.bytes).toBe(8 * 38 * 16);
    const emulation = planMemory({ ...input, kernels: EMULATION }, roomy);
    expect(emulation.buffers.filter((b) => b.name.startsWith('GPU kernels'))).toEqual([]);
    // Sampling stays the larger phase here: the peak grows by its partials.
    expect(plan.peakBytes - emulation.peakBytes).toBe(4 * 3 * 4 * 4864 + 2 * 38 * 24);
  });

  it('takes no split-K partials where the decode variant does not split, or the rows are many', () => {
    const noSplit = planMemory(
      { ...input, kernels: { avoidBarriers: false, vectorLoads: true, matmulSmall: 'reg16x64' } },
      roomy,
    );
    expect(noSplit.buffers.filter((b) => b.name.startsWith('GPU kernels: split-K'))).toEqual([]);
    // 8 × 64 training rows take the large variant (reg64x64); what still splits in the update
    // are the adapters' dA = duᵀ·x products (M = r = 16 rows, K = 512): down_proj's A (N 4864)
    // in 3.
    const tall = planMemory({ ...input, groupSize: 8, completionLength: 60 }, roomy);
    expect(entry(tall, 'GPU kernels: split-K partials (update)')?.bytes).toBe(4 * 3 * 16 * 4864);
    const fullTall = planMemory(
      { ...input, groupSize: 8, completionLength: 60, lora: null },
      roomy,
    );
    expect(entry(fullTall, 'GPU kernels: split-K partials (update)')).toBeUndefined();
  });
});
