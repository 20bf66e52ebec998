// The supervised (SFT) step on the GPU (PolicyObjective.supervised) against the independent
// PyTorch fixtures <name>_sft.* (tests/fixtures/make_fixtures.py make_sft_fixture): TRL's SFT loss
// (completion-only mean token cross-entropy with a hole inside one completion, as
// assistant_only_loss makes), mean_token_accuracy, the gradient norm, every parameter gradient
// and the weights after one clipped AdamW step, for both fixture models.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PolicyObjective } from '../../src/grpo/policy-objective';
import type { PackedBatch } from '../../src/model/batch';
import { GpuLlama } from '../../src/model/llama';
import { GpuAdamW } from '../../src/optim/adamw';
import { FIXTURE_NAMES, loadFixture } from '../fixtures/load';
import { testEngine, worstMismatch, type Tolerance } from './harness';

// The bounds of tests/kernels/model.test.ts (f32 on the GPU against f64 torch).
const GRADIENT_TOLERANCE: Tolerance = { atol: 2e-6, rtol: 2e-3 };
const LOSS_TOLERANCE = 1e-5;
// One AdamW step moves a weight by ≈ lr·sign(g): a wrong update is off by ~1e-2.
const ADAMW_TOLERANCE = 2e-4;
// A non-zero gradient this small has an f32-noise sign, so its weight is only held to one step
// of lr (a zero gradient, an embedding row the batch never uses, is held to the tight bound).
const ADAMW_NOISE_FLOOR = 1e-5;

interface SftFixture {
  batch: PackedBatch;
  loss: number;
  accuracy: number;
  gradNorm: number;
  lr: number;
  hp: { beta1: number; beta2: number; eps: number; weight_decay: number; max_grad_norm: number };
  grads: Map<string, Float64Array>;
  after: Map<string, Float64Array>;
}

function loadSftFixture(name: string): SftFixture {
  const dir = join(dirname(fileURLToPath(import.meta.url)), '../fixtures');
  const header = JSON.parse(readFileSync(join(dir, `${name}_sft.json`), 'utf8'));
  const bin = readFileSync(join(dir, `${name}_sft.bin`));
  const grads = new Map<string, Float64Array>();
  const after = new Map<string, Float64Array>();
  for (const [key, t] of Object.entries<{ offset: number; byteLength: number; dtype: string }>(
    header.tensors,
  )) {
    expect(t.dtype).toBe('f64');
    const bytes = bin.buffer.slice(
      bin.byteOffset + t.offset,
      bin.byteOffset + t.offset + t.byteLength,
    );
    const a = new Float64Array(bytes as ArrayBuffer);
    if (key.startsWith('grads/')) grads.set(key.slice(6), a);
    else if (key.startsWith('adamw/')) after.set(key.slice(6), a);
  }
  const b = header.batch;
  const { N, T, promptLength: P, completionLength: L } = b;
  const tokens = Uint32Array.from(b.tokens as number[]);
  const targets = new Uint32Array(N * L);
  for (let n = 0; n < N; n++)
    for (let j = 0; j < L; j++) targets[n * L + j] = tokens[n * T + P + j];
  return {
    batch: {
      N,
      T,
      P,
      L,
      tokens,
      keyStart: Uint32Array.from(b.keyStart),
      positions: Uint32Array.from(b.positions),
      targets,
      mask: Float32Array.from(b.lossMask),
    },
    loss: header.sft.loss,
    accuracy: header.sft.meanTokenAccuracy,
    gradNorm: header.sft.gradNorm,
    lr: header.adamw.lr,
    hp: header.adamw,
    grads,
    after,
  };
}

for (const name of FIXTURE_NAMES) {
  describe(`SFT step vs PyTorch fixture ${name}_sft`, () => {
    it('loss, mean_token_accuracy, every gradient and the weights after AdamW match', async () => {
      const fx = loadFixture(name);
      const sft = loadSftFixture(name);
      // The fixture's batch has a hole inside a completion and a partly correct greedy prefix.
      expect(sft.batch.mask.some((m, i) => m === 0 && sft.batch.mask[i + 1] === 1)).toBe(true);
      expect(sft.accuracy).toBe(0.3125);
      const engine = await testEngine();
      const policy = GpuLlama.load(engine, fx.config, fx.params);
      const optimizer = new GpuAdamW(engine, policy, {
        beta1: sft.hp.beta1,
        beta2: sft.hp.beta2,
        eps: sft.hp.eps,
        weightDecay: sft.hp.weight_decay,
        maxGradNorm: sft.hp.max_grad_norm,
      });
      const objective = new PolicyObjective(engine, policy, null, optimizer);
      const update = await objective.supervised(sft.batch, sft.lr);
      expect(update.skipped).toBeNull();
      expect(update.tokens).toBe(16);
      expect(Math.abs(update.loss - sft.loss)).toBeLessThan(LOSS_TOLERANCE);
      // 5 of 16 loss tokens are the argmax: exact in f32.
      expect(update.accuracy).toBe(sft.accuracy);
      expect(Math.abs(update.gradNorm - sft.gradNorm) / sft.gradNorm).toBeLessThan(1e-4);
      // AdamW reads the gradients and never writes them: these are the step's gradients.
      const grads = await policy.readGradients();
      expect([...grads.keys()].sort()).toEqual([...sft.grads.keys()].sort());
      for (const [param, expected] of sft.grads) {
        expect(worstMismatch(grads.get(param)!, expected, GRADIENT_TOLERANCE), param).toBeNull();
      }
      const params = await policy.readParameters();
      let loose = 0;
      let total = 0;
      for (const [param, expected] of sft.after) {
        const actual = params.get(param)!;
        const grad = sft.grads.get(param)!;
        for (let i = 0; i < expected.length; i++) {
          const noisy = grad[i] !== 0 && Math.abs(grad[i]) < ADAMW_NOISE_FLOOR;
          const atol = noisy ? sft.lr * 1.01 : ADAMW_TOLERANCE;
          if (!(Math.abs(actual[i] - expected[i]) <= atol)) {
            expect.fail(`${param}[${i}]: ${actual[i]} vs ${expected[i]} (gradient ${grad[i]})`);
          }
          loose += noisy ? 1 : 0;
          total += 1;
        }
      }
      expect(loose / total).toBeLessThan(0.05);
      optimizer.destroy();
      policy.destroy();
    });
  });
}
