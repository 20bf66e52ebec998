// Paces the `webgpu` package's (Dawn's) event pump in Node. While any Dawn promise is pending
// (onSubmittedWorkDone, mapAsync, an async pipeline compile), dawn.node keeps calling
// `setImmediate` with a fresh native callback that processes Dawn's events and schedules the next
// one: a busy loop that holds a whole CPU core and allocates an Immediate and a function per turn
// of the event loop, for as long as the GPU works. On a GPU that core is only wasted. On CPU
// emulation (SwiftShader, every test and CI run) it is taken from the emulator's own threads:
// on 2 cores the aha preset's steps ran 1.7× slower for it, and a quarter of the main thread's
// time went to collecting the loop's garbage (docs/guide/engine.md#node-dawns-event-pump).
//
// The pump's callbacks are told apart from everyone else's by their shape: a native function
// (Napi::Function::New) of no parameters, passed with no arguments. A promise's resolve function is
// native too but takes one parameter; a JS callback's source is not "[native code]". A chain of
// such callbacks, each scheduled from inside the one before, is one wait: for its first
// SPIN_MILLISECONDS it runs at full speed, so a short wait on a real GPU returns as fast as before;
// after that each turn waits for the next timer tick (about 1 ms), so a long wait costs at most
// about 1 ms of latency and no longer a core.

/** How long a wait spins before it is paced (ms). */
export const SPIN_MILLISECONDS = 1;

type Immediate = (callback: (...args: unknown[]) => void, ...args: unknown[]) => unknown;

const PACED = Symbol.for('grpo-playground.dawnEventPumpPaced');

/** What pacing did since install (tests read these to see that it acted on Dawn's callbacks). */
export const pumpStats = { dawnTurns: 0, pacedTurns: 0 };

const nativeSource = Function.prototype.toString;

/** True for the pump's callback: a native function of no parameters, passed with no arguments. */
export function isDawnPumpCallback(callback: unknown, args: readonly unknown[]): boolean {
  return (
    typeof callback === 'function' &&
    args.length === 0 &&
    callback.length === 0 &&
    callback.name === '' &&
    nativeSource.call(callback).endsWith('{ [native code] }')
  );
}

/**
 * Installs the pacing on `target` (globalThis in use; tests pass their own), once. Everything that
 * is not Dawn's pump keeps the original setImmediate untouched.
 */
export function paceDawnEventPump(
  target: { setImmediate: Immediate; setTimeout: Immediate } = globalThis as never,
  now: () => number = () => performance.now(),
): void {
  const holder = target as unknown as Record<symbol, boolean>;
  if (holder[PACED]) return;
  holder[PACED] = true;
  const immediate = target.setImmediate;
  const timeout = target.setTimeout;
  // Whether the code running now is a pump callback (so a callback it schedules continues a wait),
  // and when the wait being pumped began.
  let insidePump = false;
  let waitStartedAt = 0;
  const paced: Immediate = function (this: unknown, callback, ...args) {
    if (!isDawnPumpCallback(callback, args)) return immediate.call(this, callback, ...args);
    pumpStats.dawnTurns += 1;
    if (!insidePump) waitStartedAt = now();
    const turn = () => {
      insidePump = true;
      try {
        callback();
      } finally {
        insidePump = false;
      }
    };
    if (insidePump && now() - waitStartedAt > SPIN_MILLISECONDS) {
      pumpStats.pacedTurns += 1;
      return timeout.call(this, turn, 0);
    }
    return immediate.call(this, turn);
  };
  // util.promisify(setImmediate) looks this up; keep the original's.
  Object.assign(paced, immediate);
  target.setImmediate = paced;
}
