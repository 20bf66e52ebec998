// The TRL export of a config as files (CLI) or one ZIP (the playground's "Export to TRL" button):
// the same prompts this run trains and evaluates on, the scripts, the rewards in Python.
import type { Config } from '../grpo/config';
import { createTask, trainEvalProblems } from '../tasks/index';
import { checkTrlExportSize, exportTrl } from './trl-export';
import { zipFiles } from '../formats/zip';

/** Every file of the TRL project for `config` (a JSONL task needs its text in `sources.text`). */
export function trlExportFiles(
  config: Config,
  sources: { text?: string } = {},
): Map<string, string> {
  // Before the task is built or a prompt drawn: steps × perStepPrompts reaches 4e9 at the limits.
  checkTrlExportSize(config);
  const task = createTask(config.task, config.taskOptions, sources);
  const { train, eval: held } = trainEvalProblems(
    task,
    config.seed,
    config.steps * config.perStepPrompts,
    config.evalPrompts,
  );
  return exportTrl(config, { trainPrompts: train, evalPrompts: held });
}

/** The TRL project as a ZIP under a folder named after the run. */
export function trlExportArchive(
  config: Config,
  sources: { text?: string } = {},
  folder = `grpo-${config.task}-trl`,
): { fileName: string; bytes: Uint8Array } {
  return { fileName: `${folder}.zip`, bytes: zipFiles(trlExportFiles(config, sources), folder) };
}
