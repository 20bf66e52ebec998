// `npm run bench -- --counters [--only aha|qwen] [--json file]`: the host-side cost of a GRPO step,
// counted (src/engine/counters.ts), not timed: submits, CPU waits on the GPU, dispatches, bytes
// uploaded and read back, pipelines compiled, per step phase, for the aha preset's first step and
// for one LoRA step at Qwen2.5-0.5B's shape (bench/lib/step-counters.ts). The counts do not depend
// on the machine; on SwiftShader the 0.5B step takes a few minutes. Prints a table per step, then
// the JSON.
import { writeFileSync } from 'node:fs';
import { createEngine } from '../../src/engine/engine';
import {
  ahaStepCounters,
  countersTable,
  qwenLoraStepCounters,
  type StepCounters,
} from '../lib/step-counters';
import { machineInfo } from './machine';

async function main(argv: string[]) {
  const arg = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const only = arg('--only');
  if (only !== undefined && only !== 'aha' && only !== 'qwen')
    throw new Error(`--only must be 'aha' or 'qwen', not '${only}'`);
  const jsonOut = arg('--json');
  const engine = await createEngine();
  try {
    const runs: StepCounters[] = [];
    if (only !== 'qwen') {
      process.stderr.write('counting the aha preset’s first step…\n');
      runs.push(await ahaStepCounters(engine));
    }
    if (only !== 'aha') {
      process.stderr.write('counting one LoRA step at Qwen2.5-0.5B’s shape (minutes on a CPU)…\n');
      runs.push(await qwenLoraStepCounters(engine));
    }
    const tuning = engine.pipelines.tuning;
    for (const r of runs) {
      console.log(
        `\n## Counters: ${r.name} (${r.sequences} sequences, ${r.decodedTokens} decode steps; ` +
          `kernel variants: avoidBarriers ${tuning.avoidBarriers})`,
      );
      console.log(countersTable(r));
    }
    const result = {
      benchmark: 'counters',
      date: new Date().toISOString(),
      machine: machineInfo(),
      adapter: engine.gpu.adapter,
      tuning,
      runs,
    };
    const json = JSON.stringify(result, null, 2);
    console.log(`\n## JSON\n${json}`);
    if (jsonOut) writeFileSync(jsonOut, `${json}\n`);
  } finally {
    engine.destroy();
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exit(1);
});
