// The matmul shapes of the side-by-side matmul benchmark, shared by the page and the Node driver.
// Each is one linear layer of a transformer step in the engine's layout (row-major, HF weights
// stored (out, in)):
//   prefill / training forward  y = x·Wᵀ   (M = tokens, N = out, K = in, transB)
//   decode                       y = x·Wᵀ   with M = the N·G sequences of one decode step
//   backward dW                  dW = dYᵀ·X (M = out, N = in, K = tokens, transA)
// Two model sizes: the ~1M-parameter benchmark model of the engine benchmark (MLP up-projection,
// C = 128 → I = 384, 512 training tokens, 16 decoding sequences) and a SmolLM2-135M-sized MLP
// (C = 576 → I = 1536) with 128 tokens, kept small because WebGPU may be emulated on the CPU.
import { OUR_ENGINE, type OurPath } from './paths';

export interface MatmulShape {
  name: string;
  M: number;
  N: number;
  K: number;
  transA: boolean;
  transB: boolean;
}

export const MATMUL_SHAPES: MatmulShape[] = [
  { name: '1M prefill x·Wᵀ', M: 512, N: 384, K: 128, transA: false, transB: true },
  { name: '1M decode x·Wᵀ', M: 16, N: 384, K: 128, transA: false, transB: true },
  { name: '1M backward dYᵀ·X', M: 384, N: 128, K: 512, transA: true, transB: false },
  { name: '135M prefill x·Wᵀ', M: 128, N: 1536, K: 576, transA: false, transB: true },
  { name: '135M decode x·Wᵀ', M: 16, N: 1536, K: 576, transA: false, transB: true },
  { name: '135M backward dYᵀ·X', M: 1536, N: 576, K: 128, transA: true, transB: false },
];

/** Quick runs keep the 1M-model shapes only. */
export const QUICK_SHAPES = MATMUL_SHAPES.slice(0, 3);

export const flops = (s: MatmulShape) => 2 * s.M * s.N * s.K;

/** Matmuls per measured run: small shapes repeat so one run does at least `minFlops` of work. */
export const repeatsFor = (s: MatmulShape, minFlops = 2e7) =>
  Math.max(1, Math.ceil(minFlops / flops(s)));

/** Our matmul on both paths (paths.ts): 'ours GPU path' is src/kernels/matmul.ts as a real GPU runs
 * it (staged tiles), 'ours emulation' as SwiftShader runs it (barrier-free, vec4 loads when
 * aligned); 'ours emulation 16×64' and '32×32' are the emulation kernel with other tile shapes
 * (bench/kernels/matmul-tiles.ts). */
export const OUR_MATMUL_ENGINES = [
  OUR_ENGINE.gpu,
  OUR_ENGINE.emulation,
  'ours emulation 16×64',
  'ours emulation 32×32',
] as const;
export const OTHER_MATMUL_ENGINES = ['tfjs-webgpu', 'ort-webgpu', 'ort-wasm'] as const;
export const ENGINES = [...OUR_MATMUL_ENGINES, ...OTHER_MATMUL_ENGINES] as const;
/** The path an engine of ours runs (tile variants: the emulation path's kernel). */
export const matmulEnginePath = (e: EngineName): OurPath | null =>
  e === OUR_ENGINE.gpu ? 'gpu' : e.startsWith(OUR_ENGINE.emulation) ? 'emulation' : null;
export type EngineName = (typeof ENGINES)[number];

export interface MatmulRunConfig {
  shapes: MatmulShape[];
  engines: EngineName[];
  warmup: number;
  runs: number;
}

export interface MatmulMeasurement {
  shape: string;
  engine: EngineName;
  repeats: number;
  /** Wall seconds per measured run (repeats matmuls + one readback of the last output). */
  seconds: number[];
  /** max |out − ref| / max |ref| on the first output, against the f64 CPU reference. */
  relError: number;
  error?: string;
}
