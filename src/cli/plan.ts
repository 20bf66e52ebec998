// `npm run plan -- <model> [flags] [options] [--json]`: the GPU memory a GRPO run needs, without a
// GPU: a local Hugging Face folder (its config.json) or a built-in public model's numbers, bytes by
// category, the peak, and what to change when it does not fit (src/cli/_plan.ts does the work).
import { isHelpRequested } from '../grpo/config';
import { commandHelp, PLAN, runCommand } from './_flags';
import { formatPlanReport, planCommand, planReportJson } from './_plan';

async function main(args: string[]) {
  if (isHelpRequested(args)) {
    console.log(commandHelp(PLAN));
    return;
  }
  const report = planCommand(args);
  const text = args.includes('--json') ? planReportJson(report) : formatPlanReport(report);
  // Written out before runCommand exits: a pipe takes 64 KiB at once, and exit drops the rest.
  await new Promise<void>((done) => process.stdout.write(`${text}\n`, () => done()));
}

runCommand(() => main(process.argv.slice(2)));
