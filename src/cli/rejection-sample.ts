// `npm run rejection-sample -- --checkpoint <run or checkpoint folder> --out <folder> [--k 8]
// [--prompts N] [--seed S] [--min-length L] [--max-length L] [--language latin
// --min-language-consistency 0.9] [--no-dedupe] [options]`
// Rejection sampling (DeepSeek-R1 §2.3.3) from any checkpoint: k completions of each of the run's
// training prompts, the verified ones kept as an SFT set (<out>/sft.jsonl, which `npm run sft`
// reads), every sample with its reasons (samples.jsonl) and the counts (report.json). The same
// checkpoint, options and seed write the same files. The work is in _rejection-sample.ts.
import { runCommand } from './_flags';
import { rejectionSampleCommand } from './_rejection-sample';

runCommand(async () => {
  await rejectionSampleCommand(process.argv.slice(2));
});
