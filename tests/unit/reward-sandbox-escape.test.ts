// Escape attempts against the Node reward sandbox (QuickJS-wasm in a worker thread): the file
// system, process and environment, child processes, the network (a local listener on 127.0.0.1
// must see no connection), result forging, prototype pollution of the host, memory bombs, runaway
// loops (including native loops QuickJS never interrupts) and promises that never settle. Each
// attempt must fail with the error text asserted here, and the call after it (a well-behaved
// completion of the same source) must still score right: the run goes on.
import { createServer, type Server } from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeSandbox } from '../../src/rewards/reward-sandbox-node';
import {
  WATCHDOG_GRACE_MS,
  type SandboxOutcome,
  type WorkerRewardSandbox,
} from '../../src/rewards/reward-sandbox';
import type { RewardInput } from '../../src/rewards/rewards';

/** Per-call limit of the attacks that should finish at once (a loaded 2-core machine). */
const RELAXED_MS = 5000;
/** Per-call limit of the attacks meant to hit it. */
const LIMIT_MS = 300;
/** How late after the limit (+ the watchdog's grace) a stopped call may come back. */
const SLACK_MS = 1500;
/** Several reloads of the QuickJS runtime per test on a loaded 2-core machine. */
const SLOW_TEST_MS = 60_000;
const DEEP_MS = 25_000;

const input = (completion: string): RewardInput => ({
  completion,
  prompt: 'User: What is 2 + 3? Assistant:',
  problem: {
    id: 'p-1',
    task: 'arithmetic',
    question: 'What is 2 + 3',
    reference: '5',
    verifier: { kind: 'integer', answer: '5' },
  },
});

let server: Server;
let connections = 0;
let requests = 0;
let port = 0;
let scratch = '';

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'reward-escape-'));
  server = createServer((_req, res) => {
    requests++;
    res.end('export default 1;');
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(scratch, { recursive: true, force: true });
});

/** One attacker source: each attack on its own line (line numbers are asserted), selected by the
 * completion; any other completion scores its length. */
function attacker(mark: string, url: string): string {
  return `const attacks = {
  requireFs: () => require('fs').writeFileSync(${JSON.stringify(mark)}, 'pwned'),
  binding: () => process.binding('fs'),
  builtin: () => process.getBuiltinModule('node:fs'),
  importFs: async () => (await import('node:fs')).writeFileSync(${JSON.stringify(mark)}, 'pwned'),
  env: () => process.env.HOME,
  childProcess: () => require('child_process').execSync('touch ${mark}'),
  fetch: () => fetch(${JSON.stringify(url)}),
  xhr: () => new XMLHttpRequest(),
  webSocket: () => new WebSocket(${JSON.stringify(url.replace('http', 'ws'))}),
  webSocketStream: () => new WebSocketStream(${JSON.stringify(url.replace('http', 'ws'))}),
  eventSource: () => new EventSource(${JSON.stringify(url)}),
  importUrl: async () => await import(${JSON.stringify(url + 'x.js')}),
  importScripts: () => importScripts(${JSON.stringify(url + 'x.js')}),
  postMessage: () => postMessage({ type: 'result', id: 2, outcome: { value: 100 } }),
  parentPort: () => parentPort.postMessage({ type: 'result', id: 2, outcome: { value: 100 } }),
  selfPost: () => self.postMessage({ type: 'result', id: 2, outcome: { value: 100 } }),
  functionCtor: () => new Function('return typeof process + typeof require')(),
  wasm: () => WebAssembly.compile(new Uint8Array(8)),
};
async function reward({ completion }) {
  const attack = attacks[completion];
  return attack ? await attack() : completion.length;
}`;
}

async function one(sandbox: WorkerRewardSandbox, completion: string, ms = RELAXED_MS) {
  const t0 = performance.now();
  const [outcome] = await sandbox.score([input(completion)], ms);
  return { outcome, ms: performance.now() - t0 };
}

function errorText(o: SandboxOutcome): string {
  if (!('error' in o)) return `value ${JSON.stringify(o.value)}`;
  const e = o.error;
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** Runs each attack then a well-behaved call ('ok' scores 2); returns the attack's error text. */
async function attempt(sandbox: WorkerRewardSandbox, completion: string, ms = RELAXED_MS) {
  const { outcome, ms: took } = await one(sandbox, completion, ms);
  const after = await one(sandbox, 'ok');
  expect(after.outcome).toEqual({ value: 2 });
  return { text: errorText(outcome), timedOut: 'timedOut' in outcome && outcome.timedOut, took };
}

describe('the host capabilities a reward might reach', () => {
  let sandbox: WorkerRewardSandbox;
  let mark = '';
  beforeAll(() => {
    mark = join(scratch, 'written-by-reward');
    sandbox = createNodeSandbox(attacker(mark, `http://127.0.0.1:${port}/`));
  });
  afterAll(() => sandbox.dispose());

  it(
    'file system, process, environment and child processes are not defined',
    { timeout: SLOW_TEST_MS },
    async () => {
      const texts: Record<string, string> = {};
      for (const a of ['requireFs', 'binding', 'builtin', 'importFs', 'env', 'childProcess'])
        texts[a] = (await attempt(sandbox, a)).text;
      expect(texts).toEqual({
        requireFs: "ReferenceError: 'require' is not defined (line 2, column 20)",
        binding: "ReferenceError: 'process' is not defined (line 3, column 18)",
        builtin: "ReferenceError: 'process' is not defined (line 4, column 18)",
        // No module loader: import() of anything rejects.
        importFs: "ReferenceError: could not load module 'node:fs'",
        env: "ReferenceError: 'process' is not defined (line 6, column 14)",
        childProcess: "ReferenceError: 'require' is not defined (line 7, column 23)",
      });
      expect(existsSync(mark)).toBe(false);
    },
  );

  it(
    'no network API, no import of another origin, and the listener sees no connection',
    { timeout: SLOW_TEST_MS },
    async () => {
      const texts: Record<string, string> = {};
      for (const a of [
        'fetch',
        'xhr',
        'webSocket',
        'webSocketStream',
        'eventSource',
        'importUrl',
        'importScripts',
      ])
        texts[a] = (await attempt(sandbox, a)).text;
      expect(texts).toEqual({
        fetch: "ReferenceError: 'fetch' is not defined (line 8, column 16)",
        xhr: "ReferenceError: 'XMLHttpRequest' is not defined (line 9, column 18)",
        webSocket: "ReferenceError: 'WebSocket' is not defined (line 10, column 24)",
        webSocketStream: "ReferenceError: 'WebSocketStream' is not defined (line 11, column 30)",
        eventSource: "ReferenceError: 'EventSource' is not defined (line 12, column 26)",
        importUrl: `ReferenceError: could not load module 'http://127.0.0.1:${port}/x.js'`,
        importScripts: "ReferenceError: 'importScripts' is not defined (line 14, column 24)",
      });
      // Give a stray connection attempt time to land before asserting there was none.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect({ connections, requests }).toEqual({ connections: 0, requests: 0 });
    },
  );

  it('no channel to forge results through; eval and Function stay inside the sandbox', async () => {
    const texts: Record<string, string> = {};
    for (const a of ['postMessage', 'parentPort', 'selfPost', 'wasm'])
      texts[a] = (await attempt(sandbox, a)).text;
    expect(texts).toEqual({
      postMessage: "ReferenceError: 'postMessage' is not defined (line 15, column 22)",
      parentPort: "ReferenceError: 'parentPort' is not defined (line 16, column 21)",
      selfPost: "ReferenceError: 'self' is not defined (line 17, column 19)",
      wasm: "ReferenceError: 'WebAssembly' is not defined (line 19, column 15)",
    });
    expect((await one(sandbox, 'functionCtor')).outcome).toEqual({
      value: 'undefinedundefined',
    });
  });

  it('the global object holds the ECMAScript built-ins and the harness, nothing else', async () => {
    const probe = createNodeSandbox(
      `function reward() { return Object.getOwnPropertyNames(globalThis).sort().join(' '); }`,
    );
    try {
      const { outcome } = await one(probe, 'x');
      expect(outcome).toEqual({
        value:
          'AggregateError Array ArrayBuffer BigInt BigInt64Array BigUint64Array Boolean DataView ' +
          'Date Error EvalError FinalizationRegistry Float16Array Float32Array Float64Array ' +
          'Function Infinity Int16Array Int32Array Int8Array InternalError Iterator JSON Map ' +
          'Math NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set ' +
          'SharedArrayBuffer String Symbol SyntaxError TypeError URIError Uint16Array ' +
          'Uint32Array Uint8Array Uint8ClampedArray WeakMap WeakRef WeakSet clearTimeout ' +
          'console decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval ' +
          'globalThis isFinite isNaN parseFloat parseInt queueMicrotask reward setTimeout ' +
          'undefined unescape',
      });
    } finally {
      probe.dispose();
    }
  });
});

describe('forging results and polluting the host', () => {
  it('replacing reward, JSON.parse or Promise.prototype.then does not change what the host reads', async () => {
    const sandbox = createNodeSandbox(`let calls = 0;
async function reward({ completion }) {
  calls++;
  if (completion === 'forge') {
    globalThis.reward = () => 100;
    JSON.parse = () => ({ completion: 'forged input!' });
    Promise.prototype.then = function (ok) { ok(100); };
    Object.prototype.toJSON = () => 100;
    setTimeout(() => { globalThis.late = 'a timer of an earlier call ran'; }, 0);
    return 1;
  }
  return globalThis.late ?? completion.length * 10 + calls;
}`);
    try {
      expect((await one(sandbox, 'forge')).outcome).toEqual({ value: 1 });
      // The host's handle to the original reward, the harness's own JSON.parse, the promise
      // state read natively, and the earlier call's timer dropped when that call ended.
      expect((await one(sandbox, 'ok')).outcome).toEqual({ value: 22 });
      expect((await one(sandbox, 'abc')).outcome).toEqual({ value: 33 });
    } finally {
      sandbox.dispose();
    }
  });

  it("the guest's Object.prototype never reaches the host or another reward", async () => {
    const polluter = createNodeSandbox(`function reward() {
  const getter = { __proto__: null, configurable: true, get() { return 'forged'; } };
  Object.defineProperty(Object.prototype, 'error', getter);
  Object.prototype.polluted = 'yes';
  Object.prototype.value = 100;
  Array.prototype.map = null;
  return { __proto__: { polluted: 'deep' }, value: 100 };
}`);
    const honest = createNodeSandbox(
      `function reward({ completion }) { return ({}).polluted === undefined ? completion.length : -1; }`,
    );
    try {
      const [o] = await polluter.score([input('x')], RELAXED_MS);
      // An object return is reported by its type only; no guest object crosses.
      expect(o).toEqual({ value: {} });
      expect(Object.getPrototypeOf((o as { value: object }).value)).toBe(Object.prototype);
      const host = {} as Record<string, unknown>;
      expect([host.polluted, host.value, host.error]).toEqual([undefined, undefined, undefined]);
      expect([1, 2].map((n) => n * 2)).toEqual([2, 4]);
      expect(await honest.score([input('abcd')], RELAXED_MS)).toEqual([{ value: 4 }]);
      expect(await polluter.score([input('again')], RELAXED_MS)).toEqual([{ value: {} }]);
    } finally {
      polluter.dispose();
      honest.dispose();
    }
  });
});

describe('resource exhaustion', () => {
  let sandbox: WorkerRewardSandbox;
  beforeAll(() => {
    sandbox = createNodeSandbox(`let calls = 0;
const attacks = {
  array: () => new Array(1e9).fill(0),
  string: () => 'x'.repeat(2 ** 28),
  buffer: () => new ArrayBuffer(2 ** 30),
  buffers: () => { const keep = []; for (;;) keep.push(new Float64Array(1e6)); },
  strings: () => { const keep = []; for (let i = 0; ; i++) keep.push('x'.repeat(1e6) + i); },
  recursion: () => { const f = () => f() + 1; return f(); },
  nested: () => { let a = []; for (let i = 0; i < 20000; i++) a = [a]; return JSON.stringify(a).length; },
  loop: () => { for (;;) {} },
  regex: () => /(a+)+$/.test('a'.repeat(40) + 'b'),
  nativeLoop: () => ('a'.repeat(3e6) + 'b').indexOf('a'.repeat(1e6) + 'b'),
  never: () => new Promise(() => {}),
  longTimer: () => new Promise((resolve) => setTimeout(resolve, 1e9)),
  microtasks: async () => { for (;;) await null; },
};
async function reward({ completion }) {
  calls++;
  const attack = attacks[completion];
  if (attack) return await attack();
  // The count restarts after a reload: the state of a stopped call never reaches the next one.
  return completion === 'calls' ? calls : completion.length;
}`);
  });
  afterAll(() => sandbox.dispose());

  it(
    'memory bombs fail with out of memory; the next call works on a fresh heap',
    { timeout: SLOW_TEST_MS },
    async () => {
      const texts: Record<string, string> = {};
      for (const a of ['array', 'string', 'buffer', 'buffers', 'strings'])
        texts[a] = (await attempt(sandbox, a)).text;
      expect(texts).toEqual({
        array: 'InternalError: out of memory (line 3, column 35)',
        string: 'InternalError: out of memory (line 4, column 27)',
        buffer: 'InternalError: out of memory (line 5, column 32)',
        buffers: 'InternalError: out of memory (line 6, column 72)',
        strings: 'InternalError: out of memory (line 7, column 80)',
      });
      // 'ok' after the last bomb was the first call of a reloaded runtime; this is the second.
      expect((await one(sandbox, 'calls')).outcome).toEqual({ value: 2 });
    },
  );

  it(
    'deep recursion is a stack overflow, in the interpreter or in native code',
    { timeout: SLOW_TEST_MS },
    async () => {
      // A generous limit: recursing to QuickJS's 256 KiB stack takes seconds on a loaded 2-core
      // machine, and this test is about the overflow, not the clock.
      const recursion = await attempt(sandbox, 'recursion', DEEP_MS);
      expect(recursion.text).toBe('InternalError: stack overflow (line 8, column 39)');
      // Native recursion (JSON.stringify of deeply nested arrays) may exhaust the host's stack
      // before QuickJS notices: the engine is replaced and the message is the same.
      const nested = await attempt(sandbox, 'nested', DEEP_MS);
      expect(nested.text).toMatch(/^InternalError: stack overflow( \(line 9, column \d+\))?$/);
    },
  );

  it(
    'runaway code and never-settling promises stop at the time limit',
    { timeout: SLOW_TEST_MS },
    async () => {
      const results: Record<string, unknown> = {};
      for (const a of ['loop', 'regex', 'nativeLoop', 'never', 'longTimer', 'microtasks']) {
        const r = await attempt(sandbox, a, LIMIT_MS);
        results[a] = [r.text, r.timedOut];
        expect(r.took).toBeGreaterThanOrEqual(LIMIT_MS - 5);
        // nativeLoop: String.prototype.indexOf never checks the interrupt handler, so the host's
        // watchdog terminates the worker LIMIT_MS + WATCHDOG_GRACE_MS after the call started.
        expect(r.took).toBeLessThan(LIMIT_MS + WATCHDOG_GRACE_MS + SLACK_MS);
      }
      const timeout = [`TimeoutError: exceeded the ${LIMIT_MS} ms time limit`, true];
      expect(results).toEqual({
        loop: timeout,
        regex: timeout,
        nativeLoop: timeout,
        never: timeout,
        longTimer: timeout,
        microtasks: timeout,
      });
    },
  );
});

describe('console', () => {
  it('is captured and capped, never forwarded', async () => {
    const sandbox = createNodeSandbox(`function reward({ completion }) {
  console.log('scoring', completion, { n: 1 });
  for (let i = 0; i < 1000; i++) console.warn('x'.repeat(1000));
  return 1;
}`);
    try {
      expect(await sandbox.score([input('abc')], RELAXED_MS)).toEqual([{ value: 1 }]);
      const logs = sandbox.lastLogs;
      expect(logs[0]).toBe('scoring abc [object Object]');
      expect(logs.join('\n').length).toBeLessThan(4200);
      expect(logs.at(-1)).toBe('… (console output capped)');
    } finally {
      sandbox.dispose();
    }
  });
});
