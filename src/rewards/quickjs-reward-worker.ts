// The worker side of the reward sandbox: runs ONE user reward source in QuickJS compiled to
// WebAssembly (quickjs-emscripten), so the user's code executes in an interpreter that has no
// host capabilities at all: no fetch, no import of anything, no process, no file system, no
// postMessage. It sees the ECMAScript built-ins, plain-data copies of its inputs, and what the
// harness below defines (console.*, setTimeout/clearTimeout, queueMicrotask), nothing else.
//
// Limits, per source (one QuickJS runtime in its own wasm instance):
// - memory: runtime.setMemoryLimit, and the wasm linear memory capped a little above it (QuickJS
//   does not count ArrayBuffers against its own limit); either way the guest gets
//   "InternalError: out of memory";
// - stack: runtime.setMaxStackSize; deep recursion throws "InternalError: stack overflow"; native
//   recursion that exhausts the host's stack first surfaces as a host RangeError, reported the same;
// - time: an interrupt handler stops the interpreter once the call's deadline has passed; promise
//   jobs and guest timers only run inside the call's budget.
// After a timeout, an out-of-memory or stray work left after a call, the result carries
// `reload: true` and this worker frees the runtime at once; the host sends `load` again before the
// next call (fresh heap, the source evaluated again, then `ready` or `load-error`), so no state of
// that call reaches the next one. That reload's `timeoutMs` is what is left of the next call's
// limit: a hostile top level cannot add its own running time to every call (issue 33). After an
// engine fault (an exception out of the wasm itself, e.g. the host's native stack exhausted) the
// result carries `restart: true` and the host (reward-sandbox.ts) replaces the whole worker. A few
// native loops in QuickJS never consult the interrupt handler (String.prototype.indexOf on long
// strings, reverse or copyWithin on huge sparse arrays): the host's watchdog terminates the worker
// then, which is why QuickJS runs in a worker even though it is itself the containment.
//
// serveQuickJsReward must stay self-contained (no reference to anything outside its body, types
// excepted): reward-sandbox-node.ts ships its source text into a worker_threads eval worker, where
// it gets quickjs-emscripten-core and the release-sync wasm variant through require();
// workers/reward.worker.ts calls it directly.
import type {
  QuickJSContext,
  QuickJSHandle,
  QuickJSRuntime,
  QuickJSWASMModule,
} from 'quickjs-emscripten-core';

/** What the host sends: `start` (instantiate the engine), `load` once `started`, then `call`s one
 * at a time. */
export type ToRewardWorker =
  | { type: 'start'; limits: QuickJsLimits }
  /** timeoutMs: this load's limit from when it arrives (default limits.loadTimeoutMs, counted
   * from the source's first line) */
  | { type: 'load'; source: string; timeoutMs?: number }
  /** timeoutMs: the call's limit as the user set it (its message names it); budgetMs: the time
   * this call may run (less than timeoutMs when a reload took the rest), default timeoutMs. */
  | { type: 'call'; id: number; input: unknown; timeoutMs: number; budgetMs?: number };

/** What the worker answers. Errors are WireErrors (reward-sandbox.ts), outcomes WireOutcomes. */
export type FromRewardWorker =
  | { type: 'started' }
  | { type: 'start-error'; message: string }
  | { type: 'ready' }
  | { type: 'load-error'; error: unknown; timedOut?: boolean }
  | {
      type: 'result';
      id: number;
      outcome: unknown;
      reload?: boolean;
      restart?: boolean;
      logs?: string[];
    };

export interface QuickJsLimits {
  loadTimeoutMs: number;
  memoryLimitBytes: number;
  stackLimitBytes: number;
}

export interface QuickJsWorkerPort {
  post(message: FromRewardWorker): void;
  listen(handler: (message: unknown) => void): void;
}

export function serveQuickJsReward(
  loadQuickJs: (memory: WebAssembly.Memory) => Promise<QuickJSWASMModule>,
  port: QuickJsWorkerPort,
): void {
  /** The user's file name in QuickJS stack frames: "at reward (reward.js:2:13)". */
  const FILE = 'reward.js';
  const FRAME = /reward\.js:(\d+):(\d+)/;
  /** Longest error message or returned string taken from the guest. */
  const MAX_TEXT = 2000;
  /** console output kept per call: lines and characters. */
  const MAX_LOG_LINES = 50;
  const MAX_LOG_CHARS = 4000;
  /** Jobs run between two checks of the deadline by the host. */
  const JOB_SLICE = 256;
  /** Budget for reading an error's name/message (getters are guest code). */
  const EXTRACT_MS = 100;

  // Defined before the user's source runs; it keeps its own references to the built-ins it uses,
  // so user code that replaces globals changes only what the user's own code sees. Returns the
  // functions the host keeps handles to: the user can neither reach nor replace those.
  const HARNESS = `(function (hostLog) {
  'use strict';
  var S = String, P = Promise, apply = Reflect.apply, push = Array.prototype.push,
    join = Array.prototype.join, splice = Array.prototype.splice, substring = String.prototype.substring,
    now = Date.now, isF = Number.isFinite;
  var timers = [], nextId = 1;
  function text(args) {
    var parts = [];
    for (var i = 0; i < args.length; i++) {
      var v = args[i], s;
      try { s = typeof v === 'string' ? v : S(v); } catch (e) { s = '[unprintable]'; }
      apply(push, parts, [s]);
    }
    return apply(join, parts, [' ']);
  }
  function log(level) {
    return function () { hostLog(level, text(arguments)); };
  }
  globalThis.console = { log: log('log'), info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug') };
  globalThis.setTimeout = function (fn, ms) {
    if (typeof fn !== 'function') throw new TypeError('setTimeout needs a function (strings are not evaluated)');
    var args = [];
    for (var i = 2; i < arguments.length; i++) apply(push, args, [arguments[i]]);
    var delay = +ms;
    var id = nextId++;
    apply(push, timers, [{ id: id, due: now() + (isF(delay) && delay > 0 ? delay : 0), fn: fn, args: args }]);
    return id;
  };
  globalThis.clearTimeout = function (id) {
    for (var i = 0; i < timers.length; i++) if (timers[i].id === id) { apply(splice, timers, [i, 1]); return; }
  };
  globalThis.queueMicrotask = function (fn) {
    if (typeof fn !== 'function') throw new TypeError('queueMicrotask needs a function');
    P.resolve().then(function () { fn(); });
  };
  return {
    adopt: function (v) {
      return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function'
        ? new P(function (resolve) { resolve(v); }) : v;
    },
    nextDue: function () {
      var due = -1;
      for (var i = 0; i < timers.length; i++) if (due < 0 || timers[i].due < due) due = timers[i].due;
      return due;
    },
    // Runs the earliest timer due by t; an error it throws fails the call (an uncaught error).
    fire: function (t) {
      var best = -1;
      for (var i = 0; i < timers.length; i++)
        if (timers[i].due <= t && (best < 0 || timers[i].due < timers[best].due)) best = i;
      if (best < 0) return undefined;
      var timer = apply(splice, timers, [best, 1])[0];
      try { apply(timer.fn, undefined, timer.args); } catch (e) { return { error: e }; }
      return undefined;
    },
    reset: function () { timers = []; },
    str: function (v) { try { return S(v); } catch (e) { return 'an unprintable value was thrown'; } },
    parse: JSON.parse,
    head: function (s, n) { return apply(substring, s, [0, n]); },
  };
})`;

  interface Harness {
    adopt: QuickJSHandle;
    nextDue: QuickJSHandle;
    fire: QuickJSHandle;
    reset: QuickJSHandle;
    str: QuickJSHandle;
    parse: QuickJSHandle;
    head: QuickJSHandle;
  }
  interface WireErr {
    name: string | null;
    message: string;
    line?: number;
    column?: number;
  }
  type Outcome =
    { value: unknown } | { valueType: string } | { error: WireErr; timedOut?: boolean };

  /** Linear memory beyond the QuickJS limit: the interpreter's own stack and bookkeeping. */
  const MEMORY_HEADROOM = 32 * 1024 * 1024;
  const WASM_PAGE = 65536;
  /** What emscripten starts the instance with (its INITIAL_MEMORY). */
  const INITIAL_PAGES = 256;

  let module: QuickJSWASMModule | null = null;
  let runtime: QuickJSRuntime | null = null;
  let ctx: QuickJSContext | null = null;
  let harness: Harness | null = null;
  let rewardFn: QuickJSHandle | null = null;
  let deadline = Infinity;
  let interrupted = false;
  let logs: string[] = [];
  let logChars = 0;
  let queue: Promise<unknown> = Promise.resolve();

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

  function hostLog(level: string, line: string): void {
    if (logs.length >= MAX_LOG_LINES || logChars >= MAX_LOG_CHARS) return;
    const entry = (level === 'log' ? '' : `[${level}] `) + line;
    const room = MAX_LOG_CHARS - logChars;
    const kept = entry.length > room ? entry.slice(0, room) + '…' : entry;
    logs.push(kept);
    logChars += kept.length;
    if (logs.length === MAX_LOG_LINES || logChars >= MAX_LOG_CHARS)
      logs.push('… (console output capped)');
  }

  /** A guest string, at most MAX_TEXT characters, read without running guest code. */
  function readString(c: QuickJSContext, h: QuickJSHandle): string {
    const len = c.getProp(h, 'length').consume((l) => c.getNumber(l));
    if (len <= MAX_TEXT) return c.getString(h);
    if (!harness) return '(a string too long to show)';
    const n = c.newNumber(MAX_TEXT);
    const r = c.callFunction(harness.head, c.undefined, h, n);
    n.dispose();
    if (r.error) {
      r.error.dispose();
      return '(a string too long to show)';
    }
    return r.value.consume((s) => c.getString(s)) + '…';
  }

  /** Error → { name, message, line, column } the way the old harness encoded it. */
  function encodeError(c: QuickJSContext, e: QuickJSHandle): WireErr {
    const saved = deadline;
    deadline = Date.now() + EXTRACT_MS;
    try {
      const t = c.typeof(e);
      if (t === 'object' && !c.sameValue(e, c.null)) {
        const message = c.getProp(e, 'message');
        try {
          if (c.typeof(message) === 'string') {
            const nameH = c.getProp(e, 'name');
            const name = c.typeof(nameH) === 'string' ? readString(c, nameH) || 'Error' : 'Error';
            nameH.dispose();
            const out: WireErr = { name, message: readString(c, message) };
            const stack = c.getProp(e, 'stack');
            if (c.typeof(stack) === 'string') {
              const m = FRAME.exec(readString(c, stack));
              if (m) {
                out.line = Number(m[1]);
                out.column = Number(m[2]);
              }
            }
            stack.dispose();
            return out;
          }
        } finally {
          message.dispose();
        }
      }
      if (t === 'string') return { name: null, message: readString(c, e) };
      const r = c.callFunction(harness!.str, c.undefined, e);
      if (r.error) {
        r.error.dispose();
        return { name: null, message: 'an unprintable value was thrown' };
      }
      return r.value.consume((s) =>
        c.typeof(s) === 'string'
          ? { name: null, message: readString(c, s) }
          : { name: null, message: 'an unprintable value was thrown' },
      );
    } catch {
      return { name: null, message: 'an unprintable value was thrown' };
    } finally {
      deadline = saved;
    }
  }

  function encodeValue(c: QuickJSContext, v: QuickJSHandle): Outcome {
    const t = c.typeof(v);
    if (t === 'number') return { value: c.getNumber(v) };
    if (t === 'undefined') return { value: undefined };
    if (t === 'object' && c.sameValue(v, c.null)) return { value: null };
    if (t === 'boolean') return { value: c.sameValue(v, c.true) };
    if (t === 'string') return { value: readString(c, v) };
    return { valueType: t };
  }

  const timeoutOutcome = (timeoutMs: number): Outcome => ({
    error: { name: 'TimeoutError', message: `exceeded the ${timeoutMs} ms time limit` },
    timedOut: true,
  });

  /** A JS exception thrown out of the wasm (not a guest exception): the instance is unusable. */
  function engineFault(e: unknown): WireErr {
    if (e instanceof RangeError) return { name: 'InternalError', message: 'stack overflow' };
    return {
      name: 'InternalError',
      message: `the reward engine failed (${e instanceof Error ? e.message : String(e)})`,
    };
  }

  function isOutOfMemory(err: WireErr): boolean {
    return err.name === 'InternalError' && err.message === 'out of memory';
  }

  // QuickJS's own limit (setMemoryLimit) does not count every allocation in this build:
  // ArrayBuffers are not counted (8 MB typed arrays grew an instance to its 2 GiB maximum). So the
  // wasm linear memory itself gets a maximum a little above the limit; emscripten treats a refused
  // grow() as malloc failure, which QuickJS reports as "InternalError: out of memory".
  function instantiate(limits: QuickJsLimits): Promise<QuickJSWASMModule> {
    const maximum = Math.ceil((limits.memoryLimitBytes + MEMORY_HEADROOM) / WASM_PAGE);
    return loadQuickJs(
      new WebAssembly.Memory({ initial: Math.min(INITIAL_PAGES, maximum), maximum }),
    );
  }

  /** Frees the runtime; if QuickJS cannot free it cleanly, the whole wasm instance goes. */
  function unload(): void {
    const handles = [...(harness ? Object.values(harness) : []), rewardFn];
    harness = null;
    rewardFn = null;
    try {
      for (const h of handles) if (h?.alive) h.dispose();
      ctx?.dispose();
      runtime?.dispose();
    } catch {
      module = null;
    }
    ctx = null;
    runtime = null;
  }

  async function load(
    source: string,
    limits: QuickJsLimits,
    budgetMs?: number,
  ): Promise<FromRewardWorker> {
    const arrived = Date.now();
    unload();
    module ??= await instantiate(limits);
    const rt = module.newRuntime();
    runtime = rt;
    rt.setMemoryLimit(limits.memoryLimitBytes);
    rt.setMaxStackSize(limits.stackLimitBytes);
    rt.setInterruptHandler(() => {
      if (Date.now() <= deadline) return false;
      interrupted = true;
      return true;
    });
    const c = rt.newContext();
    ctx = c;
    // The harness (and the interpreter's first, slow, run: wasm functions compile lazily) before
    // the user's time starts.
    const setup = c.evalCode(HARNESS, '<harness>');
    if (setup.error) {
      const error = encodeError(c, setup.error);
      setup.error.dispose();
      return { type: 'load-error', error };
    }
    const logFn = c.newFunction('hostLog', (level, line) => {
      if (c.typeof(level) === 'string' && c.typeof(line) === 'string')
        hostLog(c.getString(level).slice(0, 10), readString(c, line));
    });
    const made = c.callFunction(setup.value, c.undefined, logFn);
    setup.value.dispose();
    logFn.dispose();
    if (made.error) {
      const error = encodeError(c, made.error);
      made.error.dispose();
      return { type: 'load-error', error };
    }
    harness = {
      adopt: c.getProp(made.value, 'adopt'),
      nextDue: c.getProp(made.value, 'nextDue'),
      fire: c.getProp(made.value, 'fire'),
      reset: c.getProp(made.value, 'reset'),
      str: c.getProp(made.value, 'str'),
      parse: c.getProp(made.value, 'parse'),
      head: c.getProp(made.value, 'head'),
    };
    made.value.dispose();

    // A first load's limit starts here, after the harness; a reload's covers all of it.
    const loadMs = budgetMs ?? limits.loadTimeoutMs;
    deadline = budgetMs === undefined ? Date.now() + loadMs : arrived + loadMs;
    interrupted = false;
    const timedOut = () => ({
      type: 'load-error' as const,
      error: {
        name: 'TimeoutError',
        message: `the reward source did not finish loading within ${loadMs} ms`,
      },
      timedOut: true,
    });
    const ran = c.evalCode(source, FILE);
    if (ran.error) {
      if (interrupted) {
        ran.error.dispose();
        return timedOut();
      }
      const error = encodeError(c, ran.error);
      ran.error.dispose();
      return { type: 'load-error', error };
    }
    ran.value.dispose();
    // Jobs the top level queued run within the load budget too.
    const jobs = rt.executePendingJobs();
    if (jobs.error) {
      const error = encodeError(c, jobs.error);
      jobs.error.dispose();
      if (interrupted) return timedOut();
      return { type: 'load-error', error };
    }
    const found = c.evalCode(`typeof reward === 'undefined' ? undefined : reward`, '<harness>');
    deadline = Infinity;
    if (found.error) {
      const error = encodeError(c, found.error);
      found.error.dispose();
      return { type: 'load-error', error };
    }
    const kind = c.typeof(found.value);
    if (kind !== 'function') {
      found.value.dispose();
      return {
        type: 'load-error',
        error: {
          name: 'TypeError',
          message:
            'the source must define a function named reward' +
            (kind === 'undefined' ? '' : ` (reward is a ${kind})`),
        },
      };
    }
    rewardFn = found.value;
    return { type: 'ready' };
  }

  /** Runs one call to its outcome; true when this runtime should not serve another call. */
  async function call(
    input: unknown,
    timeoutMs: number,
    budgetMs: number,
  ): Promise<[Outcome, boolean]> {
    const c = ctx!;
    const rt = runtime!;
    const h = harness!;
    deadline = Date.now() + budgetMs;
    interrupted = false;
    logs = [];
    logChars = 0;
    const reset = c.callFunction(h.reset, c.undefined);
    (reset.error ?? reset.value).dispose();

    // Plain data only: the input crosses as JSON text and is parsed by the guest's own JSON.
    const json = c.newString(JSON.stringify(input) ?? 'null');
    const parsed = c.callFunction(h.parse, c.undefined, json);
    json.dispose();
    if (parsed.error) {
      const error = encodeError(c, parsed.error);
      parsed.error.dispose();
      return [{ error }, true];
    }
    const called = c.callFunction(rewardFn!, c.undefined, parsed.value);
    parsed.value.dispose();
    if (called.error) {
      const error = encodeError(c, called.error);
      called.error.dispose();
      if (interrupted) return [timeoutOutcome(timeoutMs), true];
      return [{ error }, isOutOfMemory(error)];
    }
    let promise = called.value;
    const type = c.typeof(promise);
    let state = c.getPromiseState(promise);
    if (
      state.type === 'fulfilled' &&
      state.notAPromise &&
      (type === 'object' || type === 'function')
    ) {
      // A thenable that is not a native promise is adopted, as `await` would.
      const adopted = c.callFunction(h.adopt, c.undefined, promise);
      promise.dispose();
      if (adopted.error) {
        const error = encodeError(c, adopted.error);
        adopted.error.dispose();
        return [interrupted ? timeoutOutcome(timeoutMs) : { error }, interrupted];
      }
      promise = adopted.value;
      state = c.getPromiseState(promise);
    }
    try {
      for (;;) {
        if (state.type !== 'pending') break;
        if (rt.hasPendingJob()) {
          if (Date.now() > deadline) return [timeoutOutcome(timeoutMs), true];
          const ran = rt.executePendingJobs(JOB_SLICE);
          if (ran.error) {
            const error = encodeError(c, ran.error);
            ran.error.dispose();
            if (interrupted) return [timeoutOutcome(timeoutMs), true];
            return [{ error }, true];
          }
          state = c.getPromiseState(promise);
          continue;
        }
        const next = c.callFunction(h.nextDue, c.undefined);
        if (next.error) {
          const error = encodeError(c, next.error);
          next.error.dispose();
          return [interrupted ? timeoutOutcome(timeoutMs) : { error }, true];
        }
        const due = next.value.consume((d) => (c.typeof(d) === 'number' ? c.getNumber(d) : -1));
        if (due < 0 || due > deadline) {
          // Nothing left that could settle it within the budget (a promise that never settles).
          await sleep(deadline - Date.now() + 1);
          return [timeoutOutcome(timeoutMs), true];
        }
        await sleep(due - Date.now());
        const now = c.newNumber(Date.now());
        const fired = c.callFunction(h.fire, c.undefined, now);
        now.dispose();
        if (fired.error) {
          const error = encodeError(c, fired.error);
          fired.error.dispose();
          return [interrupted ? timeoutOutcome(timeoutMs) : { error }, true];
        }
        const thrown = fired.value.consume((f) =>
          c.typeof(f) === 'object' && !c.sameValue(f, c.undefined) && !c.sameValue(f, c.null)
            ? c.getProp(f, 'error')
            : null,
        );
        if (thrown) {
          const error = encodeError(c, thrown);
          thrown.dispose();
          return [{ error }, true];
        }
        state = c.getPromiseState(promise);
      }
      let outcome: Outcome;
      if (state.type === 'fulfilled') {
        outcome = encodeValue(c, state.value);
        if (!state.notAPromise) state.value.dispose();
      } else {
        const rejected = state as { error: QuickJSHandle };
        const error = encodeError(c, rejected.error);
        rejected.error.dispose();
        if (interrupted) return [timeoutOutcome(timeoutMs), true];
        outcome = { error };
        if (isOutOfMemory(error)) return [outcome, true];
      }
      // Stray jobs (fire-and-forget promises) finish within this call's budget, or this runtime
      // is replaced so that they never run in a later call's.
      while (rt.hasPendingJob() && Date.now() <= deadline) {
        const ran = rt.executePendingJobs(JOB_SLICE);
        if (ran.error) {
          ran.error.dispose();
          return [outcome, true];
        }
      }
      return [outcome, rt.hasPendingJob()];
    } finally {
      if (promise.alive) promise.dispose();
    }
  }

  let limits: QuickJsLimits | null = null;
  let source: string | null = null;

  async function handle(message: unknown): Promise<void> {
    if (message === null || typeof message !== 'object') return;
    const m = message as ToRewardWorker;
    if (m.type === 'start') {
      limits = m.limits;
      try {
        module = await instantiate(limits);
        port.post({ type: 'started' });
      } catch (e) {
        port.post({ type: 'start-error', message: e instanceof Error ? e.message : String(e) });
      }
      return;
    }
    if (m.type === 'load') {
      source = m.source;
      port.post(await safeLoad(m.timeoutMs));
      return;
    }
    if (m.type === 'call') {
      let outcome: Outcome;
      let reload: boolean;
      let restart = false;
      try {
        if (!rewardFn) throw new Error('the reward source is not loaded');
        [outcome, reload] = await call(m.input, m.timeoutMs, m.budgetMs ?? m.timeoutMs);
      } catch (e) {
        outcome = { error: engineFault(e) };
        reload = false;
        restart = true;
      }
      deadline = Infinity;
      const result: FromRewardWorker = { type: 'result', id: m.id, outcome, logs };
      if (restart) result.restart = true;
      else if (reload) result.reload = true;
      port.post(result);
      // The host loads the source again before the next call, within that call's limit; the
      // stopped call's heap goes now.
      if (reload && !restart) unload();
    }
  }

  async function safeLoad(budgetMs?: number): Promise<FromRewardWorker> {
    try {
      if (source === null || limits === null) throw new Error('no source to load');
      return await load(source, limits, budgetMs);
    } catch (e) {
      return { type: 'load-error', error: engineFault(e) };
    } finally {
      deadline = Infinity;
    }
  }

  port.listen((message) => {
    queue = queue.then(() => handle(message)).catch(() => undefined);
  });
}
