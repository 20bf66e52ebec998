// Per-token values for the step inspector's colouring (docs/grpo.md §3–§5): the completion's
// advantage, the probability ratio, whether the clipped objective cuts the token's gradient, and
// the k3 KL estimate against the reference. Pure functions of a report's completion record.
import type { CompletionRecord } from '../../grpo/trainer';

export type TokenMode = 'advantage' | 'ratio' | 'clipped' | 'kl';

export const TOKEN_MODES: { mode: TokenMode; label: string; help: string }[] = [
  {
    mode: 'advantage',
    label: 'Advantage',
    help: 'A of the completion, the same for each of its tokens (blue > 0, red < 0).',
  },
  {
    mode: 'ratio',
    label: 'Ratio',
    help: 'ρ = π_new / π_old per token: how much this step’s update made the token more (blue) or less (red) likely.',
  },
  {
    mode: 'clipped',
    label: 'Clipped',
    help: 'Tokens whose ratio left [1 − ε, 1 + ε_high] in the direction of their advantage: the clipped objective gives them no gradient.',
  },
  {
    mode: 'kl',
    label: 'KL',
    help: 'k3 = exp(ref − logp) − (ref − logp) − 1 per token, against the frozen reference (β > 0 only).',
  },
];

/**
 * The ratio shown per token: after-update log-probs over the sampling policy's when the report has
 * them (how the update moved each token), else π_θ / π_old of the loss (1 everywhere when μ = 1).
 */
export function tokenRatios(c: CompletionRecord): number[] {
  const next = c.logpAfter ?? c.logp;
  return next.map((lp, t) => Math.exp(lp - c.oldLogp[t]));
}

/** Whether the clipped surrogate zeroes this token's gradient at ratio r (docs/grpo.md §3). */
export function isClipped(r: number, advantage: number, eps: number, epsHigh: number): boolean {
  return (advantage > 0 && r > 1 + epsHigh) || (advantage < 0 && r < 1 - eps);
}

/** k3 per token, or null without a reference policy. */
export function tokenKl(c: CompletionRecord): (number | null)[] {
  if (!c.refLogp) return c.tokens.map(() => null);
  return c.logp.map((lp, t) => {
    const d = c.refLogp![t] - lp;
    return Math.exp(d) - d - 1;
  });
}

/** One value per token for `mode` (null = not defined for this token). */
export function tokenValues(
  c: CompletionRecord,
  mode: TokenMode,
  eps: number,
  epsHigh: number,
): (number | null)[] {
  switch (mode) {
    case 'advantage':
      return c.tokens.map(() => c.advantage);
    case 'ratio':
      return tokenRatios(c);
    case 'clipped':
      return tokenRatios(c).map((r) => (isClipped(r, c.advantage, eps, epsHigh) ? 1 : 0));
    case 'kl':
      return tokenKl(c);
  }
}

/**
 * Background colour of a token: blue for positive, red for negative (advantage; ratio around 1 in
 * log space), amber intensity for KL, solid amber for clipped. `scale` is the value that gets full
 * intensity.
 */
export function tokenColour(value: number | null, mode: TokenMode, scale: number): string {
  if (value === null || !Number.isFinite(value)) return 'transparent';
  const alpha = (x: number) => Math.min(1, Math.abs(x) / (scale || 1)) * 0.75;
  switch (mode) {
    case 'advantage': {
      const a = alpha(value);
      return value >= 0
        ? `rgba(37, 99, 235, ${a.toFixed(3)})`
        : `rgba(220, 38, 38, ${a.toFixed(3)})`;
    }
    case 'ratio': {
      const l = Math.log(value);
      const a = alpha(l);
      return l >= 0 ? `rgba(37, 99, 235, ${a.toFixed(3)})` : `rgba(220, 38, 38, ${a.toFixed(3)})`;
    }
    case 'clipped':
      return value > 0 ? 'rgba(217, 119, 6, 0.75)' : 'transparent';
    case 'kl':
      return `rgba(217, 119, 6, ${alpha(value).toFixed(3)})`;
  }
}

/** The intensity scale of a mode over a whole step (largest |value|, log-ratio for ratios). */
export function modeScale(values: (number | null)[][], mode: TokenMode): number {
  let m = 0;
  for (const row of values) {
    for (const v of row) {
      if (v === null || !Number.isFinite(v)) continue;
      const x = mode === 'ratio' ? Math.abs(Math.log(v)) : Math.abs(v);
      if (x > m) m = x;
    }
  }
  return m;
}
