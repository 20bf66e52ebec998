// Per-kernel GPU time from timestamp queries, without touching src/: an Engine wrapper whose run()
// gives every compute pass of the submission (each kernel wrapper opens one labelled pass)
// beginning/end timestamps, resolves them after the submission, and adds each pass's time to its
// label. Only for profiling runs: the extra resolve + readback per submission costs time itself.
import type { Engine } from '../../src/engine/engine';
import { releaseTransients } from '../../src/engine/memory';

/** Passes timed per submission (2 queries each); later passes in the same submission go untimed. */
const MAX_PASSES = 2048;

export interface PassTotals {
  /** GPU time (ms) and pass count per pass label. */
  passes: Map<string, { ms: number; count: number }>;
  /** Σ pass durations (ms): time the GPU executed a kernel. */
  busyMs: number;
  /** Passes that did not fit MAX_PASSES and were not timed. */
  untimed: number;
}

export class PassProfiler {
  readonly totals: PassTotals = { passes: new Map(), busyMs: 0, untimed: 0 };
  private readonly querySet: GPUQuerySet;
  private readonly resolve: GPUBuffer;

  /**
   * byDispatch: key each pass by its label and its dispatch grid ("matmul 12×1×1"), so one kernel's
   * time splits by shape.
   */
  constructor(
    private readonly device: GPUDevice,
    private readonly options: { byDispatch?: boolean } = {},
  ) {
    if (!device.features.has('timestamp-query'))
      throw new Error('PassProfiler needs the timestamp-query feature');
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * MAX_PASSES });
    this.resolve = device.createBuffer({
      size: 2 * MAX_PASSES * 8,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
  }

  reset(): void {
    this.totals.passes.clear();
    this.totals.busyMs = 0;
    this.totals.untimed = 0;
  }

  /** An engine whose submissions are profiled; everything else is the wrapped engine's. */
  wrap(engine: Engine): Engine {
    const device = this.device;
    return {
      ...engine,
      run: async (record, label = 'engine.run') => {
        const encoder = device.createCommandEncoder({ label });
        const labels: string[] = [];
        const begin = encoder.beginComputePass.bind(encoder);
        // Kernel wrappers call beginComputePass on the encoder they are given: add the writes there.
        encoder.beginComputePass = (desc: GPUComputePassDescriptor = {}) => {
          if (labels.length >= MAX_PASSES) {
            this.totals.untimed += 1;
            return begin(desc);
          }
          const i = labels.length;
          labels.push(desc.label ?? '(unlabelled)');
          const pass = begin({
            ...desc,
            timestampWrites: {
              querySet: this.querySet,
              beginningOfPassWriteIndex: 2 * i,
              endOfPassWriteIndex: 2 * i + 1,
            },
          });
          if (this.options.byDispatch) {
            const dispatch = pass.dispatchWorkgroups.bind(pass);
            pass.dispatchWorkgroups = (x: number, y = 1, z = 1) => {
              labels[i] += ` ${x}×${y}×${z}`;
              dispatch(x, y, z);
            };
          }
          return pass;
        };
        await record(encoder);
        const n = labels.length;
        let read: GPUBuffer | null = null;
        if (n > 0) {
          read = device.createBuffer({
            size: n * 16,
            usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
          });
          encoder.resolveQuerySet(this.querySet, 0, 2 * n, this.resolve, 0);
          encoder.copyBufferToBuffer(this.resolve, 0, read, 0, n * 16);
        }
        device.queue.submit([encoder.finish()]);
        await device.queue.onSubmittedWorkDone();
        releaseTransients(device); // as engine.run does: kernels' per-call scratch
        if (!read) return;
        await read.mapAsync(GPUMapMode.READ);
        const t = new BigUint64Array(read.getMappedRange().slice(0));
        read.destroy();
        labels.forEach((name, i) => {
          const ms = Number(t[2 * i + 1] - t[2 * i]) / 1e6;
          const entry = this.totals.passes.get(name) ?? { ms: 0, count: 0 };
          entry.ms += ms;
          entry.count += 1;
          this.totals.passes.set(name, entry);
          this.totals.busyMs += ms;
        });
      },
    };
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolve.destroy();
  }
}
