// The words of a step's progress line: "sampling 23/80 tokens", "backward pass 1/2" …
import type { PhaseProgress } from '../../worker/protocol';

/** The phase of a step in a few words. */
export function phaseText(p: Pick<PhaseProgress, 'phase' | 'done' | 'total'>): string {
  const of = p.done !== null && p.total !== null ? ` ${p.done}/${p.total}` : '';
  switch (p.phase) {
    case 'sampling':
      return `sampling${of} tokens`;
    case 'rewards':
      return 'scoring rewards';
    case 'reference':
      return 'reference log-probs';
    case 'backward':
      // μ = 1: one pass, nothing to count.
      return p.total !== null && p.total > 1
        ? `forward + backward, pass${of}`
        : 'forward + backward';
    case 'optimizer':
      return p.total !== null && p.total > 1 ? `optimizer step${of}` : 'optimizer step';
    case 'rescoring':
      return 'scoring the updated policy';
    case 'checkpoint':
      return 'saving the checkpoint';
    case 'eval':
      return 'evaluating';
  }
}

/** The fraction of the phase done, for a meter (sampling, and μ > 1 passes), or null: one pass of
 * one has nothing to count, and a full meter would say the update is over. */
export function phaseFraction(p: Pick<PhaseProgress, 'done' | 'total'>): number | null {
  if (p.done === null || p.total === null || p.total <= 1) return null;
  return Math.min(1, Math.max(0, p.done / p.total));
}
