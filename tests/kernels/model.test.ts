// The WebGPU Llama (src/model/llama.ts) against the independent PyTorch fixtures: logits, the
// temperature-scaled completion log-probs (logprob_gather), and every parameter gradient of the
// fixture's GRPO loss pushed back through logprob_gather_backward and the model's backward.
// Also: KV-cache generation gives the same logits as a full forward over the same tokens.
import { describe, expect, it } from 'vitest';
import { readF32, uploadStorageBuffer, createStorageBuffer } from '../../src/engine/buffers';
import { decodeGrpoLossOut, GrpoLossKernel, GRPO_LOSS_OUT } from '../../src/kernels/grpo-loss';
import { LogprobGatherBackwardKernel, LogprobGatherKernel } from '../../src/kernels/logprob';
import { GpuLlama } from '../../src/model/llama';
import { GpuAdamW } from '../../src/optim/adamw';
import { FIXTURE_NAMES, loadFixture } from '../fixtures/load';
import { testEngine, worstMismatch, type Tolerance } from './harness';

// f32 on the GPU against f64 in torch: logits are sums over C ≤ 32 and a few layers.
const LOGIT_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 1e-4 };
const LOGP_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 1e-4 };
// Gradients go through every layer backwards in f32; tiny entries get the absolute bound.
const GRADIENT_TOLERANCE: Tolerance = { atol: 2e-6, rtol: 2e-3 };
// Three AdamW steps at lr 1e-2: each step moves a weight by ~lr·m̂/√v̂, and m̂/√v̂ of a tiny
// gradient is sensitive to f32 rounding of that gradient, so the bound is absolute and a small
// fraction of one step (a wrong update is off by ~1e-2).
const ADAMW_TOLERANCE: Tolerance = { atol: 2e-4, rtol: 0 };
const LOSS_TOLERANCE = 1e-5;
const ADAMW_NOISE_FLOOR = 1e-5;

for (const name of FIXTURE_NAMES) {
  describe(`GpuLlama vs PyTorch fixture ${name}`, () => {
    const fx = loadFixture(name);
    const { N, T, promptLength: P, completionLength: L, tokens, keyStart, positions } = fx.batch;
    const V = fx.config.vocabSize;
    const invT = 1 / fx.header.grpo.temperature;

    it('logits, completion log-probs and every gradient match', async () => {
      const engine = await testEngine();
      const model = GpuLlama.load(engine, fx.config, fx.params);
      await model.ready; // pipelines compiled, so encoding below never compiles
      const batch = model.uploadBatch(tokens, keyStart, positions, N, T);
      const targets = new Uint32Array(N * L);
      for (let n = 0; n < N; n++)
        for (let j = 0; j < L; j++) targets[n * L + j] = tokens[n * T + P + j];
      const targetsBuf = uploadStorageBuffer(engine.device, targets);
      const R = N * L;
      const logp = createStorageBuffer(engine.device, R * 4);
      const entropy = createStorageBuffer(engine.device, R * 4);
      const lse = createStorageBuffer(engine.device, R * 4);
      const gradLogp = uploadStorageBuffer(engine.device, Float32Array.from(fx.dLossDLogp));
      const dLogits = createStorageBuffer(engine.device, R * V * 4);
      const gather = new LogprobGatherKernel(engine.device, engine.pipelines);
      const gatherBackward = new LogprobGatherBackwardKernel(engine.device, engine.pipelines);

      let logitsBuf: GPUBuffer | null = null;
      await engine.run(async (enc) => {
        const state = model.forward(enc, batch, { start: P - 1, count: L });
        logitsBuf = state.logits;
        gather.encode(enc, {
          logits: state.logits,
          targets: targetsBuf,
          logp,
          entropy,
          lse,
          R,
          V,
          invTemperature: invT,
        });
        gatherBackward.encode(enc, {
          logits: state.logits,
          targets: targetsBuf,
          lse,
          gradLogp,
          dLogits,
          R,
          V,
          invTemperature: invT,
        });
        model.allocateGradients();
        model.zeroGradients(enc);
        model.backward(enc, state, dLogits);
      });

      const gpuLogits = await readF32(engine.device, logitsBuf!, R * V);
      const expectedLogits = new Float64Array(R * V);
      for (let n = 0; n < N; n++) {
        const from = (n * T + P - 1) * V;
        expectedLogits.set(fx.logits.subarray(from, from + L * V), n * L * V);
      }
      expect(worstMismatch(gpuLogits, expectedLogits, LOGIT_TOLERANCE)).toBeNull();
      expect(
        worstMismatch(await readF32(engine.device, logp, R), fx.logp, LOGP_TOLERANCE),
      ).toBeNull();

      const grads = await model.readGradients();
      expect([...grads.keys()].sort()).toEqual([...fx.grads.keys()].sort());
      for (const [param, expected] of fx.grads) {
        const mismatch = worstMismatch(grads.get(param)!, expected, GRADIENT_TOLERANCE);
        expect(mismatch, `gradient of ${param}`).toBeNull();
      }
      // A gradient that is all zeros would pass a loose test: the fixture's are not.
      expect(Math.max(...fx.grads.get('model.embed_tokens.weight')!.map(Math.abs))).toBeGreaterThan(
        1e-4,
      );
      model.destroy();
    });

    it('the whole GPU training step (GRPO loss, clip, AdamW) matches 3 PyTorch steps', async () => {
      const engine = await testEngine();
      const { device } = engine;
      const hp = fx.header.adamw;
      const { grpo } = fx.header;
      const model = GpuLlama.load(engine, fx.config, fx.params);
      await model.ready; // pipelines compiled, so encoding below never compiles
      const optimizer = new GpuAdamW(engine, model, {
        beta1: hp.beta1,
        beta2: hp.beta2,
        eps: hp.eps,
        weightDecay: hp.weight_decay,
        maxGradNorm: hp.max_grad_norm,
      });
      const batch = model.uploadBatch(tokens, keyStart, positions, N, T);
      const R = N * L;
      const targets = new Uint32Array(R);
      for (let n = 0; n < N; n++)
        for (let j = 0; j < L; j++) targets[n * L + j] = tokens[n * T + P + j];
      const f32 = (a: ArrayLike<number>) => uploadStorageBuffer(device, Float32Array.from(a));
      const targetsBuf = uploadStorageBuffer(device, targets);
      const [oldLogp, refLogp, advantages, mask] = [
        fx.oldLogp,
        fx.refLogp,
        fx.advantages,
        fx.batch.completionMask,
      ].map(f32);
      const [logp, entropy, lse, dLogp] = [0, 0, 0, 0].map(() =>
        createStorageBuffer(device, R * 4),
      );
      const dLogits = createStorageBuffer(device, R * V * 4);
      const out = createStorageBuffer(device, GRPO_LOSS_OUT.length * 4);
      const gather = new LogprobGatherKernel(device, engine.pipelines);
      const gatherBackward = new LogprobGatherBackwardKernel(device, engine.pipelines);
      const loss = new GrpoLossKernel(device, engine.pipelines);
      for (let step = 0; step < hp.steps; step++) {
        await engine.run(async (enc) => {
          model.zeroGradients(enc);
          const state = model.forward(enc, batch, { start: P - 1, count: L });
          gather.encode(enc, {
            logits: state.logits,
            targets: targetsBuf,
            logp,
            entropy,
            lse,
            R,
            V,
            invTemperature: invT,
          });
          loss.encode(enc, {
            logp,
            oldLogp,
            refLogp,
            advantages,
            mask,
            dLogp,
            out,
            N,
            L,
            lossType: hp.loss_type,
            epsilonLow: grpo.epsilon,
            epsilonHigh: grpo.epsilonHigh,
            beta: grpo.beta,
            maxCompletionLength: L,
          });
          gatherBackward.encode(enc, {
            logits: state.logits,
            targets: targetsBuf,
            lse,
            gradLogp: dLogp,
            dLogits,
            R,
            V,
            invTemperature: invT,
          });
          model.backward(enc, state, dLogits);
          optimizer.encodeStep(enc, hp.lr);
        });
        const stats = await optimizer.readStats();
        expect(stats.finite).toBe(true);
        optimizer.commitStep();
        expect(Math.abs(stats.norm - hp.gradNorms[step]) / hp.gradNorms[step]).toBeLessThan(1e-4);
        const { loss: gpuLoss } = decodeGrpoLossOut(
          await readF32(device, out, GRPO_LOSS_OUT.length),
        );
        expect(Math.abs(gpuLoss - hp.losses[step])).toBeLessThan(LOSS_TOLERANCE);
      }
      const params = await model.readParameters();
      // AdamW steps each weight by ≈ lr·m̂/√v̂: for a gradient below the f32 gradient noise
      // (0 < |g| < ADAMW_NOISE_FLOOR) even the direction is rounding noise in both implementations, so
      // those weights are only held to 3 steps of lr; they must stay a small minority.
      let loose = 0;
      let total = 0;
      for (const [param, expected] of fx.paramsAfterAdamw) {
        const actual = params.get(param)!;
        const grad = fx.grads.get(param)!;
        for (let i = 0; i < expected.length; i++) {
          const noisy = grad[i] !== 0 && Math.abs(grad[i]) < ADAMW_NOISE_FLOOR;
          const atol = noisy ? 3 * hp.lr * 1.01 : ADAMW_TOLERANCE.atol;
          if (!(Math.abs(actual[i] - expected[i]) <= atol)) {
            expect.fail(
              `${param}[${i}] after 3 steps: ${actual[i]} vs ${expected[i]} (gradient ${grad[i]})`,
            );
          }
          loose += noisy ? 1 : 0;
          total += 1;
        }
      }
      expect(loose / total).toBeLessThan(0.05);
      optimizer.destroy();
      model.destroy();
    });

    it('prefill + decode steps through the KV cache give the full-forward logits', async () => {
      const engine = await testEngine();
      const model = GpuLlama.load(engine, fx.config, fx.params);
      await model.ready; // pipelines compiled, so encoding below never compiles
      const cache = model.createKvCache(N, T, keyStart);
      const promptTokens = new Uint32Array(N * P);
      const promptPositions = new Uint32Array(N * P);
      for (let n = 0; n < N; n++) {
        promptTokens.set(tokens.subarray(n * T, n * T + P), n * P);
        promptPositions.set(positions.subarray(n * T, n * T + P), n * P);
      }
      const step = (cols: number) => ({
        tokens: createStorageBuffer(engine.device, N * cols * 4),
        positions: createStorageBuffer(engine.device, N * cols * 4),
      });
      const prompt = step(P);
      engine.device.queue.writeBuffer(prompt.tokens, 0, promptTokens);
      engine.device.queue.writeBuffer(prompt.positions, 0, promptPositions);
      const perColumn: Float32Array[] = [];
      let logits: GPUBuffer | null = null;
      await engine.run(async (enc) => {
        logits = model.extend(enc, cache, prompt.tokens, prompt.positions, P, 0);
      });
      perColumn.push(await readF32(engine.device, logits!, N * V));
      const one = step(1);
      for (let t = P; t < T - 1; t++) {
        engine.device.queue.writeBuffer(
          one.tokens,
          0,
          Uint32Array.from({ length: N }, (_, n) => tokens[n * T + t]),
        );
        engine.device.queue.writeBuffer(
          one.positions,
          0,
          Uint32Array.from({ length: N }, (_, n) => positions[n * T + t]),
        );
        await engine.run(async (enc) => {
          logits = model.extend(enc, cache, one.tokens, one.positions, 1, t);
        });
        perColumn.push(await readF32(engine.device, logits!, N * V));
      }
      // perColumn[j] holds the logits of column P − 1 + j for every sequence.
      for (let j = 0; j < perColumn.length; j++) {
        const expected = new Float64Array(N * V);
        for (let n = 0; n < N; n++)
          expected.set(fx.logits.subarray((n * T + P - 1 + j) * V, (n * T + P + j) * V), n * V);
        expect(
          worstMismatch(perColumn[j], expected, LOGIT_TOLERANCE),
          `column ${P - 1 + j}`,
        ).toBeNull();
      }
      model.destroy();
    });
  });
}
