// Our engine's two kernel paths, as every benchmark times and labels them (the browser page, the
// Node driver and the Node engine benchmark share this file). The engine picks the path from the
// adapter (src/engine/engine.ts: `avoidBarriers` = adapter.isSoftware), so on SwiftShader it would
// only ever time the emulation kernels; the benchmarks set the path themselves through the engine's
// `tuning` option and time both, side by side, in the same page or process.
//  - gpu: what a real GPU runs: staged workgroup tiles in the matmul, tree reductions over a row's
//    workgroup, attention through workgroup memory (KernelTuning.avoidBarriers false).
//  - emulation: the barrier-free variants chosen for CPU-emulated adapters: the vec4 matmul,
//    row-per-thread sampling / log-prob gather, direct attention (avoidBarriers true).
// On SwiftShader both are CPU figures; only the gpu path's figures stand for a GPU's kernels.
import type { KernelTuning } from '../../src/engine/pipelines';

export const OUR_PATHS = ['gpu', 'emulation'] as const;
export type OurPath = (typeof OUR_PATHS)[number];

/** The engine name in tables and JSON (a column header, so short). */
export const OUR_ENGINE = {
  gpu: 'ours GPU path',
  emulation: 'ours emulation',
} as const satisfies Record<OurPath, string>;
export type OurEngine = (typeof OUR_ENGINE)[OurPath];

/** One line per path for the notes under a table. */
export const PATH_NOTE: Record<OurPath, string> = {
  gpu: `${OUR_ENGINE.gpu}: the kernels a real GPU runs (workgroup barriers: staged matmul tiles, tree reductions; tuning avoidBarriers false)`,
  emulation: `${OUR_ENGINE.emulation}: the barrier-free variants the engine picks on CPU-emulated adapters such as SwiftShader (vec4 matmul, row-per-thread reductions, direct attention; tuning avoidBarriers true)`,
};

/** The createEngine tuning that selects a path. */
export function pathTuning(path: OurPath): Partial<KernelTuning> {
  return { avoidBarriers: path === 'emulation' };
}

export const isOurEngine = (engine: string): engine is OurEngine =>
  (Object.values(OUR_ENGINE) as string[]).includes(engine);

export function pathOf(engine: OurEngine): OurPath {
  return engine === OUR_ENGINE.gpu ? 'gpu' : 'emulation';
}

/** `gpu`, `emulation` or `gpu,emulation` (a flag's value) → the paths, in OUR_PATHS order. */
export function parsePaths(text: string, flag = '--paths'): OurPath[] {
  const names = text.split(',').filter(Boolean);
  if (names.length === 0) throw new Error(`${flag}: name a path (${OUR_PATHS.join(', ')})`);
  for (const n of names) {
    if (!(OUR_PATHS as readonly string[]).includes(n))
      throw new Error(`${flag}: unknown path '${n}' (have: ${OUR_PATHS.join(', ')})`);
  }
  return OUR_PATHS.filter((p) => names.includes(p));
}
