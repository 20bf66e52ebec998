// LoRA on the WebGPU Llama (src/model/llama.ts with adapters, src/optim/adamw.ts on the adapters
// only) against the independent PyTorch LoRA fixtures (tests/fixtures/make_fixtures.py,
// make_lora_fixture; B non-zero): logits and log-probs, every adapter gradient (dA, dB per
// projection), the whole GRPO training step (loss, clip, AdamW) for 3 steps with the adapters
// checked after each, the frozen base (no gradients, no moments, weights unchanged), "adapters off
// = the base model" bit for bit, and KV-cache generation through the adapters. Then the trainer
// with usePeft: adapters only, the reference policy without a second copy, adapter-only snapshots.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { decodeGrpoLossOut, GrpoLossKernel, GRPO_LOSS_OUT } from '../../src/kernels/grpo-loss';
import { LogprobGatherBackwardKernel, LogprobGatherKernel } from '../../src/kernels/logprob';
import { GpuLlama, type ForwardState } from '../../src/model/llama';
import { GpuAdamW } from '../../src/optim/adamw';
import { RefLlama, positionsFromKeyStart } from '../../src/ref/llama';
import { loraAdapterSpecs, type LoraOptions } from '../../src/core/lora';
import {
  CHECKPOINT_FILES,
  checkpointFromFiles,
  checkpointToFiles,
  payloadToSnapshot,
  snapshotToPayload,
} from '../../src/train/checkpoint';
import { makeTrainer, modelConfig, config as tinyConfig } from '../support/tiny-trainer';
import { LORA_FIXTURE_NAMES, loadLoraFixture, type LoraFixture } from '../fixtures/load-lora';
import { seededUniform, testEngine, worstMismatch, type Tolerance } from './harness';

// The same bounds as the full-model fixture test (tests/kernels/model.test.ts): f32 on the GPU
// against f64 in torch. Measured here (both fixtures): logits ≤ 2.3e-6, log-probs ≤ 3.2e-6,
// adapter gradients and adapters after each AdamW step ≤ 4.5e-7 absolute.
const LOGIT_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 1e-4 };
const LOGP_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 1e-4 };
const GRADIENT_TOLERANCE: Tolerance = { atol: 2e-6, rtol: 2e-3 };
// A small fraction of one AdamW step (lr 1e-2): see model.test.ts.
const ADAMW_TOLERANCE: Tolerance = { atol: 2e-4, rtol: 0 };
const LOSS_TOLERANCE = 1e-5;

/** The model, its batch and the per-token buffers of the fixture's GRPO step. */
async function setup(fx: LoraFixture, lora = true) {
  const engine = await testEngine();
  const { device } = engine;
  const { N, T, promptLength: P, completionLength: L, tokens, keyStart, positions } = fx.base.batch;
  const model = GpuLlama.load(engine, fx.base.config, fx.base.params, {
    lora: lora ? { ...fx.options, adapters: fx.adapters } : undefined,
  });
  await model.ready;
  const batch = model.uploadBatch(tokens, keyStart, positions, N, T);
  const R = N * L;
  const targets = new Uint32Array(R);
  for (let n = 0; n < N; n++)
    for (let j = 0; j < L; j++) targets[n * L + j] = tokens[n * T + P + j];
  const buf = (floats: number) => createStorageBuffer(device, floats * 4);
  return {
    engine,
    model,
    batch,
    R,
    targets: uploadStorageBuffer(device, targets),
    logp: buf(R),
    entropy: buf(R),
    lse: buf(R),
    dLogp: buf(R),
    dLogits: buf(R * fx.base.config.vocabSize),
    gather: new LogprobGatherKernel(device, engine.pipelines),
    gatherBackward: new LogprobGatherBackwardKernel(device, engine.pipelines),
  };
}
type Setup = Awaited<ReturnType<typeof setup>>;

/** Forward + log-prob gather on `enc` (logits (N·L, V) in the returned state). */
function score(enc: GPUCommandEncoder, s: Setup, fx: LoraFixture): ForwardState {
  const state = s.model.forward(enc, s.batch, headOf(fx));
  s.gather.encode(enc, {
    ...{ logits: state.logits, targets: s.targets, logp: s.logp, entropy: s.entropy, lse: s.lse },
    ...{ R: s.R, V: fx.base.config.vocabSize, invTemperature: 1 / fx.header.grpo.temperature },
  });
  return state;
}

/** The fixture's logits at the head rows (N·L, V). */
function headLogits(fx: LoraFixture, logits: Float64Array): Float64Array {
  const { N, T, promptLength: P, completionLength: L } = fx.base.batch;
  const V = fx.base.config.vocabSize;
  const out = new Float64Array(N * L * V);
  for (let n = 0; n < N; n++) {
    const from = (n * T + P - 1) * V;
    out.set(logits.subarray(from, from + L * V), n * L * V);
  }
  return out;
}

for (const base of LORA_FIXTURE_NAMES) {
  describe(`GpuLlama with LoRA vs PyTorch fixture ${base}_lora`, () => {
    const fx = loadLoraFixture(base);
    const { N, completionLength: L } = fx.base.batch;
    const V = fx.base.config.vocabSize;
    const invT = 1 / fx.header.grpo.temperature;
    const adapterNames = loraAdapterSpecs(fx.base.config, fx.options).map((s) => s.name);

    it('logits, log-probs and every adapter gradient match; the base gets no gradient', async () => {
      const s = await setup(fx);
      const { engine, model } = s;
      const gradLogp = uploadStorageBuffer(engine.device, Float32Array.from(fx.dLossDLogp));
      let logits: GPUBuffer | null = null;
      await engine.run((enc) => {
        const state = score(enc, s, fx);
        logits = state.logits;
        s.gatherBackward.encode(enc, {
          ...{ logits: state.logits, targets: s.targets, lse: s.lse, gradLogp, dLogits: s.dLogits },
          ...{ R: s.R, V, invTemperature: invT },
        });
        model.allocateGradients();
        model.zeroGradients(enc);
        model.backward(enc, state, s.dLogits);
      });
      const gpuLogits = await readF32(engine.device, logits!, s.R * V);
      expect(worstMismatch(gpuLogits, headLogits(fx, fx.logits), LOGIT_TOLERANCE)).toBeNull();
      const logp = await readF32(engine.device, s.logp, N * L);
      expect(worstMismatch(logp, fx.logp, LOGP_TOLERANCE)).toBeNull();
      // Only the adapters have gradient buffers: the base is frozen.
      expect([...model.grads.keys()]).toEqual(adapterNames);
      const grads = await model.readGradients();
      expect([...grads.keys()]).toEqual(adapterNames);
      for (const name of adapterNames) {
        const expected = fx.grads.get(name)!;
        expect(worstMismatch(grads.get(name)!, expected, GRADIENT_TOLERANCE), name).toBeNull();
        expect(Math.max(...expected.map(Math.abs)), name).toBeGreaterThan(1e-6);
      }
      model.destroy();
    });

    it('adapters off give the plain model bit for bit (the reference policy needs no copy)', async () => {
      const s = await setup(fx);
      const plain = await setup(fx, false);
      const read = async (t: Setup, off: boolean) => {
        let logits: GPUBuffer | null = null;
        await t.engine.run((enc) => {
          const go = () => (logits = score(enc, t, fx).logits);
          if (off) t.model.withAdaptersDisabled(go);
          else go();
        });
        return {
          logits: await readF32(t.engine.device, logits!, t.R * V),
          logp: await readF32(t.engine.device, t.logp, N * L),
        };
      };
      const off = await read(s, true);
      const ref = await read(plain, false);
      expect(off.logits).toEqual(ref.logits);
      expect(off.logp).toEqual(ref.logp);
      expect(worstMismatch(off.logp, fx.refLogp, LOGP_TOLERANCE)).toBeNull();
      // And the adapters are back on afterwards.
      const on = await read(s, false);
      expect(worstMismatch(on.logp, fx.logp, LOGP_TOLERANCE)).toBeNull();
      s.model.destroy();
      plain.model.destroy();
    });

    it('3 GRPO steps (loss, clip, AdamW) move only the adapters, as torch does', async () => {
      const s = await setup(fx);
      const { engine, model } = s;
      const { device } = engine;
      const hp = fx.header.adamw;
      const { grpo } = fx.header;
      const optimizer = new GpuAdamW(engine, model, {
        beta1: hp.beta1,
        beta2: hp.beta2,
        eps: hp.eps,
        weightDecay: hp.weight_decay,
        maxGradNorm: hp.max_grad_norm,
      });
      await optimizer.ready;
      const f32 = (a: ArrayLike<number>) => uploadStorageBuffer(device, Float32Array.from(a));
      const [oldLogp, refLogp, advantages, mask] = [
        fx.oldLogp,
        fx.refLogp,
        fx.base.advantages,
        fx.base.batch.completionMask,
      ].map(f32);
      const out = createStorageBuffer(device, GRPO_LOSS_OUT.length * 4);
      const loss = new GrpoLossKernel(device, engine.pipelines);
      await loss.prepare();
      for (let step = 0; step < hp.steps; step++) {
        await engine.run((enc) => {
          model.zeroGradients(enc);
          const state = model.forward(enc, s.batch, headOf(fx));
          s.gather.encode(enc, {
            ...{ logits: state.logits, targets: s.targets, logp: s.logp, entropy: s.entropy },
            ...{ lse: s.lse, R: s.R, V, invTemperature: invT },
          });
          loss.encode(enc, {
            ...{ logp: s.logp, oldLogp, refLogp, advantages, mask, dLogp: s.dLogp, out, N, L },
            ...{ lossType: 'dapo', epsilonLow: grpo.epsilon, epsilonHigh: grpo.epsilonHigh },
            ...{ beta: grpo.beta, maxCompletionLength: L },
          });
          s.gatherBackward.encode(enc, {
            ...{ logits: state.logits, targets: s.targets, lse: s.lse, gradLogp: s.dLogp },
            ...{ dLogits: s.dLogits, R: s.R, V, invTemperature: invT },
          });
          model.backward(enc, state, s.dLogits);
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
        const adapters = await model.readAdapters();
        for (const name of adapterNames) {
          const mismatch = worstMismatch(
            adapters.get(name)!,
            fx.adamw[step].get(name)!,
            ADAMW_TOLERANCE,
          );
          expect(mismatch, `${name} after step ${step + 1}`).toBeNull();
        }
      }
      // The base is bit for bit what was loaded, and the optimizer holds moments for adapters only.
      const params = await model.readParameters();
      for (const [name, start] of fx.base.params) expect(params.get(name), name).toEqual(start);
      const state = await optimizer.readState();
      expect([...state.keys()].length).toBe(2 * adapterNames.length);
      expect([...state.keys()].every((k) => k.includes('.lora_'))).toBe(true);
      optimizer.destroy();
      model.destroy();
    });

    it('prefill + decode through the KV cache give the adapted full-forward logits', async () => {
      const s = await setup(fx);
      const { engine, model } = s;
      const { T, promptLength: P, tokens, keyStart, positions } = fx.base.batch;
      const cache = model.createKvCache(N, T, keyStart);
      const cols = (from: number, count: number, src: Uint32Array) => {
        const out = new Uint32Array(N * count);
        for (let n = 0; n < N; n++)
          out.set(src.subarray(n * T + from, n * T + from + count), n * count);
        return uploadStorageBuffer(engine.device, out);
      };
      const expected = headLogits(fx, fx.logits); // (N·L, V): column P − 1 + j in row n·L + j
      for (let t0 = 0, j = 0; t0 < T - 1; j++) {
        const count = t0 === 0 ? P : 1;
        let logits: GPUBuffer | null = null;
        await engine.run((enc) => {
          logits = model.extend(
            enc,
            cache,
            cols(t0, count, tokens),
            cols(t0, count, positions),
            count,
            t0,
          );
        });
        const got = await readF32(engine.device, logits!, N * V);
        const want = new Float64Array(N * V);
        for (let n = 0; n < N; n++)
          want.set(expected.subarray((n * L + j) * V, (n * L + j + 1) * V), n * V);
        expect(worstMismatch(got, want, LOGIT_TOLERANCE), `column ${t0 + count - 1}`).toBeNull();
        t0 += count;
      }
      model.destroy();
    });
  });
}

function headOf(fx: LoraFixture) {
  return { start: fx.base.batch.promptLength - 1, count: fx.base.batch.completionLength };
}

// The GPU path against the CPU reference (src/ref/llama.ts + src/ref/lora.ts) on shapes the
// fixtures do not have: a subset of projections, an odd rank, prime and non-multiple-of-4 row
// counts (R = 5, 21), left padding, a gradient into every logit column.
describe('GpuLlama with LoRA vs the CPU reference', () => {
  const fx = loadLoraFixture('qwen2_tied_bias');
  const options: LoraOptions = {
    r: 3,
    alpha: 5,
    targetModules: ['down_proj', 'q_proj', 'v_proj'],
    useRslora: false,
    dropout: 0,
  };
  const specs = loraAdapterSpecs(fx.base.config, options);
  const adapters = new Map(
    specs.map((spec, i) => [
      spec.name,
      seededUniform(spec.shape[0] * spec.shape[1], 100 + i, -0.3, 0.3),
    ]),
  );
  for (const [N, T, keyStart] of [
    [1, 5, [0]],
    [3, 7, [0, 2, 1]],
  ] as const) {
    it(`N = ${N}, T = ${T}: logits and adapter gradients`, async () => {
      const engine = await testEngine();
      const cfg = fx.base.config;
      const V = cfg.vocabSize;
      const ks = Uint32Array.from(keyStart);
      const tokens = Uint32Array.from(seededUniform(N * T, 7 + N, 3, V - 1), Math.floor);
      const dLogits = seededUniform(N * T * V, 9 + N);
      const ref = new RefLlama(cfg, fx.base.params, { options, adapters });
      const { logits, cache } = ref.forward(tokens, N, T, ks);
      const refGrads = ref.backward(cache, dLogits);

      const model = GpuLlama.load(engine, cfg, fx.base.params, { lora: { ...options, adapters } });
      await model.ready;
      const batch = model.uploadBatch(tokens, ks, positionsFromKeyStart(ks, N, T), N, T);
      const dLogitsBuf = uploadStorageBuffer(engine.device, dLogits);
      let logitsBuf: GPUBuffer | null = null;
      await engine.run((enc) => {
        const state = model.forward(enc, batch, { start: 0, count: T });
        logitsBuf = state.logits;
        model.allocateGradients();
        model.zeroGradients(enc);
        model.backward(enc, state, dLogitsBuf);
      });
      const gpuLogits = await readF32(engine.device, logitsBuf!, N * T * V);
      expect(worstMismatch(gpuLogits, logits, LOGIT_TOLERANCE)).toBeNull();
      const grads = await model.readGradients();
      expect([...grads.keys()]).toEqual(specs.map((s) => s.name));
      for (const spec of specs) {
        const expected = refGrads.get(spec.name)!;
        expect(
          worstMismatch(grads.get(spec.name)!, expected, GRADIENT_TOLERANCE),
          spec.name,
        ).toBeNull();
        expect(Math.max(...expected.map(Math.abs)), spec.name).toBeGreaterThan(1e-4);
      }
      model.destroy();
    });
  }
});

describe('GrpoTrainer with usePeft', { timeout: 600_000 }, () => {
  const lora = { usePeft: true, loraR: 4, loraAlpha: 8 };

  it('β > 0 costs no second copy of the weights with LoRA (it does without)', async () => {
    const engine = await testEngine();
    const bytesOf = async (overrides: Parameters<typeof makeTrainer>[0]) => {
      const before = engine.memory.liveBytes;
      const trainer = await makeTrainer(overrides);
      const bytes = engine.memory.liveBytes - before;
      trainer.destroy();
      return bytes;
    };
    const paramBytes = trainerParamBytes();
    expect(await bytesOf({ ...lora, beta: 0.04 })).toBe(await bytesOf({ ...lora, beta: 0 }));
    const full = (await bytesOf({ beta: 0.04 })) - (await bytesOf({ beta: 0 }));
    expect(full).toBeGreaterThanOrEqual(paramBytes);
  });

  it('trains the adapters only, scores the reference with them off, and snapshots them alone', async () => {
    const trainer = await makeTrainer({ ...lora, beta: 0.04, numIterations: 2 });
    const base0 = await trainer.policy.readParameters();
    const adapters0 = await trainer.policy.readAdapters();
    // PEFT's start: every B is 0, every A is non-zero.
    for (const [name, t] of adapters0) {
      expect(
        t.some((x) => x !== 0),
        name,
      ).toBe(name.endsWith('lora_A.weight'));
    }
    const first = await trainer.trainStep();
    // Fresh adapters leave the policy equal to the base: the reference log-probs (adapters off)
    // are the policy's log-probs bit for bit.
    const completions = () => first.groups.flatMap((g) => g.completions);
    for (const c of completions()) expect(c.refLogp).toEqual(c.logp);
    const second = await trainer.trainStep();
    const differs = second.groups
      .flatMap((g) => g.completions)
      .some((c) => c.refLogp!.some((r, t) => r !== c.logp[t]));
    expect(differs).toBe(true);
    // The base is untouched; the adapters moved (B too).
    expect(await trainer.policy.readParameters()).toEqual(base0);
    const adapters = await trainer.policy.readAdapters();
    for (const [name, t] of adapters) expect(t, name).not.toEqual(adapters0.get(name));

    // A checkpoint holds the adapters and their moments only, and restores them.
    const snapshot = await trainer.snapshot();
    expect([...snapshot.weights.keys()]).toEqual([...adapters0.keys()]);
    expect([...snapshot.optimizer.keys()].every((k) => k.includes('.lora_'))).toBe(true);
    const payload = snapshotToPayload(snapshot, {
      runId: 'lora',
      config: tinyConfig({ ...lora, beta: 0.04, numIterations: 2 }),
      modelConfig,
      modelIdentity: { name: 'tiny', sha256: 'base' },
      referenceIdentity: null,
      tokenizerIdentity: null,
    });
    expect(payload.tensors.every((t) => t.name.includes('.lora_'))).toBe(true);
    // On disk (the CLI's layout): adapter_model.safetensors instead of model.safetensors.
    const files = checkpointToFiles(payload);
    expect([...files.keys()].sort()).toEqual([
      CHECKPOINT_FILES.adapters,
      CHECKPOINT_FILES.optimizer,
      CHECKPOINT_FILES.state,
    ]);
    const read = checkpointFromFiles((name) => files.get(name)!).payload;
    const fresh = await makeTrainer({ ...lora, beta: 0.04, numIterations: 2 });
    fresh.restore(payloadToSnapshot(read));
    expect(await fresh.policy.readAdapters()).toEqual(adapters);
    expect(await fresh.policy.readParameters()).toEqual(base0);
    fresh.destroy();
    trainer.destroy();
  });
});

/** Bytes of the tiny trainer model's parameters (f32). */
function trainerParamBytes(): number {
  const {
    hiddenSize: C,
    intermediateSize: I,
    numHeads: H,
    numKvHeads: Hkv,
    headDim: D,
  } = modelConfig;
  const V = modelConfig.vocabSize;
  const layer = 2 * C + C * H * D * 2 + 2 * C * Hkv * D + 3 * C * I;
  return 4 * (2 * V * C + C + modelConfig.numLayers * layer);
}
