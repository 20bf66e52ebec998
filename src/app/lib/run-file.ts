// The command line's counterpart of a run file: a run folder of `npm run train` (src/cli/_train.ts
// writes config.json, the resolved config, and metrics.jsonl, one `{ step, <metric>…, skipped }`
// line per step) turned into the run file the page imports (storage/run-file.ts), so a run trained
// on a cluster or a laptop's Node lists, overlays and diffs beside the browser's runs. The result
// goes through the same import (every field validated, nothing written on a refusal); this only
// reshapes. Named as a new run is (grpo/run-name.ts) after its config and its model folder.
import { resolveConfig } from '../../grpo/config';
import { defaultRunName } from '../../grpo/run-name';
import type { FlatMetricsRow } from '../../core/metrics-row';
import { encodeRunFile } from '../../storage/run-file';

/** The two files of a run folder this reads, by name. */
export const CLI_RUN_FILES = ['config.json', 'metrics.jsonl'] as const;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A run folder's config.json and metrics.jsonl as a run file's bytes; throws naming the file and
 * line of what it cannot read. `now` dates the run (the folder records no times). */
export function runFileFromCliFolder(
  configText: string,
  metricsText: string,
  now: number = Date.now(),
): Uint8Array {
  let config: unknown;
  try {
    config = JSON.parse(configText);
  } catch (err) {
    throw new Error(`config.json is not JSON (${err instanceof Error ? err.message : err})`, {
      cause: err,
    });
  }
  if (!isObject(config)) throw new Error('config.json must be an object (the run config)');
  const rows: FlatMetricsRow[] = [];
  metricsText.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (err) {
      throw new Error(`metrics.jsonl line ${i + 1} is not JSON`, { cause: err });
    }
    if (!isObject(row)) throw new Error(`metrics.jsonl line ${i + 1} is not an object`);
    // `skipped` says whether the step's update was applied: a flag, not a metric.
    const { skipped, ...values } = row;
    void skipped;
    rows.push(values as unknown as FlatMetricsRow);
  });
  const model = typeof config.model === 'string' ? config.model : 'model';
  const modelName =
    model
      .replace(/[/\\]+$/, '')
      .split(/[/\\]/)
      .pop() || model;
  let name: string;
  try {
    name = defaultRunName(resolveConfig(config), modelName);
  } catch {
    // A config this version does not accept still imports (as stored configs do); named plainly.
    name = `${typeof config.task === 'string' ? config.task : 'run'} · ${modelName}`;
  }
  return encodeRunFile(
    {
      id: 'command-line',
      name: name.slice(0, 200),
      status: 'finished',
      config,
      modelConfig: null,
      modelIdentity: null,
      createdAt: now,
      updatedAt: now,
    },
    rows,
    rows.map(() => null),
    null,
  );
}
