// Sandbox for user JavaScript rewards: the platform-neutral host side. Each user source runs in
// QuickJS compiled to WebAssembly (quickjs-reward-worker.ts), an interpreter with no host
// capabilities, inside a worker of its own (a worker_threads Worker in Node, a module Worker in
// the browser: reward-sandbox-node.ts / reward-sandbox-browser.ts say how to start one). This file
// drives that worker: start, load the source, one call at a time, and the limits.
//
// The user's source must define a function named `reward`:
//     function reward({ completion, prompt, problem }) { … return number | null }
// It may be async. A syntax error, a throw while the source loads or a missing `reward` is a load
// failure: every call reports it (kind 'invalid' where the caller can say so).
//
// Limits (SandboxOptions): the per-call time limit is enforced inside the worker by QuickJS's
// interrupt handler (promise jobs and guest timers run only within it); a memory limit and a stack
// limit per source. A watchdog here terminates the worker when it has not answered within the
// limit plus WATCHDOG_GRACE_MS (a native loop that never checks the interrupt handler). After a
// timeout or an out-of-memory the runtime is replaced, after an engine fault the whole worker, and
// the next call loads the source afresh. Only the source's first load has a limit of its own
// (loadTimeoutMs, once per sandbox); every later load is part of the call that needs it and comes
// out of that call's limit, so a call costs the step at most its limit plus WATCHDOG_GRACE_MS
// however long the source's top level runs (issue 33: a top level of 4.7 s used to add 4.7 s to
// every timed-out call). Starting a replacement worker (the engine's wasm, nothing of the user's)
// is not counted. Calls run one at a time, in order. Nothing here keeps a Node event loop alive
// once dispose() has run.

import type { RewardInput, RewardOutcome } from './rewards';
import type { FromRewardWorker, QuickJsLimits, ToRewardWorker } from './quickjs-reward-worker';

/** A RewardOutcome that may also say the source could not be loaded at all. */
export type SandboxOutcome =
  { value: unknown } | { error: unknown; timedOut?: boolean; loadFailed?: boolean };

/** One user source, running in its own sandbox. */
export interface RewardSandbox {
  /** One outcome per input, in order. Failures are outcomes; rejects only for timeoutMs ≤ 0. */
  score(inputs: readonly RewardInput[], timeoutMs: number): Promise<SandboxOutcome[]>;
  /** Terminates the worker; later calls report an error outcome. */
  dispose(): void;
}

export type SandboxFactory = (source: string) => RewardSandbox;

export interface SandboxOptions {
  /** Limit on running the source's top level (not counted per call). */
  loadTimeoutMs?: number;
  /** QuickJS heap limit of one source (runtime.setMemoryLimit). */
  memoryLimitBytes?: number;
  /** QuickJS stack limit of one source (runtime.setMaxStackSize). */
  stackLimitBytes?: number;
}

/** Top-level evaluation of a source can take a second on a busy 2-core machine. */
export const DEFAULT_LOAD_TIMEOUT_MS = 5000;
/** Enough for text scoring; a memory bomb fails its call with "InternalError: out of memory". */
export const DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024;
/** Thousands of nested calls; small enough that QuickJS reports the overflow itself before the
 * host's native stack runs out in most cases (engine faults are handled either way). */
export const DEFAULT_STACK_LIMIT_BYTES = 256 * 1024;
/** How long past a limit the worker may take to answer before it is terminated. */
export const WATCHDOG_GRACE_MS = 500;
/** Starting a worker and instantiating the QuickJS wasm (not user-controlled; slow only on a
 * machine that is busy with something else). */
export const STARTUP_TIMEOUT_MS = 30_000;

export function resolveLimits(options: SandboxOptions = {}): QuickJsLimits {
  const pick = (v: number | undefined, dflt: number, what: string) => {
    if (v === undefined) return dflt;
    if (!(Number.isFinite(v) && v > 0)) throw new RangeError(`${what} must be > 0, got ${v}`);
    return v;
  };
  return {
    loadTimeoutMs: pick(options.loadTimeoutMs, DEFAULT_LOAD_TIMEOUT_MS, 'loadTimeoutMs'),
    memoryLimitBytes: pick(
      options.memoryLimitBytes,
      DEFAULT_MEMORY_LIMIT_BYTES,
      'memoryLimitBytes',
    ),
    stackLimitBytes: pick(options.stackLimitBytes, DEFAULT_STACK_LIMIT_BYTES, 'stackLimitBytes'),
  };
}

// ---------------------------------------------------------------------------------------------
// Wire format: what crosses worker boundaries (structured-cloneable, no Error subclasses, whose
// names and extra fields do not survive structured cloning everywhere).
// ---------------------------------------------------------------------------------------------

/** name null = a thrown non-Error value, shown as its String(). Lines are 1-based in the source. */
export interface WireError {
  name: string | null;
  message: string;
  line?: number;
  column?: number;
}

/** A returned value that is not structured-cloneable (function, symbol, object) travels as its
 * typeof only; sanitizeReward only needs the type to report it. */
export type WireOutcome =
  | { value: unknown }
  | { valueType: string }
  | { error: WireError; timedOut?: boolean; loadFailed?: boolean };

export class RewardTimeoutError extends Error {
  readonly timedOut = true;
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

function errorFromWire(w: WireError, timedOut: boolean): unknown {
  if (w.name === null) return w.message;
  const where =
    w.line === undefined
      ? ''
      : ` (line ${w.line}${w.column === undefined ? '' : `, column ${w.column}`})`;
  const e = timedOut ? new RewardTimeoutError(w.message + where) : new Error(w.message + where);
  if (!timedOut) e.name = w.name;
  return e;
}

/** Stand-ins so that sanitizeReward's "returned <typeof>" message names the real type. */
function standIn(type: string): unknown {
  if (type === 'function') return () => undefined;
  if (type === 'symbol') return Symbol('reward value');
  return {};
}

export function outcomeFromWire(w: WireOutcome): SandboxOutcome {
  if ('error' in w) {
    const timedOut = w.timedOut === true;
    const out: SandboxOutcome = { error: errorFromWire(w.error, timedOut) };
    if (timedOut) out.timedOut = true;
    if (w.loadFailed) out.loadFailed = true;
    return out;
  }
  if ('valueType' in w) return { value: standIn(w.valueType) };
  return { value: w.value };
}

/** For tests and callers holding plain RewardOutcomes. */
export function isLoadFailure(o: SandboxOutcome | RewardOutcome): boolean {
  return 'error' in o && (o as { loadFailed?: boolean }).loadFailed === true;
}

// ---------------------------------------------------------------------------------------------
// Host side: drives one QuickJS worker per source through the protocol of
// quickjs-reward-worker.ts, with the watchdogs.
// ---------------------------------------------------------------------------------------------

export interface SandboxWorker {
  post(message: ToRewardWorker): void;
  terminate(): void;
}

/** Worker events; `error` is an uncaught error in the worker (outside the QuickJS engine). */
export interface SandboxWorkerEvents {
  message(data: unknown): void;
  error(error: WireError): void;
  exit(): void;
}

export type SpawnSandboxWorker = (events: SandboxWorkerEvents) => SandboxWorker;

type WorkerEvent =
  { kind: 'message'; data: unknown } | { kind: 'error'; error: WireError } | { kind: 'exit' };

interface LiveWorker {
  worker: SandboxWorker;
  /** The waiter for the next event; events that arrive with nobody waiting queue in `inbox`
   * (a worker announces the end of a reload on its own, maybe before the next call waits). */
  waiter: ((event: WorkerEvent) => void) | null;
  inbox: WorkerEvent[];
  dead: boolean;
  /** The source must be loaded (again) before the next call: after a timeout, an out-of-memory,
   * or a reload that did not finish within its call's limit. */
  needsLoad: boolean;
}

function errorOutcome(
  name: string,
  message: string,
  flags: { timedOut?: boolean; loadFailed?: boolean } = {},
): WireOutcome {
  return { error: { name, message }, ...flags };
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === 'object';
}

function message(data: unknown): FromRewardWorker | null {
  return isRecord(data) && typeof data.type === 'string' ? (data as FromRewardWorker) : null;
}

/**
 * A RewardSandbox over any worker implementation. `scoreWire` is what a comlink worker forwards
 * (cloneable); `score` gives outcomes ready for sanitizeReward / combineOutcomes.
 */
export class WorkerRewardSandbox implements RewardSandbox {
  private live: LiveWorker | null = null;
  private loadFailure: WireOutcome | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private nextId = 1;
  private disposed = false;
  /** The source has loaded once: later loads come out of a call's limit. */
  private loadedOnce = false;
  private readonly limits: QuickJsLimits;
  /** console output of the last call (captured and capped in the worker; never forwarded). */
  lastLogs: readonly string[] = [];

  constructor(
    private readonly source: string,
    private readonly spawn: SpawnSandboxWorker,
    options: SandboxOptions = {},
  ) {
    this.limits = resolveLimits(options);
  }

  async score(inputs: readonly RewardInput[], timeoutMs: number): Promise<SandboxOutcome[]> {
    return (await this.scoreWire(inputs, timeoutMs)).map(outcomeFromWire);
  }

  scoreWire(inputs: readonly RewardInput[], timeoutMs: number): Promise<WireOutcome[]> {
    if (!(timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${timeoutMs}`);
    const run = this.queue.then(async () => {
      const out: WireOutcome[] = [];
      for (const input of inputs) out.push(await this.callOne(input, timeoutMs));
      return out;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  dispose(): void {
    this.disposed = true;
    this.kill();
  }

  private kill(): void {
    const live = this.live;
    this.live = null;
    if (!live) return;
    live.dead = true;
    live.worker.terminate();
    live.waiter?.({ kind: 'exit' });
  }

  /** Resolves with the first event, or null after ms. */
  private next(live: LiveWorker, ms: number): Promise<WorkerEvent | null> {
    return new Promise((resolve) => {
      const queued = live.inbox.shift();
      if (queued) return resolve(queued);
      if (live.dead) return resolve({ kind: 'exit' });
      const timer = setTimeout(() => {
        live.waiter = null;
        resolve(null);
      }, ms);
      live.waiter = (event) => {
        clearTimeout(timer);
        live.waiter = null;
        resolve(event);
      };
    });
  }

  /** The next protocol message (or a worker error/exit, or null at the deadline). */
  private async expect(
    live: LiveWorker,
    deadline: number,
    accept: (m: FromRewardWorker) => boolean,
  ): Promise<FromRewardWorker | WorkerEvent | null> {
    for (;;) {
      const event = await this.next(live, Math.max(0, deadline - Date.now()));
      if (event === null) return null;
      if (event.kind !== 'message') return event;
      const m = message(event.data);
      if (m && accept(m)) return m;
    }
  }

  /** A failure of the worker itself (not of the user's code), as an outcome. */
  private workerFailure(event: WorkerEvent | null, during: string): WireOutcome {
    this.kill();
    if (this.disposed) return errorOutcome('Error', 'the reward sandbox was disposed');
    if (event === null) return errorOutcome('Error', `the reward worker did not answer ${during}`);
    if (event.kind === 'error') return { error: event.error };
    return errorOutcome('Error', `the reward worker exited ${during}`);
  }

  /**
   * A ready worker and the call's deadline (now + timeoutMs, less what a reload took), or an
   * outcome for the call: a first load's failure (remembered: loading is deterministic), a reload
   * that ran out of the call's limit, or a failure of the worker itself.
   */
  private async ensureWorker(
    timeoutMs: number,
  ): Promise<{ live: LiveWorker; deadline: number } | WireOutcome> {
    if (this.live && !this.live.dead) {
      const deadline = Date.now() + timeoutMs;
      if (!this.live.needsLoad) return { live: this.live, deadline };
      return this.reload(this.live, deadline, timeoutMs);
    }
    const live: LiveWorker = {
      worker: null as unknown as SandboxWorker,
      waiter: null,
      inbox: [],
      dead: false,
      needsLoad: false,
    };
    const deliver = (event: WorkerEvent) => {
      if (event.kind !== 'message' && !live.dead) {
        live.dead = true;
        live.worker?.terminate();
      }
      if (live.waiter) live.waiter(event);
      else if (event.kind === 'message') live.inbox.push(event);
    };
    try {
      live.worker = this.spawn({
        message: (data) => deliver({ kind: 'message', data }),
        error: (error) => deliver({ kind: 'error', error }),
        exit: () => deliver({ kind: 'exit' }),
      });
    } catch (e) {
      return errorOutcome('Error', `could not start the reward worker: ${String(e)}`);
    }
    this.live = live;

    live.worker.post({ type: 'start', limits: this.limits });
    const started = await this.expect(
      live,
      Date.now() + STARTUP_TIMEOUT_MS,
      (m) => m.type === 'started' || m.type === 'start-error',
    );
    if (started === null || !('type' in started))
      return this.workerFailure(started, 'while starting');
    if (started.type === 'start-error') {
      this.kill();
      return errorOutcome('Error', `the reward engine could not start: ${started.message}`);
    }
    // A replacement worker (after a watchdog or an engine fault) loads within the call's limit.
    if (this.loadedOnce) return this.reload(live, Date.now() + timeoutMs, timeoutMs);

    live.worker.post({ type: 'load', source: this.source });
    const loaded = await this.awaitLoad(live);
    if (!('worker' in loaded)) return loaded;
    this.loadedOnce = true;
    return { live, deadline: Date.now() + timeoutMs };
  }

  /** The worker's answer to the source's first load. */
  private async awaitLoad(live: LiveWorker): Promise<LiveWorker | WireOutcome> {
    const loaded = await this.expect(
      live,
      Date.now() + this.limits.loadTimeoutMs + WATCHDOG_GRACE_MS,
      (m) => m.type === 'ready' || m.type === 'load-error',
    );
    if (loaded === null) {
      this.kill();
      this.loadFailure = errorOutcome(
        'TimeoutError',
        `the reward source did not finish loading within ${this.limits.loadTimeoutMs} ms`,
        { timedOut: true, loadFailed: true },
      );
      return this.loadFailure;
    }
    if (!('type' in loaded)) return this.workerFailure(loaded, 'while loading');
    if (loaded.type === 'ready') return live;
    this.kill();
    if (loaded.type !== 'load-error')
      return errorOutcome('Error', 'unexpected reward worker state');
    this.loadFailure = { error: loaded.error as WireError, loadFailed: true };
    if (loaded.timedOut) this.loadFailure.timedOut = true;
    return this.loadFailure;
  }

  /**
   * Loads the source again within what is left until `deadline` (the call's). A reload that does
   * not finish in time is this call's timeout, and the next call tries again within its own limit;
   * one whose top level throws this time fails this call only (it loaded before).
   */
  private async reload(
    live: LiveWorker,
    deadline: number,
    timeoutMs: number,
  ): Promise<{ live: LiveWorker; deadline: number } | WireOutcome> {
    live.needsLoad = true;
    const budget = Math.max(1, deadline - Date.now());
    live.worker.post({ type: 'load', source: this.source, timeoutMs: budget });
    const loaded = await this.expect(
      live,
      deadline + WATCHDOG_GRACE_MS,
      (m) => m.type === 'ready' || m.type === 'load-error',
    );
    const timeout = () =>
      errorOutcome(
        'TimeoutError',
        `exceeded the ${timeoutMs} ms time limit: loading the source again (after an earlier ` +
          'timeout or out-of-memory) took all of it',
        { timedOut: true },
      );
    if (loaded === null) {
      this.kill();
      return timeout();
    }
    if (!('type' in loaded)) return this.workerFailure(loaded, 'while loading');
    if (loaded.type === 'ready') {
      live.needsLoad = false;
      return { live, deadline };
    }
    if (loaded.type !== 'load-error') {
      this.kill();
      return errorOutcome('Error', 'unexpected reward worker state');
    }
    if (loaded.timedOut) return timeout();
    return { error: loaded.error as WireError };
  }

  private async callOne(input: RewardInput, timeoutMs: number): Promise<WireOutcome> {
    if (this.disposed) return errorOutcome('Error', 'the reward sandbox was disposed');
    if (this.loadFailure) return this.loadFailure;
    const ready = await this.ensureWorker(timeoutMs);
    if (!('live' in ready)) return ready;
    const { live, deadline } = ready;
    const budgetMs = deadline - Date.now();
    if (budgetMs <= 0) {
      return errorOutcome(
        'TimeoutError',
        `exceeded the ${timeoutMs} ms time limit: loading the source again took all of it`,
        { timedOut: true },
      );
    }
    const id = this.nextId++;
    try {
      live.worker.post({ type: 'call', id, input, timeoutMs, budgetMs });
    } catch (e) {
      // DataCloneError: the input itself cannot cross (not a user-code failure, but per call).
      return errorOutcome('DataCloneError', `the reward input could not be sent: ${String(e)}`);
    }
    const answer = await this.expect(
      live,
      deadline + WATCHDOG_GRACE_MS,
      (m) => m.type === 'result' && m.id === id,
    );
    if (answer === null) {
      // The engine did not stop at the limit by itself (a native loop): the watchdog ends it.
      this.kill();
      return errorOutcome('TimeoutError', `exceeded the ${timeoutMs} ms time limit`, {
        timedOut: true,
      });
    }
    if (!('type' in answer)) return this.workerFailure(answer, 'during the call');
    if (answer.type !== 'result') return errorOutcome('Error', 'unexpected reward worker state');
    this.lastLogs = answer.logs ?? [];
    if (answer.restart) this.kill();
    else if (answer.reload) live.needsLoad = true;
    return answer.outcome as WireOutcome;
  }
}

// ---------------------------------------------------------------------------------------------
// Several sandboxes behind one comlink-style API: a worker that owns sandboxes exposes
// createRewardWorkerApi, and another context uses them through remoteSandboxFactory.
// ---------------------------------------------------------------------------------------------

export interface RewardWorkerApi {
  open(handle: number, source: string, options?: SandboxOptions): void;
  score(handle: number, inputs: RewardInput[], timeoutMs: number): Promise<WireOutcome[]>;
  close(handle: number): void;
}

export function createRewardWorkerApi(
  create: (source: string, options?: SandboxOptions) => WorkerRewardSandbox,
): RewardWorkerApi {
  const sandboxes = new Map<number, WorkerRewardSandbox>();
  return {
    open(handle, source, options) {
      sandboxes.get(handle)?.dispose();
      sandboxes.set(handle, create(source, options));
    },
    async score(handle, inputs, timeoutMs) {
      const sandbox = sandboxes.get(handle);
      if (!sandbox) throw new RangeError(`no reward sandbox ${handle} (closed or never opened)`);
      return sandbox.scoreWire(inputs, timeoutMs);
    },
    close(handle) {
      sandboxes.get(handle)?.dispose();
      sandboxes.delete(handle);
    },
  };
}

/** What remoteSandboxFactory needs: a comlink Remote<RewardWorkerApi> fits. */
export interface RewardWorkerPort {
  open(handle: number, source: string, options?: SandboxOptions): unknown;
  score(handle: number, inputs: RewardInput[], timeoutMs: number): Promise<WireOutcome[]>;
  close(handle: number): unknown;
}

let nextHandle = 1;

/** Sandboxes living in a reward worker; one handle per source. */
export function remoteSandboxFactory(
  port: RewardWorkerPort,
  options?: SandboxOptions,
): SandboxFactory {
  return (source) => {
    const handle = nextHandle++;
    const opened = Promise.resolve(port.open(handle, source, options));
    return {
      async score(inputs, timeoutMs) {
        try {
          await opened;
          return (await port.score(handle, inputs.slice(), timeoutMs)).map(outcomeFromWire);
        } catch (e) {
          // The reward worker itself failed: one error per input, as score() never rejects.
          return inputs.map(() => ({ error: e }));
        }
      },
      dispose() {
        void opened.then(() => port.close(handle)).catch(() => undefined);
      },
    };
  };
}
