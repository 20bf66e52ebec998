// What leaving the page (reload, close, navigate away) would lose, as the question the browser's
// `beforeunload` prompt stands for: the playground's steps trained since its last checkpoint, and a
// recipe stage's steps since its last checkpoint while it trains. Pure, so the rule is unit-tested;
// App.svelte installs it on the window.

/** The playground's side: steps trained since the run's last checkpoint. */
export interface PlaygroundUnsaved {
  unsavedSteps: number;
  runName: string | null;
}

/** The recipe's side: its status, stage and the stage's last checkpoint (stage steps). */
export interface RecipeUnsaved {
  status: string;
  runName: string | null;
  stageIndex: number;
  timeline: ReadonlyArray<{ stage: number; stageStep: number }>;
  lastCheckpoint: { index: number; step: number } | null;
}

/** Recipe steps that a reload would train again: the stage under way's, past its checkpoint. A
 * paused recipe has saved its stage (Pause checkpoints it), so only a running one loses steps. */
export function recipeUnsavedSteps(r: RecipeUnsaved): number {
  if (r.status !== 'running') return 0;
  const saved = r.lastCheckpoint?.index === r.stageIndex ? r.lastCheckpoint.step : 0;
  return r.timeline.filter((row) => row.stage === r.stageIndex && row.stageStep > saved).length;
}

/** Why leaving now would lose work, or null when nothing would be lost. */
export function leaveWarning(playground: PlaygroundUnsaved, recipe: RecipeUnsaved): string | null {
  const parts: string[] = [];
  const steps = (n: number) => `${n} trained step${n === 1 ? '' : 's'}`;
  if (playground.unsavedSteps > 0) {
    parts.push(
      `${steps(playground.unsavedSteps)} of run '${playground.runName ?? 'this run'}' since its last checkpoint`,
    );
  }
  const recipeSteps = recipeUnsavedSteps(recipe);
  if (recipeSteps > 0) {
    parts.push(`${steps(recipeSteps)} of recipe '${recipe.runName ?? 'this recipe'}'`);
  }
  return parts.length ? `Leaving loses ${parts.join(' and ')}.` : null;
}

/** The `beforeunload` listener: asks (the browser's own dialog) only when work would be lost. */
export function guardLeaving(warning: () => string | null): (event: BeforeUnloadEvent) => void {
  return (event) => {
    const reason = warning();
    if (!reason) return;
    // Browsers show their own text; preventDefault and a returnValue are what make them ask.
    event.preventDefault();
    event.returnValue = reason;
  };
}
