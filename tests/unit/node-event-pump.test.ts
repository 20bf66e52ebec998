// The pacing of Dawn's event pump (src/engine/node-event-pump.ts) on a fake timer target with a
// fake clock: which callbacks it recognises as the pump's, that a wait spins for its first
// millisecond and is paced after, that the next wait spins again, and that every other
// setImmediate caller is left alone.
import { describe, expect, it } from 'vitest';
import {
  isDawnPumpCallback,
  paceDawnEventPump,
  SPIN_MILLISECONDS,
} from '../../src/engine/node-event-pump';

/** `body` as a native function of no parameters, the shape of Napi::Function::New's callback (a
 * bound function's source reads "function () { [native code] }"). */
function native(body: () => void): () => void {
  const bound = body.bind(null);
  Object.defineProperty(bound, 'name', { value: '' });
  return bound;
}

type Callback = (...args: unknown[]) => void;

function fakeTimers() {
  const queue: { via: 'immediate' | 'timeout'; run: () => void }[] = [];
  const target = {
    setImmediate: (callback: Callback, ...args: unknown[]) =>
      queue.push({ via: 'immediate', run: () => callback(...args) }),
    setTimeout: (callback: Callback) => queue.push({ via: 'timeout', run: () => callback() }),
  };
  /** Runs everything scheduled, in order, and returns how each turn was scheduled. */
  const drain = () => {
    const vias: string[] = [];
    while (queue.length > 0) {
      const next = queue.shift()!;
      vias.push(next.via);
      next.run();
    }
    return vias;
  };
  return { target, drain };
}

/** A pump like dawn.node's: each turn takes `turnMs` of the clock and schedules the next until
 * the clock reaches `doneAt`. */
function startPump(
  target: { setImmediate: (callback: Callback, ...args: unknown[]) => unknown },
  clock: { ms: number },
  turnMs: number,
  doneAt: number,
) {
  let turns = 0;
  const turn: () => void = native(() => {
    turns += 1;
    clock.ms += turnMs;
    if (clock.ms < doneAt) target.setImmediate(turn);
  });
  target.setImmediate(turn);
  return () => turns;
}

describe('isDawnPumpCallback', () => {
  it('takes a native function of no parameters passed with no arguments', () => {
    expect(
      isDawnPumpCallback(
        native(() => undefined),
        [],
      ),
    ).toBe(true);
  });

  it('leaves a promise resolve function, JS callbacks and calls with arguments alone', () => {
    let resolve: unknown;
    void new Promise((r) => (resolve = r));
    expect(isDawnPumpCallback(resolve, [])).toBe(false);
    expect(isDawnPumpCallback(() => undefined, [])).toBe(false);
    expect(isDawnPumpCallback(function named() {}, [])).toBe(false);
    expect(
      isDawnPumpCallback(
        native(() => undefined),
        [1],
      ),
    ).toBe(false);
    expect(isDawnPumpCallback('not a function', [])).toBe(false);
  });
});

describe('paceDawnEventPump', () => {
  it('spins a wait for its first millisecond, then gives each turn a timer tick', () => {
    expect(SPIN_MILLISECONDS).toBe(1);
    const { target, drain } = fakeTimers();
    const clock = { ms: 0 };
    paceDawnEventPump(target, () => clock.ms);
    // 0.25 ms turns until the GPU is done at 5 ms: 20 turns. The first is scheduled by the call
    // that made the promise; the continuations at 0.25 … 1 ms spin, the 15 after are paced.
    const turns = startPump(target, clock, 0.25, 5);
    const vias = drain();
    expect(turns()).toBe(20);
    expect(vias).toEqual([...Array(5).fill('immediate'), ...Array(15).fill('timeout')]);
    // The next wait, scheduled from outside the pump, spins again from its own start.
    startPump(target, clock, 0.5, clock.ms + 2);
    expect(drain()).toEqual(['immediate', 'immediate', 'immediate', 'timeout']);
  });

  it('leaves every other caller on setImmediate, arguments included, even mid-wait', () => {
    const { target, drain } = fakeTimers();
    const clock = { ms: 0 };
    paceDawnEventPump(target, () => clock.ms);
    const seen: unknown[] = [];
    let turn: () => void = () => undefined;
    turn = native(() => {
      clock.ms += 2;
      // Scheduled from inside a paced wait, yet not the pump's: no pacing.
      target.setImmediate((value: unknown) => seen.push(value), 'payload');
      if (clock.ms < 6) target.setImmediate(turn);
    });
    target.setImmediate(turn);
    expect(drain()).toEqual([
      'immediate', // the pump's first turn
      'immediate', // the JS callback
      'timeout', // the pump, past its spin
      'immediate',
      'timeout',
      'immediate',
    ]);
    expect(seen).toEqual(['payload', 'payload', 'payload']);
  });

  it('installs once per target', () => {
    const { target } = fakeTimers();
    paceDawnEventPump(target);
    const installed = target.setImmediate;
    paceDawnEventPump(target);
    expect(target.setImmediate).toBe(installed);
  });
});
