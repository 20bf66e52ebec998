// Host-side cost of GPU work, counted rather than timed: submits, CPU waits on the GPU
// (queue.onSubmittedWorkDone, buffer.mapAsync), compute dispatches, GPU objects made per dispatch
// (buffers, bind groups), bytes uploaded (queue.writeBuffer and buffers created mapped) and read
// back (mapAsync), and pipelines compiled, per phase of a training step. These numbers do not depend on the machine, so a test pins
// them (tests/kernels/counters.test.ts) and `npm run bench -- --counters` prints them.
//
// Like the byte accounting of memory.ts, the counts come from wrappers installed once on the
// device's own methods, so every caller is counted (kernel wrappers, readbacks, benchmarks' own
// encoders) without having to remember to. Each count is a plain integer increment.
//
// Beside the counts, the time of each phase: wall-clock milliseconds spent in it and, of those,
// milliseconds the CPU waited on the GPU (from a wait's call to its promise settling) and
// milliseconds engine.run spent encoding and submitting. They are machine-dependent, so tests pin
// only their relations; bench:gpu prints them to tell a host-bound step (wall ≫ wait, much of it
// encoding) from a GPU-bound one (wait ≈ wall).

/** The phases of a training step (docs/grpo.md's order), and `other` for everything else. */
export const STEP_PHASES = [
  'sampling',
  'rewards',
  'reference',
  'update',
  'optimizer',
  'checkpoint',
] as const;
export type StepPhase = (typeof STEP_PHASES)[number];
export type CounterPhase = StepPhase | 'other';
export const COUNTER_PHASES: readonly CounterPhase[] = [...STEP_PHASES, 'other'];

export interface PhaseCounts {
  /** queue.submit calls. */
  submits: number;
  /** CPU waits on the GPU: onSubmittedWorkDone and mapAsync calls. */
  waits: number;
  /** dispatchWorkgroups (and …Indirect) calls. */
  dispatches: number;
  /** device.createBuffer calls, of any usage (a uniform block per dispatch shows up here). */
  buffers: number;
  /** device.createBindGroup calls. */
  bindGroups: number;
  /** Bytes written by queue.writeBuffer or into buffers created mappedAtCreation. */
  uploadBytes: number;
  /** mapAsync calls (each is also a wait). */
  readbacks: number;
  /** Bytes mapped for reading. */
  readbackBytes: number;
  /** Compute pipelines compiled (PipelineCache: counted when asked for, sync or async, so that the
   * phase is the one that asked, not the one in which an async compile happens to finish). */
  pipelines: number;
}

export const COUNT_NAMES: readonly (keyof PhaseCounts)[] = [
  'submits',
  'waits',
  'dispatches',
  'buffers',
  'bindGroups',
  'uploadBytes',
  'readbacks',
  'readbackBytes',
  'pipelines',
];

const zero = (): PhaseCounts => ({
  submits: 0,
  waits: 0,
  dispatches: 0,
  buffers: 0,
  bindGroups: 0,
  uploadBytes: 0,
  readbacks: 0,
  readbackBytes: 0,
  pipelines: 0,
});

export type CounterSnapshot = Record<CounterPhase, PhaseCounts>;

/** Where a phase's time went (milliseconds). */
export interface PhaseTime {
  /** Wall-clock time while the phase was current. */
  wallMs: number;
  /** Time from a wait's call (onSubmittedWorkDone, mapAsync) to its promise settling. */
  waitMs: number;
  /** Time engine.run spent recording commands and submitting them (host work per dispatch). */
  encodeMs: number;
}
export type TimeSnapshot = Record<CounterPhase, PhaseTime>;

const zeroTimes = (): TimeSnapshot =>
  Object.fromEntries(
    COUNTER_PHASES.map((p) => [p, { wallMs: 0, waitMs: 0, encodeMs: 0 }]),
  ) as TimeSnapshot;

export class EngineCounters {
  private currentPhase: CounterPhase = 'other';
  private enteredAt = performance.now();
  private counts: CounterSnapshot = EngineCounters.empty();
  private times: TimeSnapshot = zeroTimes();

  /** The phase new counts go to (the trainer sets it as a step moves on). */
  get phase(): CounterPhase {
    return this.currentPhase;
  }

  set phase(phase: CounterPhase) {
    const now = performance.now();
    this.times[this.currentPhase].wallMs += now - this.enteredAt;
    this.enteredAt = now;
    this.currentPhase = phase;
  }

  /** Every phase's wall and wait milliseconds so far (the current phase's wall up to now). */
  timeSnapshot(): TimeSnapshot {
    const out = zeroTimes();
    for (const p of COUNTER_PHASES) out[p] = { ...this.times[p] };
    out[this.currentPhase].wallMs += performance.now() - this.enteredAt;
    return out;
  }

  /** Adds a settled wait's milliseconds to `phase` (the phase it was called in). */
  addWait(phase: CounterPhase, ms: number): void {
    this.times[phase].waitMs += ms;
  }

  /** Adds milliseconds of encoding and submitting to the current phase (engine.run calls it). */
  addEncode(ms: number): void {
    this.times[this.currentPhase].encodeMs += ms;
  }

  static empty(): CounterSnapshot {
    return Object.fromEntries(COUNTER_PHASES.map((p) => [p, zero()])) as CounterSnapshot;
  }

  /** The record new counts go to. */
  get current(): PhaseCounts {
    return this.counts[this.phase];
  }

  /** A copy of every phase's counts. */
  snapshot(): CounterSnapshot {
    return Object.fromEntries(
      COUNTER_PHASES.map((p) => [p, { ...this.counts[p] }]),
    ) as CounterSnapshot;
  }

  /** Sets every count and time to 0 (the phase stays). */
  reset(): void {
    this.counts = EngineCounters.empty();
    this.times = zeroTimes();
    this.enteredAt = performance.now();
  }

  /** Sets the phase and returns the one it replaces (to restore it after nested work). */
  enter(phase: CounterPhase): CounterPhase {
    const before = this.phase;
    this.phase = phase;
    return before;
  }
}

/** Each count summed over phases. */
export function totalCounts(snapshot: CounterSnapshot): PhaseCounts {
  const total = zero();
  for (const p of COUNTER_PHASES) for (const k of COUNT_NAMES) total[k] += snapshot[p][k];
  return total;
}

/** `after − before` of two time snapshots, phase by phase. */
export function diffTimes(after: TimeSnapshot, before: TimeSnapshot): TimeSnapshot {
  const out = zeroTimes();
  for (const p of COUNTER_PHASES)
    out[p] = {
      wallMs: after[p].wallMs - before[p].wallMs,
      waitMs: after[p].waitMs - before[p].waitMs,
      encodeMs: after[p].encodeMs - before[p].encodeMs,
    };
  return out;
}

/** `after − before`, phase by phase. */
export function diffCounts(after: CounterSnapshot, before: CounterSnapshot): CounterSnapshot {
  const out = EngineCounters.empty();
  for (const p of COUNTER_PHASES)
    for (const k of COUNT_NAMES) out[p][k] = after[p][k] - before[p][k];
  return out;
}

const MAP_READ = 0x0001; // GPUBufferUsage.MAP_READ

// One set of counters per device: engines that share a device (tests' tuned engines) share it.
const counters = new WeakMap<GPUDevice, EngineCounters>();

/** Bytes a queue.writeBuffer call writes (size and dataOffset count elements of a typed array). */
function writeBytes(data: BufferSource | SharedArrayBuffer, dataOffset = 0, size?: number): number {
  const element = ArrayBuffer.isView(data)
    ? ((data as unknown as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1)
    : 1;
  if (size !== undefined) return size * element;
  return data.byteLength - dataOffset * element;
}

/** `wait`, its settling time added to the phase it was called in. */
function timedWait<T>(tracker: EngineCounters, wait: Promise<T>): Promise<T> {
  const phase = tracker.phase;
  const started = performance.now();
  const settle = () => tracker.addWait(phase, performance.now() - started);
  wait.then(settle, settle);
  return wait;
}

/** The device's counters, if an engine installed them (PipelineCache counts compiles there). */
export function countersOf(device: GPUDevice): EngineCounters | undefined {
  return counters.get(device);
}

/** The device's counters, installing the wrappers on first use. */
export function trackCounters(device: GPUDevice): EngineCounters {
  const existing = counters.get(device);
  if (existing) return existing;
  const tracker = new EngineCounters();
  counters.set(device, tracker);
  const queue = device.queue;

  const submit = queue.submit.bind(queue);
  queue.submit = (buffers: Iterable<GPUCommandBuffer>) => {
    tracker.current.submits++;
    return submit(buffers);
  };
  const done = queue.onSubmittedWorkDone.bind(queue);
  queue.onSubmittedWorkDone = () => {
    tracker.current.waits++;
    return timedWait(tracker, done());
  };
  const write = queue.writeBuffer.bind(queue) as (...args: unknown[]) => undefined;
  queue.writeBuffer = ((
    buffer: GPUBuffer,
    offset: number,
    data: BufferSource | SharedArrayBuffer,
    dataOffset?: number,
    size?: number,
  ) => {
    tracker.current.uploadBytes += writeBytes(data, dataOffset, size);
    return write(buffer, offset, data, dataOffset, size);
  }) as GPUQueue['writeBuffer'];

  const createBuffer = device.createBuffer.bind(device);
  device.createBuffer = (descriptor: GPUBufferDescriptor): GPUBuffer => {
    const buffer = createBuffer(descriptor);
    tracker.current.buffers++;
    if (descriptor.mappedAtCreation) tracker.current.uploadBytes += buffer.size;
    if (descriptor.usage & MAP_READ) {
      const map = buffer.mapAsync.bind(buffer);
      buffer.mapAsync = (mode: number, offset = 0, size?: number) => {
        const counts = tracker.current;
        counts.waits++;
        counts.readbacks++;
        counts.readbackBytes += size ?? buffer.size - offset;
        return timedWait(tracker, map(mode, offset, size));
      };
    }
    return buffer;
  };

  const createBindGroup = device.createBindGroup.bind(device);
  device.createBindGroup = (descriptor: GPUBindGroupDescriptor): GPUBindGroup => {
    tracker.current.bindGroups++;
    return createBindGroup(descriptor);
  };

  const createEncoder = device.createCommandEncoder.bind(device);
  device.createCommandEncoder = (descriptor?: GPUCommandEncoderDescriptor) => {
    const encoder = createEncoder(descriptor);
    const begin = encoder.beginComputePass.bind(encoder);
    encoder.beginComputePass = (desc?: GPUComputePassDescriptor) => {
      const pass = begin(desc);
      const dispatch = pass.dispatchWorkgroups.bind(pass);
      pass.dispatchWorkgroups = (x: number, y?: number, z?: number) => {
        tracker.current.dispatches++;
        dispatch(x, y ?? 1, z ?? 1);
      };
      const indirect = pass.dispatchWorkgroupsIndirect.bind(pass);
      pass.dispatchWorkgroupsIndirect = (buffer: GPUBuffer, offset: number) => {
        tracker.current.dispatches++;
        indirect(buffer, offset);
      };
      return pass;
    };
    return encoder;
  };
  return tracker;
}
