// The numbers of the KL explorable (Learn §5): the k3 estimator the loss uses per token,
// k3 = exp(x) − x − 1 with x = log π_ref − log π_θ (docs/grpo.md §3, R1 Eq. 2), against the true
// KL(π_θ ‖ π_ref) it estimates, as the reader moves the sampled token's ratio π_θ / π_ref. The true
// KL needs the whole distribution, which one sampled token does not show, so the widget uses the
// smallest one that has it: two outcomes, the sampled token (π_ref = q, π_θ = ρ·q) and "any other
// token" (the rest of the mass). There E_π_θ[k3] equals the true KL exactly (k3 is unbiased) while
// the naive k1 = log π_θ − log π_ref is unbiased too but can be negative per token. Pure: no DOM.
import { k3 } from '../derive';

export { k3 };

/** Σ p log(p/q) over the outcomes, with 0·log 0 = 0. */
export function klDivergence(p: readonly number[], q: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < p.length; i++) if (p[i] > 0) s += p[i] * Math.log(p[i] / q[i]);
  return s;
}

export interface KlPoint {
  /** π_θ of the sampled token, ρ·q. */
  p: number;
  /** k3 of the sampled token: the per-token value the loss adds (× β). */
  k3Sampled: number;
  /** k3 had the other outcome been sampled. */
  k3Other: number;
  /** The naive estimator log π_θ − log π_ref of the sampled token. */
  k1Sampled: number;
  /** E_π_θ[k3] = p·k3(sampled) + (1 − p)·k3(other). */
  expectedK3: number;
  /** KL(π_θ ‖ π_ref) of the two-outcome distributions. */
  trueKl: number;
}

/** The largest ratio the sampled token can have when π_ref gives it q (π_θ ≤ 1). */
export function maxRatio(q: number): number {
  return 1 / q;
}

/** Two outcomes: the sampled token with π_ref = q and π_θ = ρ·q, and the rest. */
export function klPoint(rho: number, q: number): KlPoint {
  const p = rho * q;
  const xSampled = Math.log(q) - Math.log(p);
  const xOther = Math.log(1 - q) - Math.log(1 - p);
  const k3Sampled = k3(xSampled);
  const k3Other = p < 1 ? k3(xOther) : 0;
  return {
    p,
    k3Sampled,
    k3Other,
    k1Sampled: 0 - xSampled,
    expectedK3: p * k3Sampled + (p < 1 ? (1 - p) * k3Other : 0),
    trueKl: klDivergence([p, 1 - p], [q, 1 - q]),
  };
}

/**
 * Where the widget starts, from the selected step: the counted token with the largest k3 when the
 * run has a reference (β > 0), its π_ref and ratio; otherwise the first counted token's
 * probability as π_ref at ratio 1 (π_θ = π_ref: every KL is 0 at the start of a run).
 */
export function klStart(
  completions: readonly {
    logp: number[];
    refLogp: number[] | null;
    counted: boolean[];
  }[],
): { q: number; rho: number; fromReference: boolean } {
  let best: { q: number; rho: number; k: number } | null = null;
  let first: number | null = null;
  for (const c of completions) {
    c.logp.forEach((lp, t) => {
      if (!c.counted[t] || !Number.isFinite(lp)) return;
      if (first === null) first = Math.exp(lp);
      const ref = c.refLogp?.[t];
      if (ref === undefined || !Number.isFinite(ref)) return;
      const k = k3(ref - lp);
      if (best === null || k > best.k) best = { q: Math.exp(ref), rho: Math.exp(lp - ref), k };
    });
  }
  const clampQ = (q: number) => Math.min(0.95, Math.max(0.02, q));
  if (best !== null) {
    const b = best as { q: number; rho: number };
    const q = clampQ(b.q);
    return { q, rho: Math.min(b.rho, maxRatio(q)), fromReference: true };
  }
  return { q: clampQ(first ?? 0.5), rho: 1, fromReference: false };
}
