// The benchmark driver behind `npm run bench` (bundled by bench/run.mjs): runs the Node engine
// benchmark (issue 3) in a child process and the side-by-side browser benchmarks (issue 9) in
// headless Chromium, then prints one table per benchmark followed by all results as JSON.
//
// Flags:
//   --quick            fewer measured runs (a smoke run; the figures are noisier)
//   --only a,b         run only these benchmarks (engine, matmul)
//   --json <file>      also write the JSON to <file>
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmt, table, type Stat } from './lib/stats';
import type { EngineBenchResult } from './node/engine';

/** Where bench/run.mjs put the bundled entries (this file's own folder). */
const OUT_DIR = dirname(fileURLToPath(import.meta.url));
export const BENCHMARKS = ['engine'] as const;
type BenchName = (typeof BENCHMARKS)[number];

interface Options {
  quick: boolean;
  only: Set<BenchName>;
  json: string | null;
}

function parseArgs(argv: string[]): Options {
  const options: Options = { quick: false, only: new Set(BENCHMARKS), json: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') options.quick = true;
    else if (arg === '--only') {
      const names = (argv[++i] ?? '').split(',').filter(Boolean);
      for (const n of names) {
        if (!BENCHMARKS.includes(n as BenchName))
          throw new Error(`--only: unknown benchmark '${n}' (have: ${BENCHMARKS.join(', ')})`);
      }
      options.only = new Set(names as BenchName[]);
    } else if (arg === '--json') options.json = resolve(argv[++i] ?? '');
    else if (arg === '--help' || arg === '-h') {
      console.log('npm run bench -- [--quick] [--only engine] [--json file]');
      process.exit(0);
    } else throw new Error(`unknown flag '${arg}' (try --help)`);
  }
  return options;
}

/** Rows of a figure table: median, min, max and interquartile range. */
export function statRows(figures: Record<string, Stat>): string[][] {
  return Object.entries(figures).map(([name, s]) => [
    name,
    fmt(s.median),
    fmt(s.min),
    fmt(s.max),
    `${fmt(s.q1)}–${fmt(s.q3)}`,
    s.unit,
  ]);
}

const STAT_HEADERS = ['figure', 'median', 'min', 'max', 'IQR', 'unit'];

function runEngine(quick: boolean): EngineBenchResult {
  const dir = mkdtempSync(join(tmpdir(), 'grpo-bench-'));
  const out = join(dir, 'engine.json');
  try {
    // stderr streams the child's progress lines (and any error) straight to the terminal.
    const child = spawnSync(
      process.execPath,
      [join(OUT_DIR, 'engine.js'), '--out', out, ...(quick ? ['--quick'] : [])],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (child.status !== 0) throw new Error(`engine benchmark failed (exit ${child.status})`);
    return JSON.parse(readFileSync(out, 'utf8')) as EngineBenchResult;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function printEngine(r: EngineBenchResult) {
  const a = r.adapter;
  const W = r.workload;
  console.log(
    `\n## Engine (issue 3): ${r.runtime}\n` +
      `machine: ${r.machine.cpu}, ${r.machine.cores} cores, load ${r.machine.loadAverage1m} at start\n` +
      `adapter: ${a.vendor} ${a.architecture} ${a.description}${a.isSoftware ? ' (SOFTWARE: CPU emulation)' : ''}; ` +
      `features: ${a.features.join(', ') || 'none'}\n` +
      `model: ${r.model.parameters.toLocaleString('en-US')} parameters (L=${r.model.config.numLayers}, ` +
      `C=${r.model.config.hiddenSize}, I=${r.model.config.intermediateSize}, H=${r.model.config.numHeads}, ` +
      `Hkv=${r.model.config.numKvHeads}, V=${r.model.config.vocabSize}); ` +
      `B=${W.prompts} × G=${W.generations} = ${W.sequences} sequences, prompt ${W.promptTokens} + ${W.newTokens} new tokens; ` +
      `${W.warmup} warm-up + ${W.runs} measured runs\n`,
  );
  console.log(table(STAT_HEADERS, statRows(r.figures)));
  for (const note of r.notes) console.log(`note: ${note}`);
}

async function main(argv: string[]) {
  const options = parseArgs(argv);
  const results: Record<string, unknown> = {};
  const started = new Date().toISOString();
  if (options.only.has('engine')) {
    const r = runEngine(options.quick);
    printEngine(r);
    results.engine = r;
  }
  const json = JSON.stringify({ started, quick: options.quick, results }, null, 2);
  console.log(`\n## JSON\n${json}`);
  if (options.json) writeFileSync(options.json, json);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
