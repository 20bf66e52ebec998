// Matmul variants chosen by measurement on the user's device (issue 34 part 4). At model load a
// short timed sweep runs every candidate variant (src/kernels/matmul.ts MATMUL_VARIANTS) on the
// model's own products, per shape class (small: M ≤ MATMUL_SMALL_M rows, decoding; large: prefill
// and training), and sets KernelTuning.matmulSmall / matmulLarge to the fastest (least summed
// median time over the class's shapes). The choice is cached per adapter (vendor, architecture,
// device, description), sweep version and shape list: in memory, and in the browser in the Cache
// Storage API (reachable from the trainer worker, where localStorage is not).
// Software adapters (SwiftShader) skip the sweep unless forced: the barrier-free kernels that
// avoidBarriers picks are what they should run, and a sweep there costs seconds of compiles.
// timeMatmul times one product under a tuning: GPU time from timestamp queries when the device has
// them, else wall-clock over a submission of several repetitions. Both are what bench/node/gpu.ts
// reports as GFLOP/s.
import type { LlamaConfig } from '../core/model-config';
import { createStorageBuffer } from '../engine/buffers';
import type { Engine } from '../engine/engine';
import { PipelineCache, type KernelTuning } from '../engine/pipelines';
import {
  MatmulKernel,
  MATMUL_SMALL_M,
  matmulVariantFor,
  type MatmulShape,
  type MatmulVariant,
} from './matmul';

/** Bump when variants or their meaning change: cached choices of other versions are ignored. */
export const MATMUL_SWEEP_VERSION = 1;

/** Candidates per shape class on a GPU (the emulation kernels only join on software adapters). */
export const SWEEP_CANDIDATES: Record<MatmulShapeClass, MatmulVariant[]> = {
  small: ['staged64', 'reg16x64', 'splitk16x64', 'reg64x64'],
  large: ['staged64', 'reg64x64', 'reg128x64'],
};

export type MatmulShapeClass = 'small' | 'large';

export const shapeClassOf = (shape: Pick<MatmulShape, 'M'>): MatmulShapeClass =>
  shape.M <= MATMUL_SMALL_M ? 'small' : 'large';

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export interface MatmulTiming {
  /** Milliseconds per product (both passes of a split-K product). */
  ms: Spread;
  /** 2·batch·M·N·K / time. */
  gflops: Spread;
  runs: number;
  method: 'timestamp' | 'wall-clock';
  /** The variant and shader file that ran. */
  variant: MatmulVariant;
  shader: string;
  splits: number;
}

export interface TimeMatmulOptions {
  /** Force wall-clock timing even where timestamp queries exist. */
  wallClock?: boolean;
  /** Products per submission for wall-clock timing (default: enough for ~1 GFLOP, 1…64). */
  repeat?: number;
}

const spread = (xs: number[]): Spread => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { median, min: s[0], max: s[s.length - 1] };
};

/** Floating-point operations of one product. */
export const matmulFlops = (s: MatmulShape) => 2 * (s.batch ?? 1) * s.M * s.N * s.K;

/**
 * Times `shape` (zero-filled operands: time does not depend on values) under the engine's tuning
 * overridden by `tuning`, `runs` times after one warm-up run (which compiles the pipelines).
 */
export async function timeMatmul(
  engine: Engine,
  shape: MatmulShape,
  tuning: Partial<KernelTuning> = {},
  runs = 5,
  options: TimeMatmulOptions = {},
): Promise<MatmulTiming> {
  const { device } = engine;
  const pipelines = new PipelineCache(device, { ...engine.pipelines.tuning, ...tuning });
  const kernel = new MatmulKernel(device, pipelines);
  const { M, N, K, batch = 1 } = shape;
  const packed = (shape.bDtype ?? 'f32') !== 'f32';
  const bytes = (n: number) => Math.max(4, 4 * n);
  const a = createStorageBuffer(device, bytes(batch * M * K), 'sweep.a');
  const b = createStorageBuffer(device, bytes((batch * K * N) / (packed ? 2 : 1) + 1), 'sweep.b');
  const c = createStorageBuffer(device, bytes(batch * M * N), 'sweep.c');
  const info = kernel.describe(shape);
  const flops = matmulFlops(shape);
  const useTimestamps = !options.wallClock && device.features.has('timestamp-query');
  try {
    await kernel.prepare(shape);
    await engine.run((enc) => kernel.encode(enc, { ...shape, a, b, c }), 'sweep.warmup');
    const times: number[] = [];
    if (useTimestamps) {
      const timer = new PassTimer(device);
      try {
        for (let r = 0; r < runs; r++) {
          await engine.run((enc) => {
            kernel.encode(timer.wrap(enc), { ...shape, a, b, c });
            timer.resolve(enc);
          }, 'sweep.timed');
          times.push(await timer.readMs());
        }
      } finally {
        timer.destroy();
      }
    } else {
      const repeat = options.repeat ?? Math.min(64, Math.max(1, Math.round(1e9 / (flops || 1))));
      for (let r = 0; r < runs; r++) {
        const t0 = performance.now();
        await engine.run((enc) => {
          for (let i = 0; i < repeat; i++) kernel.encode(enc, { ...shape, a, b, c });
        }, 'sweep.timed');
        times.push((performance.now() - t0) / repeat);
      }
    }
    const ms = spread(times);
    const gflops = spread(times.map((t) => flops / (t * 1e6)));
    // The fastest run has the most GFLOP/s: min and max swap.
    return {
      ms,
      gflops: { median: gflops.median, min: gflops.min, max: gflops.max },
      runs,
      method: useTimestamps ? 'timestamp' : 'wall-clock',
      variant: info.variant,
      shader: info.shader,
      splits: info.splits,
    };
  } finally {
    for (const buf of [a, b, c]) buf.destroy();
  }
}

/** Timestamp queries around every compute pass of one submission (a product has one or two). */
class PassTimer {
  private static readonly MAX_PASSES = 8;
  private readonly querySet: GPUQuerySet;
  private readonly resolveBuf: GPUBuffer;
  private readonly readBuf: GPUBuffer;
  private passes = 0;

  constructor(private readonly device: GPUDevice) {
    const count = 2 * PassTimer.MAX_PASSES;
    this.querySet = device.createQuerySet({ type: 'timestamp', count });
    // GPUBufferUsage: QUERY_RESOLVE 0x200 | COPY_SRC 0x4; MAP_READ 0x1 | COPY_DST 0x8.
    this.resolveBuf = device.createBuffer({ size: 8 * count, usage: 0x200 | 0x4 });
    this.readBuf = device.createBuffer({ size: 8 * count, usage: 0x1 | 0x8 });
  }

  /** An encoder whose compute passes write begin / end timestamps (then call resolve()). */
  wrap(encoder: GPUCommandEncoder): GPUCommandEncoder {
    this.passes = 0;
    const begin = (target: GPUCommandEncoder, desc: GPUComputePassDescriptor = {}) => {
      const i = this.passes++;
      if (i >= PassTimer.MAX_PASSES) throw new RangeError('PassTimer: too many passes');
      return target.beginComputePass({
        ...desc,
        timestampWrites: {
          querySet: this.querySet,
          beginningOfPassWriteIndex: 2 * i,
          endOfPassWriteIndex: 2 * i + 1,
        },
      });
    };
    return new Proxy(encoder, {
      get(target, prop) {
        if (prop === 'beginComputePass') {
          return (desc?: GPUComputePassDescriptor) => begin(target, desc);
        }
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
  }

  /** Copies the timestamps out; call at the end of the wrapped submission's recording. */
  resolve(encoder: GPUCommandEncoder): void {
    if (this.passes === 0) return;
    encoder.resolveQuerySet(this.querySet, 0, 2 * this.passes, this.resolveBuf, 0);
    encoder.copyBufferToBuffer(this.resolveBuf, 0, this.readBuf, 0, 16 * this.passes);
  }

  /** Σ pass durations (ms) of the last wrapped submission. */
  async readMs(): Promise<number> {
    await this.readBuf.mapAsync(0x1); // GPUMapMode.READ
    const stamps = new BigUint64Array(this.readBuf.getMappedRange().slice(0));
    this.readBuf.unmap();
    let ns = 0;
    for (let i = 0; i < this.passes; i++) ns += Number(stamps[2 * i + 1] - stamps[2 * i]);
    return ns / 1e6;
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolveBuf.destroy();
    this.readBuf.destroy();
  }
}

/** One product of the sweep, with a name for reports. */
export interface SweepShape extends MatmulShape {
  name: string;
}

export interface SweepOptions {
  /** Timed runs per variant and shape (after one warm-up). Default 3. */
  runs?: number;
  /** Sweep on a software adapter too (tests, `bench:gpu --tiny`). */
  force?: boolean;
  /** Variants to try per class (default SWEEP_CANDIDATES, plus 'emulation' on software). */
  candidates?: Partial<Record<MatmulShapeClass, MatmulVariant[]>>;
  /** Set the engine's tuning to the choice (default true). */
  apply?: boolean;
  /** Read / write the cached choice (default true). */
  cache?: boolean;
  wallClock?: boolean;
}

export interface MatmulSweepResult {
  /** The cache key: adapter, sweep version, shapes. */
  key: string;
  /** The sweep did not run: 'software adapter' (not forced), or the choice came from the cache. */
  skipped: null | 'software adapter' | 'cached';
  /** The variant per class: the measured choice, or what the engine picks without one. */
  choice: Record<MatmulShapeClass, MatmulVariant>;
  /** Every (shape, variant) timed; empty when skipped. */
  timings: Array<{ shape: SweepShape; shapeClass: MatmulShapeClass; timing: MatmulTiming }>;
  /** Summed median ms per class and variant. */
  totals: Partial<Record<MatmulShapeClass, Partial<Record<MatmulVariant, number>>>>;
  ms: number;
}

/** The chosen variants by cache key: this process's memory. */
const memoryCache = new Map<string, Record<MatmulShapeClass, MatmulVariant>>();
const CACHE_NAME = 'grpo-matmul-sweep';

interface CacheStorageLike {
  open(name: string): Promise<{
    match(key: string): Promise<{ json(): Promise<unknown> } | undefined>;
    put(key: string, response: unknown): Promise<void>;
  }>;
}

/** The browser's Cache Storage (window and workers), or null in Node / insecure contexts. */
function cacheStorage(): CacheStorageLike | null {
  const g = globalThis as { caches?: CacheStorageLike; Response?: unknown };
  return g.caches && g.Response ? g.caches : null;
}

// A URL-shaped key for the Cache API (it keys by request URL).
const cacheUrl = (key: string) =>
  `https://grpo-playground.invalid/matmul-sweep/${encodeURIComponent(key)}`;

async function readCache(key: string): Promise<Record<MatmulShapeClass, MatmulVariant> | null> {
  const hit = memoryCache.get(key);
  if (hit) return hit;
  const storage = cacheStorage();
  if (!storage) return null;
  try {
    const res = await (await storage.open(CACHE_NAME)).match(cacheUrl(key));
    if (!res) return null;
    const choice = (await res.json()) as Record<MatmulShapeClass, MatmulVariant>;
    memoryCache.set(key, choice);
    return choice;
  } catch {
    return null; // a cache that cannot be read only costs a sweep
  }
}

async function writeCache(key: string, choice: Record<MatmulShapeClass, MatmulVariant>) {
  memoryCache.set(key, choice);
  const storage = cacheStorage();
  if (!storage) return;
  try {
    const body = new (globalThis as unknown as { Response: typeof Response }).Response(
      JSON.stringify(choice),
      { headers: { 'content-type': 'application/json' } },
    );
    await (await storage.open(CACHE_NAME)).put(cacheUrl(key), body);
  } catch {
    // Storage full or refused: the choice still holds for this session.
  }
}

/** Forgets this process's cached choices (tests). */
export function clearMatmulSweepMemory(): void {
  memoryCache.clear();
}

/** The sweep's cache key for this engine's adapter and these shapes. */
export function matmulSweepKey(engine: Engine, shapes: readonly MatmulShape[]): string {
  const { vendor, architecture, device, description } = engine.gpu.adapter;
  const shapeKey = shapes
    .map((s) => `${s.M}x${s.N}x${s.K}${s.transA ? 'A' : ''}${s.transB ? 'B' : ''}${s.bDtype ?? ''}`)
    .join(',');
  return [vendor, architecture, device, description, `v${MATMUL_SWEEP_VERSION}`, shapeKey].join(
    '|',
  );
}

/**
 * Times the candidate variants on `shapes` and picks the fastest per shape class; applies the
 * choice to the engine's tuning (unless apply: false). On software adapters, unless forced, it
 * measures nothing and reports what the engine already picks.
 */
export async function sweepMatmulVariants(
  engine: Engine,
  shapes: readonly SweepShape[],
  options: SweepOptions = {},
): Promise<MatmulSweepResult> {
  const t0 = performance.now();
  const key = matmulSweepKey(engine, shapes);
  const tuning = engine.pipelines.tuning;
  const current = (): Record<MatmulShapeClass, MatmulVariant> => ({
    small: matmulVariantFor(tuning, 1),
    large: matmulVariantFor(tuning, MATMUL_SMALL_M + 1),
  });
  const finish = (
    skipped: MatmulSweepResult['skipped'],
    choice: Record<MatmulShapeClass, MatmulVariant>,
    timings: MatmulSweepResult['timings'] = [],
    totals: MatmulSweepResult['totals'] = {},
  ): MatmulSweepResult => {
    if (options.apply !== false && skipped !== 'software adapter') {
      tuning.matmulSmall = choice.small;
      tuning.matmulLarge = choice.large;
    }
    return { key, skipped, choice, timings, totals, ms: performance.now() - t0 };
  };
  const software = engine.gpu.adapter.isSoftware;
  if (software && !options.force) return finish('software adapter', current());
  if (options.cache !== false) {
    const cached = await readCache(key);
    if (cached) return finish('cached', cached);
  }
  const runs = options.runs ?? 3;
  const timings: MatmulSweepResult['timings'] = [];
  const totals: MatmulSweepResult['totals'] = {};
  const choice = current();
  for (const shapeClass of ['small', 'large'] as const) {
    const inClass = shapes.filter((s) => shapeClassOf(s) === shapeClass);
    if (inClass.length === 0) continue;
    const candidates = options.candidates?.[shapeClass] ?? [
      ...SWEEP_CANDIDATES[shapeClass],
      ...(software ? (['emulation'] as const) : []),
    ];
    const sums: Partial<Record<MatmulVariant, number>> = {};
    for (const variant of candidates) {
      // Both fields: the shape decides which one applies.
      const t = { matmulSmall: variant, matmulLarge: variant };
      let sum = 0;
      for (const shape of inClass) {
        const timing = await timeMatmul(engine, shape, t, runs, { wallClock: options.wallClock });
        timings.push({ shape, shapeClass, timing });
        sum += timing.ms.median;
      }
      sums[variant] = sum;
    }
    totals[shapeClass] = sums;
    const best = (Object.entries(sums) as Array<[MatmulVariant, number]>).reduce((x, y) =>
      y[1] < x[1] ? y : x,
    );
    choice[shapeClass] = best[0];
  }
  if (options.cache !== false) await writeCache(key, choice);
  return finish(null, choice, timings, totals);
}

/**
 * The products a model of `llama` runs, deduplicated, for the sweep: the forward projections
 * (y = x·Wᵀ; q, k/v, o, gate/up, down, LM head) at `decodeRows` rows (one decode step of the
 * batch) and at `trainRows` rows, and at `trainRows` the input gradient (dX = dY·W) and the
 * weight gradient (dW = dYᵀ·X) of the MLP's largest product. `dtype`: the frozen base weights'
 * storage (LoRA on a bf16 base reads packed B in the forward and input-gradient products).
 */
export function modelMatmulShapes(
  llama: LlamaConfig,
  options: { decodeRows?: number; trainRows?: number; dtype?: 'f32' | 'bf16' | 'f16' } = {},
): SweepShape[] {
  const { decodeRows = 8, trainRows = 256, dtype = 'f32' } = options;
  const C = llama.hiddenSize;
  const I = llama.intermediateSize;
  const D = llama.headDim;
  const q = llama.numHeads * D;
  const kv = llama.numKvHeads * D;
  const bDtype = dtype === 'f32' ? undefined : dtype;
  const forward: Array<[string, number, number]> = [
    ['q', q, C],
    ['kv', kv, C],
    ['o', C, q],
    ['up', I, C],
    ['down', C, I],
    ['head', llama.vocabSize, C],
  ];
  const shapes: SweepShape[] = [];
  const seen = new Set<string>();
  const add = (s: SweepShape) => {
    const k = `${s.M},${s.N},${s.K},${s.transA},${s.transB},${s.bDtype}`;
    if (seen.has(k)) return;
    seen.add(k);
    shapes.push(s);
  };
  for (const M of [decodeRows, trainRows]) {
    for (const [name, N, K] of forward) {
      add({ name: `${name} M=${M}`, M, N, K, transB: true, ...(bDtype && { bDtype }) });
    }
  }
  add({ name: `up dX M=${trainRows}`, M: trainRows, N: C, K: I, ...(bDtype && { bDtype }) });
  add({ name: `up dW M=${trainRows}`, M: I, N: C, K: trainRows, transA: true });
  return shapes;
}

/** The sweep for a model's products at load (worker and CLI); skipped on software adapters. */
export function sweepMatmulForModel(
  engine: Engine,
  llama: LlamaConfig,
  options: SweepOptions & Parameters<typeof modelMatmulShapes>[1] = {},
): Promise<MatmulSweepResult> {
  return sweepMatmulVariants(engine, modelMatmulShapes(llama, options), options);
}

/** One line for the page and the CLI: which matmul variants run and how they were chosen. */
export function describeMatmulChoice(result: MatmulSweepResult): string {
  const { small, large } = result.choice;
  const how =
    result.skipped === 'software adapter'
      ? 'software adapter: emulation kernels, not swept'
      : result.skipped === 'cached'
        ? 'measured earlier on this GPU'
        : `measured now, ${(result.ms / 1000).toFixed(1)} s`;
  return `matmul: decode ${small}, prefill/training ${large} (${how})`;
}
