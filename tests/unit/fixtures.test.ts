// The CPU reference model (src/ref/llama.ts) and the GRPO loss / AdamW / clipping references
// reproduce the independent PyTorch float64 fixtures (tests/fixtures/make_fixtures.py): logits, the
// four losses, every parameter gradient, and the parameters after 3 clipped AdamW steps.
import { describe, expect, it } from 'vitest';
import { parameterSpecs } from '../../src/core/model-config';
import { computeAdvantages } from '../../src/grpo/advantages';
import { adamwStepRef, gradClipRef } from '../../src/ref/adamw';
import { grpoLossRef } from '../../src/ref/grpo_loss';
import { LOSS_TYPES, type LossType } from '../../src/core/loss-definitions';
import {
  RefLlama,
  completionLogprobsBackwardRef,
  completionLogprobsRef,
  positionsFromKeyStart,
} from '../../src/ref/llama';
import { FIXTURE_NAMES, loadFixture, type Fixture } from '../fixtures/load';

// f64 against f64 with different summation orders (einsum/BLAS vs index-order loops). Measured:
// logits and gradients agree to ~1e-15 absolute (gradients near 0 to ~5e-11 relative), params
// after 3 AdamW steps to ~3e-13; the tolerances leave ~100x headroom and sit far below any real bug.
const FORWARD_TOLERANCE = { atol: 1e-12, rtol: 1e-10 };
const GRADIENT_TOLERANCE = { atol: 1e-13, rtol: 1e-9 };
// m/(√v + eps) amplifies the rounding of tiny gradients, so AdamW is compared absolutely
// (lr = 1e-2: a wrong step would be off by ~1e-3).
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
    const diff = Math.abs(actual[i] - expected[i]);
    const excess = diff - (tol.atol + tol.rtol * Math.abs(expected[i]));
    if (!(excess <= worstExcess)) {
      worstExcess = Number.isNaN(excess) ? Infinity : excess;
      at = i;
    }
  }
  return at < 0 ? null : { index: at, actual: actual[at], expected: expected[at] };
}

function lossInputs(fx: Fixture, logp: Float64Array, lossType: LossType) {
  const { N, completionLength: L } = fx.batch;
  const { grpo } = fx.header;
  return {
    logp,
    oldLogp: fx.oldLogp,
    refLogp: fx.refLogp,
    advantages: computeAdvantages(fx.batch.rewards, fx.batch.groupSize, grpo.scaleRewards),
    mask: fx.batch.completionMask,
    N,
    L,
    lossType,
    epsilonLow: grpo.epsilon,
    epsilonHigh: grpo.epsilonHigh,
    beta: grpo.beta,
    maxCompletionLength: L,
  };
}

/** One forward + GRPO loss + backward on the CPU reference: (loss, grads by HF name). */
function lossAndGrads(fx: Fixture, model: RefLlama, lossType: LossType) {
  const { N, T, tokens, keyStart, promptLength: P } = fx.batch;
  const V = fx.config.vocabSize;
  const tau = fx.header.grpo.temperature;
  const { logits, cache } = model.forward(tokens, N, T, keyStart);
  const logp = completionLogprobsRef(logits, tokens, N, T, V, P, tau);
  const result = grpoLossRef(lossInputs(fx, logp, lossType));
  const dLogits = completionLogprobsBackwardRef(logits, tokens, result.dLogp, N, T, V, P, tau);
  return { logits, logp, result, grads: model.backward(cache, dLogits) };
}

for (const name of FIXTURE_NAMES) {
  describe(`fixture ${name}`, () => {
    const fx = loadFixture(name);
    const specs = parameterSpecs(fx.config);

    it('is well formed: every parameter, left padding, both clip regions', () => {
      expect(fx.header.format_version).toBe(1);
      expect([...fx.params.keys()]).toEqual(specs.map((s) => s.name));
      expect([...fx.grads.keys()]).toEqual(specs.map((s) => s.name));
      expect([...fx.paramsAfterAdamw.keys()]).toEqual(specs.map((s) => s.name));
      const { N, T, keyStart, positions } = fx.batch;
      expect(Array.from(positions)).toEqual(Array.from(positionsFromKeyStart(keyStart, N, T)));
      expect(Math.max(...keyStart)).toBeGreaterThan(0);
      expect(fx.header.grpo.clippedLowTokens).toBeGreaterThan(0);
      expect(fx.header.grpo.clippedHighTokens).toBeGreaterThan(0);
      // Clipping is active in every AdamW step (norm > max_grad_norm), so it is exercised.
      for (const norm of fx.header.adamw.gradNorms) {
        expect(norm).toBeGreaterThan(fx.header.adamw.max_grad_norm);
      }
    });

    it('logits match torch (every column, pad columns included, full vocabulary)', () => {
      const model = new RefLlama(fx.config, fx.params);
      const { logits } = model.forward(fx.batch.tokens, fx.batch.N, fx.batch.T, fx.batch.keyStart);
      expect(worst(logits, fx.logits, FORWARD_TOLERANCE)).toBeNull();
      // The comparison is not vacuous: the logits spread over several units.
      expect(Math.max(...fx.logits) - Math.min(...fx.logits)).toBeGreaterThan(2);
    });

    it('advantages, temperature log-probs and all four losses match torch', () => {
      const model = new RefLlama(fx.config, fx.params);
      const { N, T, tokens, keyStart, promptLength: P, groupSize } = fx.batch;
      const { logits } = model.forward(tokens, N, T, keyStart);
      const adv = computeAdvantages(fx.batch.rewards, groupSize, 'group');
      expect(worst(adv, fx.advantages, FORWARD_TOLERANCE)).toBeNull();
      const logp = completionLogprobsRef(
        logits,
        tokens,
        N,
        T,
        fx.config.vocabSize,
        P,
        fx.header.grpo.temperature,
      );
      expect(worst(logp, fx.logp, FORWARD_TOLERANCE)).toBeNull();
      const seen = new Set<number>();
      for (const lossType of LOSS_TYPES) {
        const { loss, dLogp } = grpoLossRef(lossInputs(fx, logp, lossType));
        const expected = fx.header.grpo.losses[lossType];
        expect(Math.abs(loss - expected)).toBeLessThan(LOSS_TOLERANCE);
        seen.add(Math.round(loss * 1e9));
        if (lossType === fx.header.grpo.gradientsOf) {
          expect(worst(dLogp, fx.dLossDLogp, GRADIENT_TOLERANCE)).toBeNull();
        }
      }
      // grpo, bnpo(=dapo here) and dr_grpo aggregate differently on this batch.
      expect(seen.size).toBe(3);
    });

    it(`every parameter gradient of the '${fx.header.grpo.gradientsOf}' loss matches torch`, () => {
      const model = new RefLlama(fx.config, fx.params);
      const { grads } = lossAndGrads(fx, model, fx.header.grpo.gradientsOf);
      for (const spec of specs) {
        const expected = fx.grads.get(spec.name) as Float64Array;
        const mismatch = worst(grads.get(spec.name) as Float64Array, expected, GRADIENT_TOLERANCE);
        expect(mismatch, spec.name).toBeNull();
        expect(Math.max(...expected.map(Math.abs)), spec.name).toBeGreaterThan(1e-6);
      }
    });

    it('parameters after 3 AdamW steps with grad-norm clipping match torch', () => {
      const model = new RefLlama(fx.config, fx.params);
      const a = fx.header.adamw;
      const hyper = {
        lr: a.lr,
        beta1: a.beta1,
        beta2: a.beta2,
        eps: a.eps,
        weightDecay: a.weight_decay,
      };
      const m = new Map(
        specs.map((s) => [s.name, new Float64Array(model.params.get(s.name)!.length)]),
      );
      const v = new Map(
        specs.map((s) => [s.name, new Float64Array(model.params.get(s.name)!.length)]),
      );
      for (let step = 1; step <= a.steps; step++) {
        const { result, grads } = lossAndGrads(fx, model, a.loss_type);
        expect(Math.abs(result.loss - a.losses[step - 1])).toBeLessThan(LOSS_TOLERANCE);
        const clip = gradClipRef(
          specs.map((s) => grads.get(s.name)!),
          a.max_grad_norm,
        );
        expect(Math.abs(clip.norm - a.gradNorms[step - 1])).toBeLessThan(1e-12 * clip.norm);
        for (const s of specs) {
          adamwStepRef(
            model.params.get(s.name)!,
            grads.get(s.name)!,
            m.get(s.name)!,
            v.get(s.name)!,
            step,
            hyper,
            clip.scale,
          );
        }
      }
      for (const s of specs) {
        const expected = fx.paramsAfterAdamw.get(s.name)!;
        expect(worst(model.params.get(s.name)!, expected, ADAMW_TOLERANCE), s.name).toBeNull();
        // The parameters did move (by ~lr per step), so matching them is not matching the start.
        const start = fx.params.get(s.name)!;
        let moved = 0;
        for (let i = 0; i < start.length; i++)
          moved = Math.max(moved, Math.abs(expected[i] - start[i]));
        expect(moved, s.name).toBeGreaterThan(1e-3);
      }
    });
  });
}
