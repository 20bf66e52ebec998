// Matmul tile-shape variants for the kernel work behind the side-by-side benchmarks:
// shaders/matmul.wgsl (4×4 outputs per thread, vec4 workgroup tiles) specialised with other
// workgroup sizes through its WG_X / WG_Y overrides, i.e. tiles of (4·WG_Y) × (4·WG_X) outputs.
// src/kernels/matmul.ts fixes 16×16 threads (64×64 tiles), which leaves 3/4 of every workgroup idle
// when M = 16 (one decode step of B·G = 16 sequences). Variants live here; only a winner would move
// into src/kernels + shaders/.
//
// The variant drives the shipped MatmulKernel itself (its uniforms, bindings and checks stay the
// ones under test) and changes only two things on the way: the WG_X / WG_Y constants it asks the
// pipeline cache for, and the workgroup grid it dispatches, recomputed for the new tile.
import { ceilDiv } from '../../src/engine/dispatch';
import type { PipelineCache } from '../../src/engine/pipelines';
import { MatmulKernel, type MatmulArgs } from '../../src/kernels/matmul';

export class MatmulTileVariant {
  private readonly kernel: MatmulKernel;

  constructor(
    device: GPUDevice,
    pipelines: PipelineCache,
    /** Threads per workgroup along columns (x) and rows (y). */
    readonly wgX: number,
    readonly wgY: number,
  ) {
    // Everything else (the shader cache, any tuning flags) is the real cache's, by prototype.
    const retiled = Object.create(pipelines) as PipelineCache;
    retiled.get = (label, source, constants = {}) =>
      pipelines.get(label, source, { ...constants, WG_X: wgX, WG_Y: wgY });
    this.kernel = new MatmulKernel(device, retiled);
  }

  get label(): string {
    return `${4 * this.wgY}×${4 * this.wgX} tile`;
  }

  async encode(encoder: GPUCommandEncoder, args: MatmulArgs): Promise<void> {
    const { M, N } = args;
    const gridX = ceilDiv(N, 4 * this.wgX);
    const gridY = ceilDiv(M, 4 * this.wgY);
    // MatmulKernel opens one pass and dispatches its 64×64-tile grid: swap in this tile's grid.
    const retiledEncoder = {
      beginComputePass: (desc?: GPUComputePassDescriptor) => {
        const pass = encoder.beginComputePass({ ...desc, label: `matmul ${this.label}` });
        return {
          setPipeline: (p: GPUComputePipeline) => pass.setPipeline(p),
          setBindGroup: (i: number, g: GPUBindGroup) => pass.setBindGroup(i, g),
          dispatchWorkgroups: (_x: number, _y?: number, z?: number) =>
            pass.dispatchWorkgroups(gridX, gridY, z),
          end: () => pass.end(),
        };
      },
    } as unknown as GPUCommandEncoder;
    this.kernel.encode(retiledEncoder, args);
  }
}
