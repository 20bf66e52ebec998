// Activation checkpointing (GpuLlamaOptions.gradientCheckpointing, config gradientCheckpointing,
// TRL gradient_checkpointing): the training forward keeps only each layer's input and backward
// recomputes the layer from it. The recompute runs the same kernels on the same inputs, so every
// gradient must equal the plain run's bit for bit (full fine-tune and LoRA), and the engine's
// measured peak of one forward + backward must drop by exactly the per-layer activations of L − 1
// layers, less the one (R, C) buffer the recomputed layer output takes. Also: the trainer passes
// the config option to the model and a checkpointed GRPO step updates the weights bit for bit.
import { describe, expect, it } from 'vitest';
import { hasQkNorm, numel, type LlamaConfig } from '../../src/core/model-config';
import { readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { grpoConfigArgs } from '../../src/export/trl-export';
import { parseCliArgs, resolveConfig } from '../../src/grpo/config';
import { initLlamaWeights } from '../../src/model/init';
import { GpuLlama } from '../../src/model/llama';
import { positionsFromKeyStart } from '../../src/ref/llama';
import { loraAdapterSpecs, type LoraOptions } from '../../src/core/lora';
import { makeTrainer, modelConfig as trainerModel } from '../support/tiny-trainer';
import { seededUniform, testEngine } from './harness';

const F32 = 4;

// Three layers (so that two layers' activations are saved), GQA, Qwen2's q/k/v bias, untied head.
const qwen2: LlamaConfig = {
  architecture: 'Qwen2ForCausalLM',
  hiddenSize: 16,
  intermediateSize: 40,
  numLayers: 3,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 4,
  vocabSize: 29,
  maxPositions: 32,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: false,
  attentionBias: true,
  bosTokenId: null,
  eosTokenIds: [0],
};
// Two left-padded sequences of 7 columns; the head reads the last 5 (the "completion").
// Qwen3's per-head q/k norms (their inputs are kept too) at the same sizes: the same matmul
// pipelines, so the case costs little beyond its run.
const qwen3: LlamaConfig = { ...qwen2, architecture: 'Qwen3ForCausalLM', attentionBias: false };
const N = 2;
const T = 7;
const HEAD = { start: 2, count: 5 };
const LORA: LoraOptions = {
  r: 3,
  alpha: 6,
  targetModules: 'all-linear',
  useRslora: false,
  dropout: 0,
};

/** Bytes of the intermediates one layer keeps for backward (llama.ts LayerActs, less x and out). */
function layerActivationBytes(c: LlamaConfig, n: number, t: number): number {
  const { hiddenSize: C, intermediateSize: I, numHeads: H, numKvHeads: Hkv, headDim: D } = c;
  const R = n * t;
  const perRow =
    C + // xn1: input_layernorm output
    1 + // rstd1
    2 * H * D + // q before and after rotary
    2 * Hkv * D + // k before and after rotary
    Hkv * D + // v
    H * D + // attention output
    C + // x2: residual after attention
    C + // xn2: post_attention_layernorm output
    1 + // rstd2
    3 * I + // gate, up, silu(gate)·up
    (hasQkNorm(c) ? (H + Hkv) * D + H + Hkv : 0); // Qwen3: q, k before their norms, and rstd
  return (R * perRow + n * H * t) * F32; // + lse (N, H, T)
}

interface StepResult {
  logits: Float32Array;
  grads: Map<string, Float32Array>;
  /** Peak live bytes during the first forward + backward, above the live bytes before it. */
  stepPeakBytes: number;
  workspaceBytes: number;
}

/** One forward + backward from a fixed dLogits on a freshly loaded model, then its gradients. */
async function step(
  gradientCheckpointing: boolean,
  lora: boolean,
  config: LlamaConfig = qwen2,
): Promise<StepResult> {
  const engine = await testEngine();
  const { device, memory } = engine;
  const weights = initLlamaWeights(config, 3, 0.2);
  // Non-zero B (PEFT starts B at 0, which would leave dA = 0 and the adapters out of the picture).
  const adapters = new Map(
    loraAdapterSpecs(config, LORA).map((s, i) => [
      s.name,
      seededUniform(numel(s.shape), 100 + i, -0.3, 0.3),
    ]),
  );
  const model = GpuLlama.load(engine, config, weights, {
    lora: lora ? { ...LORA, adapters } : undefined,
    gradientCheckpointing,
  });
  try {
    await model.ready;
    const keyStart = Uint32Array.from([0, 2]);
    const tokens = new Uint32Array(N * T);
    for (let i = 0; i < tokens.length; i++) tokens[i] = (i * 11 + 5) % config.vocabSize;
    const batch = model.uploadBatch(tokens, keyStart, positionsFromKeyStart(keyStart, N, T), N, T);
    const rows = N * HEAD.count;
    const dLogits = uploadStorageBuffer(
      device,
      seededUniform(rows * config.vocabSize, 42, -0.05, 0.05),
    );
    let logitsBuf: GPUBuffer | null = null;
    const liveBefore = memory.liveBytes;
    memory.resetPeak();
    await engine.run((enc) => {
      model.zeroGradients(enc);
      const state = model.forward(enc, batch, HEAD);
      logitsBuf = state.logits;
      model.backward(enc, state, dLogits);
    }, 'checkpointing test');
    const stepPeakBytes = memory.peakBytes - liveBefore;
    const logits = await readF32(device, logitsBuf!, rows * config.vocabSize);
    const grads = lora
      ? await model
          .readJoined(model.grads)
          .then((all) => new Map([...all].filter(([name]) => name.includes('lora_'))))
      : await model.readGradients();
    dLogits.destroy();
    return { logits, grads, stepPeakBytes, workspaceBytes: model.workspaceBytes };
  } finally {
    model.destroy();
  }
}

/** Bitwise equality of two f32 arrays (also tells +0 from −0 and NaN payloads apart). */
function firstBitDifference(a: Float32Array, b: Float32Array): number | null {
  if (a.length !== b.length) return -1;
  const [ua, ub] = [
    new Uint32Array(a.buffer, a.byteOffset, a.length),
    new Uint32Array(b.buffer, b.byteOffset, b.length),
  ];
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return null;
}

function expectBitIdentical(
  ckpt: Map<string, Float32Array>,
  plain: Map<string, Float32Array>,
  expectedNames: number,
) {
  expect([...ckpt.keys()].sort()).toEqual([...plain.keys()].sort());
  expect(plain.size).toBe(expectedNames);
  for (const [name, g] of plain) {
    // Not vacuous: every gradient has non-zero entries (the embedding's only at the batch's tokens).
    expect(
      g.some((v) => v !== 0),
      `${name} has a non-zero gradient`,
    ).toBe(true);
    const at = firstBitDifference(ckpt.get(name)!, g);
    expect(at, `${name}[${at}]: ${ckpt.get(name)![at ?? 0]} vs ${g[at ?? 0]}`).toBeNull();
  }
}

describe('activation checkpointing', () => {
  const config = qwen2;
  const bytesPerLayer = layerActivationBytes(config, N, T);
  // What checkpointing saves: L − 1 layers' intermediates (one shared set remains), less the
  // scratch (R, C) buffer the recomputed layer writes its output to.
  const expectedSaving = (config.numLayers - 1) * bytesPerLayer - N * T * config.hiddenSize * F32;

  for (const lora of [false, true]) {
    const what = lora ? 'LoRA (usePeft): every adapter gradient' : 'full fine-tune: every gradient';
    it(`${what} is bit-identical, and the measured peak drops by L − 1 layers' activations`, async () => {
      const plain = await step(false, lora);
      const ckpt = await step(true, lora);
      const layerLinears = 7;
      const expectedNames = lora
        ? config.numLayers * layerLinears * 2 // lora_A and lora_B per projection
        : initLlamaWeights(config, 0).size;
      expect(firstBitDifference(ckpt.logits, plain.logits)).toBeNull();
      expectBitIdentical(ckpt.grads, plain.grads, expectedNames);

      const saving = plain.stepPeakBytes - ckpt.stepPeakBytes;
      console.log(
        `checkpointing (${lora ? 'LoRA' : 'full'}): step peak ${plain.stepPeakBytes} → ` +
          `${ckpt.stepPeakBytes} bytes, saved ${saving} = ${config.numLayers - 1} × ` +
          `${bytesPerLayer} (one layer's activations) − ${N * T * config.hiddenSize * F32} ` +
          `(recompute output)`,
      );
      expect(saving).toBe(expectedSaving);
      expect(plain.workspaceBytes - ckpt.workspaceBytes).toBe(expectedSaving);
    });
  }

  it("Qwen3 (q/k norms): every gradient is bit-identical, and the saving counts the norms' inputs", async () => {
    const plain = await step(false, false, qwen3);
    const ckpt = await step(true, false, qwen3);
    expect(firstBitDifference(ckpt.logits, plain.logits)).toBeNull();
    // q_norm and k_norm are in the list, each with a non-zero gradient.
    expect(plain.grads.has('model.layers.2.self_attn.k_norm.weight')).toBe(true);
    expectBitIdentical(ckpt.grads, plain.grads, initLlamaWeights(qwen3, 0).size);
    const saving =
      (qwen3.numLayers - 1) * layerActivationBytes(qwen3, N, T) - N * T * qwen3.hiddenSize * F32;
    expect(plain.stepPeakBytes - ckpt.stepPeakBytes).toBe(saving);
  });

  it('is off by default; --gradient-checkpointing and the TRL name set it; the TRL export writes it', () => {
    expect(resolveConfig({}).gradientCheckpointing).toBe(false);
    for (const flag of ['--gradient-checkpointing', '--gradient_checkpointing'])
      expect(parseCliArgs([flag]).gradientCheckpointing).toBe(true);
    const args = (on: boolean) =>
      new Map(grpoConfigArgs(resolveConfig({ gradientCheckpointing: on })));
    expect(args(true).get('gradient_checkpointing')).toBe('True');
    expect(args(false).get('gradient_checkpointing')).toBe('False');
  });

  it('the trainer passes gradientCheckpointing to the policy; a GRPO step updates the weights bit for bit', async () => {
    const results: Map<string, Float32Array>[] = [];
    for (const gradientCheckpointing of [false, true]) {
      const trainer = await makeTrainer({ gradientCheckpointing, steps: 1 });
      try {
        expect(trainer.policy.gradientCheckpointing).toBe(gradientCheckpointing);
        const report = await trainer.trainStep();
        expect(report.skipped).toBeNull();
        results.push(await trainer.policy.readParameters());
      } finally {
        trainer.destroy();
      }
    }
    const [plain, ckpt] = results;
    const initial = initLlamaWeights(trainerModel, 1); // makeTrainer's starting weights
    let moved = 0;
    for (const [name, w] of plain) {
      expect(firstBitDifference(ckpt.get(name)!, w), name).toBeNull();
      if (firstBitDifference(w, initial.get(name)!) !== null) moved++;
    }
    expect(moved).toBeGreaterThan(0);
  });
});
