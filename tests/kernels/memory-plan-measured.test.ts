// The memory plan against the engine's own count: real GRPO steps of a tiny random model through
// the real trainer on Node WebGPU, for each option the plan covers (full fine-tune f32 with and
// without the reference copy, LoRA with β = 0 and β > 0, gradient checkpointing, micro-batches,
// 16-bit and NF4 bases, the GPU path's kernel partials; SFT stages in full, LoRA and QLoRA),
// and the plan's peak (planRunMemory, what every front end shows) within 10% of the measured one.
import { describe, expect, it } from 'vitest';
import type { LlamaConfig } from '../../src/core/model-config';
import type { ConfigInput } from '../../src/grpo/config';
import { planRunMemory } from '../../src/train/run';
import { GrpoTrainer } from '../../src/grpo/trainer';
import { initLlamaWeights } from '../../src/model/init';
import type { Task } from '../../src/tasks/types';
import { config, startsWithA, tokenizer } from '../support/tiny-trainer';
import type { KernelTuning } from '../../src/engine/pipelines';
import { testEngine, testEngineWith } from './harness';
import { planSftMemory, SftRun } from '../../src/train/sft';
import { resolveSftConfig } from '../../src/train/sft-config';
import type { SftExample } from '../../src/train/sft-data';

// Every prompt is 4 tokens, so the batch's prompt width is exactly maxPromptLength.
const PROMPT = 'abc?';
const fixedTask: Task = {
  name: 'fixed',
  description: 'one 4-token prompt, for memory measurements',
  generate: (seed, count) =>
    Array.from({ length: count }, (_, i) => ({
      id: `fixed-${seed}-${i}`,
      task: 'fixed',
      question: PROMPT,
      reference: null,
      verifier: { kind: 'none' as const },
    })),
  formatPrompt: (problem) => ({ kind: 'text', text: problem.question }),
  verify: () => null,
};

// V = 512 (ids past the tokenizer's alphabet decode to nothing): EOS (id 0) is drawn rarely, so
// the longest completion of a step reaches maxCompletionLength, the width the plan assumes.
const base: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 32,
  intermediateSize: 96,
  numLayers: 3,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
  vocabSize: 512,
  maxPositions: 64,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  attentionBias: false,
  bosTokenId: null,
  eosTokenIds: [0],
};
const qwenLike: LlamaConfig = {
  ...base,
  architecture: 'Qwen2ForCausalLM',
  tieWordEmbeddings: true,
  attentionBias: true,
};

// Qwen3: per-head q/k norms (their inputs kept for backward), head_dim 16 ≠ hidden / heads = 8.
const qwen3Like: LlamaConfig = {
  ...base,
  architecture: 'Qwen3ForCausalLM',
  headDim: 16,
  tieWordEmbeddings: true,
};

const lora = { usePeft: true, loraR: 4, loraAlpha: 8, loraTargetModules: ['all-linear'] };
/** Weights whose values are all bf16 values (low 16 bits cleared): what dtype 'auto' keeps 16-bit. */
function bf16Valued(weights: Map<string, Float32Array>): Map<string, Float32Array> {
  for (const data of weights.values()) {
    const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
    for (let i = 0; i < bits.length; i++) bits[i] &= 0xffff0000;
  }
  return weights;
}

// The GPU path (barrier kernels, split-K for decode-sized products, row-split sampling, log-prob
// gather and RMSNorm weight gradients: their partials are run scratch, src/engine/memory.ts) on a
// model wide enough that decode products split K (C = 128 ≥ 2 · MATMUL_MIN_SPLIT_K) and training
// rows that split the LoRA dA products and the norms' weight gradients (R = 8 · 16 = 128 rows).
// Chunks of 256 entries split the 512-token vocabulary in two.
const GPU_PATH: KernelTuning = {
  avoidBarriers: false,
  vectorLoads: true,
  sampleChunk: 256,
  logprobChunk: 256,
};
const wide: LlamaConfig = {
  ...base,
  architecture: 'Qwen2ForCausalLM',
  hiddenSize: 128,
  intermediateSize: 192,
  numLayers: 2,
  headDim: 32,
  tieWordEmbeddings: true,
  attentionBias: true,
};

const CASES: {
  name: string;
  model: LlamaConfig;
  overrides: Partial<ConfigInput>;
  bf16Weights?: boolean;
  /** Kernel variants (default: the adapter's own, the emulation path on SwiftShader). */
  tuning?: KernelTuning;
  /** Largest |planned − measured| / measured (default 10%). */
  tolerance?: number;
}[] = [
  { name: 'full fine-tune f32, β = 0', model: base, overrides: { beta: 0 } },
  { name: 'full fine-tune f32, β > 0 (reference copy)', model: base, overrides: { beta: 0.04 } },
  { name: 'LoRA all-linear, β = 0', model: base, overrides: { ...lora, beta: 0 } },
  {
    name: 'LoRA, β > 0 (adapters off, no copy), tied + bias',
    model: qwenLike,
    overrides: { ...lora, beta: 0.04 },
  },
  {
    name: 'full fine-tune, gradient checkpointing',
    model: base,
    overrides: { gradientCheckpointing: true },
  },
  {
    name: 'LoRA, checkpointing, 2 micro-batches',
    model: qwenLike,
    overrides: { ...lora, gradientCheckpointing: true, gradientAccumulationSteps: 2 },
  },
  { name: 'LoRA on a bfloat16 base', model: qwenLike, overrides: { ...lora, dtype: 'bfloat16' } },
  {
    name: 'chunked head (2-row logits chunks), full fine-tune, β > 0',
    model: base,
    overrides: { logitsMemoryMiB: 0.01, beta: 0.04 },
  },
  {
    name: 'LoRA + bfloat16 + checkpointing + chunked head',
    model: qwenLike,
    overrides: { ...lora, dtype: 'float16', gradientCheckpointing: true, logitsMemoryMiB: 0.02 },
  },
  {
    name: "LoRA, dtype 'auto' on a bf16 checkpoint (the plan reads the weights as the trainer does)",
    model: qwenLike,
    overrides: { ...lora, dtype: 'auto' },
    bf16Weights: true,
  },
  // NF4 (QLoRA): each projection one buffer of 4-bit codes + f32 block scales, the embedding
  // and LM head bf16 (the plan's nf4MatrixBytes).
  {
    name: 'LoRA on an NF4 base (QLoRA), tied + bias',
    model: qwenLike,
    overrides: { ...lora, dtype: 'nf4' },
  },
  {
    name: 'LoRA on an NF4 base, nested scales, checkpointing, 2 micro-batches, untied, β > 0',
    model: base,
    overrides: {
      ...lora,
      dtype: 'nf4',
      useBnbNestedQuant: true,
      gradientCheckpointing: true,
      gradientAccumulationSteps: 2,
      beta: 0.04,
    },
  },
  {
    name: 'Qwen3 (q/k norms, head_dim ≠ C/H), LoRA + bfloat16 + checkpointing, β > 0',
    model: qwen3Like,
    overrides: { ...lora, dtype: 'bfloat16', gradientCheckpointing: true, beta: 0.04 },
  },
  // Before the GPU path's partials were shared per run, every split product kept its own buffer
  // until the run ended, and the plan counted none: this LoRA case measured 5,416,680 B against
  // 4,233,448 B planned, the full fine-tune 12,856,008 B against 11,701,512 B.
  {
    name: 'GPU path: LoRA on a bfloat16 base, split-K and row-split partials',
    model: wide,
    overrides: { ...lora, dtype: 'bfloat16', maxCompletionLength: 12 },
    tuning: GPU_PATH,
    tolerance: 0.02,
  },
  {
    name: 'GPU path: full fine-tune, β > 0 (RMSNorm weight-gradient partials)',
    model: wide,
    overrides: { beta: 0.04, maxCompletionLength: 12 },
    tuning: GPU_PATH,
    tolerance: 0.02,
  },
];

describe('memory plan vs the measured peak', { timeout: 600_000 }, () => {
  for (const { name, model, overrides, bf16Weights, tuning, tolerance = 0.1 } of CASES) {
    const within = `${Math.round(100 * tolerance)}%`;
    it(`${name}: planned peak within ${within} of the engine's peak over two steps`, async () => {
      const engine = await (tuning ? testEngineWith(tuning) : testEngine());
      const cfg = config({
        perStepPrompts: 2,
        numGenerations: 4,
        maxPromptLength: PROMPT.length,
        maxCompletionLength: 8,
        temperature: 1.5,
        ...overrides,
      });
      const before = engine.memory.liveBytes;
      engine.memory.resetPeak();
      const weights = initLlamaWeights(model, 3);
      if (bf16Weights) bf16Valued(weights);
      const trainer = new GrpoTrainer({
        engine,
        config: cfg,
        modelConfig: model,
        weights,
        tokenizer,
        task: fixedTask,
        rewardFunctions: [startsWithA],
      });
      // The weights as stored (f32, 16-bit or NF4 buffers, adapters): the plan's byte for byte.
      const parameterBytes = trainer.policy.parameters.parameterBytes;
      let longest = 0;
      try {
        for (let s = 0; s < 2; s++) {
          const report = await trainer.trainStep();
          for (const g of report.groups)
            for (const c of g.completions) longest = Math.max(longest, c.logp.length);
        }
      } finally {
        trainer.destroy();
      }
      const measured = engine.memory.peakBytes - before;
      // Everything the run allocated came back.
      expect(engine.memory.liveBytes).toBe(before);
      expect(longest).toBe(cfg.maxCompletionLength);
      const { limits } = engine.device;
      const plan = planRunMemory(model, cfg, limits, undefined, weights, engine.pipelines.tuning);
      if (bf16Weights) expect(plan.input.dtype).toBe('bfloat16');
      expect(parameterBytes).toBe(plan.byCategory.parameters);
      console.log(`${name}: measured ${measured} B, planned ${plan.peakBytes} B`);
      expect(Math.abs(measured - plan.peakBytes)).toBeLessThanOrEqual(tolerance * measured);
    });
  }
});

// SFT stages (objective 'sft': no sampling, one packed batch through the cross-entropy step).
// Examples of different prompt and completion lengths: the plan takes the widest of each.
const sftExamples: SftExample[] = Array.from({ length: 6 }, (_, i) => {
  const prompt = Array.from({ length: 3 + (i % 3) }, (_, t) => (7 * i + t) % 500);
  const completion = Array.from({ length: 12 - (i % 4) }, (_, t) => (11 * i + 3 * t) % 500);
  return {
    line: i + 1,
    prompt,
    completion,
    mask: completion.map(() => 1),
    tokens: prompt.length + completion.length,
  };
});
const SFT_CASES: { name: string; model: LlamaConfig; options: Record<string, unknown> }[] = [
  { name: 'full fine-tune', model: base, options: {} },
  {
    name: 'LoRA on a bfloat16 base',
    model: qwenLike,
    options: { usePeft: true, loraR: 4, dtype: 'bfloat16' },
  },
  {
    name: 'QLoRA (NF4 base), gradient checkpointing, chunked head',
    model: qwen3Like,
    options: {
      usePeft: true,
      loraR: 4,
      dtype: 'nf4',
      gradientCheckpointing: true,
      logitsMemoryMiB: 0.01,
    },
  },
];

describe('SFT memory plan vs the measured peak', { timeout: 600_000 }, () => {
  for (const { name, model, options } of SFT_CASES) {
    it(`${name}: planned peak within 10% of the engine's peak over two steps`, async () => {
      const engine = await testEngine();
      const config = resolveSftConfig({
        perDeviceTrainBatchSize: 4,
        maxSteps: 2,
        learningRate: 1e-3,
        ...options,
      });
      const before = engine.memory.liveBytes;
      engine.memory.resetPeak();
      const weights = initLlamaWeights(model, 3);
      const run = new SftRun({
        engine,
        runId: 'sft-memory',
        config,
        model: { config: model, weights },
        examples: sftExamples,
        padTokenId: 0,
      });
      try {
        await run.step();
        await run.step();
      } finally {
        run.destroy();
      }
      const measured = engine.memory.peakBytes - before;
      expect(engine.memory.liveBytes).toBe(before);
      const plan = planSftMemory(
        model,
        config,
        sftExamples,
        weights,
        engine.device.limits,
        undefined,
        engine.pipelines.tuning,
      );
      expect(run.plan.peakBytes).toBe(plan.peakBytes);
      expect(plan.byCategory.sampling).toBe(0);
      console.log(`SFT ${name}: measured ${measured} B, planned ${plan.peakBytes} B`);
      expect(Math.abs(measured - plan.peakBytes)).toBeLessThanOrEqual(0.1 * measured);
    });
  }

  it('a stage that must fit and does not is refused with the plan, before anything is made', async () => {
    const engine = await testEngine();
    const config = resolveSftConfig({ perDeviceTrainBatchSize: 4, maxSteps: 1 });
    const before = engine.memory.liveBytes;
    const setup = {
      engine,
      runId: 'sft-too-large',
      config,
      model: { config: base, weights: initLlamaWeights(base, 3) },
      examples: sftExamples,
      padTokenId: 0,
      mustFit: true,
      budgetBytes: 100_000,
    };
    expect(() => new SftRun(setup)).toThrow(
      /^Does not fit: a step of 4 examples of up to 5 \+ 12 tokens needs .* To fit: .*train LoRA adapters/,
    );
    expect(engine.memory.liveBytes).toBe(before);
  });
});
