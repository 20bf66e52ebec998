// `npm run sft -- --model <folder> --data <file.jsonl> [--out runs/x] [options]`
// Supervised fine-tuning on Node WebGPU (src/train/sft.ts: TRL SFTTrainer's loss, metrics and
// SFTConfig option names). Writes a run folder: config.json, metrics.jsonl (one line per optimizer
// step), checkpoint-<step>/ (a Hugging Face folder + optimizer.safetensors + trainer_state.json,
// written atomically) and final-model/. `--resume <run>/checkpoint-<step>` continues a run exactly.
// Exits 0 when the run finished, 1 with a message otherwise. This file reads argv, the data and the
// model; _sft.ts holds the flag table and runs the loop and the folder.
import { resolve } from 'node:path';
import { checkBaseModel, readerIdentity } from '../train/checkpoint';
import { isHelpRequested } from '../grpo/config';
import { tokenizeSftDataset } from '../train/sft';
import { resolveSftConfig, type SftConfig } from '../train/sft-config';
import { parseSftJsonl } from '../train/sft-data';
import { runCommand } from './_flags';
import { openEngine, openModel } from './_session';
import { describeImport, readSftDataset } from './_dataset';
import { parseSftArgs, readSftCheckpoint, sftFolder, sftHelp, sftRunDir } from './_sft';

/** Options a resume may change: the run's length only (anything else would be another run). */
const RESUMABLE = new Set(['maxSteps', 'numTrainEpochs']);

async function main(argv: string[]) {
  if (isHelpRequested(argv)) {
    console.log(sftHelp());
    return;
  }
  const args = parseSftArgs(argv);
  let config: SftConfig;
  let resume: ReturnType<typeof readSftCheckpoint> | null = null;
  if (args.resume) {
    const changed = Object.keys(args.options).filter((k) => !RESUMABLE.has(k));
    if (changed.length)
      throw new Error(
        `--resume continues a run as configured; only --max-steps and --num-train-epochs may change (got ${changed.join(', ')})`,
      );
    resume = readSftCheckpoint(resolve(args.resume));
    config = resolveSftConfig({ ...resume.config, ...args.options });
  } else {
    if (!args.model) throw new Error('--model <folder> is required (npm run sft -- --help)');
    if (!args.data) throw new Error('--data <file.jsonl> is required (npm run sft -- --help)');
    config = resolveSftConfig(args.options);
  }
  const dataPath = resolve(args.data ?? resume!.data);
  // Any dataset the importer reads (src/tasks/datasets): TRL's SFT JSONL passes through unchanged.
  const columns = resume ? resume.columns : args.columns;
  const imported = await readSftDataset(dataPath, '--data', columns);
  if (imported.layout !== 'sft' || imported.format !== 'jsonl')
    for (const line of describeImport(dataPath, imported)) console.log(line);
  const dataset = parseSftJsonl(imported.text);
  for (const issue of dataset.issues.slice(0, 10))
    console.log(`${imported.origin(issue.line)}: skipped (${issue.message})`);
  if (dataset.issues.length > 10) console.log(`… ${dataset.issues.length - 10} more lines skipped`);

  // Opened, not loaded: the policy streams into the GPU tensor by tensor (SftRun.create).
  const model = await openModel(resume ? resume.baseModel : args.model!);
  try {
    const identity = await readerIdentity(model.folder, model.hf.weights);
    if (resume) checkBaseModel(resume.payload, identity);
    const { examples, dropped } = tokenizeSftDataset(dataset.rows, model.tokenizer, config);
    if (dropped.length)
      console.log(
        `${dropped.length} row${dropped.length === 1 ? '' : 's'} kept no loss token after max_length ${config.maxLength} (lines ${dropped.slice(0, 5).join(', ')}${dropped.length > 5 ? ', …' : ''}): skipped`,
      );
    if (examples.length === 0) throw new Error(`${dataPath}: no example to train on`);
    const engine = await openEngine();
    try {
      await sftFolder({
        engine,
        model,
        identity,
        config,
        examples,
        dataPath,
        dataColumns: columns,
        runDir: sftRunDir(args),
        resume: resume && { payload: resume.payload, from: args.resume! },
      });
    } finally {
      engine.destroy();
    }
  } finally {
    await model.hf.weights.close();
  }
}

runCommand(() => main(process.argv.slice(2)));
