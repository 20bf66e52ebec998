// Compute-pipeline cache keyed by WGSL source + override constants. Compilation runs inside a
// validation error scope; WGSL errors are thrown as WgslCompileError with line, column and source
// (by prepare() at once, or by checkPipelines() for a pipeline get() had to compile itself).
import { countersOf } from './counters';
import { GpuValidationError, WgslCompileError } from './errors';
import { shaderLocation } from './shaders';

export type OverrideConstants = Record<string, number | boolean>;

/** What identifies a pipeline: get() and prepare() take these arguments. */
export type PipelineKey = [
  label: string,
  source: string,
  constants?: OverrideConstants,
  entryPoint?: string,
];

function constantsKey(constants: OverrideConstants): string {
  return Object.keys(constants)
    .sort()
    .map((k) => `${k}=${Number(constants[k])}`)
    .join(',');
}

/** Variant choices the kernel wrappers make for the adapter at hand (see createEngine). */
export interface KernelTuning {
  /**
   * Prefer kernel variants without workgroup barriers (one invocation loops over a whole row or
   * reads K/V straight from storage instead of staging tiles). On CPU-emulated WebGPU (SwiftShader)
   * every barrier suspends and resumes each SIMD batch of the workgroup, so a tree reduction in
   * workgroup memory costs far more than the loop it replaces: rmsnorm forward over 6144×64 took
   * 1217 ms as one workgroup per row and 17 ms as one invocation per row. Real GPUs keep the
   * cooperative variants, which spread a row over many threads.
   */
  avoidBarriers: boolean;
  /**
   * With avoidBarriers: aligned matmuls read their operands as vec4 (shaders/matmul_vec4.wgsl,
   * same bits). Off only to measure or test the scalar-load kernel beside it.
   */
  vectorLoads: boolean;
  /**
   * Matmul variant for products of more than MATMUL_SMALL_M rows (prefill, training), and for at
   * most that many (decoding). Names: src/kernels/matmul.ts MATMUL_VARIANTS. Unset: 'emulation'
   * (the barrier-free kernels) with avoidBarriers, else the GPU defaults (matmul.ts
   * DEFAULT_MATMUL_LARGE / DEFAULT_MATMUL_SMALL). The sweep at model load (src/kernels/
   * matmul-sweep.ts) sets both to the fastest it measured on the device.
   */
  matmulLarge?: string;
  matmulSmall?: string;
  /**
   * Row reductions (log-prob gather, RMSNorm) merge their threads with subgroup operations where
   * the device has `subgroups`, on the GPU path (avoidBarriers false). Unset: true. False only to
   * measure or test the workgroup-memory tree beside it (src/kernels/logprob.ts, rmsnorm.ts).
   */
  subgroups?: boolean;
  /**
   * GPU path: vocabulary entries per workgroup of the log-prob gather; a longer row is reduced by
   * ceil(V / logprobChunk) workgroups and a combine pass. 0: one workgroup per row. Unset:
   * LOGPROB_SPLIT_CHUNK (src/kernels/logprob.ts).
   */
  logprobChunk?: number;
  /**
   * GPU path: rows per thread of the RMSNorm weight gradient; more rows are summed in chunks by
   * ceil(R / chunk) threads per channel and a combine pass. 0: one thread per channel over all
   * rows. Unset: RMSNORM_WEIGHT_ROW_CHUNK (src/kernels/rmsnorm.ts).
   */
  rmsnormWeightRowChunk?: number;
  /**
   * GPU path: vocabulary entries per workgroup of the sampling kernel without top-k / top-p /
   * min-p; a longer row is reduced by ceil(V / sampleChunk) workgroups (sample_split.wgsl) and a
   * combine pass that draws (sample_combine.wgsl). 0: one workgroup per row (sample.wgsl). Unset:
   * SAMPLE_SPLIT_CHUNK (src/kernels/sampling.ts), or 0 with avoidBarriers (the emulation path).
   */
  sampleChunk?: number;
}

export const DEFAULT_TUNING: KernelTuning = { avoidBarriers: false, vectorLoads: true };

/** A cached pipeline: compiled (ready), or being compiled asynchronously by prepare(). */
interface Entry {
  pipeline?: GPUComputePipeline;
  pending?: Promise<void>;
}

/**
 * Pipelines by shader source and specialisation. Kernel wrappers encode synchronously: get()
 * returns a compiled pipeline. Whoever knows the shapes ahead (a model at load) calls prepare()
 * first, which compiles asynchronously and in parallel and throws WgslCompileError with line and
 * column; a pipeline nobody prepared (a kernel test, a bench) is compiled synchronously on first
 * use, and its compile errors surface at the next checkPipelines() (engine.run calls it).
 */
export class PipelineCache {
  // source → constants key → entry. The source string itself is the key: V8 caches a string's
  // hash, so repeated lookups with the same (imported) source are cheap.
  private readonly pipelines = new Map<string, Map<string, Entry>>();

  constructor(
    private readonly device: GPUDevice,
    readonly tuning: KernelTuning = DEFAULT_TUNING,
  ) {}

  /** Compiled pipelines. */
  get size(): number {
    let n = 0;
    for (const m of this.pipelines.values()) for (const e of m.values()) if (e.pipeline) n++;
    return n;
  }

  private entries(source: string): Map<string, Entry> {
    let byConstants = this.pipelines.get(source);
    if (!byConstants) this.pipelines.set(source, (byConstants = new Map()));
    return byConstants;
  }

  /** The pipeline for `source` specialised with `constants`, entry point `entryPoint`. */
  get(
    label: string,
    source: string,
    constants: OverrideConstants = {},
    entryPoint = 'main',
  ): GPUComputePipeline {
    const byConstants = this.entries(source);
    const key = `${entryPoint}:${constantsKey(constants)}`;
    const entry = byConstants.get(key);
    if (entry?.pipeline) return entry.pipeline;
    // Not prepared (or still compiling): compile here. A failed compile must not stay cached, so
    // the next call reports the error again.
    const counts = countersOf(this.device)?.current;
    if (counts) counts.pipelines++;
    const pipeline = compilePipelineSync(this.device, label, source, constants, entryPoint, () =>
      byConstants.delete(key),
    );
    byConstants.set(key, { ...entry, pipeline });
    return pipeline;
  }

  /** Compiles the pipeline get() will return for these arguments; throws its compile error. */
  prepare(
    label: string,
    source: string,
    constants: OverrideConstants = {},
    entryPoint = 'main',
  ): Promise<void> {
    const byConstants = this.entries(source);
    const key = `${entryPoint}:${constantsKey(constants)}`;
    const existing = byConstants.get(key);
    if (existing?.pipeline) return Promise.resolve();
    if (existing?.pending) return existing.pending;
    const counts = countersOf(this.device)?.current;
    if (counts) counts.pipelines++;
    const entry: Entry = {};
    entry.pending = compilePipeline(this.device, label, source, constants, entryPoint).then(
      (pipeline) => {
        entry.pipeline ??= pipeline;
        delete entry.pending;
      },
      (err: unknown) => {
        if (byConstants.get(key) === entry) byConstants.delete(key);
        throw err;
      },
    );
    byConstants.set(key, entry);
    return entry.pending;
  }
}

// Errors of pipelines compiled synchronously by get(), per device, until checkPipelines() reads
// them. The promises never reject (a rejection nobody awaits would crash Node).
const pendingChecks = new WeakMap<GPUDevice, Promise<Error | null>[]>();

function compilePipelineSync(
  device: GPUDevice,
  label: string,
  source: string,
  constants: OverrideConstants,
  entryPoint: string,
  onError: () => void,
): GPUComputePipeline {
  device.pushErrorScope('validation');
  const module = device.createShaderModule({ label, code: source });
  const pipeline = device.createComputePipeline({
    label,
    layout: 'auto',
    compute: { module, entryPoint, constants: numericConstants(constants) },
  });
  const scope = device.popErrorScope();
  const check = (async (): Promise<Error | null> => {
    const compileError = compileErrorOf(label, source, await module.getCompilationInfo());
    const scopeError = await scope;
    if (compileError) return compileError;
    if (scopeError) {
      return new GpuValidationError(
        `pipeline '${label}' (${constantsKey(constants)}): ${scopeError.message}`,
      );
    }
    return null;
  })()
    .catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))))
    .then((err) => {
      if (err) onError();
      return err;
    });
  const list = pendingChecks.get(device) ?? [];
  list.push(check);
  pendingChecks.set(device, list);
  return pipeline;
}

/** Throws the first compile error of a pipeline get() compiled since the last call. */
export async function checkPipelines(device: GPUDevice): Promise<void> {
  const list = pendingChecks.get(device);
  if (!list?.length) return;
  pendingChecks.set(device, []);
  const errors = (await Promise.all(list)).filter((e): e is Error => e !== null);
  if (errors.length > 0) throw errors[0];
}

function numericConstants(constants: OverrideConstants): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(constants)) out[k] = Number(v);
  return out;
}

function compileErrorOf(
  label: string,
  source: string,
  info: GPUCompilationInfo,
): WgslCompileError | null {
  const errors = info.messages.filter((m) => m.type === 'error');
  if (errors.length === 0) return null;
  const first = errors[0];
  const lines = source.split('\n');
  return new WgslCompileError(
    label,
    first.lineNum,
    first.linePos,
    first.message,
    lines[first.lineNum - 1] ?? '',
    // Each message names the file and line as written (an #include'd snippet's own), not only the
    // line of the expanded source.
    errors
      .map((m) => {
        const at = shaderLocation(source, m.lineNum) ?? `${label}:${m.lineNum}`;
        return `${at}:${m.linePos}: ${m.message}`;
      })
      .join('\n'),
  );
}

export async function compilePipeline(
  device: GPUDevice,
  label: string,
  source: string,
  constants: OverrideConstants = {},
  entryPoint = 'main',
): Promise<GPUComputePipeline> {
  device.pushErrorScope('validation');
  const module = device.createShaderModule({ label, code: source });
  const compileError = compileErrorOf(label, source, await module.getCompilationInfo());
  if (compileError) {
    await device.popErrorScope();
    throw compileError;
  }
  let pipeline: GPUComputePipeline;
  try {
    pipeline = await device.createComputePipelineAsync({
      label,
      layout: 'auto',
      compute: { module, entryPoint, constants: numericConstants(constants) },
    });
  } catch (err) {
    await device.popErrorScope();
    throw new GpuValidationError(
      `pipeline '${label}' (${constantsKey(constants)}): ${(err as Error).message}`,
    );
  }
  const scopeError = await device.popErrorScope();
  if (scopeError) {
    throw new GpuValidationError(
      `pipeline '${label}' (${constantsKey(constants)}): ${scopeError.message}`,
    );
  }
  return pipeline;
}

/** A buffer bound whole, or a range of one (a uniform block in its arena slot). */
export type BoundBuffer = GPUBuffer | GPUBufferBinding;

// getBindGroupLayout makes a new layout object on every call (in a browser, a message to the GPU
// process); a pipeline's group 0 layout never changes, so each is asked for once.
const groupLayouts = new WeakMap<GPUComputePipeline, GPUBindGroupLayout>();

/** A bind group for group 0 with buffers bound at bindings 0…n−1 in order. */
export function bindBuffers(
  device: GPUDevice,
  pipeline: GPUComputePipeline,
  buffers: readonly BoundBuffer[],
  label?: string,
): GPUBindGroup {
  return bindAt(device, pipeline, { ...buffers }, label);
}

/** A bind group for group 0 with each buffer at its binding number (entry points that use only
 * some of a shader's bindings). */
export function bindAt(
  device: GPUDevice,
  pipeline: GPUComputePipeline,
  buffers: Readonly<Record<number, BoundBuffer>>,
  label?: string,
): GPUBindGroup {
  let layout = groupLayouts.get(pipeline);
  if (!layout) groupLayouts.set(pipeline, (layout = pipeline.getBindGroupLayout(0)));
  return device.createBindGroup({
    label,
    layout,
    entries: Object.entries(buffers).map(([binding, bound]) => ({
      binding: Number(binding),
      resource: 'buffer' in bound ? bound : { buffer: bound },
    })),
  });
}
