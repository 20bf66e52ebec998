// Node side of the whole-model comparisons (forward, sampling, training step): for each model,
// builds its files (model-files.ts), serves them to the page, runs the selected benchmarks in the
// page, turns the wall times into figures (median, min/max, IQR of the measured runs) and ratios
// (ours ÷ each other engine, median tokens/s over median tokens/s: > 1 means ours is faster), and
// prints tables.
import { loadavg } from 'node:os';
import { fmt, fmtStat, summarize, table, type Stat } from '../lib/stats';
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
  /** ours ÷ engine on median tokens/s. */
  ratios: Partial<Record<R['engine'], number>>;
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
  const ours = figures['ours' as R['engine']];
  for (const run of r.runs) {
    const theirs = figures[run.engine as R['engine']];
    if (run.engine !== 'ours' && ours && theirs)
      ratios[run.engine as R['engine']] =
        ours.tokensPerSecond.median / theirs.tokensPerSecond.median;
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

export async function runModelBenches(
  root: string,
  page: BenchPage,
  which: ReadonlySet<ModelBenchName>,
  quick: boolean,
  only: readonly string[] | null = null,
): Promise<ModelBenchResults> {
  const out: ModelBenchResults = {
    notes: [
      'ours / X is our median tokens/s over X’s median tokens/s: > 1 means ours is faster.',
      `forward: logits (N, T, V) read back to the CPU; every engine's first logits are checked against onnxruntime-web's CPU (wasm) EP on the same ONNX graph (max rel. error ≤ ${LOGITS_REL_TOLERANCE}) before timing; ort-wasm (1 thread) is there for context.`,
      'sampling: B prompts × G completions, temperature 1, no top-k / top-p, no EOS stop (every sequence generates exactly newTokens tokens), KV cache on both sides; an untimed greedy run compares each engine’s tokens with ours; transformers.js-wasm (1 thread) is there for context.',
      `training: forward, mean next-token cross-entropy over all N·T tokens, backward, Adam (β 0.9/0.999, ε 1e-8, no weight decay) on every weight; ours also measures the global gradient norm as the trainer does (clipping off). The losses of the first two steps (before and after one update) must agree with ours (rel. ≤ ${LOSS_REL_TOLERANCE}) before timing.`,
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
        const r = await page.call('forward', model.id, w, [...FORWARD_ENGINES]);
        (out.forward ??= []).push(section(r, label, w.N * w.T));
      }
      if (which.has('sampling')) {
        const w = model.sampling;
        progress(
          `${model.id}: sampling B=${w.B} G=${w.G} prompt=${w.promptTokens} new=${w.newTokens}`,
        );
        const r = await page.call('sampling', model.id, w, [...SAMPLING_ENGINES]);
        (out.sampling ??= []).push(section(r, label, w.B * w.G * w.newTokens));
      }
      if (which.has('training')) {
        const w = model.training;
        progress(`${model.id}: training N=${w.N} T=${w.T}`);
        const r = await page.call('training', model.id, w, [...TRAINING_ENGINES]);
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

function checkText(name: ModelBenchName, r: ModelSection): string {
  return r.runs
    .filter((run) => run.engine !== 'ours' || name === 'forward')
    .map((run) => {
      if (name === 'forward') {
        const e = (run as ForwardRun).relError;
        return `${run.engine} ${Number.isFinite(e) ? e.toExponential(1) : '–'}`;
      }
      if (name === 'sampling') {
        const n = r.workload as { B: number; G: number };
        return `${run.engine} ${(run as SamplingRun).greedyMatches}/${n.B * n.G}`;
      }
      const ours = (r.runs.find((x) => x.engine === 'ours') as TrainingRun).losses;
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

/** The compact table (median [min–max] tokens/s, ratios) and a per-engine detail table. */
export function printModelBench(name: ModelBenchName, sections: ModelSection[]): string {
  const lines: string[] = [];
  const print = (text: string) => {
    console.log(text);
    lines.push(text);
  };
  const engines = [...new Set(sections.flatMap((s) => s.runs.map((r) => r.engine)))];
  const others = engines.filter((e) => e !== 'ours');
  print(`\n## ${TITLES[name]}\ncells: median [min–max] tokens/s of the measured runs\n`);
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
      ...others.map((e) => {
        const ratio = s.ratios[e];
        return ratio === undefined ? '–' : `${fmt(ratio)}×`;
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
        ...others.map((e) => `ours/${e}`),
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
