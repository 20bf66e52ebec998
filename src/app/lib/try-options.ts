// One-click "see it with …" (Learn mode, the step inspector): puts a few options into the options
// form and starts a fresh run with them through the session's own Reset, which asks first in the
// discard dialog when the run has unsaved steps, then takes one Step so the views show the option
// at work. Cancel in that dialog leaves the form and the run exactly as they were.
import type { DraftConfig } from '../../grpo/config';

/** The options a "see it with" button may set. */
export type TryChanges = Partial<Pick<DraftConfig, 'numIterations' | 'beta'>>;

/** What the helper needs of the page's Session (session.svelte.ts). */
export interface TrySession {
  readonly options: { readonly draft: DraftConfig };
  readonly training: {
    readonly applied: Pick<DraftConfig, 'numIterations' | 'beta'> | null;
    readonly step: number;
    readonly status: string;
    reset(): Promise<void>;
    stepOnce(): Promise<void>;
  };
  readonly model: { readonly info: unknown };
  readonly busy: string | null;
}

/** Whether a "see it with" button can act now: a model is loaded and nothing is under way. */
export function canTry(session: TrySession): boolean {
  return !!session.model.info && session.training.status !== 'running' && session.busy === null;
}

/** The button's text, e.g. "See it with μ = 2" (the option's symbol as the page writes it). */
export function tryLabel(changes: TryChanges): string {
  const parts: string[] = [];
  if (changes.numIterations !== undefined) parts.push(`μ = ${changes.numIterations}`);
  if (changes.beta !== undefined) parts.push(`β = ${changes.beta}`);
  return parts.join(', ');
}

export type TryOutcome = 'stepped' | 'reset' | 'cancelled' | 'unavailable';

/**
 * Sets `changes` in the form, resets the run (the discard dialog asks first when steps are unsaved)
 * and takes one step. 'cancelled': the dialog was cancelled or the reset failed (its banner says
 * why), and the form got its old values back; 'reset': the new run exists but the step failed.
 */
export async function tryOptions(session: TrySession, changes: TryChanges): Promise<TryOutcome> {
  if (!canTry(session)) return 'unavailable';
  const keys = Object.keys(changes) as (keyof TryChanges)[];
  const before: TryChanges = {};
  for (const k of keys) before[k] = session.options.draft[k];
  Object.assign(session.options.draft, changes);
  await session.training.reset();
  const applied = session.training.applied;
  const took =
    !!applied && session.training.step === 0 && keys.every((k) => applied[k] === changes[k]);
  if (!took) {
    Object.assign(session.options.draft, before);
    return 'cancelled';
  }
  await session.training.stepOnce();
  return session.training.step > 0 ? 'stepped' : 'reset';
}
