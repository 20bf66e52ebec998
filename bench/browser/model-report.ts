// Node side of the whole-model comparisons (forward, sampling, training step): for each model,
// builds its files (model-files.ts), serves them to the page, runs the selected benchmarks in the
// page, turns the wall times into figures (median, min/max, IQR of the measured runs) and ratios
// (each of our two kernel paths ÷ each other engine, median tokens/s over median tokens/s with the
// range over the runs: > 1 means ours is faster), and prints tables.
import { loadavg } from 'node:os';
import {
  fmt,
  fmtRatio,
  fmtStat,
  ratioRange,
  summarize,
  table,
  type RatioRange,
  type Stat,
} from '../lib/stats';
import type { BenchPage } from './driver';
import { buildModelFiles } from './model-files';
import {
  BENCH_MODELS,
  FORWARD_ENGINES,
  LOGITS_REL_TOLERANCE,
  LOSS_REL_TOLERANCE,
  quickModel,
  SAMPLING_ENGINES,
  TRAINING_ENGINES,
  type EngineRun,
  type ForwardRun,
  type ModelBenchResult,
  type SamplingRun,
  type TrainingRun,
} from './models';
import {
  isOurEngine,
  OUR_ENGINE,
  OUR_PATHS,
  PATH_NOTE,
  type OurEngine,
  type OurPath,
} from './paths';

export const MODEL_BENCHMARKS = ['forward', 'sampling', 'training'] as const;
export type ModelBenchName = (typeof MODEL_BENCHMARKS)[number];

export interface EngineFigures {
  tokensPerSecond: Stat;
  msPerCall: Stat;
}

export interface ModelSection<R extends EngineRun = EngineRun> extends ModelBenchResult<R, object> {
  /** Tokens one call processes: forward N·T, sampling B·G·newTokens, training N·T. */
  tokensPerCall: number;
  figures: Partial<Record<R['engine'], EngineFigures>>;
  /**
   * Each of our paths ÷ each other engine (our other path included) on tokens/s: median over
   * median, and min–max over the runs (stats.ts ratioRange).
   */
  ratios: Partial<Record<OurEngine, Partial<Record<R['engine'], RatioRange>>>>;
  /** 1-minute load average when this model's benchmark ended (the start is in `machine`). */
  loadAverage1mAfter: number;
}

export interface ModelBenchResults {
  forward?: ModelSection<ForwardRun>[];
  sampling?: ModelSection<SamplingRun>[];
  training?: ModelSection<TrainingRun>[];
  notes: string[];
}

function section<R extends EngineRun>(
  r: ModelBenchResult<R, object>,
  label: string,
  tokensPerCall: number,
): ModelSection<R> {
  const figures: ModelSection<R>['figures'] = {};
  for (const run of r.runs) {
    if (run.error || run.seconds.length === 0) continue;
    figures[run.engine as R['engine']] = {
      tokensPerSecond: summarize(
        run.seconds.map((s) => tokensPerCall / s),
        'tok/s',
      ),
      msPerCall: summarize(
        run.seconds.map((s) => s * 1000),
        'ms',
      ),
    };
  }
  const ratios: ModelSection<R>['ratios'] = {};
  for (const mine of r.runs.filter((x) => isOurEngine(x.engine))) {
    const ours = figures[mine.engine as R['engine']];
    if (!ours) continue;
    const row: Partial<Record<R['engine'], RatioRange>> = {};
    for (const run of r.runs) {
      const theirs = figures[run.engine as R['engine']];
      if (run.engine !== mine.engine && theirs)
        row[run.engine as R['engine']] = ratioRange(ours.tokensPerSecond, theirs.tokensPerSecond);
    }
    ratios[mine.engine as OurEngine] = row;
  }
  return {
    ...r,
    label,
    tokensPerCall,
    figures,
    ratios,
    loadAverage1mAfter: Math.round(loadavg()[0] * 100) / 100,
  };
}

const paramText = (n: number) =>
  n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : `${Math.round(n / 1e3)}K`;

const progress = (line: string) => console.error(`  [models] ${line}`);

/** The engines of a list that run: every other engine, and ours on the chosen paths. */
function enginesOn<E extends string>(engines: readonly E[], paths: readonly OurPath[]): E[] {
  return engines.filter(
    (e) => !isOurEngine(e) || paths.some((p) => OUR_ENGINE[p] === (e as string)),
  );
}

export async function runModelBenches(
  root: string,
  page: BenchPage,
  which: ReadonlySet<ModelBenchName>,
  quick: boolean,
  only: readonly string[] | null = null,
  paths: readonly OurPath[] = OUR_PATHS,
): Promise<ModelBenchResults> {
  const out: ModelBenchResults = {
    notes: [
      ...paths.map((p) => PATH_NOTE[p]),
      'ratio cells: our tokens/s ÷ theirs, median over median [range over the runs: min(ours) ÷ max(theirs) – max(ours) ÷ min(theirs)]; > 1 means ours is faster. The table shows ratios against the WebGPU engines and between our two paths; the JSON has every pair.',
      `forward: logits (N, T, V) read back to the CPU; every engine's first logits are checked against onnxruntime-web's CPU (wasm) EP on the same ONNX graph (max rel. error ≤ ${LOGITS_REL_TOLERANCE}) before timing; ort-wasm (1 thread) is there for context.`,
      'sampling: B prompts × G completions, temperature 1, no top-k / top-p, no EOS stop (every sequence generates exactly newTokens tokens), KV cache on both sides; an untimed greedy run compares each engine’s tokens with ours (the first of our paths that ran); transformers.js-wasm (1 thread) is there for context.',
      `training: forward, mean next-token cross-entropy over all N·T tokens, backward, Adam (β 0.9/0.999, ε 1e-8, no weight decay) on every weight; ours also measures the global gradient norm as the trainer does (clipping off). The losses of the first two steps (before and after one update) must agree with ours (the first of our paths that ran; rel. ≤ ${LOSS_REL_TOLERANCE}) before timing.`,
      'warm-up+runs: untimed runs before the measured ones (forward: after the checked first run; sampling: after the greedy check; training: the two checked steps are the warm-up), then measured runs.',
    ],
  };
  for (const base of BENCH_MODELS.filter((m) => !only || only.includes(m.id))) {
    const model = quick ? quickModel(base) : base;
    progress(`${model.id}: building the model files (safetensors, ONNX, transformers.js folder)`);
    const built = buildModelFiles(root, model);
    page.modelFiles.clear();
    for (const [path, bytes] of built.files) page.modelFiles.set(path, bytes);
    const label = `${model.id} (${paramText(built.parameters)}, ${model.source.kind})`;
    try {
      if (which.has('forward')) {
        const w = model.forward;
        progress(`${model.id}: forward N=${w.N} T=${w.T}`);
        const r = await page.call('forward', model.id, w, enginesOn(FORWARD_ENGINES, paths));
        (out.forward ??= []).push(section(r, label, w.N * w.T));
      }
      if (which.has('sampling')) {
        const w = model.sampling;
        progress(
          `${model.id}: sampling B=${w.B} G=${w.G} prompt=${w.promptTokens} new=${w.newTokens}`,
        );
        const r = await page.call('sampling', model.id, w, enginesOn(SAMPLING_ENGINES, paths));
        (out.sampling ??= []).push(section(r, label, w.B * w.G * w.newTokens));
      }
      if (which.has('training')) {
        const w = model.training;
        progress(`${model.id}: training N=${w.N} T=${w.T}`);
        const r = await page.call('training', model.id, w, enginesOn(TRAINING_ENGINES, paths));
        (out.training ??= []).push(section(r, label, w.N * w.T));
      }
    } finally {
      await page.call('unloadModel');
      page.modelFiles.clear();
    }
  }
  return out;
}

function workloadText(name: ModelBenchName, w: Record<string, number>): string {
  if (name === 'sampling') return `B=${w.B}×G=${w.G}, ${w.promptTokens}+${w.newTokens} tok`;
  return `N=${w.N}×T=${w.T}`;
}

/** The checks before timing; sampling and training compare with the first of our paths that ran. */
function checkText(name: ModelBenchName, r: ModelSection): string {
  const reference =
    name === 'training'
      ? r.runs.find((x) => isOurEngine(x.engine) && (x as TrainingRun).losses.length >= 2)
      : r.runs.find((x) => isOurEngine(x.engine) && !x.error);
  return r.runs
    .filter((run) => run !== reference || name === 'forward')
    .map((run) => {
      if (name === 'forward') {
        const e = (run as ForwardRun).relError;
        return `${run.engine} ${Number.isFinite(e) ? e.toExponential(1) : '–'}`;
      }
      if (name === 'sampling') {
        const n = r.workload as { B: number; G: number };
        return `${run.engine} ${(run as SamplingRun).greedyMatches}/${n.B * n.G}`;
      }
      const ours = reference ? (reference as TrainingRun).losses : [];
      const losses = (run as TrainingRun).losses;
      if (losses.length < 2 || ours.length < 2) return `${run.engine} –`;
      const rel = Math.max(...losses.map((l, i) => Math.abs(l - ours[i]) / Math.abs(ours[i])));
      return `${run.engine} ${rel.toExponential(1)}`;
    })
    .join(', ');
}

const CHECK_HEADER: Record<ModelBenchName, string> = {
  forward: 'logits max rel. err vs ort-wasm',
  sampling: 'greedy tokens = ours',
  training: 'loss rel. diff vs ours',
};

const TITLES: Record<ModelBenchName, string> = {
  forward: 'Forward pass tokens/s: logits for a batch of sequences',
  sampling: 'Sampling tokens/s: B×G batched decode with KV cache',
  training: 'Training step tokens/s: forward + backward + Adam',
};

/** Short names of our paths in ratio column headers. */
const SHORT: Record<OurEngine, string> = {
  [OUR_ENGINE.gpu]: 'GPU',
  [OUR_ENGINE.emulation]: 'emu',
};

/**
 * The ratio columns of the compact table: each of our paths ÷ each WebGPU engine, then the GPU
 * path ÷ the emulation path (the CPU-side engines, wasm, are in the JSON and the detail table).
 */
export function ratioColumns(engines: readonly string[]): [OurEngine, string][] {
  const ours = engines.filter(isOurEngine);
  const peers = engines.filter((e) => !isOurEngine(e) && e.includes('webgpu'));
  const cols: [OurEngine, string][] = ours.flatMap((o) =>
    peers.map((p) => [o, p] as [OurEngine, string]),
  );
  if (ours.includes(OUR_ENGINE.gpu) && ours.includes(OUR_ENGINE.emulation))
    cols.push([OUR_ENGINE.gpu, OUR_ENGINE.emulation]);
  return cols;
}

export const ratioHeader = ([ours, theirs]: [OurEngine, string]) =>
  `${SHORT[ours]}/${isOurEngine(theirs) ? SHORT[theirs] : theirs}`;

/** The compact table (median [min–max] tokens/s, ratios) and a per-engine detail table. */
export function printModelBench(name: ModelBenchName, sections: ModelSection[]): string {
  const lines: string[] = [];
  const print = (text: string) => {
    console.log(text);
    lines.push(text);
  };
  const engines = [...new Set(sections.flatMap((s) => s.runs.map((r) => r.engine)))];
  const columns = ratioColumns(engines);
  print(
    `\n## ${TITLES[name]}\n` +
      `cells: median [min–max] tokens/s of the measured runs; ${OUR_ENGINE.gpu} = the kernels a real GPU runs, ` +
      `${OUR_ENGINE.emulation} = the barrier-free kernels SwiftShader gets by default\n` +
      `ratios (GPU = ${OUR_ENGINE.gpu}, emu = ${OUR_ENGINE.emulation}): ours ÷ theirs tokens/s, ` +
      `median/median [min(ours)/max(theirs) – max(ours)/min(theirs)]\n`,
  );
  const rows = sections.map((s) => {
    const w = s.workload as Record<string, number>;
    return [
      s.label,
      workloadText(name, w),
      `${w.warmup}+${w.runs}`,
      ...engines.map((e) => {
        const f = s.figures[e];
        return f ? fmtStat(f.tokensPerSecond) : 'error';
      }),
      ...columns.map(([ours, theirs]) => {
        const ratio = s.ratios[ours]?.[theirs as keyof ModelSection['figures']];
        return ratio === undefined ? '–' : fmtRatio(ratio);
      }),
      checkText(name, s),
    ];
  });
  print(
    table(
      [
        'model',
        'workload',
        'warm-up+runs',
        ...engines,
        ...columns.map(ratioHeader),
        CHECK_HEADER[name],
      ],
      rows,
    ),
  );
  const detail: string[][] = [];
  for (const s of sections) {
    for (const run of s.runs) {
      const f = s.figures[run.engine];
      detail.push(
        f
          ? [
              s.model,
              run.engine,
              fmt(f.msPerCall.median),
              fmt(f.msPerCall.min),
              fmt(f.msPerCall.max),
              `${fmt(f.msPerCall.q1)}–${fmt(f.msPerCall.q3)}`,
              fmt(f.tokensPerSecond.median),
              String(s.loadAverage1mAfter),
            ]
          : [s.model, run.engine, 'error', '', '', '', '', String(s.loadAverage1mAfter)],
      );
    }
  }
  print(
    '\n' +
      table(
        ['model', 'engine', 'ms/call median', 'min', 'max', 'IQR', 'tok/s', 'load after'],
        detail,
      ),
  );
  for (const s of sections) {
    for (const run of s.runs.filter((r) => r.error))
      print(`error: ${s.model} ${run.engine}: ${run.error}`);
  }
  return lines.join('\n');
}
