// Compute-pipeline cache keyed by WGSL source + override constants. Compilation runs inside a
// validation error scope; WGSL errors are thrown as WgslCompileError with line, column and source.
import { GpuValidationError, WgslCompileError } from './errors';

export type OverrideConstants = Record<string, number | boolean>;

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
}

export const DEFAULT_TUNING: KernelTuning = { avoidBarriers: false, vectorLoads: true };

export class PipelineCache {
  // source → constants key → pipeline. The source string itself is the key: V8 caches a string's
  // hash, so repeated lookups with the same (imported) source are cheap.
  private readonly pipelines = new Map<string, Map<string, Promise<GPUComputePipeline>>>();

  constructor(
    private readonly device: GPUDevice,
    readonly tuning: KernelTuning = DEFAULT_TUNING,
  ) {}

  get size(): number {
    let n = 0;
    for (const m of this.pipelines.values()) n += m.size;
    return n;
  }

  /** The pipeline for `source` specialised with `constants`, entry point `entryPoint`. */
  get(
    label: string,
    source: string,
    constants: OverrideConstants = {},
    entryPoint = 'main',
  ): Promise<GPUComputePipeline> {
    let byConstants = this.pipelines.get(source);
    if (!byConstants) this.pipelines.set(source, (byConstants = new Map()));
    const key = `${entryPoint}:${constantsKey(constants)}`;
    let pipeline = byConstants.get(key);
    if (!pipeline) {
      pipeline = compilePipeline(this.device, label, source, constants, entryPoint);
      // A failed compile must not stay cached: the next call should report the error again.
      pipeline.catch(() => byConstants.delete(key));
      byConstants.set(key, pipeline);
    }
    return pipeline;
  }
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
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === 'error');
  if (errors.length > 0) {
    await device.popErrorScope();
    const first = errors[0];
    const lines = source.split('\n');
    throw new WgslCompileError(
      label,
      first.lineNum,
      first.linePos,
      first.message,
      lines[first.lineNum - 1] ?? '',
      errors.map((m) => `${label}:${m.lineNum}:${m.linePos}: ${m.message}`).join('\n'),
    );
  }
  const numericConstants: Record<string, number> = {};
  for (const [k, v] of Object.entries(constants)) numericConstants[k] = Number(v);
  let pipeline: GPUComputePipeline;
  try {
    pipeline = await device.createComputePipelineAsync({
      label,
      layout: 'auto',
      compute: { module, entryPoint, constants: numericConstants },
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

/** A bind group for group 0 with buffers bound at bindings 0…n−1 in order. */
export function bindBuffers(
  device: GPUDevice,
  pipeline: GPUComputePipeline,
  buffers: GPUBuffer[],
  label?: string,
): GPUBindGroup {
  return device.createBindGroup({
    label,
    layout: pipeline.getBindGroupLayout(0),
    entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
}
