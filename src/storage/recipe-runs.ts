// Recipe runs (multi-stage: SFT, GRPO, rejection sampling) as the page's worker stores them: one
// run row whose `recipe` field holds the recipe's state (db.ts StoredRecipe), beside the run's
// metrics timeline (run-history.ts) and each stage's checkpoints under the stage's own run id.
// The state is written in one small transaction on the run row, so a reload finds either the
// previous state or the new one, never a mix.

import type { GrpoDatabase, RunRecord, RunStatus, StoredRecipe } from './db';
import type { RunHistoryMeta } from './run-history';
import { writeTx } from './tx';

/** Creates the recipe's run row or replaces its recipe state, stages and status. */
export async function putRecipe(
  db: GrpoDatabase,
  meta: RunHistoryMeta,
  recipe: StoredRecipe,
  status: RunStatus,
  now: () => number = Date.now,
): Promise<RunRecord> {
  let stored: RunRecord | undefined;
  await writeTx(db, ['runs'], async (tx) => {
    const runs = tx.objectStore('runs');
    const existing = await runs.get(meta.id);
    const t = now();
    stored = {
      ...(existing ?? {
        id: meta.id,
        name: meta.name.trim() || meta.id,
        config: meta.config,
        modelConfig: meta.modelConfig ?? null,
        modelIdentity: meta.modelIdentity ?? null,
        createdAt: t,
      }),
      ...(meta.stages ? { stages: meta.stages } : {}),
      status,
      recipe,
      updatedAt: t,
    };
    await runs.put(stored);
  });
  return stored!;
}

/** Every run that is a recipe, most recently updated first. */
export async function listRecipeRuns(db: GrpoDatabase): Promise<RunRecord[]> {
  const runs = await db.getAll('runs');
  return runs.filter((r) => r.recipe !== undefined).sort((a, b) => b.updatedAt - a.updatedAt);
}
