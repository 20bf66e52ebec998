// Node side of the reward sandbox (CLI, tests): each user source runs in a worker_threads Worker
// started with `eval: true` on the same harness text as the browser (reward-sandbox.ts).
//
// What the user code can and cannot reach here (tests/unit/custom-reward.test.ts checks each):
// - not the host's module scope, globals or require cache: a worker thread has its own V8 isolate;
// - not require/module/exports/__filename/__dirname: the harness deletes them (portability with
//   the browser, where they do not exist);
// - not the host's environment variables: the worker gets an empty process.env;
// - but it does have the worker's own `process` (process.getBuiltinModule reaches fs, net …),
//   fetch and timers, in the same OS process. So this is a time limit and a fault boundary (an
//   infinite loop, a crash or an out-of-memory end only the worker), not a security boundary: in
//   the CLI the user runs their own code on their own machine, as TRL runs Python rewards.
import { Worker } from 'node:worker_threads';
import {
  WorkerRewardSandbox,
  type SandboxFactory,
  type SandboxOptions,
  type SpawnSandboxWorker,
  type WireError,
} from './reward-sandbox';

/** Heap limit of one reward worker: a runaway allocation ends the worker, not the trainer. */
export const NODE_REWARD_HEAP_MB = 256;

function wireError(e: unknown): WireError {
  if (!(e instanceof Error)) return { name: null, message: String(e) };
  // A syntax error in eval'd worker code carries its position as "[worker eval]:LINE" in the stack.
  const m = /\[worker eval\]:(\d+)/.exec(e.stack ?? '');
  const out: WireError = { name: e.name, message: e.message };
  if (m) out.line = Number(m[1]);
  return out;
}

export const spawnNodeWorker: SpawnSandboxWorker = (script, events) => {
  const worker = new Worker(script, {
    eval: true,
    env: {},
    resourceLimits: { maxOldGenerationSizeMb: NODE_REWARD_HEAP_MB },
  });
  // An idle reward worker must not keep the CLI alive; a call in flight holds a timer, which does.
  worker.unref();
  worker.on('message', (data) => events.message(data));
  worker.on('error', (e) => events.error(wireError(e)));
  worker.on('exit', () => events.exit());
  return {
    post: (message) => worker.postMessage(message),
    terminate: () => void worker.terminate(),
  };
};

export function createNodeSandbox(source: string, options?: SandboxOptions): WorkerRewardSandbox {
  return new WorkerRewardSandbox(source, 'node', spawnNodeWorker, options);
}

export function nodeSandboxFactory(options?: SandboxOptions): SandboxFactory {
  return (source) => createNodeSandbox(source, options);
}
