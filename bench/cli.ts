// The benchmark driver behind `npm run bench` (bundled by bench/run.mjs): runs the Node engine
// benchmark in a child process and the side-by-side browser benchmarks (against other libraries) in
// headless Chromium (one browser, one page for all of them), then prints one table per benchmark
// followed by all results as JSON. Our engine is timed on both kernel paths (browser/paths.ts): the
// GPU path (workgroup barriers, what a real GPU runs) and the emulation path (barrier-free, what the
// engine picks on SwiftShader), each labelled, against the same other engines in the same page.
//
// Flags:
//   --quick            fewer measured runs (a smoke run; the figures are noisier; warm-ups kept)
//   --only a,b         run only these benchmarks (engine, matmul, forward, sampling, training)
//   --models a,b       forward/sampling/training on these models only (tiny-reasoner, llama-100m)
//   --paths a,b        our kernel paths to time (gpu, emulation; default both)
//   --json <file>      also write the JSON to <file>
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openBenchPage, type BenchPage } from './browser/driver';
import { BENCH_MODELS } from './browser/models';
import {
  MODEL_BENCHMARKS,
  printModelBench,
  runModelBenches,
  type ModelBenchName,
} from './browser/model-report';
import type { BrowserInfo } from './browser/page';
import {
  ENGINES,
  flops,
  matmulEnginePath,
  MATMUL_SHAPES,
  QUICK_SHAPES,
  type EngineName,
  type MatmulMeasurement,
} from './browser/shapes';
import {
  fmt,
  fmtRatio,
  fmtStat,
  ratioRange,
  summarize,
  table,
  type RatioRange,
  type Stat,
} from './lib/stats';
import { ratioColumns, ratioHeader } from './browser/model-report';
import {
  isOurEngine,
  OUR_ENGINE,
  OUR_PATHS,
  parsePaths,
  PATH_NOTE,
  type OurEngine,
  type OurPath,
} from './browser/paths';
import type { EngineBenchResult } from './node/engine';
import { machineInfo, type MachineInfo } from './node/machine';

/** Where bench/run.mjs put the bundled entries (this file's own folder). */
const OUT_DIR = dirname(fileURLToPath(import.meta.url));
export const BENCHMARKS = ['engine', 'matmul', ...MODEL_BENCHMARKS] as const;
type BenchName = (typeof BENCHMARKS)[number];

interface Options {
  quick: boolean;
  only: Set<BenchName>;
  models: string[] | null;
  paths: OurPath[];
  json: string | null;
}

function parseArgs(argv: string[]): Options {
  const options: Options = {
    quick: false,
    only: new Set(BENCHMARKS),
    models: null,
    paths: [...OUR_PATHS],
    json: null,
  };
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
    } else if (arg === '--models') {
      const names = (argv[++i] ?? '').split(',').filter(Boolean);
      const known = BENCH_MODELS.map((m) => m.id);
      for (const n of names) {
        if (!known.includes(n))
          throw new Error(`--models: unknown model '${n}' (have: ${known.join(', ')})`);
      }
      options.models = names;
    } else if (arg === '--paths') options.paths = parsePaths(argv[++i] ?? '');
    else if (arg === '--json') options.json = resolve(argv[++i] ?? '');
    else if (arg === '--help' || arg === '-h') {
      console.log(
        `npm run bench -- [--quick] [--only ${BENCHMARKS.join(',')}] ` +
          `[--models ${BENCH_MODELS.map((m) => m.id).join(',')}] ` +
          `[--paths ${OUR_PATHS.join(',')}] [--json file]`,
      );
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

/** One result per path, in OUR_PATHS order. */
function runEngine(quick: boolean, paths: readonly OurPath[]): EngineBenchResult[] {
  const dir = mkdtempSync(join(tmpdir(), 'grpo-bench-'));
  const out = join(dir, 'engine.json');
  try {
    // stderr streams the child's progress lines (and any error) straight to the terminal.
    const child = spawnSync(
      process.execPath,
      [
        join(OUT_DIR, 'engine.js'),
        '--out',
        out,
        '--paths',
        paths.join(','),
        ...(quick ? ['--quick'] : []),
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (child.status !== 0) throw new Error(`engine benchmark failed (exit ${child.status})`);
    return JSON.parse(readFileSync(out, 'utf8')) as EngineBenchResult[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function printEngine(r: EngineBenchResult) {
  const a = r.adapter;
  const W = r.workload;
  console.log(
    `\n## Engine, ${r.pathLabel}: ${r.runtime}\n` +
      `machine: ${r.machine.cpu}, ${r.machine.cores} cores, load ${r.machine.loadAverage1m} at start\n` +
      `adapter: ${a.vendor} ${a.architecture} ${a.description}${a.isSoftware ? ' (SOFTWARE: CPU emulation)' : ''}; ` +
      `features: ${a.features.join(', ') || 'none'}\n` +
      `model: ${r.model.parameters.toLocaleString('en-US')} parameters (L=${r.model.config.numLayers}, ` +
      `C=${r.model.config.hiddenSize}, I=${r.model.config.intermediateSize}, H=${r.model.config.numHeads}, ` +
      `Hkv=${r.model.config.numKvHeads}, V=${r.model.config.vocabSize}); ` +
      `B=${W.prompts} × G=${W.generations} = ${W.sequences} sequences, prompt ${W.promptTokens} + ${W.newTokens} new tokens; ` +
      `${W.warmup} warm-up + ${W.runs} measured runs; GRPO step with β = ${W.beta} ` +
      `(reference forward included), ${W.readbacksPerStep} readbacks per step\n`,
  );
  console.log(table(STAT_HEADERS, statRows(r.figures)));
  for (const note of r.notes) console.log(`note: ${note}`);
  if (!r.profile) {
    console.log('(no per-kernel profile: the adapter lacks timestamp-query)');
    return;
  }
  for (const [name, p] of [
    ['sampling (one generate call)', r.profile.sampling],
    ['GRPO step', r.profile.grpoStep],
  ] as const) {
    console.log(
      `\nper-kernel GPU time, ${name}, one profiled run: wall ${fmt(p.wallMs)} ms, ` +
        `kernels busy ${fmt(p.busyMs)} ms (${fmt((100 * p.busyMs) / p.wallMs)}%), ` +
        `GPU idle ${fmt(p.wallMs - p.busyMs)} ms`,
    );
    const top = p.kernels.slice(0, 10);
    const rest = p.kernels.slice(10).reduce((s, k) => s + k.ms, 0);
    const rows = top.map((k) => [
      k.label,
      fmt(k.ms),
      String(k.count),
      fmt(k.ms / k.count),
      fmt((100 * k.ms) / p.wallMs),
    ]);
    if (p.kernels.length > 10)
      rows.push(['(other kernels)', fmt(rest), '', '', fmt((100 * rest) / p.wallMs)]);
    console.log(table(['kernel (pass label)', 'ms', 'passes', 'ms/pass', '% wall'], rows));
  }
}

/**
 * The GPU path's speed over the emulation path's, figure by figure (both measured in this run):
 * rates (tok/s) as GPU ÷ emulation, times (ms) as emulation ÷ GPU, so > 1 always means the GPU
 * path is faster; host-side figures (rewards, readbacks, other host work) get no ratio.
 */
export function enginePathRatios(
  gpu: Record<string, Stat>,
  emulation: Record<string, Stat>,
): Record<string, RatioRange | null> {
  const out: Record<string, RatioRange | null> = {};
  for (const [name, g] of Object.entries(gpu)) {
    const e = emulation[name];
    const host = /rewards|readbacks|host work|GPU idle/.test(name);
    if (!e || host || !(g.min > 0 && e.min > 0)) out[name] = null;
    else out[name] = g.unit === 'ms' ? ratioRange(e, g) : ratioRange(g, e);
  }
  return out;
}

function printEnginePaths(results: EngineBenchResult[]): Record<string, RatioRange | null> | null {
  const gpu = results.find((r) => r.path === 'gpu');
  const emu = results.find((r) => r.path === 'emulation');
  if (!gpu || !emu) return null;
  const ratios = enginePathRatios(gpu.figures, emu.figures);
  console.log(
    `\n## Engine, both paths: median [min–max]; speed ratio = ${OUR_ENGINE.gpu} ÷ ${OUR_ENGINE.emulation} ` +
      `(tok/s GPU/emu, ms emu/GPU: > 1 means the GPU path is faster), median/median ` +
      `[min(one)/max(other) – max(one)/min(other)]\n`,
  );
  console.log(
    table(
      ['figure', OUR_ENGINE.gpu, OUR_ENGINE.emulation, 'unit', 'speed GPU/emu'],
      Object.entries(gpu.figures).map(([name, g]) => {
        const e = emu.figures[name];
        const r = ratios[name];
        return [name, fmtStat(g), e ? fmtStat(e) : '–', g.unit, r ? fmtRatio(r) : '–'];
      }),
    ),
  );
  return ratios;
}

/** Largest relative error a matmul may show against the f64 reference and still be timed. */
const MATMUL_REL_TOLERANCE = 1e-4;

interface MatmulBenchResult {
  bench: 'matmul';
  machine: MachineInfo;
  browser: { version: string } & BrowserInfo;
  warmup: number;
  runs: number;
  /** Our paths timed (the tile variants run with the emulation path). */
  paths: OurPath[];
  rows: (MatmulMeasurement & { gflops: Stat | null })[];
  /**
   * Per shape, each of our paths as shipped ÷ every other engine (our other path included) on
   * GFLOP/s: median over median, and min–max over the runs (stats.ts ratioRange).
   */
  ratios: Record<string, Partial<Record<OurEngine, Partial<Record<EngineName, RatioRange>>>>>;
  notes: string[];
}

async function runMatmul(
  page: BenchPage,
  quick: boolean,
  paths: readonly OurPath[],
): Promise<MatmulBenchResult> {
  const machine = machineInfo();
  const shapes = quick ? QUICK_SHAPES : MATMUL_SHAPES;
  const warmup = 1;
  const runs = quick ? 2 : 5;
  const engines = ENGINES.filter((e) => {
    const path = matmulEnginePath(e);
    return path === null || paths.includes(path);
  });
  const measured = await page.call('matmul', {
    shapes,
    engines,
    warmup,
    runs,
  });
  const rows = measured.map((m) => {
    const shape = shapes.find((s) => s.name === m.shape)!;
    const ok = !m.error && m.relError <= MATMUL_REL_TOLERANCE && m.seconds.length > 0;
    if (!m.error && !ok) m.error = `relative error ${m.relError} > ${MATMUL_REL_TOLERANCE}`;
    const gflops = ok
      ? summarize(
          m.seconds.map((s) => (flops(shape) * m.repeats) / s / 1e9),
          'GFLOP/s',
        )
      : null;
    return { ...m, gflops };
  });
  const ratios: MatmulBenchResult['ratios'] = {};
  for (const shape of shapes) {
    ratios[shape.name] = {};
    for (const mine of rows.filter((x) => x.shape === shape.name && isOurEngine(x.engine))) {
      if (!mine.gflops) continue;
      const row: Partial<Record<EngineName, RatioRange>> = {};
      for (const r of rows.filter((x) => x.shape === shape.name && x.engine !== mine.engine)) {
        // Other libraries and our other path (the tile variants are compared with their kernel).
        const peer = matmulEnginePath(r.engine) === null || isOurEngine(r.engine);
        if (peer && r.gflops) row[r.engine] = ratioRange(mine.gflops, r.gflops);
      }
      ratios[shape.name][mine.engine as OurEngine] = row;
    }
  }
  const software = /swiftshader/i.test(
    `${page.info.adapter.vendor} ${page.info.adapter.architecture} ${page.info.adapter.description}`,
  );
  return {
    bench: 'matmul',
    machine,
    browser: { version: page.browserVersion, ...page.info },
    warmup,
    runs,
    paths: [...paths],
    rows,
    ratios,
    notes: [
      ...paths.map((p) => PATH_NOTE[p]),
      'ratio cells: our GFLOP/s ÷ theirs, median/median [range over the runs: min(ours)/max(theirs) – max(ours)/min(theirs)]; the table shows ratios against the WebGPU engines and between our two paths, the JSON every pair (ort-wasm included).',
      software
        ? 'WebGPU is SwiftShader (CPU emulation): GFLOP/s here are CPU figures, not GPU speed.'
        : 'Hardware WebGPU adapter.',
      'WebGPU engines keep operands on their GPU device; one measured run = `repeats` matmuls + one readback of the last output.',
      'ort-wasm is onnxruntime-web on the CPU (1 thread, SIMD), for context: operands cross from JS each run.',
      `Every engine's first output is checked against the f64 CPU reference (relative error ≤ ${MATMUL_REL_TOLERANCE}) before timing.`,
    ],
  };
}

/** Adapter features that faster kernels (f16, subgroups) and the profile (timestamps) would use. */
const KERNEL_FEATURES = ['shader-f16', 'subgroups', 'timestamp-query'];

function printMatmul(r: MatmulBenchResult) {
  const a = r.browser.adapter;
  console.log(
    `\n## Matmul GFLOP/s: Chromium ${r.browser.version}, headless\n` +
      `machine: ${r.machine.cpu}, ${r.machine.cores} cores, load ${r.machine.loadAverage1m} at start\n` +
      `adapter: ${a.vendor} ${a.architecture} ${a.description}; kernel-relevant features: ` +
      `${KERNEL_FEATURES.map((f) => `${f} ${a.features.includes(f) ? 'yes' : 'no'}`).join(', ')} ` +
      `(all ${a.features.length} in the JSON)\n` +
      `versions: ${Object.entries(r.browser.versions)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}; crossOriginIsolated ${r.browser.crossOriginIsolated}; ` +
      `${r.warmup} warm-up + ${r.runs} measured runs; cells: median [min–max] GFLOP/s; ` +
      `ratios (GPU = ${OUR_ENGINE.gpu}, emu = ${OUR_ENGINE.emulation}): ours ÷ theirs GFLOP/s, ` +
      `median/median [min(ours)/max(theirs) – max(ours)/min(theirs)]\n`,
  );
  const shapes = [...new Set(r.rows.map((x) => x.shape))];
  const engines = [...new Set(r.rows.map((x) => x.engine))];
  const columns = ratioColumns(engines);
  const variants = engines.filter((e) => !isOurEngine(e) && matmulEnginePath(e) !== null);
  const median = (shape: string, e: string) =>
    r.rows.find((x) => x.shape === shape && x.engine === e)?.gflops?.median;
  const rows = shapes.map((shape) => {
    const spec = MATMUL_SHAPES.find((s) => s.name === shape)!;
    const cells = engines.map((e) => {
      const row = r.rows.find((x) => x.shape === shape && x.engine === e);
      return row?.gflops ? fmtStat(row.gflops) : `error`;
    });
    const ratios = columns.map(([ours, theirs]) => {
      const ratio = r.ratios[shape]?.[ours]?.[theirs as EngineName];
      return ratio === undefined ? '–' : fmtRatio(ratio);
    });
    // The best tile variant over the emulation kernel it varies: > 1 means a variant would win.
    const ours = median(shape, OUR_ENGINE.emulation);
    const best = Math.max(0, ...variants.map((v) => median(shape, v) ?? 0));
    const gain = ours && best > 0 ? `${fmt(best / ours)}×` : '–';
    return [
      `${shape} (${spec.M}×${spec.N}×${spec.K})`,
      ...cells,
      ...ratios,
      ...(variants.length ? [gain] : []),
    ];
  });
  console.log(
    table(
      [
        'shape (M×N×K)',
        ...engines,
        ...columns.map(ratioHeader),
        ...(variants.length ? ['best tile/emu'] : []),
      ],
      rows,
    ),
  );
  for (const row of r.rows.filter((x) => x.error)) {
    console.log(`error: ${row.shape} ${row.engine}: ${row.error}`);
  }
  for (const note of r.notes) console.log(`note: ${note}`);
}

/**
 * The code that was measured: HEAD and any uncommitted changes under src/ and shaders/ (the tree
 * is shared with other work in progress); null outside a git checkout.
 */
function sourceState(): { commit: string; uncommitted: string[] } | null {
  const git = (...args: string[]) => spawnSync('git', args, { encoding: 'utf8' });
  const head = git('rev-parse', 'HEAD');
  if (head.status !== 0) return null;
  const status = git('status', '--porcelain', '--', 'src', 'shaders');
  return {
    commit: head.stdout.trim(),
    uncommitted: status.stdout.split('\n').filter(Boolean),
  };
}

async function main(argv: string[]) {
  const options = parseArgs(argv);
  const results: Record<string, unknown> = {};
  const started = new Date().toISOString();
  if (options.only.has('engine')) {
    const r = runEngine(options.quick, options.paths);
    for (const path of r) printEngine(path);
    const pathRatios = printEnginePaths(r);
    results.engine = { paths: r, gpuOverEmulation: pathRatios };
  }
  const models = MODEL_BENCHMARKS.filter((b) => options.only.has(b));
  if (options.only.has('matmul') || models.length > 0) {
    // One headless Chromium and one page for every browser benchmark.
    const page = await openBenchPage(process.cwd());
    try {
      if (options.only.has('matmul')) {
        const r = await runMatmul(page, options.quick, options.paths);
        printMatmul(r);
        results.matmul = r;
      }
      if (models.length > 0) {
        const machine = machineInfo();
        const r = await runModelBenches(
          process.cwd(),
          page,
          new Set<ModelBenchName>(models),
          options.quick,
          options.models,
          options.paths,
        );
        const browser = { version: page.browserVersion, ...page.info };
        for (const name of models) {
          const sections = r[name];
          if (!sections) continue;
          const text = printModelBench(name, sections);
          results[name] = { bench: name, machine, browser, table: text, models: sections };
        }
        for (const note of r.notes) console.log(`note: ${note}`);
        const fetched = await page.call('hfFetched');
        console.log(
          `transformers.js fetched ${fetched.length} files, all from this server: ` +
            [...new Set(fetched)].join(', '),
        );
        results.modelNotes = r.notes;
      }
      console.log(
        `requests to anything but the local server: ${page.offOrigin.length ? page.offOrigin.join(', ') : 'none'}`,
      );
      results.offOriginRequests = [...page.offOrigin];
    } finally {
      await page.close();
    }
  }
  const json = JSON.stringify(
    { started, quick: options.quick, paths: options.paths, source: sourceState(), results },
    null,
    2,
  );
  console.log(`\n## JSON\n${json}`);
  if (options.json) writeFileSync(options.json, json);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
