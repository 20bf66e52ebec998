// The command line's dataset path (src/cli/_dataset.ts, _session.ts taskText, _sft.ts, _recipe.ts):
// `--dataset <file|folder> [--column role=col] [--checker c]` parses, becomes task 'jsonl' with the
// layout's checker, and the same loading path a run, a resume (taskOptions.path), `npm run sft`
// and a recipe's SFT stage use reads Parquet shards, CSV and JSONL into the same problems.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { takeCommandFlags, TRAIN } from '../../src/cli/_flags';
import { datasetFiles, datasetOverrides, readSftDataset } from '../../src/cli/_dataset';
import { taskText } from '../../src/cli/_session';
import { parseSftArgs } from '../../src/cli/_sft';
import { readRecipe } from '../../src/cli/_recipe';
import { resolveConfig } from '../../src/grpo/config';
import { createTask } from '../../src/tasks/index';
import { suggestedChecker } from '../../src/tasks/datasets';
import { parseSftJsonl } from '../../src/train/sft-data';

const DIR = resolve(__dirname, '../fixtures/datasets');

describe('npm run train -- --dataset', () => {
  it('parses --dataset, repeated --column and --checker as command flags', () => {
    const { flags, rest } = takeCommandFlags(TRAIN, [
      '--dataset',
      'gsm8k.parquet',
      '--column',
      'prompt=question',
      '--column=answer=answer',
      '--checker',
      'numeric',
      '--steps',
      '3',
    ]);
    expect(flags.get('dataset')).toEqual(['gsm8k.parquet']);
    expect(flags.get('column')).toEqual(['prompt=question', 'answer=answer']);
    expect(flags.get('checker')).toEqual(['numeric']);
    expect(rest).toEqual(['--steps', '3']);
  });

  it('a GSM8K Parquet file becomes task jsonl with the layout checker, 50 problems', async () => {
    const { flags } = takeCommandFlags(TRAIN, ['--dataset', join(DIR, 'gsm8k-test-50.parquet')]);
    const d = (await datasetOverrides(flags))!;
    expect(d.task).toBe('jsonl');
    expect(d.taskOptions).toEqual({
      path: join(DIR, 'gsm8k-test-50.parquet'),
      columns: '',
      checker: suggestedChecker('gsm8k'),
    });
    const config = resolveConfig({ task: d.task, taskOptions: d.taskOptions });
    const task = createTask(config.task, config.taskOptions, { text: d.text });
    const problems = task.generate(1, 50);
    expect(new Set(problems.map((p) => p.id)).size).toBe(50);
    // A resumed run reads taskOptions.path again: the same text.
    expect(await taskText(config)).toBe(d.text);
    const { flags: bad } = takeCommandFlags(TRAIN, ['--column', 'prompt=q']);
    await expect(datasetOverrides(bad)).rejects.toThrow('--column applies to --dataset');
    const { flags: wrong } = takeCommandFlags(TRAIN, ['--dataset', 'x', '--checker', 'fuzzy']);
    await expect(datasetOverrides(wrong)).rejects.toThrow('--checker must be one of exact,');
  });

  it('taskOptions.path: a folder of shards, mapped columns, relative to the config folder', async () => {
    const config = resolveConfig({
      task: 'jsonl',
      taskOptions: { path: 'math500-test-50', columns: 'answer=solution' },
    });
    const text = (await taskText(config, DIR))!;
    const all = createTask('jsonl', config.taskOptions, { text }) as unknown as {
      dataset: { problems: { reference: string }[] };
    };
    expect(all.dataset.problems[1].reference).toBe('p - q'); // the last \boxed{} of the solution
    await expect(
      taskText(resolveConfig({ task: 'jsonl', taskOptions: { path: 'nowhere.parquet' } }), DIR),
    ).rejects.toThrow(
      `taskOptions.path: cannot read the dataset ${join(DIR, 'nowhere.parquet')} (ENOENT); a relative path is from the config file's folder`,
    );
    const empty = mkdtempSync(join(tmpdir(), 'ds-'));
    expect(() => datasetFiles(empty, '--dataset')).toThrow(
      `--dataset: ${empty}: no dataset file in the folder (.parquet, .jsonl, .json or .csv)`,
    );
  });
});

describe('SFT data from the same files', () => {
  it('npm run sft takes --dataset / --data and --column; a recipe SFT stage reads data.path', async () => {
    const args = parseSftArgs(['--dataset', 'x.csv', '--column', 'completion=solution']);
    expect([args.data, args.columns]).toEqual(['x.csv', 'completion=solution']);
    expect(() => parseSftArgs(['--data', 'a', '--dataset', 'b'])).toThrow('give the dataset once');
    const g = await readSftDataset(join(DIR, 'gsm8k-test-50.csv'), '--data');
    expect(parseSftJsonl(g.text).rows).toHaveLength(50);

    const dir = mkdtempSync(join(tmpdir(), 'recipe-'));
    writeFileSync(
      join(dir, 'r.json'),
      JSON.stringify({
        name: 'sft-math',
        stages: [
          {
            kind: 'sft',
            name: 'warm',
            data: { path: join(DIR, 'math500-test-50'), columns: 'prompt=problem' },
            options: { maxSteps: 1 },
          },
        ],
      }),
    );
    const recipe = await readRecipe(join(dir, 'r.json'));
    const data = (recipe.stages[0] as unknown as { data: { jsonl: string } }).data;
    const rows = parseSftJsonl(data.jsonl).rows;
    expect(rows).toHaveLength(50);
    expect(rows[1]).toMatchObject({ completion: expect.stringContaining('\\boxed{p - q}') });
  });
});
