// Supervised (SFT) cross-entropy from the log-prob gather kernels: loss = mean over masked rows of
// −logp, and its gradient into the logits. The per-row upstream gradient g = −mask / count is
// built on the CPU (crossEntropyRowWeights: the mask is CPU data anyway) and the loss Σ g·logp is a
// 1×R·R×1 product on the existing matmul kernel, so no extra WGSL is needed and the sum is
// reduced in a fixed order. encodeLoss alone serves the training step, which gathers and
// back-propagates the head's logits per row chunk (src/model/head-chunks.ts) with the same kernels.
// The gather's variants (src/kernels/logprob.ts: a row over many workgroups on GPUs, subgroup
// merges) apply here as they do everywhere, chosen by the same KernelTuning.
import { createStorageBuffer } from '../engine/buffers';
import { transient } from '../engine/memory';
import type { PipelineCache } from '../engine/pipelines';
import { LogprobGatherBackwardKernel, LogprobGatherKernel } from './logprob';
import { MatmulKernel } from './matmul';

export { crossEntropyRowWeights } from '../ref/logprob';

export interface CrossEntropyArgs {
  logits: GPUBuffer; // (R, V)
  targets: GPUBuffer; // (R) u32
  /** (R) −mask/count, from crossEntropyRowWeights(mask[, count over the accumulated batch]). */
  rowWeights: GPUBuffer;
  loss: GPUBuffer; // (1) out: mean −logp over masked rows
  dLogits: GPUBuffer; // (R, V) out
  R: number;
  V: number;
  invTemperature?: number;
  /** Add into dLogits (gradient accumulation); the loss is always overwritten. */
  accumulate?: boolean;
  /** Optional outputs; scratch buffers are made when left out. */
  logp?: GPUBuffer; // (R)
  entropy?: GPUBuffer; // (R)
  lse?: GPUBuffer; // (R)
}

export class CrossEntropyKernel {
  private readonly gather: LogprobGatherKernel;
  private readonly backward: LogprobGatherBackwardKernel;
  private readonly matmul: MatmulKernel;

  constructor(
    private readonly device: GPUDevice,
    pipelines: PipelineCache,
  ) {
    this.gather = new LogprobGatherKernel(device, pipelines);
    this.backward = new LogprobGatherBackwardKernel(device, pipelines);
    this.matmul = new MatmulKernel(device, pipelines);
  }

  encode(encoder: GPUCommandEncoder, args: CrossEntropyArgs): void {
    const { R, V, invTemperature = 1 } = args;
    const scratch = (label: string) =>
      transient(this.device, createStorageBuffer(this.device, R * 4, `cross_entropy.${label}`));
    const logp = args.logp ?? scratch('logp');
    const entropy = args.entropy ?? scratch('entropy');
    const lse = args.lse ?? scratch('lse');
    const { logits, targets } = args;
    this.gather.encode(encoder, {
      logits,
      targets,
      logp,
      entropy,
      lse,
      R,
      V,
      invTemperature,
    });
    this.encodeLoss(encoder, { rowWeights: args.rowWeights, logp, loss: args.loss, R });
    this.backward.encode(encoder, {
      logits,
      targets,
      lse,
      gradLogp: args.rowWeights,
      dLogits: args.dLogits,
      R,
      V,
      invTemperature,
      accumulate: args.accumulate,
    });
  }

  /** loss (1×1) = rowWeights (1×R) · logp (R×1): the mean −logp over masked rows. */
  encodeLoss(
    encoder: GPUCommandEncoder,
    args: { rowWeights: GPUBuffer; logp: GPUBuffer; loss: GPUBuffer; R: number },
  ): void {
    const { rowWeights: a, logp: b, loss: c, R } = args;
    this.matmul.encode(encoder, { a, b, c, M: 1, N: 1, K: R });
  }
}
