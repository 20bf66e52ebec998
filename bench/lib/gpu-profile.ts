// Per-kernel GPU time from timestamp queries, without touching src/: an Engine wrapper whose run()
// gives every compute pass of the submission (each kernel wrapper opens one labelled pass)
// beginning/end timestamps, resolves them after the submission, and adds each pass's time to its
// label. Only for profiling runs: the extra resolve + readback per submission costs time itself.
import type { Engine } from '../../src/engine/engine';

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

  /**
   * An engine whose submissions are profiled; everything else is the wrapped engine's. Each
   * submission's timestamps come back with it (one more range in its readback), so every
   * submission waits, including those asked not to (RunOptions.wait false): a profiled run times
   * kernels, not the overlap of host and GPU.
   */
  wrap(engine: Engine): Engine {
    return {
      ...engine,
      run: async (record, label = 'engine.run', options = {}) => {
        const labels: string[] = [];
        const out = await engine.run(
          async (encoder) => {
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
            if (labels.length > 0)
              encoder.resolveQuerySet(this.querySet, 0, 2 * labels.length, this.resolve, 0);
          },
          label,
          {
            ...options,
            wait: true,
            // The resolved timestamps (sized after encoding: the range is read when it is copied).
            read: [
              ...(options.read ?? []),
              {
                buffer: this.resolve,
                get bytes() {
                  return labels.length * 16;
                },
              },
            ],
          },
        );
        const stamps = out.pop()!;
        const t = new BigUint64Array(stamps);
        labels.forEach((name, i) => {
          const ms = Number(t[2 * i + 1] - t[2 * i]) / 1e6;
          const entry = this.totals.passes.get(name) ?? { ms: 0, count: 0 };
          entry.ms += ms;
          entry.count += 1;
          this.totals.passes.set(name, entry);
          this.totals.busyMs += ms;
        });
        return out;
      },
    };
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolve.destroy();
  }
}
