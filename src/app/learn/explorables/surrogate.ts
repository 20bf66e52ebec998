// The numbers of the surrogate explorable (Learn §4): one token's policy objective J(ρ) = −ℓ and
// the push its gradient gives log π, −∂ℓ/∂log π, as the reader drags its ratio ρ and advantage A,
// for the clipped surrogate (ε_low, ε_high, two-sided δ), CISPO and SAPO (docs/grpo.md §3, §5),
// and the aggregation weight each loss type gives the token (§4). Every value comes from the
// project's f64 reference (src/ref/grpo_loss.ts), so the widget shows what the trainer computes;
// this module only samples curves and reads the selected step. Pure: no DOM.
import { aggregationWeights, clippedSurrogate, cispoTerm, sapoTerm } from '../../../ref/grpo_loss';
import type { LossType } from '../../../core/loss-definitions';
import type { CompletionRecord } from '../../../grpo/trainer';

export interface SurrogateParams {
  lossType: LossType;
  epsLow: number;
  epsHigh: number;
  /** Two-sided clipping (INTELLECT-2); null = off. Only the clipped surrogate uses it. */
  delta: number | null;
  sapoPos: number;
  sapoNeg: number;
}

/** The per-token objective a loss type uses: the four aggregations share the clipped surrogate. */
export type ObjectiveKind = 'clip' | 'cispo' | 'sapo';

export function objectiveKind(lossType: LossType): ObjectiveKind {
  return lossType === 'cispo' || lossType === 'sapo' ? lossType : 'clip';
}

export interface TokenPoint {
  /** J = −ℓ (the policy term, β = 0); null for CISPO, whose ℓ depends on log π itself. */
  objective: number | null;
  /** −∂ℓ/∂log π: > 0 raises the token's probability, 0 where the clip holds it. */
  push: number;
  /** The clip (or CISPO's cap) is active: the gradient is 0 or capped here. */
  clipped: boolean;
}

/** One token at ratio ρ with advantage A, under the loss type's objective. */
// `0 - x` rather than `-x` below: a readout never shows −0.
export function tokenPoint(rho: number, a: number, p: SurrogateParams): TokenPoint {
  const kind = objectiveKind(p.lossType);
  if (kind === 'cispo') {
    // The value is −min(ρ, ε_high)·A·log π; its gradient does not depend on log π (logp = 0 here).
    const t = cispoTerm(rho, a, 0, p.epsHigh);
    return { objective: null, push: 0 - t.grad, clipped: t.isHigh };
  }
  if (kind === 'sapo') {
    const t = sapoTerm(rho, a, p.sapoPos, p.sapoNeg);
    return { objective: 0 - t.perToken, push: 0 - t.grad, clipped: false };
  }
  const t = clippedSurrogate(rho, a, p.epsLow, p.epsHigh, p.delta);
  // With δ the flags of §6 test the capped ratio; the widget marks where the gradient is cut,
  // which also covers ρ > δ with A < 0.
  const cut = t.isLow || t.isHigh || (p.delta !== null && rho > p.delta && a < 0);
  return { objective: 0 - t.perToken, push: 0 - t.grad, clipped: cut };
}

export interface CurvePoint {
  rho: number;
  objective: number | null;
  push: number;
}

/**
 * J(ρ) and the push sampled over [lo, hi] at `samples` points, plus every kink (1 ± ε, δ, ε_high
 * for CISPO) so a polyline through them is exact for the piecewise-linear objectives.
 */
export function curve(
  a: number,
  p: SurrogateParams,
  lo: number,
  hi: number,
  samples = 121,
): CurvePoint[] {
  const xs = new Set<number>();
  for (let i = 0; i < samples; i++) xs.add(lo + ((hi - lo) * i) / (samples - 1));
  const kinks = [1 - p.epsLow, 1 + p.epsHigh];
  if (p.delta !== null) kinks.push(p.delta);
  if (objectiveKind(p.lossType) === 'cispo') kinks.push(p.epsHigh);
  // Both sides of a jump in the push (the clip switches the gradient off at the kink).
  for (const k of kinks) for (const x of [k - 1e-9, k, k + 1e-9]) if (x >= lo && x <= hi) xs.add(x);
  return [...xs]
    .sort((x, y) => x - y)
    .map((rho) => {
      const t = tokenPoint(rho, a, p);
      return { rho, objective: t.objective, push: t.push };
    });
}

/** A counted token of the step as the explorable marks it. */
export interface StepPoint {
  rho: number;
  advantage: number;
  /** Completion index within the group. */
  completion: number;
}

/** The group's counted tokens as (ρ, A) points: ρ = exp(logp − old) of the trainer's first pass. */
export function stepPoints(completions: readonly CompletionRecord[]): StepPoint[] {
  return completions.flatMap((c, completion) =>
    c.logp.flatMap((lp, t) =>
      c.counted[t]
        ? [{ rho: Math.exp(lp - c.oldLogp[t]), advantage: c.advantage, completion }]
        : [],
    ),
  );
}

/**
 * Where the handle starts: the point of the group with the largest |A| (ties: the first), so the
 * reader starts on a token that gets a gradient; (1, 1) when the group has none.
 */
export function startPoint(points: readonly StepPoint[]): { rho: number; advantage: number } {
  let best: StepPoint | null = null;
  for (const q of points) {
    if (!Number.isFinite(q.rho) || !Number.isFinite(q.advantage)) continue;
    if (best === null || Math.abs(q.advantage) > Math.abs(best.advantage)) best = q;
  }
  return best && best.advantage !== 0
    ? { rho: best.rho, advantage: best.advantage }
    : { rho: 1, advantage: 1 };
}

/**
 * The aggregation weight w (docs/grpo.md §4, L = Σ m·w·ℓ) each counted token of each completion
 * gets under `lossType` when the group is the whole batch (one micro-batch): the factor the loss
 * type puts on the token's push. From the reference's own aggregationWeights.
 */
export function groupTokenWeights(
  completions: readonly CompletionRecord[],
  lossType: LossType,
  maxCompletionLength: number,
): number[] {
  const N = completions.length;
  const L = Math.max(1, ...completions.map((c) => c.counted.length));
  const mask = new Float64Array(N * L);
  completions.forEach((c, i) => c.counted.forEach((m, t) => (mask[i * L + t] = m ? 1 : 0)));
  const zeros = new Float64Array(N * L);
  return Array.from(
    aggregationWeights({
      logp: zeros,
      oldLogp: zeros,
      refLogp: null,
      advantages: new Float64Array(N),
      mask,
      N,
      L,
      lossType,
      epsilonLow: 0,
      epsilonHigh: 0,
      beta: 0,
      maxCompletionLength,
    }),
  );
}
