// Custom rewards: the user's own JavaScript reward functions (config.customRewards, named
// 'custom:<id>' in config.rewards), each run in its own QuickJS-wasm sandbox (reward-sandbox.ts)
// with a per-call time limit, a memory limit and no host capabilities: the source may come from a
// shared link, an imported checkpoint or a config file, so it is treated as untrusted.
//
// Source format (one source per id):
//     function reward({ completion, prompt, problem }) {
//       // completion: the decoded completion; prompt: the rendered prompt; problem: the task's
//       // Problem (id, question, reference, verifier …), all plain data
//       return completion.includes('<answer>') ? 1 : 0;   // a finite number, or null = not applicable
//     }
// A dataset row's other columns (problem.columns: MATH's `solution`, `level` …) are also fields of
// the argument under their own names, as TRL passes dataset columns to reward functions as
// keyword arguments: `function reward({ completion, solution })`.
// `reward` may be declared any way (function, const arrow, async). It sees the ECMAScript
// built-ins, console.* (captured), setTimeout/clearTimeout and queueMicrotask (within the call's
// time limit), nothing of the host. A throw → kind 'threw'; NaN/±Infinity → 'non-finite'; a
// string/undefined/object → 'invalid' (sanitizeReward in rewards.ts); a call over the time limit
// is stopped → 'timeout'; a syntax error, a throw at the top level or no `reward` → 'invalid'.
// Error messages read "<Name>: <message> (line L, column C)" with L, C in the user's source as
// QuickJS gives them. Each failure gives 0 for that completion and training goes on.
//
// Through rewards.ts's scoreCompletions (compute() per completion) every failure thrown from
// compute() is reported as 'threw' (the message still says what happened: "TimeoutError: exceeded
// the 200 ms time limit", "SyntaxError: … (line 2, column 5)"): scoreCompletions records no timeout
// flag. scoreCompletionsBatched here gives the exact kinds and sends each function's whole batch to
// its worker in one go.
//
// Lifetime: sandboxes start on first use; disposeCustomRewards (or each function's dispose())
// terminates their workers, after which nothing of them keeps a Node process alive.

import {
  combineOutcomes,
  CUSTOM_REWARD_PREFIX,
  sanitizeReward,
  type CompletionReward,
  type RewardError,
  type RewardFunction,
  type RewardInput,
  type RewardOutcome,
  type RewardValue,
} from './rewards';
import {
  isLoadFailure,
  type RewardSandbox,
  type SandboxFactory,
  type SandboxOptions,
  type SandboxOutcome,
} from './reward-sandbox';
import { browserSandboxFactory } from './reward-sandbox-browser';

export interface CustomRewardOptions {
  /** Per-call limit (config.rewardTimeoutMs). */
  timeoutMs: number;
  /** nodeSandboxFactory() in Node, browserSandboxFactory() or startRewardWorker().factory in a
   * browser: each source gets a worker running QuickJS. */
  sandboxFactory: SandboxFactory;
}

export interface CustomRewardFunction extends RewardFunction {
  /** The key in config.customRewards; name is 'custom:<id>'. */
  id: string;
  source: string;
  /** One completion (the RewardFunction contract): returns the raw value, throws on failure. */
  compute(input: RewardInput): Promise<RewardValue>;
  /** All completions in one round trip; never rejects. */
  computeBatch(inputs: readonly RewardInput[]): Promise<SandboxOutcome[]>;
  /** Terminates the sandbox's worker; a later call starts a new one. */
  dispose(): void;
}

/** The argument the user's function gets: the input, with the problem's dataset columns beside
 * it under their names (never shadowing completion, prompt or problem). */
export function rewardArgument(input: RewardInput): RewardInput {
  const columns = input.problem.columns;
  return columns ? { ...columns, ...input } : input;
}

export function isCustomReward(fn: RewardFunction): fn is CustomRewardFunction {
  return typeof (fn as Partial<CustomRewardFunction>).computeBatch === 'function';
}

/** One RewardFunction per config.customRewards entry; sandboxes start on first use. */
export function createCustomRewards(
  customRewards: Record<string, string>,
  options: CustomRewardOptions,
): CustomRewardFunction[] {
  const { timeoutMs, sandboxFactory } = options;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0))
    throw new RangeError(`reward timeout must be a positive number of ms, got ${timeoutMs}`);
  return Object.entries(customRewards).map(([id, source]) => {
    if (id === '') throw new RangeError('a custom reward id must not be empty');
    if (typeof source !== 'string')
      throw new TypeError(`custom reward '${id}': the source must be a string`);
    let sandbox: RewardSandbox | null = null;
    const get = () => (sandbox ??= sandboxFactory(source));
    return {
      name: CUSTOM_REWARD_PREFIX + id,
      id,
      source,
      async compute(input) {
        const [outcome] = await get().score([rewardArgument(input)], timeoutMs);
        if ('error' in outcome) throw outcome.error;
        return outcome.value as RewardValue;
      },
      computeBatch: (inputs) => get().score(inputs.map(rewardArgument), timeoutMs),
      dispose() {
        sandbox?.dispose();
        sandbox = null;
      },
    };
  });
}

/** The `custom` argument of createRewardFunctions (rewards.ts) over createCustomRewards' list. */
export function customRewardResolver(
  fns: readonly CustomRewardFunction[],
): (id: string) => RewardFunction {
  const byId = new Map(fns.map((f) => [f.id, f]));
  return (id) => {
    const fn = byId.get(id);
    if (!fn)
      throw new RangeError(
        `reward '${CUSTOM_REWARD_PREFIX}${id}' has no source in customRewards (ids: ${[...byId.keys()].join(', ') || 'none'})`,
      );
    return fn;
  };
}

export function disposeCustomRewards(fns: readonly RewardFunction[]): void {
  for (const fn of fns) if (isCustomReward(fn)) fn.dispose();
}

/** sanitizeReward, plus: a source that could not load is 'invalid' (not the function's throw). */
export function describeOutcome(
  name: string,
  outcome: SandboxOutcome,
): { value: RewardValue; error?: RewardError } {
  const r = sanitizeReward(name, outcome as RewardOutcome);
  if (r.error && isLoadFailure(outcome) && r.error.kind === 'threw')
    return { value: r.value, error: { ...r.error, kind: 'invalid' } };
  return r;
}

/**
 * scoreCompletions (rewards.ts) with the same result shape, but each custom reward scores all
 * inputs in one round trip and its errors keep their exact kind ('timeout', 'invalid' for a
 * source that does not load). Other functions are called per input as scoreCompletions does.
 */
export async function scoreCompletionsBatched(
  fns: readonly RewardFunction[],
  weights: readonly number[] | null | undefined,
  inputs: readonly RewardInput[],
): Promise<CompletionReward[]> {
  const names = fns.map((f) => f.name);
  const byFn: SandboxOutcome[][] = [];
  for (const fn of fns) {
    if (isCustomReward(fn)) {
      byFn.push(await fn.computeBatch(inputs));
      continue;
    }
    const outs: SandboxOutcome[] = [];
    for (const input of inputs) {
      try {
        outs.push({ value: await fn.compute(input) });
      } catch (error) {
        outs.push({ error });
      }
    }
    byFn.push(outs);
  }
  return inputs.map((_, i) => {
    const outcomes = byFn.map((outs) => outs[i]);
    const result = combineOutcomes(names, weights, outcomes as RewardOutcome[]);
    result.errors = result.errors.map((e) => {
      const k = names.indexOf(e.reward);
      return describeOutcome(e.reward, outcomes[k]).error ?? e;
    });
    return result;
  });
}

export type TryResult = { value: RewardValue } | { error: RewardError };

/**
 * The UI's "try it": runs `source` on samples in a fresh sandbox (then disposed) and returns each
 * sample's value, or the error as training would record it. Default sandbox: a reward worker
 * started from this browser context, off its thread (pass nodeSandboxFactory() in Node).
 */
export async function tryCustomReward(
  source: string,
  samples: readonly RewardInput[],
  timeoutMs: number,
  sandboxFactory: SandboxFactory = defaultSandboxFactory(),
  name = `${CUSTOM_REWARD_PREFIX}try`,
): Promise<TryResult[]> {
  const sandbox = sandboxFactory(source);
  try {
    const outcomes = await sandbox.score(samples.map(rewardArgument), timeoutMs);
    return outcomes.map((o) => {
      const { value, error } = describeOutcome(name, o);
      return error ? { error } : { value };
    });
  } finally {
    sandbox.dispose();
  }
}

function defaultSandboxFactory(): SandboxFactory {
  if (typeof Worker === 'undefined' || typeof Blob === 'undefined')
    throw new Error('no Web Worker here: pass a sandboxFactory (nodeSandboxFactory() in Node)');
  return browserSandboxFactory();
}

/**
 * A factory whose sandboxes each run in their own reward worker (workers/reward.worker.ts, QuickJS
 * inside), plus terminate() to stop every worker it started.
 */
export function startRewardWorker(options?: SandboxOptions): {
  factory: SandboxFactory;
  terminate(): void;
} {
  const make = browserSandboxFactory(options);
  const live = new Set<RewardSandbox>();
  return {
    factory(source) {
      const sandbox = make(source);
      live.add(sandbox);
      return {
        score: (inputs, timeoutMs) => sandbox.score(inputs, timeoutMs),
        dispose() {
          live.delete(sandbox);
          sandbox.dispose();
        },
      };
    },
    terminate() {
      for (const sandbox of live) sandbox.dispose();
      live.clear();
    },
  };
}
