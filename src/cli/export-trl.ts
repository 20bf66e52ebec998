// `node dist-cli/export-trl.js --config <config.json> --out <dir>` (or `--run <run folder>`): writes the
// experiment as a TRL project (see src/export/trl-export.ts). Further --options override the config.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  configHelp,
  ConfigError,
  isHelpRequested,
  parseCliArgs,
  resolveConfig,
} from '../grpo/config';
import { trlExportFiles } from '../export/trl-archive';
import { readPromptDataset } from './_dataset';

const USAGE = `usage: export-trl (--config <config.json> | --run <run folder>) --out <dir> [--option value …]

Writes train_grpo.py, rewards.py, train.jsonl, eval.jsonl, requirements.txt, accelerate configs and a
README to <dir>. Config options given here override the file.
`;

function take(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  if (i < 0) return undefined;
  const value = argv[i + 1];
  if (value === undefined || value.startsWith('--'))
    throw new ConfigError(flag, `${flag} needs a value`);
  argv.splice(i, 2);
  return value;
}

async function main(args: string[]): Promise<void> {
  if (isHelpRequested(args)) {
    console.log(`${USAGE}\n${configHelp()}`);
    return;
  }
  const argv = args.slice();
  const configPath = take(argv, '--config');
  const runDir = take(argv, '--run');
  const out = take(argv, '--out');
  if (!out || (configPath === undefined) === (runDir === undefined))
    throw new ConfigError('', USAGE);
  const file = resolve(configPath ?? join(runDir as string, 'config.json'));
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ConfigError('', `cannot read ${file}: ${(e as Error).message}`);
  }
  const config = resolveConfig({ ...(json as object), ...parseCliArgs(argv) });
  const sources: { text?: string } = {};
  if (config.task === 'jsonl') {
    const path = String(config.taskOptions.path ?? '');
    if (!path) throw new ConfigError('taskOptions', "task 'jsonl' needs taskOptions.path");
    // Any dataset the importer reads (Parquet, CSV, JSON, JSONL, a folder of shards), mapped.
    const columns = String(config.taskOptions.columns ?? '');
    const d = await readPromptDataset(resolve(dirname(file), path), 'taskOptions.path', columns);
    sources.text = d.text;
  }
  const files = trlExportFiles(config, sources);
  mkdirSync(out, { recursive: true });
  for (const [name, text] of files) writeFileSync(join(out, name), text);
  console.log(`wrote ${[...files.keys()].join(', ')} to ${resolve(out)}`);
}

main(process.argv.slice(2)).catch((e) => {
  console.error(e instanceof ConfigError ? e.message : e);
  process.exitCode = 1;
});
