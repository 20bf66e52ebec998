// Half-precision frozen weights (config dtype) on the WebGPU Llama with LoRA, against the
// independent PyTorch fixtures <base>_lora_bf16 (tests/fixtures/make_fixtures.py: the base
// rounded to bf16 by torch, everything computed in f64 from those values, B non-zero). The base is
// read from the fixture's BF16 safetensors file by the project's loader (as a checkpoint ships it)
// and stored as bf16 packed two per u32; the kernels widen it to f32. Checked: torch's rounding
// equals src/ref/half.ts's, logits, log-probs, every adapter gradient, the GRPO loss and 3 AdamW
// steps, for both fixture models; the bytes saved as the engine counts them; widen-on-read of the
// base (what the merged export reads); and f16 storage against the CPU reference.
// NF4 bases (issue #37) against <base>_lora_nf4: the engine quantises the fixture's ORIGINAL f32
// base itself (src/ref/nf4.ts, dtype 'nf4', nested scales for the second model), so the values it
// computes with must be the numpy quantiser's (make_nf4.py) bit for bit, and then the same checks
// as bf16 at the same tolerances; plus the one-buffer layout and its bytes, a pre-quantised
// tensor stored as given, and GrpoTrainer with dtype 'nf4'.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { numel, parameterSpecs } from '../../src/core/model-config';
import {
  createStorageBuffer,
  readF32,
  readU32,
  uploadStorageBuffer,
} from '../../src/engine/buffers';
import { parseSafetensors, parseSafetensorsWeights } from '../../src/formats/safetensors';
import { decodeGrpoLossOut, GrpoLossKernel, GRPO_LOSS_OUT } from '../../src/kernels/grpo-loss';
import { LogprobGatherBackwardKernel, LogprobGatherKernel } from '../../src/kernels/logprob';
import { MATMUL_TILE_K } from '../../src/kernels/matmul';
import { GpuLlama } from '../../src/model/llama';
import {
  frozenDtypeOf,
  nf4StoredWords,
  packNf4Words,
  ParameterStore,
  storedValues,
  toNf4,
  type WeightTensor,
} from '../../src/model/parameters';
import { dequantizeNf4, quantizeNf4 } from '../../src/ref/nf4';
import { GpuAdamW } from '../../src/optim/adamw';
import { packHalfBits, roundToHalf, type HalfTensor } from '../../src/ref/half';
import { positionsFromKeyStart, RefLlama } from '../../src/ref/llama';
import { loraAdapterSpecs } from '../../src/core/lora';
import {
  LORA_FIXTURE_NAMES,
  LORA_NF4_FIXTURE_NAMES,
  loadLoraFixture,
  type LoraFixture,
} from '../fixtures/load-lora';
import { makeTrainer, modelConfig } from '../support/tiny-trainer';
import { seededUniform, testEngine, worstMismatch, type Tolerance } from './harness';

// The bounds of the f32-base LoRA test (tests/kernels/lora.test.ts): the GPU computes in f32 from
// the widened bf16 values, torch in f64 from the same values, so only f32 rounding differs.
const LOGIT_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 1e-4 };
const LOGP_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 1e-4 };
const GRADIENT_TOLERANCE: Tolerance = { atol: 2e-6, rtol: 2e-3 };
const ADAMW_TOLERANCE: Tolerance = { atol: 2e-4, rtol: 0 };
const LOSS_TOLERANCE = 1e-5;

const FIXTURE_DIR = join(dirname(fileURLToPath(import.meta.url)), '../fixtures');

/** The fixture's base weights as the project's safetensors loader reads them (BF16 → f32). */
function loadBf16Base(fx: LoraFixture) {
  const file = `${fx.name}.safetensors`;
  const parsed = parseSafetensors(new Uint8Array(readFileSync(join(FIXTURE_DIR, file))), file);
  const weights = new Map<string, Float32Array>();
  for (const [name, t] of parsed.tensors) {
    expect(t.dtype, name).toBe('BF16');
    weights.set(name, t.data);
  }
  return weights;
}

function headLogits(fx: LoraFixture): Float64Array {
  const { N, T, promptLength: P, completionLength: L } = fx.base.batch;
  const V = fx.base.config.vocabSize;
  const out = new Float64Array(N * L * V);
  for (let n = 0; n < N; n++) {
    const from = (n * T + P - 1) * V;
    out.set(fx.logits.subarray(from, from + L * V), n * L * V);
  }
  return out;
}

/**
 * The checks of a fixture on a loaded model (adapters as the fixture's): logits, log-probs and
 * every adapter gradient of one forward + backward with the fixture's dLoss/dlogp, then three GRPO
 * steps (loss, gradient norm, the adapters after each AdamW step). Leaves the model loaded.
 */
async function matchesFixture(fx: LoraFixture, model: GpuLlama): Promise<void> {
  const engine = await testEngine();
  const { device } = engine;
  const { N, T, promptLength: P, completionLength: L, tokens, keyStart, positions } = fx.base.batch;
  const V = fx.base.config.vocabSize;
  const R = N * L;
  const invT = 1 / fx.header.grpo.temperature;
  const adapterNames = loraAdapterSpecs(fx.base.config, fx.options).map((s) => s.name);
  const batch = model.uploadBatch(tokens, keyStart, positions, N, T);
  const targets = new Uint32Array(R);
  for (let n = 0; n < N; n++)
    for (let j = 0; j < L; j++) targets[n * L + j] = tokens[n * T + P + j];
  const buf = (floats: number) => createStorageBuffer(device, floats * 4);
  const f32 = (a: ArrayLike<number>) => uploadStorageBuffer(device, Float32Array.from(a));
  const s = {
    targets: uploadStorageBuffer(device, targets),
    logp: buf(R),
    entropy: buf(R),
    lse: buf(R),
    dLogp: buf(R),
    dLogits: buf(R * V),
  };
  const gather = new LogprobGatherKernel(device, engine.pipelines);
  const gatherBackward = new LogprobGatherBackwardKernel(device, engine.pipelines);
  const head = { start: P - 1, count: L };

  // One forward + backward with the fixture's dLoss/dlogp.
  const gradLogp = f32(fx.dLossDLogp);
  let logits: GPUBuffer | null = null;
  await engine.run((enc) => {
    const state = model.forward(enc, batch, head);
    logits = state.logits;
    gather.encode(enc, {
      ...{ logits: state.logits, targets: s.targets, logp: s.logp, entropy: s.entropy },
      ...{ lse: s.lse, R, V, invTemperature: invT },
    });
    gatherBackward.encode(enc, {
      ...{ logits: state.logits, targets: s.targets, lse: s.lse, gradLogp },
      ...{ dLogits: s.dLogits, R, V, invTemperature: invT },
    });
    model.allocateGradients();
    model.zeroGradients(enc);
    model.backward(enc, state, s.dLogits);
  });
  const gpuLogits = await readF32(device, logits!, R * V);
  expect(worstMismatch(gpuLogits, headLogits(fx), LOGIT_TOLERANCE)).toBeNull();
  expect(worstMismatch(await readF32(device, s.logp, R), fx.logp, LOGP_TOLERANCE)).toBeNull();
  const grads = await model.readGradients();
  expect([...grads.keys()]).toEqual(adapterNames);
  for (const name of adapterNames) {
    const expected = fx.grads.get(name)!;
    expect(worstMismatch(grads.get(name)!, expected, GRADIENT_TOLERANCE), name).toBeNull();
    expect(Math.max(...expected.map(Math.abs)), name).toBeGreaterThan(1e-6);
  }

  // Three GRPO steps: loss, gradient norm and the adapters after each AdamW step.
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
  const [oldLogp, refLogp, advantages, mask] = [
    fx.oldLogp,
    fx.refLogp,
    fx.base.advantages,
    fx.base.batch.completionMask,
  ].map(f32);
  const out = createStorageBuffer(device, GRPO_LOSS_OUT.length * 4);
  const loss = new GrpoLossKernel(device, engine.pipelines);
  for (let step = 0; step < hp.steps; step++) {
    await engine.run((enc) => {
      model.zeroGradients(enc);
      const state = model.forward(enc, batch, head);
      gather.encode(enc, {
        ...{ logits: state.logits, targets: s.targets, logp: s.logp, entropy: s.entropy },
        ...{ lse: s.lse, R, V, invTemperature: invT },
      });
      loss.encode(enc, {
        ...{ logp: s.logp, oldLogp, refLogp, advantages, mask, dLogp: s.dLogp, out, N, L },
        ...{ lossType: 'dapo', epsilonLow: grpo.epsilon, epsilonHigh: grpo.epsilonHigh },
        ...{ beta: grpo.beta, maxCompletionLength: L },
      });
      gatherBackward.encode(enc, {
        ...{ logits: state.logits, targets: s.targets, lse: s.lse, gradLogp: s.dLogp },
        ...{ dLogits: s.dLogits, R, V, invTemperature: invT },
      });
      model.backward(enc, state, s.dLogits);
      optimizer.encodeStep(enc, hp.lr);
    });
    const stats = await optimizer.readStats();
    expect(stats.finite).toBe(true);
    optimizer.commitStep();
    expect(Math.abs(stats.norm - hp.gradNorms[step]) / hp.gradNorms[step]).toBeLessThan(1e-4);
    const { loss: gpuLoss } = decodeGrpoLossOut(await readF32(device, out, GRPO_LOSS_OUT.length));
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
  optimizer.destroy();
}

for (const base of LORA_FIXTURE_NAMES) {
  describe(`bf16-stored base with LoRA vs PyTorch fixture ${base}_lora_bf16`, () => {
    const fx = loadLoraFixture(base, 'bf16');
    const f32Fixture = loadLoraFixture(base);
    const cfg = fx.base.config;

    it("the BF16 file holds torch's rounding of the base, which src/ref/half.ts reproduces", () => {
      const weights = loadBf16Base(fx);
      expect([...weights.keys()].sort()).toEqual(
        parameterSpecs(cfg)
          .map((s) => s.name)
          .sort(),
      );
      for (const [name, f32] of fx.base.params) {
        expect(weights.get(name), name).toEqual(roundToHalf(f32, 'bf16'));
      }
      // 'auto' keeps the checkpoint's bf16; an f32 checkpoint stays f32.
      expect(frozenDtypeOf('auto', cfg, weights)).toBe('bf16');
      expect(frozenDtypeOf('auto', cfg, fx.base.params)).toBe('f32');
      expect(frozenDtypeOf('float16', cfg, weights)).toBe('f16');
      // The fixture tells bf16 from f32 storage: its logits are not the f32 base's.
      expect(worstMismatch(headLogits(f32Fixture), headLogits(fx), LOGIT_TOLERANCE)).not.toBeNull();
    });

    it('packed storage: matrices take half the bytes, as the engine counts them', async () => {
      const engine = await testEngine();
      const weights = loadBf16Base(fx);
      const specs = loraAdapterSpecs(cfg, fx.options);
      const adapters = { specs, tensors: fx.adapters };
      const limit = 1 << 30;
      const before = engine.memory.liveBytes;
      const half = new ParameterStore(engine.device, cfg, weights, limit, adapters, 'bf16');
      const measuredHalf = engine.memory.liveBytes - before;
      const full = new ParameterStore(engine.device, cfg, weights, limit, adapters, 'f32');
      const measuredFull = engine.memory.liveBytes - before - measuredHalf;
      expect(half.parameterBytes).toBe(measuredHalf);
      expect(full.parameterBytes).toBe(measuredFull);
      // Expected: every 2-D base tensor at 2 bytes a value (whole u32 words), the rest f32.
      let matrices = 0;
      for (const spec of parameterSpecs(cfg)) {
        if (spec.shape.length === 2) matrices += numel(spec.shape);
      }
      expect(measuredFull - measuredHalf).toBe(matrices * 2);
      for (const spec of parameterSpecs(cfg)) {
        expect(half.dtypes.get(spec.name), spec.name).toBe(
          spec.shape.length === 2 ? 'bf16' : 'f32',
        );
      }
      for (const spec of specs) expect(half.dtypes.get(spec.name)).toBe('f32');
      // Widened on read: the base comes back as loaded (what exports and the merge read).
      const back = await half.readJoined(half.params);
      for (const [name, data] of weights) expect(back.get(name), name).toEqual(data);
      for (const [name, data] of fx.adapters) expect(back.get(name), name).toEqual(data);
      // The 16-bit values as shipped (parseSafetensorsWeights: no widened copy) are stored as
      // they are: the packed words are the file's words; norms given in bf16 are widened to f32.
      const file = `${fx.name}.safetensors`;
      const raw = parseSafetensorsWeights(
        new Uint8Array(readFileSync(join(FIXTURE_DIR, file))),
        file,
      );
      const shipped = new Map([...raw].map(([name, t]) => [name, t.data]));
      expect(frozenDtypeOf('auto', cfg, shipped)).toBe('bf16');
      const asShipped = new ParameterStore(engine.device, cfg, shipped, limit, adapters, 'bf16');
      expect(asShipped.parameterBytes).toBe(half.parameterBytes);
      const embed = raw.get('model.embed_tokens.weight')!.data as HalfTensor;
      const words = await readU32(
        engine.device,
        asShipped.params.get('model.embed_tokens.weight')!,
      );
      expect(Array.from(words)).toEqual(Array.from(packHalfBits(embed.bits)));
      const shippedBack = await asShipped.readJoined(asShipped.params);
      for (const [name, data] of weights) expect(shippedBack.get(name), name).toEqual(data);
      asShipped.destroy();
      // A full fine-tune (no adapters) stores everything f32, whatever dtype asks.
      const trainAll = new ParameterStore(engine.device, cfg, weights, limit, null, 'bf16');
      expect([...trainAll.dtypes.values()].every((d) => d === 'f32')).toBe(true);
      for (const store of [half, full, trainAll]) store.destroy();
      expect(engine.memory.liveBytes).toBe(before);
    });

    it('logits, log-probs, every adapter gradient, the GRPO loss and 3 AdamW steps match', async () => {
      const engine = await testEngine();
      const weights = loadBf16Base(fx);
      const model = GpuLlama.load(engine, cfg, weights, {
        lora: { ...fx.options, adapters: fx.adapters },
        frozenDtype: frozenDtypeOf('auto', cfg, weights),
      });
      await model.ready;
      expect(model.parameters.param('model.layers.0.mlp.down_proj.weight').dtype).toBe('bf16');
      expect(model.parameters.param('model.embed_tokens.weight').dtype).toBe('bf16');
      await matchesFixture(fx, model);
      // The frozen base is still what was loaded, widened.
      const params = await model.readParameters();
      for (const [name, data] of weights) expect(params.get(name), name).toEqual(data);
      model.destroy();
    });
  });
}

for (const base of LORA_NF4_FIXTURE_NAMES) {
  describe(`nf4-stored base with LoRA vs PyTorch fixture ${base}_lora_nf4`, () => {
    const fx = loadLoraFixture(base, 'nf4');
    const cfg = fx.base.config;
    const nested = fx.header.baseWeights?.dtype === 'nf4' && fx.header.baseWeights.nested;
    const specs = parameterSpecs(cfg);
    const isTable = (name: string) =>
      name === 'model.embed_tokens.weight' || name === 'lm_head.weight';
    /** What the fixture computed with: projections NF4 (nf4Base), tables bf16, the rest as is. */
    const expected = new Map(
      specs.map((spec) => {
        const data = fx.base.params.get(spec.name)!;
        const value =
          fx.nf4Base.get(spec.name) ?? (isTable(spec.name) ? roundToHalf(data, 'bf16') : data);
        return [spec.name, value] as const;
      }),
    );

    it('one buffer per projection (codes, then block absmax), counted bytes, values read back', async () => {
      const engine = await testEngine();
      const adapters = { specs: loraAdapterSpecs(cfg, fx.options), tensors: fx.adapters };
      const limit = 1 << 30;
      const projections = specs.filter((spec) => fx.nf4Base.has(spec.name));
      expect(projections.length).toBe(7 * cfg.numLayers);
      const before = engine.memory.liveBytes;
      const store = new ParameterStore(engine.device, cfg, fx.base.params, limit, adapters, 'nf4', {
        nested,
      });
      expect(store.parameterBytes).toBe(engine.memory.liveBytes - before);
      // Bytes: per projection ceil(n / 8) code words + one f32 absmax per 64; tables bf16.
      let bytes = 0;
      for (const spec of [...specs, ...adapters.specs]) {
        const n = numel(spec.shape);
        const dtype = store.dtypes.get(spec.name);
        if (fx.nf4Base.has(spec.name)) {
          expect(dtype, spec.name).toBe('nf4');
          bytes += nf4StoredWords(n) * 4;
        } else if (isTable(spec.name)) {
          expect(dtype, spec.name).toBe('bf16');
          bytes += Math.ceil(n / 2) * 4;
        } else {
          expect(dtype, spec.name).toBe('f32');
          bytes += n * 4;
        }
      }
      expect(store.parameterBytes).toBe(bytes);
      // The engine's own quantisation holds the numpy quantiser's values bit for bit (nested
      // scales too), and read back dequantised (what the merged export reads).
      const back = await store.readJoined(store.params);
      for (const [name, want] of expected) expect(back.get(name), name).toEqual(want);
      // The stored words: code bytes in order, padded to a word, then the absmax bits.
      const name = 'model.layers.0.mlp.down_proj.weight';
      const t = toNf4(fx.base.params.get(name)!, { nested });
      const words = await readU32(engine.device, store.params.get(name)!);
      expect(Array.from(words)).toEqual(Array.from(packNf4Words(t)));
      const codeBytes = new Uint8Array(words.buffer, 0, t.codes.length);
      expect(Array.from(codeBytes)).toEqual(Array.from(t.codes));
      // A pre-quantised checkpoint's NF4 tensors ('auto' keeps them) are stored as given: the
      // nested-dequantised scales arrive as plain f32 and nothing is quantised again.
      const shipped = new Map<string, WeightTensor>(fx.base.params);
      for (const spec of projections) {
        shipped.set(spec.name, toNf4(fx.base.params.get(spec.name)!, { nested }));
      }
      expect(frozenDtypeOf('auto', cfg, shipped)).toBe('nf4');
      expect(frozenDtypeOf('auto', cfg, fx.base.params)).toBe('f32');
      const asShipped = new ParameterStore(engine.device, cfg, shipped, limit, adapters, 'nf4');
      const shippedBack = await asShipped.readJoined(asShipped.params);
      for (const [n, want] of expected) expect(shippedBack.get(n), n).toEqual(want);
      // bfloat16 on an NF4 tensor dequantises it, then rounds; a full fine-tune trains f32 values.
      const asBf16 = new ParameterStore(engine.device, cfg, shipped, limit, adapters, 'bf16');
      const bf16Back = await asBf16.readJoined(asBf16.params);
      expect(bf16Back.get(name)).toEqual(roundToHalf(dequantizeNf4(t), 'bf16'));
      const trainAll = new ParameterStore(engine.device, cfg, shipped, limit, null, 'nf4');
      expect([...trainAll.dtypes.values()].every((d) => d === 'f32')).toBe(true);
      expect((await trainAll.readJoined(trainAll.params)).get(name)).toEqual(dequantizeNf4(t));
      // The (V, C) tables split into bf16 row chunks (two K tiles of rows per buffer) beside whole
      // NF4 projections: the same values come back.
      const tableLimit = 2 * MATMUL_TILE_K * cfg.hiddenSize * 2;
      const split = new ParameterStore(
        engine.device,
        cfg,
        fx.base.params,
        tableLimit,
        adapters,
        'nf4',
        {
          nested,
        },
      );
      expect(split.isSplit).toBe(true);
      expect(split.chunks.get(name)!.length).toBe(1);
      const splitBack = await split.readJoined(split.params);
      for (const [n, want] of expected) expect(splitBack.get(n), n).toEqual(want);
      split.destroy();
      // writeParameters of the values read back keeps the codes and scales (re-quantised plainly).
      store.writeSplit(store.params, back, 'nf4 write-back');
      const again = await readU32(engine.device, store.params.get(name)!);
      expect(Array.from(again)).toEqual(Array.from(words));
      for (const s of [store, asShipped, asBf16, trainAll]) s.destroy();
      expect(engine.memory.liveBytes).toBe(before);
    });

    it('logits, log-probs, every adapter gradient, the GRPO loss and 3 AdamW steps match', async () => {
      const engine = await testEngine();
      // The ORIGINAL f32 base: the engine quantises it (dtype nf4, the fixture's nesting).
      const model = GpuLlama.load(engine, cfg, fx.base.params, {
        lora: { ...fx.options, adapters: fx.adapters },
        frozenDtype: frozenDtypeOf('nf4', cfg, fx.base.params),
        nf4: { nested },
      });
      await model.ready;
      expect(model.parameters.param('model.layers.0.mlp.down_proj.weight').dtype).toBe('nf4');
      expect(model.parameters.param('model.embed_tokens.weight').dtype).toBe('bf16');
      await matchesFixture(fx, model);
      const params = await model.readParameters();
      for (const [name, want] of expected) expect(params.get(name), name).toEqual(want);
      // The host's account of the stored base (a recipe resumed after a LoRA stage merges onto it).
      const host = storedValues(cfg, fx.base.params, 'nf4', { nested });
      for (const [name, t] of params) expect(host.get(name), name).toEqual(t);
      model.destroy();
    });
  });
}

// f16 storage (and a split, packed embedding / head) against the CPU reference computing from the
// f16-rounded weights: prime and non-multiple-of-4 row counts, a gradient into every logit column.
describe('f16-stored base with LoRA vs the CPU reference', () => {
  const fx = loadLoraFixture('qwen2_tied_bias');
  const cfg = fx.base.config;
  // 40·24·2 bytes: the largest packed projection fits, the (53, 24) table is split in 32 + 21 rows.
  for (const maxBindingBytes of [undefined, 40 * 24 * 2]) {
    it(`N = 3, T = 7${maxBindingBytes ? ', vocabulary split into packed chunks' : ''}`, async () => {
      const engine = await testEngine();
      const V = cfg.vocabSize;
      const [N, T] = [3, 7];
      const ks = Uint32Array.of(0, 2, 1);
      const tokens = Uint32Array.from(seededUniform(N * T, 17, 3, V - 1), Math.floor);
      const dLogits = seededUniform(N * T * V, 19);
      const rounded = new Map<string, Float32Array>();
      for (const [name, data] of fx.base.params) {
        const matrix = parameterSpecs(cfg).find((s) => s.name === name)!.shape.length === 2;
        rounded.set(name, matrix ? roundToHalf(data, 'f16') : data);
      }
      const lora = { options: fx.options, adapters: fx.adapters };
      const ref = new RefLlama(cfg, rounded, lora);
      const { logits, cache } = ref.forward(tokens, N, T, ks);
      const refGrads = ref.backward(cache, dLogits);

      const model = GpuLlama.load(engine, cfg, fx.base.params, {
        lora: { ...fx.options, adapters: fx.adapters },
        frozenDtype: 'f16',
        maxBindingBytes,
      });
      await model.ready;
      // Loading compiled every pipeline a step encodes, the packed ones included: the forward
      // and backward below compile nothing.
      const compiled = engine.pipelines.size;
      if (maxBindingBytes) expect(model.isSplit).toBe(true);
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
      expect(engine.pipelines.size).toBe(compiled);
      const gpuLogits = await readF32(engine.device, logitsBuf!, N * T * V);
      expect(worstMismatch(gpuLogits, logits, LOGIT_TOLERANCE)).toBeNull();
      const grads = await model.readGradients();
      const adapterNames = loraAdapterSpecs(cfg, fx.options).map((spec) => spec.name);
      expect([...grads.keys()]).toEqual(adapterNames);
      for (const name of adapterNames) {
        const expected = refGrads.get(name)!;
        expect(worstMismatch(grads.get(name)!, expected, GRADIENT_TOLERANCE), name).toBeNull();
        expect(Math.max(...expected.map(Math.abs)), name).toBeGreaterThan(1e-4);
      }
      const params = await model.readParameters();
      for (const [name, data] of rounded) expect(params.get(name), name).toEqual(data);
      model.destroy();
    });
  }
});

// The config option end to end: GrpoTrainer with usePeft stores its base as dtype asks and trains.
describe('GrpoTrainer with usePeft and dtype', { timeout: 600_000 }, () => {
  const lora = { usePeft: true, loraR: 4, loraAlpha: 8 };

  it('bfloat16 halves the base matrices, trains the adapters, leaves the rounded base as it is', async () => {
    const f32Run = await makeTrainer({ ...lora, dtype: 'float32' });
    const bf16Run = await makeTrainer({ ...lora, dtype: 'bfloat16' });
    const auto = await makeTrainer({ ...lora, dtype: 'auto' }); // an f32 checkpoint: stays f32
    const full = await makeTrainer({ dtype: 'bfloat16' }); // a full fine-tune trains all: f32
    let matrices = 0;
    for (const spec of parameterSpecs(modelConfig)) {
      if (spec.shape.length === 2) matrices += numel(spec.shape);
    }
    const bytes = (t: typeof f32Run) => t.policy.parameters.parameterBytes;
    expect(bytes(f32Run) - bytes(bf16Run)).toBe(matrices * 2);
    expect(bytes(auto)).toBe(bytes(f32Run));
    expect([...full.policy.parameters.dtypes.values()].every((d) => d === 'f32')).toBe(true);
    const base0 = await bf16Run.policy.readParameters();
    const initial = await f32Run.policy.readParameters();
    for (const spec of parameterSpecs(modelConfig)) {
      const want =
        spec.shape.length === 2
          ? roundToHalf(initial.get(spec.name)!, 'bf16')
          : initial.get(spec.name)!;
      expect(base0.get(spec.name), spec.name).toEqual(want);
    }
    const adapters0 = await bf16Run.policy.readAdapters();
    const report = await bf16Run.trainStep();
    expect(Number.isFinite(report.metrics.loss)).toBe(true);
    const adapters1 = await bf16Run.policy.readAdapters();
    const moved = [...adapters1].some(([name, t]) =>
      t.some((x, i) => x !== adapters0.get(name)![i]),
    );
    expect(moved).toBe(true);
    expect(storedValues(modelConfig, initial, 'bf16')).toEqual(base0);
    const base1 = await bf16Run.policy.readParameters();
    for (const [name, t] of base0) expect(base1.get(name), name).toEqual(t);
    for (const t of [f32Run, bf16Run, auto, full]) t.destroy();
  });

  it('nf4 stores the projections as 4-bit codes and scales, trains the adapters, keeps the base', async () => {
    const nf4Run = await makeTrainer({ ...lora, dtype: 'nf4' });
    const f32Run = await makeTrainer({ ...lora, dtype: 'float32' });
    const initial = await f32Run.policy.readParameters();
    const base0 = await nf4Run.policy.readParameters();
    let bytes = 0;
    for (const spec of parameterSpecs(modelConfig)) {
      const n = numel(spec.shape);
      const dtype = nf4Run.policy.parameters.dtypes.get(spec.name);
      const data = initial.get(spec.name)!;
      if (spec.shape.length === 1) {
        expect(dtype).toBe('f32');
        expect(base0.get(spec.name), spec.name).toEqual(data);
        bytes += n * 4;
      } else if (spec.name.endsWith('_proj.weight')) {
        expect(dtype).toBe('nf4');
        expect(base0.get(spec.name), spec.name).toEqual(dequantizeNf4(quantizeNf4(data)));
        bytes += nf4StoredWords(n) * 4;
      } else {
        expect(dtype).toBe('bf16');
        expect(base0.get(spec.name), spec.name).toEqual(roundToHalf(data, 'bf16'));
        bytes += Math.ceil(n / 2) * 4;
      }
    }
    const adapterBytes = nf4Run.policy.parameters.adapterSpecs.reduce(
      (sum, spec) => sum + numel(spec.shape) * 4,
      0,
    );
    expect(nf4Run.policy.parameters.parameterBytes).toBe(bytes + adapterBytes);
    expect(storedValues(modelConfig, initial, 'nf4')).toEqual(base0);
    const adapters0 = await nf4Run.policy.readAdapters();
    const report = await nf4Run.trainStep();
    expect(Number.isFinite(report.metrics.loss)).toBe(true);
    const adapters1 = await nf4Run.policy.readAdapters();
    expect(
      [...adapters1].some(([name, t]) => t.some((x, i) => x !== adapters0.get(name)![i])),
    ).toBe(true);
    const base1 = await nf4Run.policy.readParameters();
    for (const [name, t] of base0) expect(base1.get(name), name).toEqual(t);
    // A 4-bit base cannot be fully fine-tuned: the config refuses nf4 without LoRA.
    await expect(makeTrainer({ dtype: 'nf4' })).rejects.toThrow(/nf4 needs usePeft/);
    for (const t of [nf4Run, f32Run]) t.destroy();
  });
});
