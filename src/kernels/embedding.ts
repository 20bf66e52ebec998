// TS wrappers of shaders/embedding_forward.wgsl (embedding_forward_packed16.wgsl for a bf16 / f16
// table packed two per u32) and shaders/embedding_backward.wgsl, and the CPU token index that lets
// the backward pass scatter-add without atomics.
// Legend: R = N·T token rows, V vocab, C channels, U distinct token ids in the batch.
import { uploadStorageBuffer } from '../engine/buffers';
import { ceilDiv, MAX_WORKGROUPS_PER_DIM, splitGrid } from '../engine/dispatch';
import { bindBuffers, type PipelineCache, type PipelineKey } from '../engine/pipelines';
import { shaderSource } from '../engine/shaders';
import { transient } from '../engine/memory';
import { uniformLayout } from '../engine/uniforms';
import type { WeightDtype } from './matmul';

/** The `struct Params` of shaders/embedding_forward.wgsl and embedding_forward_packed16.wgsl. */
export const EMBEDDING_FORWARD_PARAMS = uniformLayout(
  ['embedding_forward', 'embedding_forward_packed16'],
  {
    rows: 'u32',
    channels: 'u32',
    vocab: 'u32',
    row_start: 'u32',
    zero_misses: 'u32',
  },
);

/** The `struct Params` of shaders/embedding_backward.wgsl. */
export const EMBEDDING_BACKWARD_PARAMS = uniformLayout('embedding_backward', {
  unique: 'u32',
  channels: 'u32',
  accumulate: 'u32',
});

/** Threads per workgroup of both embedding kernels. */
export const EMBEDDING_WG = 256;

type GridOptions = {
  /** Grid split limit per dimension (tests lower it to exercise the split). */
  maxWorkgroupsPerDim?: number;
};

/**
 * The rows of a token batch grouped by token id: the rows holding uniqueIds[u] are
 * order[offsets[u]] … order[offsets[u + 1] − 1], ascending. Ids are ascending too.
 */
export interface TokenIndex {
  uniqueIds: Uint32Array; // (U)
  offsets: Uint32Array; // (U + 1)
  order: Uint32Array; // (R)
}

/** Groups the rows of `tokens` (R) by token id (a stable counting of ids; O(R log R)). */
export function buildTokenIndex(tokens: Uint32Array): TokenIndex {
  const R = tokens.length;
  const order = new Uint32Array(R);
  for (let r = 0; r < R; r++) order[r] = r;
  // Ties broken by row so that every id sums its rows in ascending order.
  order.sort((a, b) => tokens[a] - tokens[b] || a - b);
  const unique: number[] = [];
  const offsets: number[] = [];
  for (let p = 0; p < R; p++) {
    if (p === 0 || tokens[order[p]] !== tokens[order[p - 1]]) {
      unique.push(tokens[order[p]]);
      offsets.push(p);
    }
  }
  offsets.push(R);
  return { uniqueIds: Uint32Array.from(unique), offsets: Uint32Array.from(offsets), order };
}

export interface EmbeddingForwardArgs {
  tokens: GPUBuffer; // u32 (R)
  weight: GPUBuffer; // (V, C)
  /** How `weight` stores its values: f32 (default), or bf16 / f16 packed two per u32. */
  weightDtype?: WeightDtype;
  x: GPUBuffer; // (R, C) output
  rows: number; // R
  V: number; // rows of `weight`
  C: number;
  /** Split table: `weight` holds token ids rowStart … rowStart + V − 1 (default 0). */
  rowStart?: number;
  /** Write 0 for ids outside `weight` (default true); false leaves those rows of x as they are. */
  zeroMisses?: boolean;
}

/** The forward kernel for a table stored as `dtype`: f32, or the packed 16-bit variant. */
function forwardPipelineKey(dtype: WeightDtype): PipelineKey {
  if (dtype === 'f32') {
    return ['embedding_forward', shaderSource('embedding_forward'), { WG: EMBEDDING_WG }];
  }
  const name = 'embedding_forward_packed16';
  return [name, shaderSource(name), { WG: EMBEDDING_WG, HALF_BF16: dtype === 'bf16' }];
}

export class EmbeddingForwardKernel {
  private readonly maxPerDim: number;

  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
    options: GridOptions = {},
  ) {
    this.maxPerDim = options.maxWorkgroupsPerDim ?? MAX_WORKGROUPS_PER_DIM;
  }

  /** Compiles the pipeline encode() uses for a table stored as `weightDtype`. */
  prepare(weightDtype: WeightDtype = 'f32'): Promise<void> {
    return this.pipelines.prepare(...forwardPipelineKey(weightDtype));
  }

  encode(encoder: GPUCommandEncoder, args: EmbeddingForwardArgs): void {
    const { rows, V, C } = args;
    const pipeline = this.pipelines.get(...forwardPipelineKey(args.weightDtype ?? 'f32'));
    const params = EMBEDDING_FORWARD_PARAMS.block(this.device, encoder, {
      rows,
      channels: C,
      vocab: V,
      row_start: args.rowStart ?? 0,
      zero_misses: args.zeroMisses === false ? 0 : 1,
    });
    const pass = encoder.beginComputePass({ label: 'embedding_forward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.tokens, args.weight, args.x, params]),
    );
    const groups = ceilDiv(rows * C, EMBEDDING_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}

export interface EmbeddingBackwardArgs {
  dx: GPUBuffer; // (R, C) gradient of the embedding output
  dw: GPUBuffer; // (V, C) weight gradient
  /** buildTokenIndex(tokens) of the batch that produced dx. */
  index: TokenIndex;
  V: number;
  C: number;
  /** Add into dw instead of overwriting it (without: rows of unused ids are cleared to 0). */
  accumulate?: boolean;
}

export class EmbeddingBackwardKernel {
  private readonly maxPerDim: number;

  constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: PipelineCache,
    options: GridOptions = {},
  ) {
    this.maxPerDim = options.maxWorkgroupsPerDim ?? MAX_WORKGROUPS_PER_DIM;
  }

  /** Compiles the pipeline encode() uses. */
  prepare(): Promise<void> {
    return this.pipelines.prepare('embedding_backward', shaderSource('embedding_backward'), {
      WG: EMBEDDING_WG,
    });
  }

  encode(encoder: GPUCommandEncoder, args: EmbeddingBackwardArgs): void {
    const { index, V, C, accumulate = false } = args;
    const U = index.uniqueIds.length;
    if (U > 0 && index.uniqueIds[U - 1] >= V) {
      throw new RangeError(
        `embedding backward: token id ${index.uniqueIds[U - 1]} is outside the vocabulary (${V})`,
      );
    }
    // The kernel writes only rows of ids that occur; 'overwrite' means every other row is 0.
    if (!accumulate) encoder.clearBuffer(args.dw, 0, V * C * 4);
    if (U === 0) return;
    const pipeline = this.pipelines.get('embedding_backward', shaderSource('embedding_backward'), {
      WG: EMBEDDING_WG,
    });
    // Per-call data (a later call in the same submission needs its own), freed after the run.
    const upload = (data: Uint32Array, label: string) =>
      transient(this.device, uploadStorageBuffer(this.device, data, label));
    const uniqueIds = upload(index.uniqueIds, 'embedding.uniqueIds');
    const offsets = upload(index.offsets, 'embedding.offsets');
    const order = upload(index.order, 'embedding.order');
    const params = EMBEDDING_BACKWARD_PARAMS.block(this.device, encoder, {
      unique: U,
      channels: C,
      accumulate: accumulate ? 1 : 0,
    });
    const pass = encoder.beginComputePass({ label: 'embedding_backward' });
    pass.setPipeline(pipeline);
    pass.setBindGroup(
      0,
      bindBuffers(this.device, pipeline, [args.dx, uniqueIds, offsets, order, args.dw, params]),
    );
    const groups = ceilDiv(U * C, EMBEDDING_WG);
    if (groups > 0) pass.dispatchWorkgroups(...splitGrid(groups, this.maxPerDim));
    pass.end();
  }
}
