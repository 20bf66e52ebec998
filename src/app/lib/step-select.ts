// The one selected step every view shows (session.svelte.ts keeps it): moving it through the
// run's steps (the step picker's buttons and arrow keys, a chart's arrow keys) and which step
// Learn explains: the selection when it is pinned, otherwise the most recent step that teaches
// something, i.e. one whose rewards differ within a group (equal rewards give zero advantages, a
// step with no gradient from its policy term).
import { nearestIndex } from '../../core/chart-scale';

/** The step `delta` places from `current` among the ascending `steps` (clamped to the ends);
 * from null (nothing selected) it starts at the last step. Null when there are no steps. */
export function stepBy(steps: readonly number[], current: number | null, delta: number) {
  if (steps.length === 0) return null;
  const at = current === null ? steps.length - 1 : nearestIndex(steps, current);
  return steps[Math.min(steps.length - 1, Math.max(0, at + delta))];
}

/** The key presses that move a step selection: ← → one step, Home / End the first / last. */
export function stepKey(key: string, steps: readonly number[], current: number | null) {
  if (key === 'ArrowLeft') return stepBy(steps, current, -1);
  if (key === 'ArrowRight') return stepBy(steps, current, 1);
  if (key === 'Home') return steps.length ? steps[0] : null;
  if (key === 'End') return steps.length ? steps[steps.length - 1] : null;
  return null;
}

/** What the choice of Learn's step reads from a report. */
export interface StepWithAdvantages {
  step: number;
  groups: { completions: { advantage: number }[] }[];
}

/** Some completion of the step has a non-zero advantage (its rewards differ within a group). */
export function teaches(report: StepWithAdvantages): boolean {
  return report.groups.some((g) => g.completions.some((c) => c.advantage !== 0));
}

export type LearnReason =
  /** Pinned: the selected step, whatever it is. */
  | 'selected'
  /** Following: the most recent kept step with a non-zero advantage. */
  | 'instructive'
  /** Following, and every kept step ties within each group: the latest. */
  | 'all-tie'
  /** Pinned on a step whose full report is no longer kept. */
  | 'gone'
  /** No step yet. */
  | 'none';

export interface LearnChoice<R> {
  report: R | null;
  step: number | null;
  reason: LearnReason;
}

/** The step Learn walks through: see the file's header. `reports` ascending by step. */
export function learnChoice<R extends StepWithAdvantages>(
  reports: readonly R[],
  selected: number | null,
  follow: boolean,
): LearnChoice<R> {
  if (!follow && selected !== null) {
    const report = reports.find((r) => r.step === selected) ?? null;
    return { report, step: selected, reason: report ? 'selected' : 'gone' };
  }
  for (let i = reports.length - 1; i >= 0; i--)
    if (teaches(reports[i]))
      return { report: reports[i], step: reports[i].step, reason: 'instructive' };
  const last = reports.at(-1) ?? null;
  return { report: last, step: last?.step ?? null, reason: last ? 'all-tie' : 'none' };
}

/** The sentence Learn shows about its choice. */
export function learnWhy(choice: LearnChoice<unknown>, latest: number | null): string {
  const k = choice.step;
  switch (choice.reason) {
    case 'selected':
      return `Showing step ${k}: the selected step (pinned; choose “Follow latest” to follow the run).`;
    case 'instructive':
      return (
        `Showing step ${k}: the most recent step whose rewards differ within a group (a step where ` +
        `every group ties has zero advantages and teaches nothing)` +
        (latest !== null && latest !== k ? `; the latest, step ${latest}, tied everywhere.` : '.')
      );
    case 'all-tie':
      return (
        `Showing step ${k}, the latest: in every kept step each group’s rewards tie, so all ` +
        `advantages are zero and the policy term has no gradient. Steps with differing rewards teach more.`
      );
    case 'gone':
      return `Step ${k}’s full report is no longer kept in memory (only the most recent steps are): its details cannot be shown.`;
    case 'none':
      return '';
  }
}
