// Custom JS rewards in the Node sandbox (QuickJS-wasm in a worker thread): each failure mode gives
// the outcome rewards.ts reports (through scoreCompletions and through scoreCompletionsBatched), an
// infinite loop is stopped at the time limit and the next completion still scores, and what the
// user code can and cannot reach (the escape attempts are in reward-sandbox-escape.test.ts).
// Error texts are QuickJS's (its messages and its line/column positions), not V8's.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  createCustomRewards,
  customRewardResolver,
  disposeCustomRewards,
  scoreCompletionsBatched,
  tryCustomReward,
  type CustomRewardFunction,
} from '../../src/rewards/custom-reward';
import {
  createRewardWorkerApi,
  isLoadFailure,
  remoteSandboxFactory,
} from '../../src/rewards/reward-sandbox';
import { createNodeSandbox, nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import {
  createRewardFunctions,
  scoreCompletions,
  type CompletionReward,
  type RewardInput,
} from '../../src/rewards/rewards';
import type { Problem } from '../../src/tasks/types';

/** Per-call limit in these tests: long enough for a loaded 2-core machine to answer a trivial
 * call, short enough to keep the file fast. */
const TIMEOUT_MS = 200;
/** Limit for rewards that are not meant to time out: other engineers' SwiftShader runs can load
 * this 2-core machine enough that even a trivial call misses 200 ms now and then. */
const RELAXED_TIMEOUT_MS = 5000;
/** How late after the limit a looping call may come back (terminate + bookkeeping). */
const KILL_SLACK_MS = 1500;

const problem: Problem = {
  id: 'p-1',
  task: 'arithmetic',
  question: 'What is 2 + 3',
  reference: '5',
  verifier: { kind: 'integer', answer: '5' },
};
const input = (completion: string): RewardInput => ({
  completion,
  prompt: 'User: What is 2 + 3? Assistant:',
  problem,
});

const SOURCES = {
  // Uses all three fields: 1 + length/100 when the answer matches the reference.
  good: `function reward({ completion, prompt, problem }) {
  const m = /<answer>(.*?)<\\/answer>/.exec(completion);
  if (!prompt.includes(problem.question)) return -1;
  return m && m[1].trim() === problem.reference ? 1 + completion.length / 100 : 0;
}`,
  throws: `function reward() {
  throw new RangeError('no answer here');
}`,
  throwsString: `function reward() { throw 'plain string'; }`,
  loops: `function reward({ completion }) {
  if (completion === 'loop') while (true) {}
  return completion.length;
}`,
  nan: `const reward = ({ completion }) => (completion === 'inf' ? Infinity : NaN);`,
  string: `function reward() { return '1'; }`,
  fn: `function reward() { return () => 1; }`,
  syntax: `// line 1
function reward({ completion }) {
  return completion.length +;
}`,
  async: `async function reward({ completion }) {
  await new Promise((resolve) => setTimeout(resolve, 5));
  return completion === 'skip' ? null : completion.length / 10;
}`,
  asyncThrows: `async function reward() { await null; throw new TypeError('async failure'); }`,
  neverResolves: `function reward() { return new Promise(() => {}); }`,
  noReward: `function score() { return 1; }`,
  topLevelThrow: `const table = undefinedThing.x;\nfunction reward() { return 1; }`,
  exits: `function reward({ completion }) {
  if (completion === 'exit') process.exit(3);
  return 2;
}`,
} as const;

const factory = nodeSandboxFactory();
let created: CustomRewardFunction[] = [];

type SourceId = keyof typeof SOURCES;

/** Rewards under test; the ones meant to time out get TIMEOUT_MS, the rest RELAXED_TIMEOUT_MS. */
function custom(...ids: SourceId[]): CustomRewardFunction[] {
  const fns = ids.flatMap((id) =>
    createCustomRewards(
      { [id]: SOURCES[id] },
      {
        timeoutMs: id === 'loops' || id === 'neverResolves' ? TIMEOUT_MS : RELAXED_TIMEOUT_MS,
        sandboxFactory: factory,
      },
    ),
  );
  created.push(...fns);
  return fns;
}

afterEach(() => {
  disposeCustomRewards(created);
  created = [];
});

function only(r: CompletionReward) {
  expect(Object.keys(r.perFunction)).toHaveLength(1);
  return { total: r.total, errors: r.errors.map((e) => ({ kind: e.kind, message: e.message })) };
}

describe('custom rewards through scoreCompletions (rewards.ts)', () => {
  it('a correct reward gives its numbers from all three fields', async () => {
    const fns = custom('good');
    expect(fns[0].name).toBe('custom:good');
    const completions = [
      '<answer>5</answer>',
      '<answer>6</answer>',
      'none',
      '<answer> 5 </answer>',
    ];
    const results = await scoreCompletions(fns, null, completions.map(input));
    expect(results.map((r) => r.total)).toEqual([1.18, 0, 0, 1.2]);
    expect(results.every((r) => r.errors.length === 0)).toBe(true);
    expect(results[0].perFunction).toEqual({ 'custom:good': 1.18 });
  });

  it('a throw is kind threw with the error name and message', async () => {
    const [r] = await scoreCompletions(custom('throws'), null, [input('x')]);
    expect(only(r)).toEqual({
      total: 0,
      errors: [{ kind: 'threw', message: 'RangeError: no answer here (line 2, column 23)' }],
    });
    const [s] = await scoreCompletions(custom('throwsString'), null, [input('x')]);
    expect(only(s).errors).toEqual([{ kind: 'threw', message: 'plain string' }]);
  });

  it('NaN and Infinity are non-finite; a string and a function are invalid', async () => {
    const nan = await scoreCompletions(custom('nan'), null, [input('x'), input('inf')]);
    expect(nan.map((r) => only(r))).toEqual([
      { total: 0, errors: [{ kind: 'non-finite', message: 'returned NaN' }] },
      { total: 0, errors: [{ kind: 'non-finite', message: 'returned Infinity' }] },
    ]);
    const [str] = await scoreCompletions(custom('string'), null, [input('x')]);
    expect(only(str).errors).toEqual([
      { kind: 'invalid', message: 'returned "1"; a reward must return a finite number or null' },
    ]);
    const [fn] = await scoreCompletions(custom('fn'), null, [input('x')]);
    expect(only(fn).errors[0]).toMatchObject({ kind: 'invalid', message: /^returned function;/ });
  });

  it('an async reward resolves to its values, null meaning not applicable', async () => {
    const results = await scoreCompletions(custom('async'), null, [input('abcd'), input('skip')]);
    expect(results[0].total).toBeCloseTo(0.4, 12);
    expect(results[1]).toEqual({ total: 0, perFunction: { 'custom:async': null }, errors: [] });
    const [rej] = await scoreCompletions(custom('asyncThrows'), null, [input('x')]);
    expect(only(rej).errors).toEqual([
      { kind: 'threw', message: 'TypeError: async failure (line 1, column 58)' },
    ]);
  });

  it('an infinite loop is killed at the time limit and the next completion still scores', async () => {
    const fns = custom('loops');
    const t0 = performance.now();
    const results = await scoreCompletions(fns, null, [input('ab'), input('loop'), input('abc')]);
    const elapsed = performance.now() - t0;
    expect(results[0]).toEqual({ total: 2, perFunction: { 'custom:loops': 2 }, errors: [] });
    // scoreCompletions keeps no timeout flag, so rewards.ts files it under 'threw'; the message
    // says it was the time limit.
    expect(only(results[1])).toEqual({
      total: 0,
      errors: [
        { kind: 'threw', message: `TimeoutError: exceeded the ${TIMEOUT_MS} ms time limit` },
      ],
    });
    expect(results[2]).toEqual({ total: 3, perFunction: { 'custom:loops': 3 }, errors: [] });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + KILL_SLACK_MS);
  });

  it('a promise that never settles times out too', async () => {
    const [r] = await scoreCompletions(custom('neverResolves'), null, [input('x')]);
    expect(only(r).errors[0].message).toBe(
      `TimeoutError: exceeded the ${TIMEOUT_MS} ms time limit`,
    );
  });

  it('a syntax error reports the message and the line in the source, for every completion', async () => {
    const results = await scoreCompletions(custom('syntax'), null, [input('a'), input('b')]);
    for (const r of results) {
      expect(only(r)).toEqual({
        total: 0,
        errors: [
          {
            kind: 'threw',
            message: "SyntaxError: unexpected token in expression: ';' (line 3, column 29)",
          },
        ],
      });
    }
  });

  it('a missing reward or a top-level throw is a load failure', async () => {
    const [a] = await scoreCompletions(custom('noReward'), null, [input('x')]);
    expect(only(a).errors[0].message).toBe(
      'TypeError: the source must define a function named reward',
    );
    const [b] = await scoreCompletions(custom('topLevelThrow'), null, [input('x')]);
    expect(only(b).errors[0].message).toBe(
      "ReferenceError: 'undefinedThing' is not defined (line 1, column 15)",
    );
  });

  // The old worker_threads sandbox had a real `process` (process.exit ended the worker); QuickJS
  // has none, so the call fails with a ReferenceError and the next one scores as before.
  it('process.exit is not there: that call fails, the next still scores', async () => {
    const results = await scoreCompletions(custom('exits'), null, [
      input('a'),
      input('exit'),
      input('b'),
    ]);
    expect(results.map((r) => r.total)).toEqual([2, 0, 2]);
    expect(only(results[1]).errors).toEqual([
      { kind: 'threw', message: "ReferenceError: 'process' is not defined (line 2, column 30)" },
    ]);
  });

  it('combines with built-ins by name and weight (createRewardFunctions + resolver)', async () => {
    const customs = custom('good', 'throws');
    const fns = createRewardFunctions(
      ['format', 'custom:good', 'custom:throws'],
      undefined,
      customRewardResolver(customs),
    );
    const [r] = await scoreCompletions(
      fns,
      [1, 2, 5],
      [input('<think>x</think><answer>5</answer>')],
    );
    expect(r.perFunction).toEqual({ format: 1, 'custom:good': 1.34, 'custom:throws': 0 });
    expect(r.total).toBeCloseTo(1 + 2 * 1.34, 12);
    expect(r.errors.map((e) => [e.reward, e.kind])).toEqual([['custom:throws', 'threw']]);
    expect(() => customRewardResolver(customs)('missing')).toThrow(/no source in customRewards/);
  });

  it('concurrent calls are serialised and each gets its own answer', async () => {
    const [fn] = custom('async');
    const values = await Promise.all(['a', 'bb', 'ccc', 'dddd'].map((c) => fn.compute(input(c))));
    expect(values).toEqual([0.1, 0.2, 0.3, 0.4]);
  });
});

describe('scoreCompletionsBatched and tryCustomReward keep the exact error kinds', () => {
  it('timeout, invalid source and the rest in one batch per function', async () => {
    const fns = custom('loops', 'syntax', 'nan');
    const results = await scoreCompletionsBatched(fns, null, [input('ab'), input('loop')]);
    expect(results[0].perFunction).toEqual({
      'custom:loops': 2,
      'custom:syntax': 0,
      'custom:nan': 0,
    });
    expect(results[0].errors.map((e) => [e.reward, e.kind])).toEqual([
      ['custom:syntax', 'invalid'],
      ['custom:nan', 'non-finite'],
    ]);
    expect(results[1].errors.map((e) => [e.reward, e.kind, e.message])).toEqual([
      ['custom:loops', 'timeout', `TimeoutError: exceeded the ${TIMEOUT_MS} ms time limit`],
      [
        'custom:syntax',
        'invalid',
        "SyntaxError: unexpected token in expression: ';' (line 3, column 29)",
      ],
      ['custom:nan', 'non-finite', 'returned NaN'],
    ]);
    // Same totals as the per-completion path.
    const plain = await scoreCompletions(fns, null, [input('ab'), input('loop')]);
    expect(plain.map((r) => r.total)).toEqual(results.map((r) => r.total));
  });

  it('tryCustomReward: per-sample value or error', async () => {
    const samples = [input('<answer>5</answer>'), input('loop')];
    expect(await tryCustomReward(SOURCES.good, samples, RELAXED_TIMEOUT_MS, factory)).toEqual([
      { value: 1.18 },
      { value: 0 },
    ]);
    const loops = await tryCustomReward(SOURCES.loops, samples, TIMEOUT_MS, factory);
    expect(loops[0]).toEqual({ value: 18 });
    expect(loops[1]).toMatchObject({ error: { reward: 'custom:try', kind: 'timeout' } });
    const bad = await tryCustomReward(
      SOURCES.syntax,
      samples,
      RELAXED_TIMEOUT_MS,
      factory,
      'custom:x',
    );
    expect(bad).toEqual(
      samples.map(() => ({
        error: {
          reward: 'custom:x',
          kind: 'invalid',
          message: "SyntaxError: unexpected token in expression: ';' (line 3, column 29)",
        },
      })),
    );
  });

  it('a top level that never finishes is a load timeout, reported once per call without waiting again', async () => {
    const sandbox = createNodeSandbox('while (true) {}\nfunction reward() { return 1; }', {
      loadTimeoutMs: 400,
    });
    try {
      const t0 = performance.now();
      const outs = await sandbox.score([input('a'), input('b')], TIMEOUT_MS);
      const elapsed = performance.now() - t0;
      expect(outs.every((o) => 'error' in o && o.timedOut === true && isLoadFailure(o))).toBe(true);
      expect(elapsed).toBeLessThan(400 + KILL_SLACK_MS);
    } finally {
      sandbox.dispose();
    }
  });

  it('the reward-worker API (wire format, as over comlink) gives the same outcomes', async () => {
    const api = createRewardWorkerApi(createNodeSandbox);
    const remote = remoteSandboxFactory({
      // Structured-clone every message, as a worker boundary would.
      open: (h, s, o) => api.open(h, s, o),
      score: async (h, inputs, t) =>
        structuredClone(await api.score(h, structuredClone(inputs), t)),
      close: (h) => api.close(h),
    });
    const fns = [
      ...createCustomRewards(
        { loops: SOURCES.loops },
        { timeoutMs: TIMEOUT_MS, sandboxFactory: remote },
      ),
      ...createCustomRewards(
        { throws: SOURCES.throws, fn: SOURCES.fn },
        { timeoutMs: RELAXED_TIMEOUT_MS, sandboxFactory: remote },
      ),
    ];
    created.push(...fns);
    const results = await scoreCompletionsBatched(fns, null, [input('loop'), input('abc')]);
    expect(results[0].errors.map((e) => [e.kind, e.message])).toEqual([
      ['timeout', `TimeoutError: exceeded the ${TIMEOUT_MS} ms time limit`],
      ['threw', 'RangeError: no answer here (line 2, column 23)'],
      ['invalid', 'returned function; a reward must return a finite number or null'],
    ]);
    expect(results[1].perFunction['custom:loops']).toBe(3);
  });

  it('a disposed sandbox reports an error instead of hanging', async () => {
    const sandbox = createNodeSandbox(SOURCES.good);
    sandbox.dispose();
    const [o] = await sandbox.score([input('x')], TIMEOUT_MS);
    expect('error' in o && String(o.error)).toBe('Error: the reward sandbox was disposed');
  });

  it('an idle or disposed sandbox holds nothing that keeps a Node process alive', async () => {
    const handles = () =>
      process.getActiveResourcesInfo().filter((r) => r === 'MessagePort' || r === 'Worker').length;
    // Workers of earlier tests, disposed without waiting, may still be on their way out.
    for (let i = 0; i < 60 && handles() > 0; i++) await new Promise((r) => setTimeout(r, 50));
    const before = handles();
    const sandbox = createNodeSandbox(SOURCES.good);
    expect(await sandbox.score([input('<answer>5</answer>')], RELAXED_TIMEOUT_MS)).toEqual([
      { value: 1.18 },
    ]);
    expect(handles()).toBe(before);
    sandbox.dispose();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(handles()).toBe(before);
  });

  it('rejects a non-positive time limit', () => {
    expect(() =>
      createCustomRewards({ a: SOURCES.good }, { timeoutMs: 0, sandboxFactory: factory }),
    ).toThrow(RangeError);
  });
});

// What the user's code can reach in the Node sandbox: the ECMAScript built-ins of its QuickJS
// context and its input, nothing of the host. (The old worker_threads sandbox reached its own
// `process`, Node's built-in modules and fetch: that was the defect this sandbox removes.)
const hostOnlySecret = 'host-module-scope';
(globalThis as Record<string, unknown>).__hostMarker = 'host-global';

describe('what the Node sandbox can reach', () => {
  afterAll(() => {
    delete (globalThis as Record<string, unknown>).__hostMarker;
  });

  it('no host module scope, host globals, require, process, environment, built-ins or network', async () => {
    expect(hostOnlySecret).toBe('host-module-scope');
    expect(Object.keys(process.env).length).toBeGreaterThan(0);
    const probe = `function reward() {
  return JSON.stringify({
    hostOnlySecret: typeof hostOnlySecret,
    hostMarker: typeof globalThis.__hostMarker,
    require: typeof require,
    module: typeof module,
    dirname: typeof __dirname,
    window: typeof window,
    process: typeof process,
    Buffer: typeof Buffer,
    fetch: typeof fetch,
    WebAssembly: typeof WebAssembly,
    postMessage: typeof postMessage,
    setTimeout: typeof setTimeout,
    console: typeof console.log,
  });
}`;
    const sandbox = createNodeSandbox(probe);
    try {
      const [o] = await sandbox.score([input('x')], 2000);
      expect('value' in o).toBe(true);
      expect(JSON.parse((o as { value: string }).value)).toEqual({
        hostOnlySecret: 'undefined',
        hostMarker: 'undefined',
        require: 'undefined',
        module: 'undefined',
        dirname: 'undefined',
        window: 'undefined',
        process: 'undefined',
        Buffer: 'undefined',
        fetch: 'undefined',
        WebAssembly: 'undefined',
        postMessage: 'undefined',
        // The harness's own, bounded by the call's time limit.
        setTimeout: 'function',
        console: 'function',
      });
    } finally {
      sandbox.dispose();
    }
  });
});
