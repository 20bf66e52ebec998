// Leaving the page asks exactly when trained steps would be lost (src/app/lib/leave-guard.ts): the
// playground's steps since its last checkpoint, a running recipe stage's steps since its own.
import { describe, expect, it } from 'vitest';
import { guardLeaving, leaveWarning, recipeUnsavedSteps } from '../../src/app/lib/leave-guard';

const idleRecipe = {
  status: 'idle',
  runName: null,
  stageIndex: 0,
  timeline: [],
  lastCheckpoint: null,
};
const rows = (stage: number, steps: number[]) => steps.map((stageStep) => ({ stage, stageStep }));

describe('leave guard', () => {
  it('asks nothing when every step is saved', () => {
    expect(leaveWarning({ unsavedSteps: 0, runName: 'r' }, idleRecipe)).toBeNull();
  });

  it('names the playground run and its unsaved steps', () => {
    expect(leaveWarning({ unsavedSteps: 1, runName: 'countdown' }, idleRecipe)).toBe(
      "Leaving loses 1 trained step of run 'countdown' since its last checkpoint.",
    );
    expect(leaveWarning({ unsavedSteps: 3, runName: 'countdown' }, idleRecipe)).toBe(
      "Leaving loses 3 trained steps of run 'countdown' since its last checkpoint.",
    );
  });

  it("counts a running recipe's current stage past its last checkpoint only", () => {
    const recipe = {
      status: 'running',
      runName: 'r1',
      stageIndex: 1,
      timeline: [...rows(0, [1, 2]), ...rows(1, [1, 2, 3])],
      lastCheckpoint: { index: 1, step: 1 },
    };
    expect(recipeUnsavedSteps(recipe)).toBe(2);
    // The checkpoint is an earlier stage's: every step of this stage is unsaved.
    expect(recipeUnsavedSteps({ ...recipe, lastCheckpoint: { index: 0, step: 2 } })).toBe(3);
    // Pause saves the stage under way: a paused recipe loses nothing.
    expect(recipeUnsavedSteps({ ...recipe, status: 'paused' })).toBe(0);
    expect(leaveWarning({ unsavedSteps: 2, runName: 'p' }, recipe)).toBe(
      "Leaving loses 2 trained steps of run 'p' since its last checkpoint and 2 trained steps of recipe 'r1'.",
    );
  });

  it('the listener makes the browser ask only when something would be lost', () => {
    const event = () => {
      const e = { defaultPrevented: false, returnValue: '' as string | boolean };
      return Object.assign(e, { preventDefault: () => void (e.defaultPrevented = true) });
    };
    const quiet = event();
    guardLeaving(() => null)(quiet as unknown as BeforeUnloadEvent);
    expect(quiet.defaultPrevented).toBe(false);
    const asks = event();
    guardLeaving(() => 'Leaving loses 1 trained step.')(asks as unknown as BeforeUnloadEvent);
    expect(asks.defaultPrevented).toBe(true);
    expect(asks.returnValue).toBe('Leaving loses 1 trained step.');
  });
});
