// A command-line run folder (config.json + metrics.jsonl, as src/cli/_train.ts writes them) made
// a run file by the page (src/app/lib/run-file.ts) and imported through the run-file import on
// fake-indexeddb: the rows are the folder's (its `skipped` flag dropped, NaN kept), the name is a
// new run's default name for that config and model folder, and a damaged line is named.
import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it } from 'vitest';
import { GrpoStorage } from '../../src/storage';
import { resolveConfig } from '../../src/grpo/config';
import { defaultRunName } from '../../src/grpo/run-name';
import { runFileFromCliFolder } from '../../src/app/lib/run-file';

const opened: GrpoStorage[] = [];
afterEach(() => {
  for (const s of opened.splice(0)) s.close();
});

const config = resolveConfig({ model: '/models/SmolLM2-135M/', learningRate: 3e-5, steps: 2 });
// As _train.ts appends them: JSON.stringify of { step, ...metrics, skipped } (NaN becomes null).
const metrics = [
  JSON.stringify({ step: 1, reward: 0.25, loss: 0.5, kl: NaN, skipped: false }),
  JSON.stringify({ step: 2, reward: 0.5, loss: -0.25, kl: 0.01, skipped: true }),
  '',
].join('\n');

describe('a command-line run folder as a run file', () => {
  it('imports with its rows and config, named as a new run of that config is', async () => {
    const s = await GrpoStorage.open({
      indexedDB: new IDBFactory(),
      name: 'cli-folder',
      storageManager: null,
    });
    opened.push(s);
    const bytes = runFileFromCliFolder(JSON.stringify(config, null, 2), metrics, 1_700_000_000_000);
    const { run, rows } = await s.importRunFile(bytes, { fileName: 'run folder' });
    expect(rows).toBe(2);
    expect(run.name).toBe(defaultRunName(config, 'SmolLM2-135M'));
    expect(run.name).toBe('countdown · SmolLM2-135M · lr=3e-5, steps=2');
    const history = (await s.getRunHistory(run.id))!;
    expect(history.rows).toEqual([
      { step: 1, reward: 0.25, loss: 0.5, kl: NaN },
      { step: 2, reward: 0.5, loss: -0.25, kl: 0.01 },
    ]);
    expect(history.times).toEqual([null, null]);
    expect(history.config).toEqual(JSON.parse(JSON.stringify(config)));
    expect([history.status, history.createdAt]).toEqual(['finished', 1_700_000_000_000]);
  });

  it('names the file and line it cannot read', () => {
    expect(() => runFileFromCliFolder('[1]', metrics)).toThrow('config.json must be an object');
    expect(() => runFileFromCliFolder('{', metrics)).toThrow('config.json is not JSON');
    expect(() => runFileFromCliFolder('{}', '{"step":1}\n{oops')).toThrow(
      'metrics.jsonl line 2 is not JSON',
    );
  });
});
