// A dataset row's other columns reach custom rewards under their own names (issue 36: as TRL
// passes dataset columns to reward functions as keyword arguments): MATH-500's `level` and
// `solution`, read from the Parquet shards, are fields of the reward's argument beside
// completion, prompt and problem, and never shadow them; the TRL export's train.jsonl carries
// them too, so TRL passes them to its reward functions.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCustomRewards, disposeCustomRewards } from '../../src/rewards/custom-reward';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { importPromptDataset } from '../../src/tasks/datasets';
import { createJsonlTask } from '../../src/tasks/jsonl';
import { resolveConfig } from '../../src/grpo/config';
import { trlExportFiles } from '../../src/export/trl-archive';

const DIR = join(__dirname, '../fixtures/datasets/math500-test-50');
const source = `function reward({ completion, problem, level, solution, subject }) {
  // A column named like an argument field would be shadowed: 'completion' stays the completion.
  return level * 100 + (solution.includes('\\\\boxed') ? 10 : 0) + (completion === 'c' ? 1 : 0)
    + (problem.columns.subject === subject ? 1000 : 0);
}`;
const fns = createCustomRewards(
  { cols: source },
  {
    timeoutMs: 2000,
    sandboxFactory: nodeSandboxFactory(),
  },
);
afterAll(() => disposeCustomRewards(fns));

describe('dataset columns as reward arguments', () => {
  it('MATH-500 level and solution are fields of the argument', async () => {
    const files = readdirSync(DIR).map((f) => ({
      name: f,
      bytes: new Uint8Array(readFileSync(join(DIR, f))),
    }));
    const d = await importPromptDataset(files);
    const problems = createJsonlTask(d.text).dataset.problems.slice(0, 3);
    expect(problems.map((p) => p.columns?.level)).toEqual([2, 5, 3]);
    const values = await fns[0].computeBatch(
      problems.map((problem) => ({ completion: 'c', prompt: 'p', problem })),
    );
    expect(values).toEqual([{ value: 1211 }, { value: 1511 }, { value: 1311 }]);
  });
});

describe('dataset columns in the TRL export', () => {
  it("train.jsonl rows carry MATH-500's columns, so TRL passes them to the rewards", async () => {
    const dir = join(__dirname, '../fixtures/datasets');
    const d = await importPromptDataset([
      {
        name: 'math500-test-50.jsonl',
        bytes: new Uint8Array(readFileSync(join(dir, 'math500-test-50.jsonl'))),
      },
    ]);
    const config = resolveConfig({
      task: 'jsonl',
      taskOptions: { path: 'math500-test-50.jsonl' },
      steps: 1,
      perStepPrompts: 2,
      evalPrompts: 1,
    });
    const files = trlExportFiles(config, { text: d.text });
    const rows = files
      .get('train.jsonl')!
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows).toHaveLength(2);
    for (const r of rows) {
      expect(Object.keys(r)).toEqual([
        'solution',
        'subject',
        'level',
        'prompt',
        'verifier',
        'id',
        'reference',
      ]);
      expect(r.solution).toMatch(/\\boxed\{/);
      expect(typeof r.level).toBe('number');
    }
  });
});
