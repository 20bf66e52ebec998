// The CPU reference's LoRA (src/ref/lora.ts inside src/ref/llama.ts) against the independent
// PyTorch float64 LoRA fixtures (tests/fixtures/make_fixtures.py, make_lora_fixture): logits with
// non-zero adapters, the four GRPO losses with the base model as reference policy, every adapter
// gradient (dA, dB per projection), the adapters after each of 3 clipped AdamW steps (base frozen),
// and "adapters off = the base model" bit for bit. Also the option checks and PEFT's init.
import { describe, expect, it } from 'vitest';
import { computeAdvantages } from '../../src/grpo/advantages';
import { loraOptionsOf, parseCliArgs, resolveConfig } from '../../src/grpo/config';
import { adamwStepRef, gradClipRef } from '../../src/ref/adamw';
import { grpoLossRef } from '../../src/ref/grpo_loss';
import { LOSS_TYPES, type LossType } from '../../src/core/loss-definitions';
import {
  RefLlama,
  completionLogprobsBackwardRef,
  completionLogprobsRef,
} from '../../src/ref/llama';
import {
  checkLoraOptions,
  initLoraAdapters,
  loraAdapterSpecs,
  loraScaling,
  LORA_PROJECTIONS,
  type LoraOptions,
} from '../../src/core/lora';
import { LORA_FIXTURE_NAMES, loadLoraFixture, type LoraFixture } from '../fixtures/load-lora';

// f64 against f64 in another summation order, as tests/unit/fixtures.test.ts; measured here:
// logits ≤ 4.9e-15, adapter gradients ≤ 8.1e-16, adapters after AdamW ≤ 7.7e-16, losses ≤ 3.1e-16.
const FORWARD_TOLERANCE = { atol: 1e-12, rtol: 1e-10 };
const GRADIENT_TOLERANCE = { atol: 1e-13, rtol: 1e-9 };
const ADAMW_TOLERANCE = { atol: 1e-11, rtol: 0 };
const LOSS_TOLERANCE = 1e-13;

function worst(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: typeof FORWARD_TOLERANCE,
) {
  expect(actual.length).toBe(expected.length);
  let worstExcess = 0;
  let at = -1;
  for (let i = 0; i < expected.length; i++) {
    const excess =
      Math.abs(actual[i] - expected[i]) - (tol.atol + tol.rtol * Math.abs(expected[i]));
    if (!(excess <= worstExcess)) {
      worstExcess = Number.isNaN(excess) ? Infinity : excess;
      at = i;
    }
  }
  return at < 0 ? null : { index: at, actual: actual[at], expected: expected[at] };
}

function model(
  fx: LoraFixture,
  adapters: ReadonlyMap<string, Float32Array | Float64Array> = fx.adapters,
) {
  return new RefLlama(fx.base.config, fx.base.params, { options: fx.options, adapters });
}

/** Forward, log-probs, GRPO loss (reference = fixture's refLogp), backward: loss and grads. */
function lossAndGrads(fx: LoraFixture, m: RefLlama, lossType: LossType) {
  const { N, T, tokens, keyStart, promptLength: P, completionLength: L, groupSize } = fx.base.batch;
  const V = fx.base.config.vocabSize;
  const g = fx.header.grpo;
  const { logits, cache } = m.forward(tokens, N, T, keyStart);
  const logp = completionLogprobsRef(logits, tokens, N, T, V, P, g.temperature);
  const result = grpoLossRef({
    logp,
    oldLogp: fx.oldLogp,
    refLogp: fx.refLogp,
    advantages: computeAdvantages(fx.base.batch.rewards, groupSize, 'group'),
    mask: fx.base.batch.completionMask,
    N,
    L,
    lossType,
    epsilonLow: g.epsilon,
    epsilonHigh: g.epsilonHigh,
    beta: g.beta,
    maxCompletionLength: L,
  });
  const dLogits = completionLogprobsBackwardRef(
    logits,
    tokens,
    result.dLogp,
    N,
    T,
    V,
    P,
    g.temperature,
  );
  return { logits, logp, result, grads: m.backward(cache, dLogits) };
}

for (const base of LORA_FIXTURE_NAMES) {
  describe(`LoRA fixture ${base}_lora`, () => {
    const fx = loadLoraFixture(base);
    const specs = loraAdapterSpecs(fx.base.config, fx.options);

    it('is well formed: every projection of every layer, A and B non-zero', () => {
      expect([...fx.adapters.keys()]).toEqual(specs.map((s) => s.name));
      expect([...fx.grads.keys()]).toEqual(specs.map((s) => s.name));
      expect(specs.length).toBe(fx.base.config.numLayers * LORA_PROJECTIONS.length * 2);
      expect(loraScaling(fx.options)).toBe(fx.header.lora.scaling);
      for (const t of fx.adapters.values()) expect(Math.max(...t.map(Math.abs))).toBeGreaterThan(0);
    });

    it('logits and log-probs with adapters match torch; the adapters change them', () => {
      const { N, T, tokens, keyStart } = fx.base.batch;
      const { logits } = model(fx).forward(tokens, N, T, keyStart);
      expect(worst(logits, fx.logits, FORWARD_TOLERANCE)).toBeNull();
      let moved = 0;
      for (let i = 0; i < logits.length; i++)
        moved = Math.max(moved, Math.abs(logits[i] - fx.base.logits[i]));
      expect(moved).toBeGreaterThan(1e-2);
    });

    it('adapters off = the base model, bit for bit; the reference log-probs are the base ones', () => {
      const { N, T, tokens, keyStart, promptLength: P } = fx.base.batch;
      const V = fx.base.config.vocabSize;
      const withAdapters = model(fx);
      withAdapters.adaptersEnabled = false;
      const off = withAdapters.forward(tokens, N, T, keyStart).logits;
      const plain = new RefLlama(fx.base.config, fx.base.params).forward(
        tokens,
        N,
        T,
        keyStart,
      ).logits;
      expect(off).toEqual(plain);
      const refLogp = completionLogprobsRef(off, tokens, N, T, V, P, fx.header.grpo.temperature);
      expect(worst(refLogp, fx.refLogp, FORWARD_TOLERANCE)).toBeNull();
      // B = 0 (PEFT's start): the adapted model is the base model too.
      const zeroB = new Map(
        [...fx.adapters].map(([k, t]) => [
          k,
          k.endsWith('lora_B.weight') ? new Float32Array(t.length) : t,
        ]),
      );
      expect(model(fx, zeroB).forward(tokens, N, T, keyStart).logits).toEqual(plain);
    });

    it('all four losses and every adapter gradient (dA, dB) match torch', () => {
      const m = model(fx);
      for (const lossType of LOSS_TYPES) {
        const { result } = lossAndGrads(fx, m, lossType);
        expect(Math.abs(result.loss - fx.header.grpo.losses[lossType]), lossType).toBeLessThan(
          LOSS_TOLERANCE,
        );
      }
      const { result, grads, logp } = lossAndGrads(fx, m, 'dapo');
      expect(worst(logp, fx.logp, FORWARD_TOLERANCE)).toBeNull();
      expect(worst(result.dLogp, fx.dLossDLogp, GRADIENT_TOLERANCE)).toBeNull();
      for (const s of specs) {
        const expected = fx.grads.get(s.name)!;
        expect(worst(grads.get(s.name)!, expected, GRADIENT_TOLERANCE), s.name).toBeNull();
        expect(Math.max(...expected.map(Math.abs)), s.name).toBeGreaterThan(1e-6);
      }
    });

    it('adapters after each of 3 clipped AdamW steps match torch (base untouched)', () => {
      const m = model(fx);
      const a = fx.header.adamw;
      const hyper = {
        lr: a.lr,
        beta1: a.beta1,
        beta2: a.beta2,
        eps: a.eps,
        weightDecay: a.weight_decay,
      };
      const mom = new Map(
        specs.map((s) => [s.name, new Float64Array(m.params.get(s.name)!.length)]),
      );
      const vel = new Map(
        specs.map((s) => [s.name, new Float64Array(m.params.get(s.name)!.length)]),
      );
      for (let step = 1; step <= a.steps; step++) {
        const { result, grads } = lossAndGrads(fx, m, 'dapo');
        expect(Math.abs(result.loss - a.losses[step - 1])).toBeLessThan(LOSS_TOLERANCE);
        const clip = gradClipRef(
          specs.map((s) => grads.get(s.name)!),
          a.max_grad_norm,
        );
        expect(Math.abs(clip.norm - a.gradNorms[step - 1])).toBeLessThan(1e-12 * clip.norm);
        for (const s of specs) {
          const p = m.params.get(s.name)!;
          adamwStepRef(
            p,
            grads.get(s.name)!,
            mom.get(s.name)!,
            vel.get(s.name)!,
            step,
            hyper,
            clip.scale,
          );
          expect(
            worst(p, fx.adamw[step - 1].get(s.name)!, ADAMW_TOLERANCE),
            `${s.name} step ${step}`,
          ).toBeNull();
        }
      }
      for (const [name, start] of fx.base.params)
        expect(m.params.get(name)).toEqual(Float64Array.from(start));
    });
  });
}

describe('LoRA options and initialisation (PEFT semantics)', () => {
  const fx = loadLoraFixture('llama_gqa');
  const cfg = fx.base.config;
  const opts = (o: Partial<LoraOptions>): LoraOptions => ({
    r: 4,
    alpha: 8,
    targetModules: 'all-linear',
    useRslora: false,
    dropout: 0,
    ...o,
  });

  it('scaling is α/r, or α/√r with rslora', () => {
    expect(loraScaling(opts({ r: 4, alpha: 8 }))).toBe(2);
    expect(loraScaling(opts({ r: 4, alpha: 8, useRslora: true }))).toBe(4);
  });

  it("'all-linear' targets every decoder projection (never lm_head); a list keeps its members", () => {
    expect(checkLoraOptions(opts({}))).toEqual([...LORA_PROJECTIONS]);
    expect(checkLoraOptions(opts({ targetModules: ['all-linear'] }))).toEqual([
      ...LORA_PROJECTIONS,
    ]);
    expect(checkLoraOptions(opts({ targetModules: ['v_proj', 'q_proj'] }))).toEqual([
      'q_proj',
      'v_proj',
    ]);
    const names = loraAdapterSpecs(cfg, opts({})).map((s) => s.name);
    expect(names.some((n) => n.includes('lm_head') || n.includes('embed'))).toBe(false);
    expect(names[0]).toBe('model.layers.0.self_attn.q_proj.lora_A.weight');
    expect(
      loraAdapterSpecs(cfg, opts({})).find((s) => s.name.endsWith('down_proj.lora_B.weight'))!
        .shape,
    ).toEqual([cfg.hiddenSize, 4]);
  });

  it('rejects dropout ≠ 0, unknown modules and a bad rank with clear errors', () => {
    expect(() => checkLoraOptions(opts({ dropout: 0.05 }))).toThrow(
      /lora_dropout 0.05 is not supported/,
    );
    expect(() => checkLoraOptions(opts({ targetModules: ['lm_head'] }))).toThrow(
      /unknown module 'lm_head'/,
    );
    expect(() => checkLoraOptions(opts({ r: 0 }))).toThrow(/lora_r/);
  });

  it('A ~ U(−1/√in, 1/√in) (kaiming_uniform_ a=√5), B = 0, deterministic for a seed', () => {
    const a = initLoraAdapters(cfg, opts({}), 7);
    const b = initLoraAdapters(cfg, opts({}), 7);
    expect([...a.entries()]).toEqual([...b.entries()]);
    for (const s of loraAdapterSpecs(cfg, opts({}))) {
      const t = a.get(s.name)!;
      if (s.name.endsWith('lora_B.weight')) {
        expect(t.every((x) => x === 0)).toBe(true);
      } else {
        const bound = 1 / Math.sqrt(s.shape[1]);
        const max = Math.max(...t.map(Math.abs));
        expect(max).toBeLessThanOrEqual(bound);
        expect(max).toBeGreaterThan(0.5 * bound); // spread over the range, not a constant
      }
    }
    expect([...initLoraAdapters(cfg, opts({}), 8).values()][0]).not.toEqual([...a.values()][0]);
  });
});

describe('LoRA config options (TRL ModelConfig names)', () => {
  it('are off by default; on, they give PEFT options; TRL spellings work as flags', () => {
    expect(loraOptionsOf(resolveConfig({}))).toBeNull();
    expect(loraOptionsOf(resolveConfig({ usePeft: true }))).toEqual({
      r: 16,
      alpha: 32,
      targetModules: ['all-linear'],
      useRslora: false,
      dropout: 0,
    });
    const cli = parseCliArgs([
      '--use_peft',
      '--lora_r',
      '8',
      '--lora_alpha',
      '16',
      '--lora_target_modules',
      'q_proj,v_proj',
      '--use_rslora',
    ]);
    expect(loraOptionsOf(resolveConfig(cli))).toEqual({
      r: 8,
      alpha: 16,
      targetModules: ['q_proj', 'v_proj'],
      useRslora: true,
      dropout: 0,
    });
  });

  it('reject lora_dropout ≠ 0 and unknown target modules, naming the option', () => {
    expect(() => resolveConfig({ usePeft: true, loraDropout: 0.05 })).toThrow(
      /loraDropout.*lora_dropout.*0\.05 is not supported/,
    );
    expect(() => resolveConfig({ usePeft: true, loraTargetModules: ['lm_head'] })).toThrow(
      /unknown module 'lm_head'/,
    );
  });
});
