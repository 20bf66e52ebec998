// Recipe runs on fake-indexeddb (src/storage/recipe-runs.ts): the recipe's state is one field of
// its run row, created on the first write and replaced by later ones; the other writes to the run
// row (a metrics row, a rename, the status) keep it; only runs with a recipe are listed.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { GrpoStorage, type StoredRecipe } from '../../src/storage';

const recipe = (stageIndex: number, steps: number): StoredRecipe => ({
  state: {
    recipe: { name: 'two-stage', stages: [{ kind: 'sft' }, { kind: 'grpo' }] },
    stageIndex,
    results: [],
    datasets: {},
    timeline: Array.from({ length: steps }, (_, i) => ({
      step: i + 1,
      stage: i < 2 ? 0 : 1,
      stageStep: i < 2 ? i + 1 : i - 1,
      metrics: { loss: i / 4, rate: NaN },
    })),
  },
  rejections: { samples: { kept: 1, sampled: 4 } },
});

describe('recipe runs', () => {
  it('stores, replaces and keeps the recipe state on the run row', async () => {
    let t = 1000;
    const s = await GrpoStorage.open({ indexedDB: new IDBFactory(), now: () => t++ });
    const meta = {
      id: 'r1',
      name: 'recipe two-stage',
      config: { recipe: 'two-stage' },
      stages: [{ name: 'cold-start', kind: 'sft', firstStep: 1 }],
    };
    const first = await s.putRecipe(meta, recipe(0, 1), 'created');
    expect(first).toMatchObject({ id: 'r1', status: 'created', name: 'recipe two-stage' });
    expect(first.updatedAt).toBe(first.createdAt);
    await s.recordRunMetrics(meta, [{ step: 1, loss: 0 }]);
    await s.putRecipe(
      { ...meta, stages: [...meta.stages, { name: 'rl', kind: 'grpo', firstStep: 3 }] },
      recipe(1, 3),
      'paused',
    );
    await s.renameRun('r1', 'renamed');
    await s.recordRunMetrics({ id: 'r1', name: 'x', config: {} }, [{ step: 2, loss: 0.25 }]);
    const run = await s.getRun('r1');
    expect(run?.name).toBe('renamed');
    expect(run?.status).toBe('paused');
    expect(run?.createdAt).toBe(first.createdAt);
    expect(run?.stages?.map((x) => x.firstStep)).toEqual([1, 3]);
    expect(run?.recipe?.state.stageIndex).toBe(1);
    const timeline = run?.recipe?.state.timeline as { metrics: { rate: number } }[];
    expect(timeline).toHaveLength(3);
    // Structured clone keeps NaN (JSON would write null).
    expect(timeline[2].metrics.rate).toBeNaN();
    expect(run?.recipe?.rejections).toEqual({ samples: { kept: 1, sampled: 4 } });

    await s.recordRunMetrics({ id: 'plain', name: 'plain run', config: {} }, [{ step: 1 }]);
    expect((await s.listRecipeRuns()).map((r) => r.id)).toEqual(['r1']);
    s.close();
  });
});
