// Sandbox for user JavaScript rewards: the platform-neutral part (the harness script, the message
// protocol and the host that enforces the per-call time limit). The user's code runs in its own
// worker so that an infinite loop can be stopped by terminating the worker;
// reward-sandbox-browser.ts (Blob-URL Worker) and reward-sandbox-node.ts (worker_threads) only
// say how to start one.
//
// The user's source must define a function named `reward`:
//     function reward({ completion, prompt, problem }) { … return number | null }
// It may be async. The source is pasted into the worker's script text (never eval'd: the app's
// CSP has no 'unsafe-eval'), inside a function, so its top-level declarations are local to it and
// it sees only the worker's globals. A syntax error, a throw while the source loads or a missing
// `reward` is a load failure: every call reports it (kind 'invalid' where the caller can say so).
//
// Per call: when `reward` has not settled within timeoutMs the worker is terminated, the call
// gives a timeout outcome, and the next call starts a fresh worker (paying the start-up again,
// which is not counted against the limit). Calls run one at a time, in order.

import type { RewardInput, RewardOutcome } from './rewards';

/** A RewardOutcome that may also say the source could not be loaded at all. */
export type SandboxOutcome =
  { value: unknown } | { error: unknown; timedOut?: boolean; loadFailed?: boolean };

/** One user source, running in its own worker. */
export interface RewardSandbox {
  /** One outcome per input, in order. Failures are outcomes; rejects only for timeoutMs ≤ 0. */
  score(inputs: readonly RewardInput[], timeoutMs: number): Promise<SandboxOutcome[]>;
  /** Terminates the worker; later calls report an error outcome. */
  dispose(): void;
}

export type SandboxFactory = (source: string) => RewardSandbox;

export interface SandboxOptions {
  /** Limit on starting the worker and running the source's top level (not counted per call). */
  loadTimeoutMs?: number;
}

/** Start-up of a worker (thread creation, parsing) can take a second on a busy 2-core machine. */
export const DEFAULT_LOAD_TIMEOUT_MS = 5000;

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
  /** Only from the harness to the host, which turns it into line/column and drops it. */
  stack?: string;
}

// A frame of the harness script in a V8 stack: "[worker eval]:12:9" (Node) or
// "blob:http://host/uuid:12:9" (browser).
const SCRIPT_FRAME = /(?:\[worker eval\]|blob:[^\s)]+):(\d+):(\d+)/;

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
// Harness script. One classic script:
//   (HARNESS)(PRELUDE-IIFE, function () { <user source> ; return reward; });
// The prelude runs first (argument order) and captures postMessage before user code can touch
// it; the user function is created at script top level, so it closes over no harness variable.
// ---------------------------------------------------------------------------------------------

export type SandboxPlatform = 'browser' | 'node';

// Browser: the Blob worker has the page's origin, so without this the reward could open the app's
// IndexedDB (checkpoints), Cache API, OPFS, talk on BroadcastChannels or start further workers
// (each with fresh globals). The network APIs go too: a reward scores text and needs none, and the
// app's CSP allows https: in connect-src (models load from user-given URLs), so a reward that
// arrived in a shared link could otherwise send the completions anywhere. Removed from the
// instance and its prototypes before user code runs. Defense in depth, not a proof.
const BROWSER_PRELUDE = `function () {
  var post = self.postMessage.bind(self);
  var add = self.addEventListener.bind(self);
  var drop = ['indexedDB', 'caches', 'BroadcastChannel', 'Worker', 'SharedWorker', 'importScripts',
    'fetch', 'XMLHttpRequest', 'WebSocket', 'EventSource', 'WebTransport'];
  for (var o = self; o; o = Object.getPrototypeOf(o)) {
    for (var i = 0; i < drop.length; i++) {
      try { delete o[drop[i]]; } catch (e) {}
    }
  }
  try {
    for (var n = Object.getPrototypeOf(self.navigator); n; n = Object.getPrototypeOf(n)) {
      delete n.storage;
    }
  } catch (e) {}
  return { post: post, listen: function (f) { add('message', function (e) { f(e.data); }); } };
}`;

// Node: an eval'd worker gets require/module/__dirname as globals. Removed so a reward that runs
// in the CLI also runs in the browser. The worker's own \`process\` stays (its env is empty, see
// reward-sandbox-node.ts) and process.getBuiltinModule still reaches fs, net …: in Node this is
// a time limit and a fault boundary, NOT a security boundary.
const NODE_PRELUDE = `function () {
  var port = require('worker_threads').parentPort;
  var drop = ['require', 'module', 'exports', '__filename', '__dirname'];
  for (var i = 0; i < drop.length; i++) {
    try { delete globalThis[drop[i]]; } catch (e) {}
  }
  return { post: function (m) { port.postMessage(m); }, listen: function (f) { port.on('message', f); } };
}`;

const HARNESS = `function (host, load) {
  function encodeError(e) {
    try {
      if (e !== null && typeof e === 'object' && typeof e.message === 'string') {
        var out = { name: String(e.name || 'Error'), message: e.message };
        if (typeof e.stack === 'string') out.stack = e.stack.slice(0, 4000);
        return out;
      }
      return { name: null, message: String(e) };
    } catch (_) {
      return { name: null, message: 'an unprintable value was thrown' };
    }
  }
  function encodeValue(v) {
    var t = typeof v;
    if (v === null || t === 'number' || t === 'string' || t === 'boolean' || t === 'bigint' || t === 'undefined') {
      return { value: v };
    }
    return { valueType: t };
  }
  var fn;
  try {
    fn = load();
  } catch (e) {
    host.post({ type: 'load-error', error: encodeError(e) });
    return;
  }
  if (typeof fn !== 'function') {
    host.post({ type: 'load-error', error: { name: 'TypeError', message:
      'the source must define a function named reward' + (fn === undefined ? '' : ' (reward is a ' + typeof fn + ')') } });
    return;
  }
  host.listen(function (m) {
    if (m === null || typeof m !== 'object' || m.type !== 'call') return;
    var id = m.id;
    new Promise(function (resolve) { resolve(fn(m.input)); }).then(
      function (v) { host.post({ type: 'result', id: id, outcome: encodeValue(v) }); },
      function (e) { host.post({ type: 'result', id: id, outcome: { error: encodeError(e) } }); }
    );
  });
  host.post({ type: 'ready' });
}`;

export interface HarnessScript {
  script: string;
  /** 1-based line of the script on which the user's source starts. */
  sourceLine: number;
}

export function buildHarness(source: string, platform: SandboxPlatform): HarnessScript {
  const prelude = platform === 'browser' ? BROWSER_PRELUDE : NODE_PRELUDE;
  const head = `(${HARNESS})((${prelude})(), function () {\n`;
  // The newline before the tail ends a trailing // comment in the source.
  const tail = `\n;return typeof reward === 'undefined' ? undefined : reward;\n});\n`;
  return { script: head + source + tail, sourceLine: head.split('\n').length };
}

// ---------------------------------------------------------------------------------------------
// Host side: drives one worker per source through the protocol, with the time limits.
// ---------------------------------------------------------------------------------------------

/** What the host sends to a harness. */
export interface CallMessage {
  type: 'call';
  id: number;
  input: RewardInput;
}

export interface SandboxWorker {
  post(message: CallMessage): void;
  terminate(): void;
}

/** Worker events; `error` is an uncaught error in the worker (a syntax error at start-up, an
 * error thrown outside the reward's promise), `line` relative to the whole script. */
export interface SandboxWorkerEvents {
  message(data: unknown): void;
  error(error: WireError): void;
  exit(): void;
}

export type SpawnSandboxWorker = (script: string, events: SandboxWorkerEvents) => SandboxWorker;

type WorkerEvent =
  { kind: 'message'; data: unknown } | { kind: 'error'; error: WireError } | { kind: 'exit' };

interface LiveWorker {
  worker: SandboxWorker;
  /** The waiter for the next event; events with nobody waiting only mark a dead worker. */
  waiter: ((event: WorkerEvent) => void) | null;
  dead: boolean;
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
  private readonly harness: HarnessScript;
  private readonly loadTimeoutMs: number;

  constructor(
    source: string,
    platform: SandboxPlatform,
    private readonly spawn: SpawnSandboxWorker,
    options: SandboxOptions = {},
  ) {
    this.harness = buildHarness(source, platform);
    this.loadTimeoutMs = options.loadTimeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS;
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

  private mapLine(e: WireError): WireError {
    if (e.line === undefined) return e;
    const line = e.line - this.harness.sourceLine + 1;
    return line >= 1 ? { ...e, line } : { name: e.name, message: e.message };
  }

  /** Where in the user's source a thrown Error came from (first frame in the script). */
  private locate(outcome: WireOutcome): WireOutcome {
    if (!('error' in outcome) || outcome.error.stack === undefined) return outcome;
    const { stack, ...error } = outcome.error;
    const m = SCRIPT_FRAME.exec(stack);
    if (m) Object.assign(error, { line: Number(m[1]), column: Number(m[2]) });
    return { ...outcome, error: this.mapLine(error) };
  }

  /** A ready worker, or a load-failure outcome (remembered: loading is deterministic). */
  private async ensureWorker(): Promise<LiveWorker | WireOutcome> {
    if (this.live && !this.live.dead) return this.live;
    const live: LiveWorker = {
      worker: null as unknown as SandboxWorker,
      waiter: null,
      dead: false,
    };
    const deliver = (event: WorkerEvent) => {
      if (event.kind !== 'message' && !live.dead) {
        // A browser worker survives an uncaught error, but its state is unknown: start afresh.
        live.dead = true;
        live.worker?.terminate();
      }
      live.waiter?.(event);
    };
    try {
      live.worker = this.spawn(this.harness.script, {
        message: (data) => deliver({ kind: 'message', data }),
        error: (error) => deliver({ kind: 'error', error }),
        exit: () => deliver({ kind: 'exit' }),
      });
    } catch (e) {
      return errorOutcome('Error', `could not start the reward worker: ${String(e)}`);
    }
    this.live = live;
    for (;;) {
      const event = await this.next(live, this.loadTimeoutMs);
      if (event === null) {
        this.kill();
        this.loadFailure = errorOutcome(
          'TimeoutError',
          `the reward source did not finish loading within ${this.loadTimeoutMs} ms`,
          { timedOut: true, loadFailed: true },
        );
        return this.loadFailure;
      }
      if (event.kind === 'message') {
        const m = event.data;
        if (!isRecord(m)) continue;
        if (m.type === 'ready') return live;
        if (m.type === 'load-error') {
          this.kill();
          this.loadFailure = this.locate({ error: m.error as WireError, loadFailed: true });
          return this.loadFailure;
        }
        continue;
      }
      this.kill();
      if (this.disposed) return errorOutcome('Error', 'the reward sandbox was disposed');
      this.loadFailure =
        event.kind === 'error'
          ? { error: this.mapLine(event.error), loadFailed: true }
          : errorOutcome('Error', 'the reward worker exited while loading', { loadFailed: true });
      return this.loadFailure;
    }
  }

  private async callOne(input: RewardInput, timeoutMs: number): Promise<WireOutcome> {
    if (this.disposed) return errorOutcome('Error', 'the reward sandbox was disposed');
    if (this.loadFailure) return this.loadFailure;
    const ready = await this.ensureWorker();
    if (!('worker' in ready)) return ready;
    const live = ready;
    const id = this.nextId++;
    try {
      live.worker.post({ type: 'call', id, input });
    } catch (e) {
      // DataCloneError: the input itself cannot cross (not a user-code failure, but per call).
      return errorOutcome('DataCloneError', `the reward input could not be sent: ${String(e)}`);
    }
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const event = await this.next(live, Math.max(0, deadline - Date.now()));
      if (event === null) {
        this.kill();
        return errorOutcome('TimeoutError', `exceeded the ${timeoutMs} ms time limit`, {
          timedOut: true,
        });
      }
      if (event.kind === 'message') {
        const m = event.data;
        if (isRecord(m) && m.type === 'result' && m.id === id)
          return this.locate(m.outcome as WireOutcome);
        continue; // stale results of a previous worker, or the user's own postMessage
      }
      this.kill();
      if (this.disposed) return errorOutcome('Error', 'the reward sandbox was disposed');
      if (event.kind === 'error') return { error: this.mapLine(event.error) };
      return errorOutcome('Error', 'the reward worker exited during the call');
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The reward worker (workers/reward.worker.ts) exposes this over comlink; the trainer worker or
// the page talks to it through remoteSandboxFactory.
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
